#include "runtime/data/token_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>

#include "runtime/data/example_packing.h"
#include "runtime/io/checksum.h"
#include "kernels/random/counter_rng.h"
#include "runtime/io/error.h"

namespace mt {
namespace {

constexpr size_t kHeaderBytes = 32;
constexpr int64_t kChunkTokens = int64_t(1) << 20;  // tokens checked per read when a file is opened

int64_t modifiedNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// One row of a batch: tokens [start, start + seq) of `data` and, as targets, each next token,
// counted unless the file's mask leaves it out (-1: ignored by the loss); positions from the
// row's start. `mask` is scratch. Returns the targets counted.
int64_t readRow(const TokenFile& data, int64_t start, int64_t seq, std::vector<uint8_t>& mask, const RowSlots& row) {
  const std::vector<uint32_t> window = data.read(start, seq + 1, data.hasLossMask() ? &mask : nullptr);
  int64_t counted = 0;
  for (int64_t t = 0; t < seq; ++t) {
    row.tokens[t] = static_cast<int32_t>(window[t]);
    const bool counts = mask.empty() || mask[t + 1];
    row.targets[t] = counts ? static_cast<int32_t>(window[t + 1]) : -1;
    counted += counts;
  }
  if (row.positions) std::iota(row.positions, row.positions + seq, 0);
  return counted;
}

// One example as a row from its start (--rows examples), then padding. Returns the targets
// counted.
int64_t exampleRow(const TokenFile& data, size_t i, int64_t end, int64_t seq, std::vector<uint8_t>& mask,
                   const RowSlots& slots) {
  int64_t counted = 0;
  const int64_t used = placeExample(data, data.exampleStarts()[i], data.exampleEnd(i, end), seq, mask, slots, counted);
  padSlots(slots.at(used), seq - used);
  return counted;
}

// The bytes each pair of a file of `version` holds after the examples' starts: a label (version 5)
// or a margin (version 6).
uint64_t bytesPerPair(uint32_t version) {
  return version == kTokenLabelledVersion ? 1 : version == kTokenMarginsVersion ? 4 : 0;
}

// --rows pairs: examples [first, last) narrowed to whole pairs (from an even example to one), in
// rows of whole pairs (an even batch).
void keepWholePairs(size_t& first, size_t& last, int64_t batch) {
  if (batch % 2 != 0) throw Error("--rows pairs: a batch of " + std::to_string(batch) + " rows is not pairs");
  first += first % 2, last -= last % 2;
  last = std::max(first, last);
}

}  // namespace

TokenFile::TokenFile(const std::string& path)
    : path_(path), file_(path, "token file", "(make one with mttok)") {
  auto bad = [&](const std::string& why) {
    return Error("token file " + path + " is invalid: " + why + " (re-create it with mttok)");
  };
  const size_t size = file_.size();
  unsigned char header[kHeaderBytes];
  if (size < kHeaderBytes || file_.readAt(header, kHeaderBytes, 0) != kHeaderBytes)
    throw bad("shorter than its 32-byte header");
  uint32_t version;
  uint64_t count;
  std::memcpy(&version, header + 8, 4);
  std::memcpy(&bytes_per_token_, header + 12, 4);
  std::memcpy(&count, header + 16, 8);
  std::memcpy(&vocab_, header + 24, 4);
  std::memcpy(&tokenizer_fingerprint_, header + 28, 4);
  if (std::memcmp(header, kTokenMagic, 8) != 0) throw bad("bad magic (not a MegaTrain token file)");
  if (version < kTokenVersion || version > kTokenMarginsVersion)
    throw bad("version " + std::to_string(version) +
              ", this reader knows 1 (ids), 2 (ids and a loss mask), 3 (and the examples), 4 (in pairs), 5 (in "
              "labelled pairs) and 6 (in pairs with margins)");
  pairs_ = version >= kTokenPairsVersion;
  const bool labelled = version == kTokenLabelledVersion;
  const char* per_pair = labelled ? " and labels" : version == kTokenMarginsVersion ? " and margins" : "";
  masked_ = version != kTokenVersion;
  if (bytes_per_token_ != 2 && bytes_per_token_ != 4)
    throw bad("bytes per token is " + std::to_string(bytes_per_token_) + ", not 2 or 4");
  if (vocab_ == 0) throw bad("vocab size is 0");
  // A plan holds tokens and targets as int32: an id past INT32_MAX would turn negative there.
  if (vocab_ > (uint32_t{1} << 31)) throw bad("vocab size " + std::to_string(vocab_) + " is past 2^31 (ids are int32)");
  id_limit_ = vocab_;
  const uint64_t per_token = bytes_per_token_ + (masked_ ? 1 : 0);  // the id, and its mask byte
  // Version 3: the examples' section after the mask (its count, then one u64 per example).
  uint64_t examples = 0;
  const uint64_t body = size - kHeaderBytes;
  if (version >= kTokenExamplesVersion) {
    if (count > body / per_token || body - count * per_token < 8)
      throw bad("header says " + std::to_string(count) + " tokens but the file has no room for them, their loss "
                "mask and its examples' count (truncated?)");
    unsigned char raw[8];
    if (file_.readAt(raw, 8, kHeaderBytes + count * per_token) != 8) throw bad("its examples' count cannot be read");
    std::memcpy(&examples, raw, 8);
    if (pairs_ && examples % 2 != 0)
      throw bad("it says its " + std::to_string(examples) + " examples are " +
                (labelled ? "(example, KL row)" : "(chosen, rejected)") + " pairs: an odd count");
    // Each example a u64 start (and a label or a margin per pair: half a byte or two per example).
    const uint64_t rest = body - count * per_token - 8;
    if (examples == 0 || examples > count || examples > rest / 8 ||
        rest != 8 * examples + examples / 2 * bytesPerPair(version))
      throw bad("it says " + std::to_string(examples) + " examples but holds " + std::to_string(rest) +
                " bytes of example starts" + per_pair + " for " + std::to_string(count) +
                " tokens (truncated?)");
  }
  const uint64_t after_mask = examples ? 8 + 8 * examples + examples / 2 * bytesPerPair(version) : 0;
  if (count > body / per_token || count * per_token + after_mask != body)
    throw bad("header says " + std::to_string(count) + " tokens but the file holds " +
              std::to_string(body / per_token) + (masked_ ? " with their loss mask" : "") + " (truncated?)");
  count_ = static_cast<int64_t>(count);
  struct stat st;
  if (fstat(file_.fd(), &st) != 0) throw bad(std::strerror(errno));
  modified_ns_ = modifiedNs(st);
  crc32c_ = crc32c(header, kHeaderBytes);
  std::vector<uint32_t> chunk;
  for (int64_t first = 0; first < count_; first += kChunkTokens) {
    chunk.resize(static_cast<size_t>(std::min(kChunkTokens, count_ - first)));
    readChecked(first, static_cast<int64_t>(chunk.size()), chunk.data(), bad, &crc32c_);
    largest_id_ = std::max(largest_id_, *std::max_element(chunk.begin(), chunk.end()));
  }
  std::vector<uint8_t> mask;
  for (int64_t first = 0; masked_ && first < count_; first += kChunkTokens) {
    mask.resize(static_cast<size_t>(std::min(kChunkTokens, count_ - first)));
    readMask(first, static_cast<int64_t>(mask.size()), mask.data(), bad, &crc32c_);
  }
  if (examples) readExamples(examples, version, bad);
}

void TokenFile::readExamples(uint64_t examples, uint32_t version, const std::function<Error(const std::string&)>& bad) {
  const size_t offset = kHeaderBytes + static_cast<size_t>(count_) * (bytes_per_token_ + 1);
  std::vector<unsigned char> raw(8 + 8 * examples + examples / 2 * bytesPerPair(version));
  if (file_.readAt(raw.data(), raw.size(), offset) != raw.size()) throw bad("its example starts cannot be read");
  crc32c_ = crc32c(raw.data(), raw.size(), crc32c_);
  example_starts_.resize(examples);
  for (uint64_t i = 0; i < examples; ++i) {
    uint64_t start;
    std::memcpy(&start, raw.data() + 8 + 8 * i, 8);
    const uint64_t previous = i ? static_cast<uint64_t>(example_starts_[i - 1]) : 0;
    if ((i == 0 && start != 0) || (i > 0 && start <= previous) || start >= static_cast<uint64_t>(count_))
      throw bad("example " + std::to_string(i) + " starts at token " + std::to_string(start) +
                (i == 0 ? ", not 0" : ", not after example " + std::to_string(i - 1) + "'s start " +
                                          std::to_string(previous) + " and below the " + std::to_string(count_) +
                                          " tokens"));
    example_starts_[i] = static_cast<int64_t>(start);
  }
  const unsigned char* after = raw.data() + 8 + 8 * examples;
  if (version == kTokenMarginsVersion) {
    margins_.resize(examples / 2);
    std::memcpy(margins_.data(), after, 4 * margins_.size());
    for (size_t p = 0; p < margins_.size(); ++p)
      if (!std::isfinite(margins_[p]))
        throw bad("the margin of pair " + std::to_string(p) + " is " + std::to_string(margins_[p]) + ", not finite");
  }
  if (version != kTokenLabelledVersion) return;
  labels_.assign(after, static_cast<const unsigned char*>(raw.data() + raw.size()));
  for (size_t p = 0; p < labels_.size(); ++p)
    if (labels_[p] > 1)
      throw bad("the label of pair " + std::to_string(p) + " is " + std::to_string(labels_[p]) + ", not 0 or 1");
}

std::string rowsName(RowLayout layout) {
  switch (layout) {
    case RowLayout::kPacked: return "packed";
    case RowLayout::kExamples: return "examples";
    case RowLayout::kPackedExamples: return "packed-examples";
    case RowLayout::kPairs: return "pairs";
  }
  return "?";
}

void TokenFile::requireExamples(RowLayout layout, const std::string& what) const {
  if (layout == RowLayout::kPairs && !pairs_)
    throw Error(rowsFlag(layout) + ": " + what + " " + path_ + " is not preference data (a prompt's chosen and "
                "rejected replies in pairs, or labelled examples beside their KL rows): make it with mttok "
                "--preferences for a plan of mtc --objective dpo, --unpaired for one of --objective kto");
  if (layout != RowLayout::kPairs && pairs_)
    throw Error(rowsFlag(layout) + ": " + what + " " + path_ + " is preference data (" +
                (hasLabels() ? "labelled examples beside their KL rows, mttok --unpaired): train it with a plan of mtc "
                               "--objective kto"
                             : "chosen and rejected replies in pairs, mttok --preferences): train it with a plan of mtc "
                               "--objective dpo") +
                ", which reads it --rows pairs");
  if (!hasExamples())
    throw Error(rowsFlag(layout) + ": " + what + " " + path_ + " does not record where its examples start (mttok "
                "--chat records them, since version 3 of the format: tokenise the instruction data again, or train "
                "--rows packed)");
}

int64_t TokenFile::exampleEnd(size_t i, int64_t end_limit) const {
  const int64_t end = i + 1 < example_starts_.size() ? example_starts_[i + 1] : count_;
  return std::min(end, end_limit);
}

size_t TokenFile::firstExampleFrom(int64_t token) const {
  return static_cast<size_t>(std::lower_bound(example_starts_.begin(), example_starts_.end(), token) -
                             example_starts_.begin());
}

std::vector<uint32_t> TokenFile::read(int64_t first, int64_t count, std::vector<uint8_t>* counted) const {
  if (first < 0 || count < 0 || first > count_ - count)
    throw Error("tokens [" + std::to_string(first) + ", " + std::to_string(first + count) + ") of token file " +
                path_ + " asked for, but it holds " + std::to_string(count_));
  struct stat st;
  if (fstat(file_.fd(), &st) != 0) throw changedError(std::strerror(errno));
  if (static_cast<size_t>(st.st_size) != file_.size() || modifiedNs(st) != modified_ns_)
    throw changedError("it is now " + std::to_string(st.st_size) + " bytes, modified after it was opened");
  std::vector<uint32_t> out(static_cast<size_t>(count));
  auto changed = [&](const std::string& what) { return changedError(what); };
  try {
    readChecked(first, count, out.data(), changed);
    if (counted) {
      counted->assign(static_cast<size_t>(count), 1);
      if (masked_) readMask(first, count, counted->data(), changed);
    }
  } catch (const Error& e) {
    throw IoFault(e.what());  // the file, not the run, went wrong: the trainer checkpoints before it stops
  }
  return out;
}

void TokenFile::readMask(int64_t first, int64_t count, uint8_t* out,
                         const std::function<Error(const std::string&)>& changed, uint32_t* crc) const {
  const size_t offset = kHeaderBytes + static_cast<size_t>(count_) * bytes_per_token_ + static_cast<size_t>(first);
  const size_t bytes = static_cast<size_t>(count);
  if (file_.readAt(out, bytes, offset) != bytes) throw changed("it holds less of a loss mask than its header says");
  for (size_t i = 0; i < bytes; ++i)
    if (out[i] > 1)
      throw changed("the loss mask of token " + std::to_string(first + static_cast<int64_t>(i)) + " is " +
                    std::to_string(out[i]) + ", not 0 or 1");
  if (crc) *crc = crc32c(out, bytes, *crc);
}

void TokenFile::readChecked(int64_t first, int64_t count, uint32_t* out,
                            const std::function<Error(const std::string&)>& changed, uint32_t* crc) const {
  const size_t bytes = static_cast<size_t>(count) * bytes_per_token_;
  std::vector<unsigned char> raw(bytes);
  const size_t offset = kHeaderBytes + static_cast<size_t>(first) * bytes_per_token_;
  if (file_.readAt(raw.data(), bytes, offset) != bytes) throw changed("it holds fewer tokens than its header says");
  for (int64_t i = 0; i < count; ++i) {
    uint32_t id = 0;
    if (bytes_per_token_ == 2) {
      uint16_t v;
      std::memcpy(&v, raw.data() + 2 * i, 2);
      id = v;
    } else {
      std::memcpy(&id, raw.data() + 4 * i, 4);
    }
    if (id >= id_limit_)
      throw changed("token " + std::to_string(first + i) + " is " + std::to_string(id) +
                    ", not below the vocab size " + std::to_string(id_limit_));
    out[i] = id;
  }
  if (crc) *crc = crc32c(raw.data(), bytes, *crc);
}

void TokenFile::limitIds(uint32_t limit) {
  if (largest_id_ >= limit)
    throw Error("token file " + path_ + " holds token id " + std::to_string(largest_id_) + ", not below " +
                std::to_string(limit));
  id_limit_ = std::min(id_limit_, limit);
}

IoFault TokenFile::changedError(const std::string& what) const {
  return IoFault("token file " + path_ + " changed while it was being read (" + what +
               "): leave a run's data file alone until it ends; restore the file and resume from the last "
               "checkpoint");
}

void writeTokenFile(const std::string& path, const std::vector<uint32_t>& ids, uint32_t vocab_size,
                    const std::vector<uint8_t>* counted, uint32_t tokenizer_fingerprint,
                    const std::vector<int64_t>* example_starts, bool pairs, const std::vector<uint8_t>* labels,
                    const std::vector<float>* margins) {
  const uint32_t width = vocab_size <= 65536 ? 2 : 4;
  if (counted && counted->size() != ids.size())
    throw Error("a loss mask of " + std::to_string(counted->size()) + " entries for " + std::to_string(ids.size()) +
                " tokens");
  if (example_starts && (!counted || example_starts->empty() || example_starts->front() != 0 ||
                         example_starts->back() >= static_cast<int64_t>(ids.size()) ||
                         !std::is_sorted(example_starts->begin(), example_starts->end(), std::less_equal<>())))
    throw Error("example starts must come with a loss mask, begin at 0 and rise strictly below the token count");
  const size_t examples = example_starts ? example_starts->size() : 0;
  if (pairs && (examples == 0 || examples % 2 != 0))
    throw Error("examples in (chosen, rejected) pairs must be an even count, not " + std::to_string(examples));
  if (labels && (!pairs || labels->size() != examples / 2))
    throw Error("labels come one per pair of examples: " + std::to_string(labels->size()) + " for " +
                std::to_string(examples / 2) + " pairs");
  if (margins && (!pairs || labels || margins->size() != examples / 2))
    throw Error("margins come one per (chosen, rejected) pair of examples, without labels: " +
                std::to_string(margins->size()) + " for " + std::to_string(examples / 2) + " pairs");
  const size_t label_bytes = labels ? labels->size() : 0, margin_bytes = margins ? 4 * margins->size() : 0;
  std::string bytes(kHeaderBytes + ids.size() * width + (counted ? ids.size() : 0) +
                        (examples ? 8 + 8 * examples + label_bytes + margin_bytes : 0),
                    '\0');
  const uint64_t count = ids.size();
  std::memcpy(&bytes[0], kTokenMagic, 8);
  const uint32_t version = labels     ? kTokenLabelledVersion
                           : margins  ? kTokenMarginsVersion
                           : pairs    ? kTokenPairsVersion
                           : examples ? kTokenExamplesVersion
                           : counted  ? kTokenMaskedVersion
                                      : kTokenVersion;
  std::memcpy(&bytes[8], &version, 4);
  std::memcpy(&bytes[12], &width, 4);
  std::memcpy(&bytes[16], &count, 8);
  std::memcpy(&bytes[24], &vocab_size, 4);
  std::memcpy(&bytes[28], &tokenizer_fingerprint, 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= vocab_size) throw Error("token id " + std::to_string(ids[i]) + " >= vocab size");
    if (width == 2) {
      const uint16_t v = static_cast<uint16_t>(ids[i]);
      std::memcpy(&bytes[kHeaderBytes + 2 * i], &v, 2);
    } else {
      std::memcpy(&bytes[kHeaderBytes + 4 * i], &ids[i], 4);
    }
  }
  for (size_t i = 0; counted && i < ids.size(); ++i) {
    if ((*counted)[i] > 1) throw Error("loss mask entry " + std::to_string(i) + " is not 0 or 1");
    bytes[kHeaderBytes + ids.size() * width + i] = static_cast<char>((*counted)[i]);
  }
  if (examples) {
    const size_t at = kHeaderBytes + ids.size() * (width + 1);
    const uint64_t n = examples;
    std::memcpy(&bytes[at], &n, 8);
    for (size_t i = 0; i < examples; ++i) {
      const uint64_t start = static_cast<uint64_t>((*example_starts)[i]);
      std::memcpy(&bytes[at + 8 + 8 * i], &start, 8);
    }
    for (size_t p = 0; p < label_bytes; ++p) {
      if ((*labels)[p] > 1) throw Error("label " + std::to_string(p) + " is not 0 or 1");
      bytes[at + 8 + 8 * examples + p] = static_cast<char>((*labels)[p]);
    }
    for (size_t p = 0; margins && p < margins->size(); ++p) {
      if (!std::isfinite((*margins)[p])) throw Error("margin " + std::to_string(p) + " is not finite");
      std::memcpy(&bytes[at + 8 + 8 * examples + 4 * p], &(*margins)[p], 4);
    }
  }
  writeFileAtomically(path, bytes);
}

BatchSampler::BatchSampler(const TokenFile& data, int64_t batch, int64_t seq, uint64_t seed, int64_t begin,
                           int64_t end, RowLayout layout, int64_t step_rows)
    : data_(data), batch_(batch), seq_(seq), seed_(seed), begin_(begin), end_(end < 0 ? data.size() : end),
      layout_(layout), step_rows_(step_rows > 0 ? step_rows : batch) {
  if (begin_ < 0 || end_ > data.size() || begin_ > end_) throw Error("token range outside the token file");
  if (byExamples(layout)) {
    data.requireExamples(layout);
    first_example_ = data.firstExampleFrom(begin_), last_example_ = data.firstExampleFrom(end_);
    if (layout == RowLayout::kPairs) keepWholePairs(first_example_, last_example_, batch);
    if (first_example_ == last_example_) throw Error("token file " + data.path() + ": no example to train on");
    if (layout == RowLayout::kPackedExamples)
      passes_ = std::make_shared<const PackedPasses>(data, first_example_, last_example_, end_, seq, seed);
    return;
  }
  if (end_ - begin_ < seq + 1)
    throw Error("token file has " + std::to_string(end_ - begin_) + " tokens to sample from; a sequence of " +
                std::to_string(seq) + " needs at least " + std::to_string(seq + 1));
}

int64_t BatchSampler::fill(int64_t step, int32_t* tokens, int32_t* targets, int64_t first_row, float* kept,
                           int32_t* positions) const {
  int64_t counted = 0;
  std::vector<uint8_t> mask;
  if (kept) std::fill(kept, kept + batch_ * seq_, 1.0f);  // packed rows: every token
  for (int64_t b = 0; b < batch_; ++b) {
    const RowSlots row{tokens + b * seq_, targets + b * seq_, kept ? kept + b * seq_ : nullptr,
                       positions ? positions + b * seq_ : nullptr};
    if (layout_ == RowLayout::kPackedExamples) {
      counted += passes_->fill(step * step_rows_ + first_row + b, mask, row);
      continue;
    }
    if (layout_ == RowLayout::kPairs) {
      counted += exampleRow(data_, exampleOfRow(step, first_row + b), end_, seq_, mask, row);
      continue;
    }
    const uint64_t key = splitmix64(splitmix64(seed_ ^ 0x5eed) ^ (uint64_t(step) << 20) ^ uint64_t(first_row + b));
    if (layout_ == RowLayout::kExamples) {
      counted += exampleRow(data_, first_example_ + key % (last_example_ - first_example_), end_, seq_, mask, row);
      continue;
    }
    const int64_t start = begin_ + static_cast<int64_t>(key % static_cast<uint64_t>(end_ - begin_ - seq_));
    counted += readRow(data_, start, seq_, mask, row);
  }
  return counted;
}

size_t BatchSampler::exampleOfRow(int64_t step, int64_t row) const {
  const uint64_t key = splitmix64(splitmix64(seed_ ^ 0x9a125) ^ (uint64_t(step) << 20) ^ uint64_t(row / 2));
  const size_t pairs = (last_example_ - first_example_) / 2;
  return first_example_ + 2 * (key % pairs) + static_cast<size_t>(row % 2);
}

int64_t BatchSampler::exampleSlots() const {
  int64_t slots = 0;
  for (size_t i = first_example_; i < last_example_; ++i)
    slots += std::min(data_.exampleEnd(i, end_) - data_.exampleStarts()[i], seq_);
  return slots;
}

int64_t BatchSampler::packedRowsPerPass() const {
  return packedRowsInOrder(data_, first_example_, last_example_, end_, seq_);
}

int64_t BatchSampler::examplesCut() const {
  int64_t cut = 0;
  for (size_t i = first_example_; i < last_example_; ++i)
    cut += data_.exampleEnd(i, end_) - data_.exampleStarts()[i] > seq_ + 1;
  return cut;
}

HeldOutBatches::HeldOutBatches(const TokenFile& data, int64_t batch, int64_t seq, int64_t begin, int64_t end,
                               int64_t max_batches, RowLayout layout)
    : data_(data), batch_(batch), seq_(seq), begin_(begin), end_(end), layout_(layout) {
  if (byExamples(layout)) {
    data.requireExamples(layout, "held-out token file");
    first_example_ = data.firstExampleFrom(begin);
    size_t last = data.firstExampleFrom(end);
    if (layout == RowLayout::kPairs) keepWholePairs(first_example_, last, batch);
    windows_ = static_cast<int64_t>(last - first_example_);
    if (windows_ == 0) throw Error("held-out tokens of " + data.path() + ": no example starts among them");
    if (layout == RowLayout::kPackedExamples) {
      packed_ = std::make_shared<const PackedRows>(
          data, examplesInOrder(first_example_, first_example_ + static_cast<size_t>(windows_)), end, seq);
      windows_ = packed_->rows();
    }
  } else {
    if (begin < 0 || end > data.size() || end - begin < seq + 1)
      throw Error("held-out tokens: " + std::to_string(end - begin) + " to validate on; a sequence of " +
                  std::to_string(seq) + " needs at least " + std::to_string(seq + 1));
    windows_ = (end - begin - 1) / seq;
  }
  all_batches_ = (windows_ + batch - 1) / batch;
  batches_ = max_batches > 0 ? std::min(max_batches, all_batches_) : all_batches_;
}

int64_t HeldOutBatches::fill(int64_t i, int32_t* tokens, int32_t* targets, float* kept, int32_t* positions) const {
  int64_t counted = 0;
  std::vector<uint8_t> mask;
  if (kept) std::fill(kept, kept + batch_ * seq_, 1.0f);
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t window = i * batch_ + b;
    const RowSlots row{tokens + b * seq_, targets + b * seq_, kept ? kept + b * seq_ : nullptr,
                       positions ? positions + b * seq_ : nullptr};
    if (window >= windows_) {  // padding: nothing counted
      padSlots(row, seq_);
      continue;
    }
    if (layout_ == RowLayout::kPackedExamples) {
      counted += packed_->fill(window, mask, row);
      continue;
    }
    if (layout_ == RowLayout::kExamples || layout_ == RowLayout::kPairs) {
      counted += exampleRow(data_, first_example_ + static_cast<size_t>(window), end_, seq_, mask, row);
      continue;
    }
    counted += readRow(data_, begin_ + window * seq_, seq_, mask, row);
  }
  return counted;
}

}  // namespace mt
