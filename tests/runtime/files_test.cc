// The files the runtime reads — token files and safetensors — give one clear error when
// missing, truncated or malformed; and the data order is deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

#include "runtime/io/checksum.h"
#include "tests/runtime/expect_error.h"
#include "runtime/io/error.h"
#include "runtime/io/safetensors.h"
#include "runtime/data/example_packing.h"
#include "runtime/data/token_data.h"
#include "runtime/training/train_config.h"
#include "runtime/training/trainer.h"

namespace mt {
namespace {

std::string temp(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

using test::expectError;

TEST(TokenFile, RoundTripsAndRejectsCorruption) {
  const std::string path = temp("ok.tok");
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 1000; ++i) ids.push_back(i * 7 % 256);
  writeTokenFile(path, ids, 256);
  TokenFile file(path);
  ASSERT_EQ(file.size(), 1000);
  EXPECT_EQ(file.read(0, 1000), ids);
  EXPECT_EQ(file.read(990, 10), std::vector<uint32_t>(ids.end() - 10, ids.end()));
  expectError([&] { file.read(995, 10); }, "holds 1000");

  const std::string bytes = readAll(path);
  writeAll(temp("short.tok"), bytes.substr(0, bytes.size() - 3));
  expectError([&] { TokenFile f(temp("short.tok")); }, "truncated");
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  writeAll(temp("magic.tok"), bad_magic);
  expectError([&] { TokenFile f(temp("magic.tok")); }, "magic");
  std::string big_id = bytes;
  big_id[32] = '\xff';
  big_id[33] = '\xff';  // id 65535 >= vocab 256
  writeAll(temp("id.tok"), big_id);
  expectError([&] { TokenFile f(temp("id.tok")); }, "vocab size");
  expectError([&] { TokenFile f(temp("missing.tok")); }, "mttok");
  expectError([&] { writeTokenFile(temp("x.tok"), {300}, 256); }, "vocab");
  // Ids are int32 in a plan: a vocabulary past 2^31 would let an id turn negative (fuzz finding).
  writeTokenFile(temp("huge.tok"), {1, 2}, 3000000000u);
  expectError([&] { TokenFile f(temp("huge.tok")); }, "past 2^31");
}

// A model's vocabulary smaller than the tokenizer's (Gemma 3 1B's): the ids the file holds must
// fit it, then and on every later read (a change to an id past it, mtime kept, is caught).
TEST(TokenFile, LimitsItsIdsToASmallerVocabulary) {
  const std::string path = temp("limit.tok");
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 63; ++i) ids.push_back(i * 3 % 201);
  ids.push_back(200);
  writeTokenFile(path, ids, 256);
  TokenFile file(path);
  EXPECT_EQ(file.largestId(), 200u);
  expectError([&] { file.limitIds(200); }, "holds token id 200, not below 200");
  file.limitIds(201);
  EXPECT_EQ(file.read(0, 64), ids);
  const auto modified = std::filesystem::last_write_time(path);
  std::string bytes = readAll(path);
  bytes[32] = static_cast<char>(230);  // token 0: 230, below the file's 256, past the limit
  writeAll(path, bytes);
  std::filesystem::last_write_time(path, modified);
  expectError([&] { file.read(0, 64); }, "token 0 is 230, not below the vocab size 201");
}

// Version 2: a loss mask after the ids. The sampler's targets the mask leaves out are -1 (the
// loss ignores them) and fill() counts the rest; a mask byte other than 0/1, or a mask cut
// short, is refused.
TEST(TokenFile, CarriesALossMask) {
  const std::string path = temp("masked.tok");
  std::vector<uint32_t> ids;
  std::vector<uint8_t> counted;
  for (uint32_t i = 0; i < 1000; ++i) ids.push_back(i % 200), counted.push_back(i % 3 == 0);
  writeTokenFile(path, ids, 256, &counted);
  TokenFile file(path);
  ASSERT_TRUE(file.hasLossMask());
  std::vector<uint8_t> mask;
  EXPECT_EQ(file.read(10, 20, &mask), std::vector<uint32_t>(ids.begin() + 10, ids.begin() + 30));
  EXPECT_EQ(mask, std::vector<uint8_t>(counted.begin() + 10, counted.begin() + 30));
  BatchSampler sampler(file, 2, 16, 5);
  std::vector<int32_t> tokens(32), targets(32);
  const int64_t n = sampler.fill(0, tokens.data(), targets.data());
  int64_t seen = 0;
  for (int i = 0; i < 32; ++i) {
    if (targets[i] < 0) {
      EXPECT_EQ(targets[i], -1);
      continue;
    }
    EXPECT_EQ(targets[i], (tokens[i] + 1) % 200);
    ++seen;
  }
  EXPECT_EQ(n, seen);
  EXPECT_GT(n, 0);
  EXPECT_LT(n, 32);
  // Without a mask every target counts.
  writeTokenFile(temp("plain.tok"), ids, 256);
  TokenFile plain(temp("plain.tok"));
  EXPECT_FALSE(plain.hasLossMask());
  EXPECT_EQ(BatchSampler(plain, 2, 16, 5).fill(0, tokens.data(), targets.data()), 32);

  const std::string bytes = readAll(path);
  std::string two = bytes;
  two[bytes.size() - 1] = '\x02';
  writeAll(temp("two.tok"), two);
  expectError([&] { TokenFile f(temp("two.tok")); }, "not 0 or 1");
  writeAll(temp("cut.tok"), bytes.substr(0, bytes.size() - 10));
  expectError([&] { TokenFile f(temp("cut.tok")); }, "with their loss mask");
  expectError([&] { writeTokenFile(temp("y.tok"), ids, 256, &mask); }, "a loss mask of 20 entries");
}

// Version 3 (mttok --chat): the examples' starts after the mask. --rows examples puts one
// example per row from its start: its tokens, its counted targets, then padding (token 0,
// target -1); one longer than a row is cut. Held-out rows are the examples in order. Starts that
// do not begin at 0, do not rise or lie past the tokens, and a section cut short, are refused.
TEST(TokenFile, RecordsItsExamplesForOnePerRow) {
  const std::string path = temp("examples.tok");
  // Examples of 5, 12 and 3 tokens: token i is 100 + its place in its example; only the second
  // half of each example counts (a reply after its prompt).
  const std::vector<int64_t> starts = {0, 5, 17};
  std::vector<uint32_t> ids;
  std::vector<uint8_t> counted;
  for (int64_t length : {5, 12, 3})
    for (int64_t t = 0; t < length; ++t) ids.push_back(100 + static_cast<uint32_t>(t)), counted.push_back(2 * t >= length);
  writeTokenFile(path, ids, 256, &counted, 0, &starts);
  TokenFile file(path);
  ASSERT_TRUE(file.hasExamples());
  EXPECT_EQ(file.exampleStarts(), starts);
  EXPECT_EQ(file.exampleEnd(2, file.size()), 20);
  const int64_t seq = 8;
  BatchSampler sampler(file, 4, seq, 7, 0, -1, RowLayout::kExamples);
  EXPECT_EQ(sampler.examples(), 3);
  EXPECT_EQ(sampler.examplesCut(), 1) << "the 12-token example is longer than a row of 8 + 1";
  std::vector<int32_t> tokens(4 * seq), targets(4 * seq);
  int64_t want_counted = 0;
  const int64_t n = sampler.fill(3, tokens.data(), targets.data());
  for (int64_t b = 0; b < 4; ++b) {
    const int32_t* row = tokens.data() + b * seq;
    const int32_t* target = targets.data() + b * seq;
    ASSERT_EQ(row[0], 100) << "row " << b << " begins at an example's start";
    int64_t length = 1;
    while (length < seq && row[length] == 100 + length) ++length;
    const int64_t example = length == 5 ? 5 : length == 3 ? 3 : 12;
    for (int64_t t = 0; t < seq; ++t) {
      const bool inside = t + 1 < std::min<int64_t>(example, seq + 1);
      if (t >= std::min<int64_t>(example, seq + 1)) EXPECT_EQ(row[t], 0) << "padding, row " << b;
      const bool counts = inside && 2 * (t + 1) >= example;
      EXPECT_EQ(target[t], counts ? 101 + t : -1) << "row " << b << " position " << t;
      want_counted += counts;
    }
  }
  EXPECT_EQ(n, want_counted);
  HeldOutBatches held(file, 2, seq, 5, file.size(), 0, RowLayout::kExamples);
  EXPECT_EQ(held.windows(), 2) << "the examples starting in the held-out range";
  EXPECT_EQ(held.allBatches(), 1);
  held.fill(0, tokens.data(), targets.data());
  EXPECT_EQ(std::vector<int32_t>(tokens.begin(), tokens.begin() + seq),
            (std::vector<int32_t>{100, 101, 102, 103, 104, 105, 106, 107}));
  EXPECT_EQ(std::vector<int32_t>(tokens.begin() + seq, tokens.begin() + 2 * seq),
            (std::vector<int32_t>{100, 101, 102, 0, 0, 0, 0, 0}));
  writeTokenFile(temp("plain.tok"), ids, 256, &counted);
  TokenFile plain(temp("plain.tok"));
  expectError([&] { BatchSampler s(plain, 1, seq, 1, 0, -1, RowLayout::kExamples); }, "does not record where its examples start");

  const std::string bytes = readAll(path);
  const size_t section = bytes.size() - 8 * 4;  // the count, then 3 starts
  auto withStart = [&](int i, uint64_t start) {
    std::string b = bytes;
    std::memcpy(&b[section + 8 + 8 * i], &start, 8);
    writeAll(temp("bad-examples.tok"), b);
  };
  withStart(0, 1);
  expectError([&] { TokenFile f(temp("bad-examples.tok")); }, "example 0 starts at token 1, not 0");
  withStart(2, 5);
  expectError([&] { TokenFile f(temp("bad-examples.tok")); }, "example 2 starts at token 5, not after example 1");
  withStart(2, 20);
  expectError([&] { TokenFile f(temp("bad-examples.tok")); }, "below the 20 tokens");
  std::string many = bytes;
  const uint64_t huge = uint64_t{1} << 62;
  std::memcpy(&many[section], &huge, 8);
  writeAll(temp("bad-examples.tok"), many);
  expectError([&] { TokenFile f(temp("bad-examples.tok")); }, "example starts for 20 tokens");
  writeAll(temp("bad-examples.tok"), bytes.substr(0, bytes.size() - 4));
  expectError([&] { TokenFile f(temp("bad-examples.tok")); }, "truncated?");
  const std::vector<int64_t> falling = {0, 9, 4};
  expectError([&] { writeTokenFile(temp("y.tok"), ids, 256, &counted, 0, &falling); }, "rise strictly");
}

// Version 4 (mttok --preferences): the examples in (chosen, rejected) pairs. --rows pairs puts a
// pair's two examples in rows 2j and 2j + 1, the same pair for the same (step, j), its examples
// those exampleOfRow names; held out (and for the reference pass), whole pairs in order, padding after.
// An odd count of examples is refused when written and when read; pairs on another layout and
// other layouts' files on pairs are refused naming the fix.
TEST(TokenFile, RecordsPairsOfRepliesForPreferences) {
  const std::string path = temp("pairs.tok");
  std::vector<uint32_t> ids;
  std::vector<uint8_t> counted;
  std::vector<int64_t> starts;
  for (uint32_t e = 0; e < 6; ++e) {  // example e: 4 tokens of value 10 e, then e + 1 tokens of 10 e + 1
    starts.push_back(static_cast<int64_t>(ids.size()));
    for (uint32_t t = 0; t < 5 + e; ++t) ids.push_back(10 * e + (t >= 4)), counted.push_back(t >= 4);
  }
  writeTokenFile(path, ids, 256, &counted, 0, &starts, /*pairs=*/true);
  TokenFile file(path);
  ASSERT_TRUE(file.hasPairs());
  const int64_t seq = 8, batch = 4;
  BatchSampler sampler(file, batch, seq, 5, 0, -1, RowLayout::kPairs);
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  std::set<size_t> drawn;
  for (int64_t step = 0; step < 6; ++step) {
    sampler.fill(step, tokens.data(), targets.data(), /*first_row=*/batch);
    for (int64_t b = 0; b < batch; ++b) {
      const size_t e = sampler.exampleOfRow(step, batch + b);
      drawn.insert(e);
      EXPECT_EQ(e % 2, static_cast<size_t>(b % 2)) << "row " << b << ": chosen in even rows, rejected in odd";
      if (b % 2) EXPECT_EQ(e, sampler.exampleOfRow(step, batch + b - 1) + 1) << "a pair's two examples";
      EXPECT_EQ(tokens[b * seq], static_cast<int32_t>(10 * e)) << "step " << step << " row " << b;
      EXPECT_EQ(targets[b * seq + 3], static_cast<int32_t>(10 * e + 1)) << "the reply counted";
      EXPECT_EQ(targets[b * seq + 2], -1) << "the prompt not";
    }
  }
  EXPECT_EQ(drawn.size(), 6u) << "every example of the three pairs drawn in 6 steps of 2 pairs";
  // In order, whole pairs from the first that starts in range (example 1 starts at 5: pairs 1, 2).
  HeldOutBatches in_order(file, batch, seq, 2, file.size(), 0, RowLayout::kPairs);
  EXPECT_EQ(in_order.firstExample(), 2u);
  EXPECT_EQ(in_order.windows(), 4);
  EXPECT_EQ(in_order.dataRows(0), 4);
  HeldOutBatches last_pair(file, batch, seq, starts[4], file.size(), 0, RowLayout::kPairs);
  EXPECT_EQ(last_pair.dataRows(0), 2);
  last_pair.fill(0, tokens.data(), targets.data());
  EXPECT_EQ(tokens[0], 40);
  EXPECT_EQ(tokens[seq], 50);
  EXPECT_EQ(std::vector<int32_t>(targets.begin() + 2 * seq, targets.end()), std::vector<int32_t>(2 * seq, -1))
      << "rows past the pairs are padding";
  expectError([&] { BatchSampler s(file, batch, seq, 5, 0, -1, RowLayout::kExamples); },
              "train it with a plan of mtc --objective dpo");
  writeTokenFile(temp("plain-examples.tok"), ids, 256, &counted, 0, &starts);
  TokenFile examples(temp("plain-examples.tok"));
  expectError([&] { BatchSampler s(examples, batch, seq, 5, 0, -1, RowLayout::kPairs); }, "make it with mttok --preferences");
  const std::vector<int64_t> five(starts.begin(), starts.end() - 1);
  expectError([&] { writeTokenFile(temp("y.tok"), ids, 256, &counted, 0, &five, true); }, "an even count, not 5");
  std::string bytes = readAll(path);  // five starts said and held: version 4 refuses the odd count
  const uint64_t count5 = 5;
  const size_t section = bytes.size() - 8 * 7;
  std::memcpy(&bytes[section], &count5, 8);
  writeAll(temp("odd-pairs.tok"), bytes.substr(0, bytes.size() - 8));
  expectError([&] { TokenFile f(temp("odd-pairs.tok")); }, "(chosen, rejected) pairs: an odd count");
}

// Six examples of rising lengths (three pairs), each counting its tokens after its fourth.
std::tuple<std::vector<uint32_t>, std::vector<uint8_t>, std::vector<int64_t>> sixExamples() {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> counted;
  std::vector<int64_t> starts;
  for (uint32_t e = 0; e < 6; ++e) {
    starts.push_back(static_cast<int64_t>(ids.size()));
    for (uint32_t t = 0; t < 5 + e; ++t) ids.push_back(10 * e + (t >= 4)), counted.push_back(t >= 4);
  }
  return {ids, counted, starts};
}

// Version 5 (mttok --unpaired, KTO): pairs of an example and its KL row, a label byte per pair
// after the starts, read back as written; a label other than 0 or 1, a file cut in its labels, labels
// not one per pair, and a DPO layout's refusal name the problem.
TEST(TokenFile, RecordsTheLabelsOfUnpairedExamples) {
  const std::string path = temp("labelled.tok");
  const auto examples = sixExamples();  // (named references: lambdas below capture them)
  const std::vector<uint32_t>& ids = std::get<0>(examples);
  const std::vector<uint8_t>& counted = std::get<1>(examples);
  const std::vector<int64_t>& starts = std::get<2>(examples);
  const std::vector<uint8_t> labels{1, 0, 1};
  writeTokenFile(path, ids, 256, &counted, 0, &starts, /*pairs=*/true, &labels);
  TokenFile file(path);
  EXPECT_TRUE(file.hasPairs());
  EXPECT_EQ(file.labels(), labels);
  writeTokenFile(temp("pairs-only.tok"), ids, 256, &counted, 0, &starts, /*pairs=*/true);
  EXPECT_FALSE(TokenFile(temp("pairs-only.tok")).hasLabels());
  EXPECT_NE(TokenFile(temp("pairs-only.tok")).checksum(), file.checksum()) << "the labels are in the checksum";
  expectError([&] { BatchSampler s(file, 4, 8, 5, 0, -1, RowLayout::kExamples); },
              "train it with a plan of mtc --objective kto");
  const std::string bytes = readAll(path);
  std::string two = bytes;
  two[bytes.size() - 2] = 2;
  writeAll(temp("bad-label.tok"), two);
  expectError([&] { TokenFile f(temp("bad-label.tok")); }, "the label of pair 1 is 2, not 0 or 1");
  writeAll(temp("bad-label.tok"), bytes.substr(0, bytes.size() - 1));
  expectError([&] { TokenFile f(temp("bad-label.tok")); }, "bytes of example starts and labels");
  const std::vector<uint8_t> two_labels{1, 0};
  expectError([&] { writeTokenFile(temp("y.tok"), ids, 256, &counted, 0, &starts, true, &two_labels); },
              "one per pair of examples: 2 for 3 pairs");
}

// Version 6 (mttok --preferences of records with TRL's "margin"): (chosen, rejected) pairs, a
// little-endian f32 per pair after the starts, read back as written and in the checksum; a margin
// that is not finite, a file cut in its margins, and margins not one per pair (or beside labels)
// name the problem.
TEST(TokenFile, RecordsTheMarginsOfPairs) {
  const std::string path = temp("margins.tok");
  const auto examples = sixExamples();  // (named references: lambdas below capture them)
  const std::vector<uint32_t>& ids = std::get<0>(examples);
  const std::vector<uint8_t>& counted = std::get<1>(examples);
  const std::vector<int64_t>& starts = std::get<2>(examples);
  const std::vector<float> margins{0.5f, -1.25f, 3.0f};
  writeTokenFile(path, ids, 256, &counted, 0, &starts, /*pairs=*/true, nullptr, &margins);
  TokenFile file(path);
  EXPECT_TRUE(file.hasPairs());
  EXPECT_FALSE(file.hasLabels());
  EXPECT_EQ(file.margins(), margins);
  writeTokenFile(temp("pairs-only.tok"), ids, 256, &counted, 0, &starts, /*pairs=*/true);
  EXPECT_FALSE(TokenFile(temp("pairs-only.tok")).hasMargins());
  const std::vector<float> other{0.5f, -1.25f, 3.5f};  // one margin apart
  writeTokenFile(temp("other-margins.tok"), ids, 256, &counted, 0, &starts, /*pairs=*/true, nullptr, &other);
  EXPECT_NE(TokenFile(temp("other-margins.tok")).checksum(), file.checksum()) << "the margins are in the checksum";
  const std::string bytes = readAll(path);
  std::string bad = bytes;
  const float nan = NAN;
  std::memcpy(&bad[bytes.size() - 8], &nan, 4);
  writeAll(temp("bad-margin.tok"), bad);
  expectError([&] { TokenFile f(temp("bad-margin.tok")); }, "the margin of pair 1 is nan, not finite");
  writeAll(temp("bad-margin.tok"), bytes.substr(0, bytes.size() - 2));
  expectError([&] { TokenFile f(temp("bad-margin.tok")); }, "bytes of example starts and margins");
  const std::vector<float> two{1.0f, 2.0f}, infinite{1.0f, INFINITY, 0.0f};
  const std::vector<uint8_t> labels{1, 0, 1};
  expectError([&] { writeTokenFile(temp("y.tok"), ids, 256, &counted, 0, &starts, true, nullptr, &two); },
              "margins come one per (chosen, rejected) pair of examples, without labels: 2 for 3 pairs");
  expectError([&] { writeTokenFile(temp("y.tok"), ids, 256, &counted, 0, &starts, true, &labels, &margins); },
              "without labels");
  expectError([&] { writeTokenFile(temp("y.tok"), ids, 256, &counted, 0, &starts, true, nullptr, &infinite); },
              "margin 1 is not finite");
}

// --rows packed-examples: each pass over the examples a shuffle, packed next fit into rows of
// whole examples (one longer than a row alone, cut), each example once per pass; positions from
// 0 in each example and in the padding; the sampler's step rows are the passes' rows in turn,
// the same for the same seed, another order for another.
TEST(TokenFile, PacksWholeExamplesEachOncePerPass) {
  const std::string path = temp("packed.tok");
  const int64_t examples = 40, seq = 10;
  std::vector<int64_t> starts;
  std::vector<uint32_t> ids;
  for (int64_t e = 0; e < examples; ++e) {  // example e: length 1 + (e * 7) % 13 (some past seq + 1), tokens e + 1
    starts.push_back(static_cast<int64_t>(ids.size()));
    ids.insert(ids.end(), static_cast<size_t>(1 + (e * 7) % 13), static_cast<uint32_t>(e + 1));
  }
  const std::vector<uint8_t> counted(ids.size(), 1);
  writeTokenFile(path, ids, 256, &counted, 0, &starts);
  TokenFile file(path);
  auto length = [&](int64_t e) { return 1 + (e * 7) % 13; };
  const PackedPasses passes(file, 0, examples, file.size(), seq, 5);
  std::vector<int32_t> tokens(seq), targets(seq), positions(seq);
  std::vector<float> kept(seq);
  std::vector<uint8_t> mask;
  std::vector<int64_t> seen;  // the examples in row order
  for (int64_t row = 0; static_cast<int64_t>(seen.size()) < 2 * examples; ++row) {
    passes.fill(row, mask, {tokens.data(), targets.data(), kept.data(), positions.data()});
    int64_t t = 0;
    while (t < seq && tokens[t] != 0) {  // an example from its position 0
      const int64_t e = tokens[t] - 1, slots = std::min(length(e), seq);
      seen.push_back(e);
      for (int64_t i = 0; i < slots; ++i) {
        ASSERT_EQ(tokens[t + i], e + 1) << "row " << row;
        ASSERT_EQ(positions[t + i], i) << "row " << row << " slot " << t + i;
        ASSERT_EQ(kept[t + i], 1.0f);
        ASSERT_EQ(targets[t + i], i + 1 < length(e) ? e + 1 : -1) << "row " << row << " slot " << t + i;
      }
      t += slots;
    }
    for (int64_t i = t; i < seq; ++i)  // padding
      ASSERT_TRUE(tokens[i] == 0 && targets[i] == -1 && kept[i] == 0.0f && positions[i] == i - t) << "row " << row;
    ASSERT_GT(t, 0) << "row " << row << " holds an example";
  }
  ASSERT_EQ(static_cast<int64_t>(seen.size()), 2 * examples) << "each pass ends at a row's end";
  std::vector<int64_t> first(seen.begin(), seen.begin() + examples), second(seen.begin() + examples, seen.end());
  EXPECT_NE(first, second) << "each pass a new shuffle";
  for (auto* pass : {&first, &second}) {
    std::vector<int64_t> sorted = *pass;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t e = 0; e < examples; ++e) ASSERT_EQ(sorted[e], e) << "each example once per pass";
  }
  EXPECT_GT(packedRowsInOrder(file, 0, examples, file.size(), seq), examples / 4);
  // The sampler's step 2, row 1 of 3 (step_rows 6: two micro-batches of 3): the passes' row 13.
  const BatchSampler sampler(file, 3, seq, 5, 0, -1, RowLayout::kPackedExamples, 6);
  std::vector<int32_t> batch_tokens(3 * seq), batch_targets(3 * seq);
  sampler.fill(2, batch_tokens.data(), batch_targets.data(), 0);
  passes.fill(13, mask, {tokens.data(), targets.data()});
  EXPECT_EQ(std::vector<int32_t>(batch_tokens.begin() + seq, batch_tokens.begin() + 2 * seq), tokens);
  const BatchSampler other(file, 3, seq, 6, 0, -1, RowLayout::kPackedExamples, 6);
  std::vector<int32_t> other_tokens(3 * seq), other_targets(3 * seq);
  other.fill(2, other_tokens.data(), other_targets.data(), 0);
  EXPECT_NE(other_tokens, batch_tokens) << "another seed, another order";
}

TEST(BatchSampler, IsDeterministicPerStepAndShiftsTargets) {
  const std::string path = temp("sampler.tok");
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 5000; ++i) ids.push_back(i % 251);
  writeTokenFile(path, ids, 256);
  TokenFile file(path);
  BatchSampler a(file, 3, 16, 42), b(file, 3, 16, 42), c(file, 3, 16, 43);
  std::vector<int32_t> t1(48), y1(48), t2(48), y2(48), t3(48), y3(48);
  a.fill(5, t1.data(), y1.data());
  b.fill(5, t2.data(), y2.data());
  c.fill(5, t3.data(), y3.data());
  EXPECT_EQ(t1, t2);
  EXPECT_NE(t1, t3);
  for (int i = 0; i < 48; ++i) EXPECT_EQ(y1[i], (t1[i] + 1) % 251);
  expectError([&] { BatchSampler s(file, 1, 5000, 1); }, "at least");
}

// A token file truncated or rewritten while a run samples from it (issue 18, #7) ends the run
// with an error naming the file: it was memory-mapped, and the truncation raised SIGBUS and
// out-of-vocabulary ids were trained on.
TEST(BatchSampler, RefusesAFileChangedUnderneath) {
  const std::string path = temp("changing.tok");
  std::vector<uint32_t> ids(5000);
  for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i % 200;
  writeTokenFile(path, ids, 256);
  TokenFile file(path);
  BatchSampler sampler(file, 4, 64, 3);
  std::vector<int32_t> tokens(256), targets(256);
  sampler.fill(0, tokens.data(), targets.data());

  std::filesystem::resize_file(path, 32 + 2 * 100);  // truncated in place: 100 tokens left
  for (int64_t step = 0; step < 4; ++step)
    expectError([&] { sampler.fill(step, tokens.data(), targets.data()); }, "changed while");

  // Rewritten in place at the same length with ids past the vocabulary.
  writeTokenFile(temp("other.tok"), std::vector<uint32_t>(5000, 255), 256);
  std::string bytes = readAll(temp("other.tok"));
  for (size_t i = 32; i < bytes.size(); i += 2) bytes[i + 1] = '\x7f';  // id 0x7fff
  {
    std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  expectError([&] { sampler.fill(1, tokens.data(), targets.data()); }, "changed while");
}

TEST(BatchSampler, DrawsOnlyFromItsRange) {
  // Pseudo-random ids: each 16-token window occurs once, so it can be located in the file.
  std::vector<uint32_t> ids(5000);
  uint64_t x = 12345;
  for (auto& id : ids) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<uint32_t>(x >> 56);
  }
  const std::string path = temp("range.tok");
  writeTokenFile(path, ids, 256);
  TokenFile file(path);
  BatchSampler held_out(file, 3, 16, 7, 4000, 5000);
  std::vector<int32_t> tokens(48), targets(48);
  int located = 0;
  for (int64_t step = 0; step < 50; ++step) {
    held_out.fill(step, tokens.data(), targets.data());
    for (int row = 0; row < 3; ++row) {
      auto found = std::search(ids.begin(), ids.end(), tokens.begin() + row * 16, tokens.begin() + row * 16 + 16,
                               [](uint32_t a, int32_t b) { return a == static_cast<uint32_t>(b); });
      ASSERT_NE(found, ids.end());
      const int64_t start = found - ids.begin();
      EXPECT_GE(start, 4000);
      EXPECT_LE(start + 17, 5000);  // the targets' last token too
      ++located;
    }
  }
  EXPECT_EQ(located, 150);
}

TEST(Safetensors, RoundTripsAndRejectsCorruption) {
  const std::string path = temp("w.safetensors");
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  writeSafetensors(path, {{"a", "F32", {2, 3}, a.data(), 24}});
  {
    SafetensorsFile file(path);
    const auto& e = file.f32("a", {2, 3});
    EXPECT_EQ(std::memcmp(e.data, a.data(), 24), 0);
    expectError([&] { file.f32("a", {3, 2}); }, "needs F32");
    expectError([&] { file.f32("b", {1}); }, "no tensor 'b'");
  }
  const std::string bytes = readAll(path);
  for (size_t cut : {size_t(4), size_t(20), bytes.size() - 1}) {
    writeAll(temp("cut.safetensors"), bytes.substr(0, cut));
    expectError([&] { SafetensorsFile f(temp("cut.safetensors")); }, "not valid safetensors");
  }
  std::string bad_json = bytes;
  bad_json[9] = '!';
  writeAll(temp("json.safetensors"), bad_json);
  expectError([&] { SafetensorsFile f(temp("json.safetensors")); }, "not valid safetensors");
}

// Issue 18 #1: a shape whose element count overflows int64 claimed 8 bytes (the product wrapped)
// and mtonnx then wrote rows x cols floats into them. Every size from the file is checked.
TEST(Safetensors, RejectsAShapeWhoseProductOverflows) {
  const std::string header = R"({"w":{"dtype":"F32","shape":[239075442,77158673929],"data_offsets":[0,8]}})";
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  writeAll(temp("overflow.safetensors"), bytes + header + std::string(8, '\0'));
  expectError([&] { SafetensorsFile f(temp("overflow.safetensors")); }, "too large");
}

// A peak of 1 after 4 warmup steps, 14 steps, a floor of 0.1.
TrainConfig scheduleOf14Steps() {
  TrainConfig c;
  c.lr = 1.0;
  c.warmup = 4;
  c.steps = 14;
  c.min_lr_ratio = 0.1;
  return c;
}

TEST(LearningRate, WarmsUpLinearlyThenDecaysByCosineToTheFloor) {
  const TrainConfig c = scheduleOf14Steps();
  EXPECT_DOUBLE_EQ(learningRate(c, 1), 0.25);
  EXPECT_DOUBLE_EQ(learningRate(c, 4), 1.0);
  EXPECT_DOUBLE_EQ(learningRate(c, 5), 1.0);
  EXPECT_NEAR(learningRate(c, 14), 0.1, 1e-12);
  for (int s = 5; s < 14; ++s) EXPECT_GT(learningRate(c, s), learningRate(c, s + 1));
}

// --lr-schedule linear: from lr at the first step after the warmup down by equal steps to
// lr * min_lr_ratio at the last; constant: lr after the warmup. --warmup-ratio: ceil(ratio x steps).
TEST(LearningRate, LinearAndConstantSchedulesAndAWarmupRatio) {
  TrainConfig c = scheduleOf14Steps();
  c.lr_schedule = LrSchedule::kLinear;
  EXPECT_DOUBLE_EQ(learningRate(c, 2), 0.5);
  EXPECT_DOUBLE_EQ(learningRate(c, 5), 1.0);
  EXPECT_DOUBLE_EQ(learningRate(c, 6), 0.9);  // 9 equal steps of 0.1 from step 5 to step 14
  EXPECT_NEAR(learningRate(c, 10), 0.5, 1e-12);
  EXPECT_NEAR(learningRate(c, 14), 0.1, 1e-12);
  c.lr_schedule = LrSchedule::kConstant;
  EXPECT_DOUBLE_EQ(learningRate(c, 3), 0.75);
  for (int s = 5; s <= 14; ++s) EXPECT_DOUBLE_EQ(learningRate(c, s), 1.0);

  c.warmup = 0;
  c.warmup_ratio = 0.1;
  EXPECT_EQ(resolveWarmup(c).warmup, 2);  // 1.4 steps: rounded up
  c.warmup_ratio = 0.0;
  EXPECT_EQ(resolveWarmup(c).warmup, 0);
  c.warmup_ratio = 1.0;
  EXPECT_EQ(resolveWarmup(c).warmup, 14);
  c.warmup_ratio.reset();
  c.warmup = 3;
  EXPECT_EQ(resolveWarmup(c).warmup, 3);  // no ratio: --warmup as given
}

TEST(Checksum, Crc32cMatchesTheStandardAndItsPortableTwin) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xe3069283u);  // RFC 3720's check value
  EXPECT_EQ(crc32cPortable(check.data(), check.size()), 0xe3069283u);
  std::vector<unsigned char> bytes(4099);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t start : {0, 1, 3, 8}) {
    for (size_t n : {0, 1, 7, 8, 9, 100, 4000}) {
      const uint32_t whole = crc32c(bytes.data() + start, n);
      EXPECT_EQ(whole, crc32cPortable(bytes.data() + start, n)) << start << " " << n;
      EXPECT_EQ(whole, crc32c(bytes.data() + start + n / 2, n - n / 2, crc32c(bytes.data() + start, n / 2)));
    }
  }
}

// Issue 18: a flipped bit in a written file is reported, not trained on.
TEST(Safetensors, EveryTensorCarriesAChecksumThatCatchesAFlippedBit) {
  const std::string path = temp("sum.safetensors");
  std::vector<float> a(1000, 0.25f), b = {1, 2, 3};
  writeSafetensors(path, {{"a", "F32", {1000}, a.data(), 4000}, {"b", "F32", {3}, b.data(), 12}},
                   {{"note", "kept"}, {"crc32c.a", "ffffffff"}});  // a stale checksum is replaced
  const std::string bytes = readAll(path);
  {
    SafetensorsFile file(path);
    EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"note", "kept"}}));
    ASSERT_TRUE(file.entries().at("a").crc32c.has_value());
    EXPECT_EQ(*file.entries().at("a").crc32c, crc32c(a.data(), 4000));
    file.f32("a", {1000});
    file.f32("b", {3});
  }
  for (size_t bit : {size_t(0), size_t(13), size_t(8 * 3999 + 7)}) {
    std::string flipped = bytes;
    flipped[bytes.size() - 12 - 4000 + bit / 8] ^= static_cast<char>(1 << (bit % 8));
    writeAll(temp("flipped.safetensors"), flipped);
    SafetensorsFile file(temp("flipped.safetensors"));
    expectError([&] { file.f32("a", {1000}); }, "tensor 'a' does not match its checksum");
    file.f32("b", {3});  // the other tensor is intact
  }
  std::string bad = bytes;
  const size_t at = bad.find("\"crc32c.b\":\"") + 12;
  bad[at] = 'X';
  writeAll(temp("badsum.safetensors"), bad);
  expectError([&] { SafetensorsFile f(temp("badsum.safetensors")); }, "checksum of 'b' is not 8 hex digits");
}

}  // namespace
}  // namespace mt
