// Hugging Face tokenizer.json reading and BPE on small hand-made tokenizers (the real GPT-2,
// Llama 3, Qwen 3 and Mistral files are checked against Hugging Face's JavaScript tokenizers in
// tests/e2e/tokenizer_vs_node.sh), and instruction data's templates and loss masks.
#include <ctime>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/io/error.h"
#include "runtime/data/hf_tokenizer.h"
#include "runtime/data/instruction_data.h"
#include "runtime/io/json_input.h"
#include "runtime/data/utf8.h"
#include "tests/runtime/expect_error.h"
#include "tests/runtime/scratch_path.h"

namespace mt {
namespace {

using nlohmann::json;

// A byte-level BPE tokenizer.json: byte b is id b; `extra` tokens follow from id 256 in order.
json tinyTokenizer(const std::vector<std::string>& extra, const std::vector<std::string>& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byteLevelChars()[b]] = b;
  for (size_t i = 0; i < extra.size(); ++i) vocab[extra[i]] = 256 + i;
  return json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"post_processor", {{"type", "ByteLevel"}}},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}, {"merges", merges}}}};
}

void addToken(json& tokenizer, uint32_t id, const std::string& content, bool special = true) {
  tokenizer["added_tokens"].push_back({{"id", id},
                                       {"content", content},
                                       {"single_word", false},
                                       {"lstrip", false},
                                       {"rstrip", false},
                                       {"normalized", false},
                                       {"special", special}});
}

std::string save(const json& tokenizer) {
  const std::string path = test::scratchPath("tokenizer.json");
  std::ofstream(path) << tokenizer.dump();
  return path;
}

std::vector<uint32_t> bytesOf(const std::string& text) {
  return {reinterpret_cast<const unsigned char*>(text.data()), reinterpret_cast<const unsigned char*>(text.data()) + text.size()};
}

using test::expectError;

TEST(HfTokenizer, MergesLowestRankFirst) {
  // "b c" ranks before "a b": abc -> a, bc (not ab, c).
  HfTokenizer t(save(tinyTokenizer({"bc", "ab"}, {"b c", "a b"})));
  EXPECT_EQ(t.encode("abc"), (std::vector<uint32_t>{'a', 256}));
  EXPECT_EQ(t.encode("ab"), (std::vector<uint32_t>{257}));
  EXPECT_EQ(t.vocabSize(), 258u);
}

TEST(HfTokenizer, EqualRanksMergeFromTheLeft) {
  HfTokenizer t(save(tinyTokenizer({"aa", "aaaa"}, {"a a", "aa aa"})));
  EXPECT_EQ(t.encode("aaa"), (std::vector<uint32_t>{256, 'a'}));
  EXPECT_EQ(t.encode("aaaaa"), (std::vector<uint32_t>{257, 'a'}));
}

TEST(HfTokenizer, MergesGivenAsPairsAndTheSpaceByteLevelCharacter) {
  // Merges in the newer [left, right] form; a space is the byte-level character U+0120 (Ġ).
  const std::string space = byteLevelChars()[' '];
  HfTokenizer t(save(tinyTokenizer({space + "x"}, {})));
  json file = tinyTokenizer({space + "x"}, {});
  file["model"]["merges"] = json::array({json::array({space, "x"})});
  HfTokenizer pairs(save(file));
  EXPECT_EQ(pairs.encode("a x"), (std::vector<uint32_t>{'a', 256}));
  EXPECT_EQ(t.encode("a x"), (std::vector<uint32_t>{'a', ' ', 'x'}));  // no merge: bytes
}

TEST(HfTokenizer, IgnoreMergesTakesAWholeVocabularyEntry) {
  json file = tinyTokenizer({"abc"}, {});
  EXPECT_EQ(HfTokenizer(save(file)).encode("abc"), bytesOf("abc"));
  file["model"]["ignore_merges"] = true;
  EXPECT_EQ(HfTokenizer(save(file)).encode("abc"), (std::vector<uint32_t>{256}));
}

TEST(HfTokenizer, AddedTokensSplitLeftmostLongestAndTemplateAddsSpecials) {
  json file = tinyTokenizer({}, {});
  addToken(file, 300, "<s>");
  addToken(file, 301, "<s>x");
  addToken(file, 302, "<|endoftext|>");
  file["post_processor"] = {{"type", "TemplateProcessing"},
                            {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {300}}, {"tokens", {"<s>"}}}}}}};
  HfTokenizer t(save(file));
  EXPECT_EQ(t.encode("a<s>xb<s>", false), (std::vector<uint32_t>{'a', 301, 'b', 300}));
  EXPECT_EQ(t.encode("a", true), (std::vector<uint32_t>{300, 'a'}));
  EXPECT_EQ(t.endOfText(), std::optional<uint32_t>(302));
  EXPECT_EQ(t.vocabSize(), 303u);
  EXPECT_EQ(t.decode({'a', 301, 'b', 302}), "a<s>xb<|endoftext|>");
  EXPECT_EQ(t.decode({'a', 301, 'b', 302}, /*skip_special_tokens=*/true), "ab");
}

TEST(HfTokenizer, WhiteSpaceIsOniguruma) {
  // U+0085 and U+000B are white space to Oniguruma (ICU's own \s has neither): a Split that
  // removes \s drops them.
  json file = tinyTokenizer({}, {});
  file["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "Split"}, {"pattern", {{"Regex", "\\s"}}}, {"behavior", "Removed"}, {"invert", false}},
                             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  HfTokenizer t(save(file));
  EXPECT_EQ(t.encode("a\u0085b\vc d"), bytesOf("abcd"));
}

TEST(HfTokenizer, NormalizesToNfcBeforeSplitting) {
  json file = tinyTokenizer({}, {});
  file["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(HfTokenizer(save(file)).encode("e\u0301"), bytesOf("\u00e9"));
  file["normalizer"] = nullptr;
  EXPECT_EQ(HfTokenizer(save(file)).encode("e\u0301"), bytesOf("e\u0301"));
}

TEST(HfTokenizer, DecodesWhatItEncodes) {
  HfTokenizer t(save(tinyTokenizer({"ab"}, {"a b"})));
  const std::string text = "ab 中文 😀 e\u0301\n\t x";
  EXPECT_EQ(t.decode(t.encode(text)), text);
  EXPECT_EQ(t.decode({0xE4, 0xB8, 'a'}), "\uFFFDa");  // two thirds of a character: replaced, not raw bytes
  expectError([&] { t.decode({999}); }, "token id 999 is not in the tokenizer");
}

TEST(Utf8, IllFormedSequencesBecomeReplacementCharactersAsTextDecoderMakesThem) {
  const std::string r = "\uFFFD";
  EXPECT_EQ(validUtf8("a\xE2\x82" "b"), "a" + r + "b");              // truncated: one for the maximal prefix
  EXPECT_EQ(validUtf8("\xE0\x80\xAF"), r + r + r);                    // overlong: no valid prefix
  EXPECT_EQ(validUtf8("\xED\xA0\x80"), r + r + r);                    // a surrogate
  EXPECT_EQ(validUtf8("\xF4\x90\x80\x80"), r + r + r + r);           // past U+10FFFF
  EXPECT_EQ(validUtf8("\xF0\x9F\x98" "\xF0\x9F\x98\x80"), r + "\U0001F600");
  EXPECT_EQ(validUtf8("\xC0\xAF\xFF"), r + r + r);
  EXPECT_EQ(validUtf8("caf\xC3\xA9 \u4E2D"), "caf\xC3\xA9 \u4E2D");
}

TEST(HfTokenizer, RefusesWhatItDoesNotImplement) {
  auto refused = [](json file, const std::string& needle) { expectError([&] { HfTokenizer t(save(file)); }, needle); };
  json file = tinyTokenizer({}, {});
  file["model"]["type"] = "WordPiece";
  refused(file, "model WordPiece is not supported");
  file = tinyTokenizer({}, {});
  file["pre_tokenizer"] = {{"type", "Metaspace"}};
  refused(file, "pre-tokenizer Metaspace is not supported");
  file["pre_tokenizer"] = nullptr;  // a BPE over characters, which needs byte_fallback
  refused(file, "a BPE over characters without byte_fallback (no pre-tokenizer, no ByteLevel) is not supported");
  // A Split without ByteLevel splits characters, which also needs byte_fallback.
  file["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", " "}}}, {"behavior", "Isolated"}};
  refused(file, "a BPE over characters without byte_fallback (no pre-tokenizer, no ByteLevel) is not supported");
  file["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", " "}}}, {"behavior", "MergedWithNext"}};
  refused(file, "Split behavior MergedWithNext is not supported");
  file = tinyTokenizer({}, {});
  file["normalizer"] = {{"type", "Lowercase"}};
  refused(file, "normalizer Lowercase is not supported");
  file = tinyTokenizer({}, {});
  file["model"]["byte_fallback"] = true;
  refused(file, "byte_fallback with a ByteLevel pre-tokenizer is not supported");
  file = tinyTokenizer({}, {"x y"});
  refused(file, "merge 0 (x y) names a token the vocabulary lacks");
  file = tinyTokenizer({}, {"a b c"});
  refused(file, "is not two tokens separated by one space");
  file = tinyTokenizer({}, {});
  file["model"]["vocab"].erase(byteLevelChars()['q']);
  refused(file, "byte 113 has none");
  file = tinyTokenizer({}, {});
  addToken(file, 300, "<x>");
  file["added_tokens"][0]["lstrip"] = true;
  refused(file, "added token <x> with lstrip is not supported");
  file = tinyTokenizer({}, {});
  file["model"]["vocab"]["zz"] = -4;
  refused(file, "that is not a whole number");
  file = tinyTokenizer({}, {});
  file["model"]["vocab"]["zz"] = 2000000000;  // tables indexed by id would take gigabytes (fuzz finding)
  refused(file, "far past the tokens the file defines (ids must stay below 1538");
  file = tinyTokenizer({}, {});
  file["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  refused(file, "does not compile");
  const std::string path = test::scratchPath("not-json.json");
  std::ofstream(path) << "{ not json";
  expectError([&] { HfTokenizer t(path); }, "is not valid JSON: parse error at line 1");
}

// A SentencePiece-style tokenizer.json (Mistral's kind): "▁" prepended and spaces replaced by it,
// BPE over characters, <0xXX> tokens (ids 3 + byte) for the bytes of characters the vocabulary
// lacks; `extra` tokens follow from id 259 in order.
const std::string kSpiece = "\u2581";
json characterTokenizer(const std::vector<std::string>& extra, const std::vector<std::string>& merges) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  for (size_t i = 0; i < extra.size(); ++i) vocab[extra[i]] = 259 + i;
  json replace_space = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpiece}};
  json file = {{"version", "1.0"},
               {"truncation", nullptr},
               {"padding", nullptr},
               {"added_tokens", json::array()},
               {"normalizer", {{"type", "Sequence"},
                               {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpiece}}, replace_space}}}},
               {"pre_tokenizer", nullptr},
               {"post_processor", nullptr},
               {"decoder", {{"type", "Sequence"},
                            {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", kSpiece}}}, {"content", " "}},
                                          {{"type", "ByteFallback"}},
                                          {{"type", "Fuse"}},
                                          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
               {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"fuse_unk", true},
                          {"byte_fallback", true}, {"vocab", vocab}, {"merges", merges}}}};
  addToken(file, 2, "</s>");
  return file;
}

TEST(HfTokenizer, CharactersWithByteFallbackAsSentencePiece) {
  HfTokenizer t(save(characterTokenizer({kSpiece, "a", "b", kSpiece + "a", kSpiece + "ab"},
                                        {kSpiece + " a", kSpiece + "a b"})));
  const uint32_t space = 259, a = 260, b = 261, space_a = 262, space_ab = 263;
  // "▁" prepended, spaces replaced: "▁ab▁ab" merges into two "▁ab".
  EXPECT_EQ(t.encode("ab ab"), (std::vector<uint32_t>{space_ab, space_ab}));
  // A character the vocabulary lacks is its UTF-8 bytes' tokens.
  EXPECT_EQ(t.encode("b\u00e9"), (std::vector<uint32_t>{space, b, 3 + 0xC3, 3 + 0xA9}));
  // Prepend only before something, and each stretch between added tokens is normalized alone.
  EXPECT_TRUE(t.encode("").empty());
  EXPECT_EQ(t.encode("a</s>a"), (std::vector<uint32_t>{space_a, 2, space_a}));
  // Decoding: "▁" back to spaces, the byte tokens to their character, the leading space cut.
  EXPECT_EQ(t.decode(t.encode("ab b\u00e9 \u4e2d")), "ab b\u00e9 \u4e2d");
  EXPECT_EQ(t.bytesOf(space_ab), " ab");
  // A run of byte tokens that is not UTF-8 is one U+FFFD per byte, as tokenizers' ByteFallback.
  EXPECT_EQ(t.decode({a, 3 + 0xE4, 3 + 0xB8, a}), "a\uFFFD\uFFFDa");
  EXPECT_EQ(t.endOfText(), std::optional<uint32_t>(2));
}

TEST(HfTokenizer, SplitMergedWithPreviousJoinsAMatchToTheStretchBeforeIt) {
  // tokenizers' example: "the-final--countdown" split on "-" is "the-", "final-", "-",
  // "countdown" (a match after a match, or at the start, stands alone). The merge of two dashes
  // ranks first, so it would join "--" in one piece.
  json file = tinyTokenizer({"--", "e-", "l-"}, {"- -", "e -", "l -"});
  file["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  const uint32_t dashes = 256, e_dash = 257, l_dash = 258;
  EXPECT_EQ(HfTokenizer(save(file)).encode("the-final--countdown"),
            (std::vector<uint32_t>{'t', 'h', e_dash, 'f', 'i', 'n', 'a', l_dash, '-', 'c', 'o', 'u', 'n', 't', 'd',
                                   'o', 'w', 'n'}));
  EXPECT_EQ(HfTokenizer(save(file)).encode("--a"), (std::vector<uint32_t>{'-', '-', 'a'}));
  file["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  EXPECT_EQ(HfTokenizer(save(file)).encode("--a"), (std::vector<uint32_t>{dashes, 'a'}));
}

TEST(HfTokenizer, GemmaSplitsOnSpacesItsNormalizerHasReplaced) {
  // Gemma 3's: spaces become "▁" (no Prepend), then a Split on " " (which finds none left)
  // before a BPE over characters with byte fallback.
  json file = characterTokenizer({kSpiece, "a", "b", kSpiece + "a", kSpiece + "ab", "ab"},
                                 {kSpiece + " a", kSpiece + "a b", "a b"});
  file["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpiece}};
  file["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"},
                           {"invert", false}};
  file["decoder"]["decoders"].erase(3);  // no Strip: nothing was prepended
  HfTokenizer t(save(file));
  const uint32_t space_ab = 263, ab = 264;
  EXPECT_EQ(t.encode("ab ab"), (std::vector<uint32_t>{ab, space_ab}));
  EXPECT_EQ(t.decode(t.encode(" ab  b\u00e9")), " ab  b\u00e9");
}

TEST(HfTokenizer, RefusesCharacterTokenizersItCannotDecode) {
  auto refused = [](json file, const std::string& needle) { expectError([&] { HfTokenizer t(save(file)); }, needle); };
  json file = characterTokenizer({}, {});
  file["model"]["byte_fallback"] = false;
  refused(file, "a BPE over characters without byte_fallback");
  file = characterTokenizer({}, {});
  file["model"]["vocab"].erase("<0x41>");
  refused(file, "byte 65 has none");
  file = characterTokenizer({}, {});
  file["decoder"]["decoders"].erase(1);
  refused(file, "whose decoder has no ByteFallback");
  file = characterTokenizer({}, {});
  std::swap(file["decoder"]["decoders"][2], file["decoder"]["decoders"][3]);
  refused(file, "a Strip decoder before Fuse");
  file = characterTokenizer({}, {});
  file["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}};
  refused(file, "a Replace whose pattern is not {\"String\": ...}");
  file = characterTokenizer({}, {});
  file["decoder"] = {{"type", "ByteLevel"}};
  refused(file, "without a Sequence decoder");
}

// An added token on a vocabulary entry's id must be that entry (found by the fuzzer: the BPE made
// the id of "ll", which decoded as the added token and could not say where it lay); the entry's
// own spelling is fine (GPT-2's <|endoftext|>, Llama 2's <s>), in the byte-level alphabet too.
TEST(HfTokenizer, RefusesAnAddedTokenOnAnotherEntrysId) {
  json file = tinyTokenizer({"ll"}, {"l l"});
  addToken(file, 256, "<|endoftext|>");
  expectError([&] { HfTokenizer t(save(file)); },
              "added token \"<|endoftext|>\" has id 256, the vocabulary's entry \"ll\": one id for two tokens");
  file = tinyTokenizer({"<|endoftext|>", byteLevelString("\u00e9!")}, {});
  addToken(file, 256, "<|endoftext|>");
  addToken(file, 257, "\u00e9!", /*special=*/false);
  HfTokenizer t(save(file));
  EXPECT_EQ(t.encode("a<|endoftext|>\u00e9!", false), (std::vector<uint32_t>{'a', 256, 257}));
}

// Two vocabulary entries on one id are refused (found by the fuzzer: "Ġthe" and "ll" on one id,
// the BPE making it for " the" and its bytes spelling "ll").
TEST(HfTokenizer, RefusesTwoEntriesOnOneId) {
  json file = tinyTokenizer({"ll"}, {"l l"});
  file["model"]["vocab"]["he"] = 256;
  expectError([&] { HfTokenizer t(save(file)); }, "share id 256: one id for two tokens");
}

// A ChatML tokenizer: the template's markers are added tokens, everything else bytes.
json chatmlTokenizer() {
  json file = tinyTokenizer({}, {});
  addToken(file, 300, "<|endoftext|>");
  addToken(file, 301, "<|im_start|>");
  addToken(file, 302, "<|im_end|>");
  return file;
}

TEST(InstructionData, ReadsAlpacaMessagesAndShareGpt) {
  auto alpaca = readExample(R"({"instruction": "Add", "input": "2 and 3", "output": "5"})", "x:1").messages;
  ASSERT_EQ(alpaca.size(), 2u);
  EXPECT_EQ(alpaca[0].role, "user");
  EXPECT_EQ(alpaca[0].content, "Add\n\n2 and 3");
  EXPECT_EQ(alpaca[1].content, "5");
  EXPECT_EQ(readExample(R"({"instruction": "Hi", "input": "", "output": "Yo"})", "x:1").messages[0].content, "Hi");
  auto chat = readExample(R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                                            {"role": "assistant", "content": "A"}]})",
                          "x:1").messages;
  EXPECT_EQ(chat.size(), 3u);
  auto share = readExample(R"({"conversations": [{"from": "human", "value": "U"}, {"from": "gpt", "value": "A"}]})", "x:1").messages;
  EXPECT_EQ(share[1].role, "assistant");
  expectError([] { readExample(R"({"messages": [{"role": "robot", "content": "x"}]})", "f:7"); },
              "f:7: message 0: role 'robot' is not one of system, user, assistant, tool");
  expectError([] { readExample(R"({"messages": [{"role": "user", "content": "x"}]})", "f:2"); },
              "f:2: no assistant message");
  expectError([] { readExample("[1, 2]", "f:3"); }, "f:3: not a JSON object");
  expectError([] { readExample(std::string(100000, '[') + std::string(100000, ']'), "f:8"); },
              "f:8 nests lists and objects deeper than 64 levels");
  expectError([] { readExample(R"({"text": "x"})", "f:4"); }, "neither \"messages\"");
  expectError([] { readExample(R"({"instruction": "x", "output": 5})", "f:5"); }, "\"output\" is not a string");
}

// TRL's prompt-completion records (what --preferences and --unpaired read, with one reply): a
// string a user's or the assistant's message, lists in the messages shape; a prompt alone is a
// conversation to reply to.
TEST(InstructionData, ReadsPromptCompletion) {
  auto plain = readExample(R"({"prompt": "Add 2 and 3", "completion": "5"})", "x:1").messages;
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0].role + " " + plain[0].content, "user Add 2 and 3");
  EXPECT_EQ(plain[1].role + " " + plain[1].content, "assistant 5");
  auto listed = readExample(R"({"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
                                "completion": [{"role": "assistant", "content": "A"}]})", "x:2").messages;
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[2].role + " " + listed[2].content, "assistant A");
  EXPECT_EQ(conversationOf(nlohmann::ordered_json::parse(R"({"prompt": "Hi"})"), "x:3").messages.size(), 1u);
  expectError([] { readExample(R"({"prompt": "Hi"})", "f:1"); }, "f:1: no assistant message");
  expectError([] { readExample(R"({"prompt": [{"role": "assistant", "content": "A"}], "completion": "B"})", "f:2"); },
              "f:2: the prompt ends with the assistant's message");
  expectError([] { readExample(R"({"prompt": "Hi", "completion": [{"role": "user", "content": "U"}]})", "f:3"); },
              "f:3: completion: the reply ends with a user message, not the assistant's");
  expectError([] { readExample(R"({"prompt": 5, "completion": "A"})", "f:4"); }, "f:4: prompt");
  // Preference data is refused by name as instruction data to train on, in any shape; a reply to
  // its prompt (mtgen --chat-file) reads the prompt, and as its reference the chosen reply or a
  // desirable completion (not an undesirable one).
  expectError([] { readExample(R"({"prompt": "Q", "completion": "A", "label": false})", "f:5"); },
              "f:5: a \"label\": this is KTO's unpaired feedback");
  expectError([] { readExample(R"({"prompt": "Q", "chosen": "A", "rejected": "B"})", "f:6"); },
              "tokenise it with mttok --preferences");
  expectError([] { readExample(R"({"chosen": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],
                                   "rejected": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "B"}]})",
                               "f:7"); },
              "f:7: \"chosen\"/\"rejected\": this is a preference pair");
  expectError([] { readExample(R"({"conversations": [{"from": "human", "value": "Q"}], "chosen": {"from": "gpt",
                                   "value": "A"}, "rejected": {"from": "gpt", "value": "B"}})", "f:8"); },
              "tokenise it with mttok --preferences");
  const auto replyTo = [](const char* record) {
    std::string text;
    for (const ChatMessage& m : conversationOf(nlohmann::ordered_json::parse(record), "f:9").messages)
      text += (text.empty() ? "" : " | ") + m.role + " " + m.content;
    return text;
  };
  EXPECT_EQ(replyTo(R"({"prompt": "Q", "chosen": "A", "rejected": "B"})"), "user Q | assistant A");
  EXPECT_EQ(replyTo(R"({"prompt": "Q", "completion": "A", "label": true})"), "user Q | assistant A");
  EXPECT_EQ(replyTo(R"({"prompt": "Q", "completion": "A", "label": false})"), "user Q");
  EXPECT_EQ(replyTo(R"({"chosen": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],
                       "rejected": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "B"}]})"),
            "user Q | assistant A");
}

// LLaMA-Factory's alpaca "history" (earlier turns before the instruction), and a JSON array file
// (Stanford Alpaca's alpaca_data.json) beside JSONL: the same examples, each named where it is.
TEST(InstructionData, ReadsHistoryAndJsonArrays) {
  auto turns = readExample(
      R"({"system": "S", "instruction": "Q2", "output": "A2", "history": [["Q0", "A0"], ["Q1", "A1"]]})", "x:1").messages;
  ASSERT_EQ(turns.size(), 7u);
  const std::vector<std::string> want = {"system S", "user Q0", "assistant A0", "user Q1", "assistant A1", "user Q2", "assistant A2"};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(turns[i].role + " " + turns[i].content, want[i]);
  expectError([] { readExample(R"({"instruction": "x", "output": "y", "history": [["only one"]]})", "f:6"); },
              "f:6: \"history\" item 0 is not a [user, assistant] pair of strings");
  const std::string records = R"({"instruction": "I0", "output": "O0"})" "\n\n" R"({"instruction": "I1", "output": "O1"})";
  const std::string array = "  [" R"({"instruction": "I0", "output": "O0"})" ",\n" R"({"instruction": "I1", "output": "O1"})" "]";
  for (const auto& [text, places] : {std::pair{records, std::vector<std::string>{"d.jsonl:1", "d.jsonl:3"}},
                                     std::pair{array, std::vector<std::string>{"d.jsonl: record 0", "d.jsonl: record 1"}}}) {
    std::vector<std::string> seen, where_seen;
    forEachExample("d.jsonl", text, [&](const ChatExample& e, const std::string& where) {
      seen.push_back(e.messages.back().content);
      where_seen.push_back(where);
    });
    EXPECT_EQ(seen, (std::vector<std::string>{"O0", "O1"}));
    EXPECT_EQ(where_seen, places);
  }
  expectError([] { forEachExample("a.json", R"([{"instruction": "x", "output": "y"}, 7])", [](auto&, auto&) {}); },
              "a.json: record 1: not a JSON object");
}

TEST(InstructionData, TemplatesRenderAsHuggingFaceDoes) {
  const std::vector<ChatMessage> chat = {{"user", "Hi"}, {"assistant", "\nHello "}, {"user", "Bye"}, {"assistant", "Ciao"}};
  std::string text, counted;
  for (const auto& part : renderChat(chat, ChatTemplate::ChatML)) (part.counted ? counted : text) += part.text + "|";
  EXPECT_EQ(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n|\n<|im_start|>user\nBye<|im_end|>\n"
                  "<|im_start|>assistant\n|\n|");
  EXPECT_EQ(counted, "\nHello <|im_end|>|Ciao<|im_end|>|");
  text.clear();
  counted.clear();
  for (const auto& part : renderChat(chat, ChatTemplate::Qwen3)) (part.counted ? counted : text) += part.text;
  EXPECT_NE(text.find("<|im_start|>assistant\n<think>\n\n</think>\n\n"), std::string::npos);  // last reply only
  EXPECT_EQ(text.find("<think>"), text.rfind("<think>"));
  text.clear();
  counted.clear();
  for (const auto& part : renderChat(chat, ChatTemplate::Llama3)) (part.counted ? counted : text) += part.text;
  EXPECT_EQ(text.substr(0, 61), "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi");
  EXPECT_EQ(counted, "Hello<|eot_id|>Ciao<|eot_id|>");  // trimmed, as Llama 3's template does
}

// Qwen 3's reasoning, as its template renders it: a reply after the last user message opens with
// its <think> block (from reasoning_content, or from a content holding </think>), counted with
// the reply; an earlier reply loses its reasoning; the other templates leave reasoning_content out.
TEST(InstructionData, Qwen3RendersReasoningAsItsTemplateDoes) {
  auto render = [](const std::vector<ChatMessage>& chat, ChatTemplate t) {
    std::string text, counted;
    for (const auto& part : renderChat(chat, t)) (part.counted ? counted : text) += part.text + "|";
    return std::pair{text, counted};
  };
  ChatMessage reasoned{"assistant", "\nIt is 4."};
  reasoned.reasoning = "\n2 and 2 make 4.\n\n";
  auto [text, counted] = render({{"user", "2+2?"}, reasoned}, ChatTemplate::Qwen3);
  EXPECT_EQ(text, "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n|\n|");
  EXPECT_EQ(counted, "<think>\n2 and 2 make 4.\n</think>\n\nIt is 4.<|im_end|>|");
  // The trace in the content: the same rendering; an earlier reply's trace is dropped.
  const ChatMessage inline_trace{"assistant", "<think>\n2 and 2 make 4.</think>\n\nIt is 4."};
  EXPECT_EQ(render({{"user", "2+2?"}, inline_trace}, ChatTemplate::Qwen3).second, counted);
  std::tie(text, counted) = render({{"user", "2+2?"}, inline_trace, {"user", "And 3+3?"}, {"assistant", "6."}},
                                   ChatTemplate::Qwen3);
  EXPECT_EQ(counted, "It is 4.<|im_end|>|6.<|im_end|>|");
  EXPECT_NE(text.find("<|im_start|>assistant\n<think>\n\n</think>\n\n|"), std::string::npos);  // the last, empty
  EXPECT_EQ(render({{"user", "2+2?"}, reasoned}, ChatTemplate::ChatML).second, "\nIt is 4.<|im_end|>|");
  expectError([] { readExample(R"({"messages": [{"role": "user", "content": "Q", "reasoning_content": "r"},
                                              {"role": "assistant", "content": "A"}]})", "x.jsonl:1"); },
              "x.jsonl:1: message 0: \"reasoning_content\" on a user message");
}

// Function calling in the data: the messages shape's tool_calls (OpenAI's {"function": ...} and the
// bare {"name", "arguments"}), a null content beside them, tool results with their id and name,
// the example's tools; LLaMA-Factory's sharegpt function_call and observation turns and its tools
// as JSON text. Keys keep the data's order (a template's tojson writes them so); what a template
// cannot take is refused naming the message; the built-in templates refuse tools.
TEST(InstructionData, ReadsToolCallsAndTools) {
  const ChatExample example = readExample(
      R"({"messages": [{"role": "user", "content": "Weather in Paris?"},
                       {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "id": "c1",
                        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}}]},
                       {"role": "tool", "content": "18", "tool_call_id": "c1", "name": "get_weather"},
                       {"role": "assistant", "content": "18 degrees."}],
          "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})",
      "x:1");
  ASSERT_EQ(example.messages.size(), 4u);
  EXPECT_TRUE(example.usesTools());
  EXPECT_EQ(example.messages[1].content, "");
  EXPECT_EQ(example.messages[1].tool_fields,
            R"({"tool_calls":[{"type":"function","id":"c1","function":{"name":"get_weather","arguments":{"city":"Paris","unit":"C"}}}]})");
  EXPECT_EQ(example.messages[2].role, "tool");
  EXPECT_EQ(example.messages[2].tool_fields, R"({"tool_call_id":"c1","name":"get_weather"})");
  EXPECT_EQ(example.tools, R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])");
  EXPECT_FALSE(readExample(R"({"instruction": "Q", "output": "A"})", "x:2").usesTools());
  // A conversation to reply to (mtgen --conversation) needs no reply; an example does.
  const std::string asked = R"({"messages": [{"role": "user", "content": "Q"}], "tools": [{"name": "f"}]})";
  EXPECT_EQ(conversationOf(parseOrderedJsonInput(asked, "c"), "c").tools, R"([{"name":"f"}])");
  expectError([&] { readExample(asked, "x:9"); }, "x:9: no assistant message");
  // LLaMA-Factory's sharegpt: the call's JSON as text, a list of calls too; tools as JSON text.
  const ChatExample share = readExample(
      R"({"conversations": [{"from": "human", "value": "Add 2 and 3"},
                            {"from": "function_call", "value": "{\"name\": \"add\", \"arguments\": {\"b\": 3, \"a\": 2}}"},
                            {"from": "observation", "value": "5"}, {"from": "gpt", "value": "It is 5."}],
          "tools": "[{\"name\": \"add\", \"parameters\": {}}]"})",
      "x:3");
  EXPECT_EQ(share.messages[1].role, "assistant");
  EXPECT_EQ(share.messages[1].content, "");
  EXPECT_EQ(share.messages[1].tool_fields,
            R"({"tool_calls":[{"type":"function","function":{"name":"add","arguments":{"b":3,"a":2}}}]})");
  EXPECT_EQ(share.messages[2].role, "tool");
  EXPECT_EQ(share.tools, R"([{"name":"add","parameters":{}}])");
  EXPECT_EQ(readExample(R"({"conversations": [{"from": "function_call",
                          "value": "[{\"name\": \"f\", \"arguments\": \"{}\"}, {\"name\": \"g\", \"arguments\": {}}]"}]})",
                        "x:4").messages[0].tool_fields,
            R"({"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}},)"
            R"({"type":"function","function":{"name":"g","arguments":{}}}]})");
  const std::string reply = R"(, {"role": "assistant", "content": "A"}]})";
  expectError([&] { readExample(R"({"messages": [{"role": "user", "content": "Q", "tool_calls": [{"name": "f", "arguments": {}}]})" + reply, "f:1"); },
              "f:1: message 0: \"tool_calls\" on a user message");
  expectError([&] { readExample(R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": 7}]})" + reply, "f:2"); },
              "f:2: message 0: tool call 0: \"arguments\" is 7, neither an object nor its JSON as a string");
  expectError([&] { readExample(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": {}}}]})" + reply, "f:3"); },
              "f:3: message 0: tool call 0: no \"name\"");
  expectError([&] { readExample(R"({"messages": [{"role": "assistant", "content": null}]})", "f:4"); },
              "f:4: message 0: \"content\" is not a string");
  expectError([] { readExample(R"({"instruction": "Q", "output": "A", "tools": {"name": "f"}})", "f:5"); },
              "f:5: \"tools\" is an object of 1 key, not a list of the functions' schemas");
  expectError([] { readExample(R"({"conversations": [{"from": "function_call", "value": "not json"}]})", "f:6"); },
              "f:6: message 0: the function_call's value");
  expectError([] { readExample(R"({"conversations": [{"from": "function_call", "value": "[]"}]})", "f:7"); },
              "f:7: message 0: the function_call's value lists no call");
  expectError([] { readExample(R"({"conversations": [{"from": "function_call", "value": "7"}]})", "f:8"); },
              "f:8: message 0: the function_call's value is neither a call");
  // OpenAI's arguments as JSON text are kept as given (the renderer reads them into their object
  // for the templates that write arguments with tojson), but must be a JSON object's text.
  EXPECT_EQ(readExample(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f",
                          "arguments": "{\"z\":1}"}}]}]})", "x:5").messages[0].tool_fields,
            R"({"tool_calls":[{"function":{"name":"f","arguments":"{\"z\":1}"}}]})");
  expectError([&] { readExample(R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": "[1]"}]})" + reply, "f:9"); },
              "f:9: message 0: tool call 0: \"arguments\" is text that is not a JSON object's (\"[1]\")");
  expectError([&] { readExample(R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": "{"}]})" + reply, "f:10"); },
              "f:10: message 0: tool call 0: \"arguments\" is not valid JSON");
  expectError([&] { renderExample(example, ChatTemplate::ChatML); }, "\"tools\": the built-in template chatml renders no tools");
  expectError([&] { renderChat(example.messages, ChatTemplate::Qwen3); },
              "a reply of tool calls: the built-in template qwen3 renders no tools");
}

// Mistral's [INST] format as Mixtral-8x7B-Instruct's template renders it: <s>, the user turns in
// [INST] ... [/INST], each reply counted with its </s>; a system message or turns out of order
// refused as the template refuses them; the generation prompt adds nothing.
TEST(InstructionData, MistralRendersAsMixtralTemplateDoes) {
  const std::vector<ChatMessage> chat = {{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}, {"assistant", "Ciao"}};
  std::string text, counted;
  for (const auto& part : renderChat(chat, ChatTemplate::Mistral)) (part.counted ? counted : text) += part.text + "|";
  EXPECT_EQ(text, "<s>[INST] Hi [/INST]|[INST] Bye [/INST]|");
  EXPECT_EQ(counted, "Hello</s>|Ciao</s>|");
  EXPECT_EQ(generationPrompt(ChatExample{{{"user", "Hi"}}}, ChatTemplate::Mistral), "<s>[INST] Hi [/INST]");
  expectError([] { renderChat({{"system", "S"}, {"user", "Q"}}, ChatTemplate::Mistral); }, "a system message");
  expectError([] { renderChat({{"user", "Q"}, {"user", "Q"}}, ChatTemplate::Mistral); }, "alternate");
}

// gpt-oss's harmony as its template renders a training conversation: the system header with
// today's date, the first system message as the developer's instructions, each reply in the final
// channel, counted from <|channel|> (what the model writes after the generation prompt's
// <|start|>assistant) through <|end|>, the last through <|return|>.
TEST(InstructionData, HarmonyRendersAsGptOssTemplateDoes) {
  const std::vector<ChatMessage> chat = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}, {"assistant", "Ciao"}};
  // Today's date, read around the rendering (a test run across midnight sees either).
  auto today = [] {
    char date[16];
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    return std::string(date, std::strftime(date, sizeof date, "%Y-%m-%d", &local));
  };
  auto header = [](const std::string& date) {
    return "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
           "2024-06\nCurrent date: " + date + "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, "
           "final. Channel must be included for every message.<|end|>";
  };
  const std::string before = today();
  std::string text, counted;
  for (const auto& part : renderChat(chat, ChatTemplate::Harmony)) (part.counted ? counted : text) += part.text + "|";
  const std::string after = today();
  const std::string rest = "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|><|start|>user<|message|>Hi"
                           "<|end|><|start|>assistant|<|start|>user<|message|>Bye<|end|><|start|>assistant|";
  EXPECT_TRUE(text == header(before) + rest || text == header(after) + rest) << text;
  EXPECT_EQ(counted, "<|channel|>final<|message|>Hello<|end|>|<|channel|>final<|message|>Ciao<|return|>|");
  const std::string prompt = generationPrompt(ChatExample{{{"user", "Hi"}}}, ChatTemplate::Harmony);
  EXPECT_EQ(prompt.substr(prompt.find("<|start|>user")), "<|start|>user<|message|>Hi<|end|><|start|>assistant");
  expectError([] { renderChat({{"user", "Q"}, {"system", "S"}}, ChatTemplate::Harmony); }, "a system message after the first");
  expectError([] { renderChat({{"user", "Q"}, {"assistant", "<|channel|>final<|message|>A"}}, ChatTemplate::Harmony); },
              "harmony's channel markers");
  // gpt-oss's "thinking": the last reply's rendered as its analysis message, counted with it.
  const ChatExample thought = readExample(R"({"messages": [{"role": "user", "content": "Q"},
      {"role": "assistant", "content": "A", "thinking": "T"}]})", "x:1");
  EXPECT_EQ(thought.messages[1].reasoning_field, ChatMessage::ReasoningField::Thinking);
  counted.clear();
  for (const auto& part : renderExample(thought, ChatTemplate::Harmony)) if (part.counted) counted += part.text + "|";
  EXPECT_EQ(counted, "<|channel|>analysis<|message|>T<|end|><|start|>assistant<|channel|>final<|message|>A<|return|>|");
  ChatMessage marked = thought.messages[1];
  marked.reasoning = "<|channel|>analysis<|message|>T";
  expectError([&] { renderChat({{"user", "Q"}, marked}, ChatTemplate::Harmony); }, "harmony's channel markers");
  expectError([] { readExample(R"({"messages": [{"role": "assistant", "content": "A", "thinking": "T",
                                                 "reasoning_content": "R"}]})", "x:2"); },
              "x:2: message 0: both \"reasoning_content\" and \"thinking\"");
}

TEST(InstructionData, TheMaskCountsRepliesAndTheirEnd) {
  HfTokenizer t(save(chatmlTokenizer()));
  EXPECT_EQ(templateFor(t), ChatTemplate::ChatML);
  std::vector<uint32_t> ids;
  std::vector<uint8_t> counted;
  EXPECT_EQ(appendExample(t, renderChat({{"user", "Q"}, {"assistant", "A!"}}, ChatTemplate::ChatML), ids, counted), 0u);
  const std::vector<uint32_t> want_ids = {301, 'u', 's', 'e', 'r', '\n', 'Q', 302, '\n', 301, 'a', 's', 's',
                                          'i', 's', 't', 'a', 'n', 't', '\n', 'A', '!', 302, '\n'};
  EXPECT_EQ(ids, want_ids);
  std::vector<uint8_t> want_counted(want_ids.size(), 0);
  want_counted[20] = want_counted[21] = want_counted[22] = 1;  // "A", "!", <|im_end|>
  EXPECT_EQ(counted, want_counted);
  json plain = tinyTokenizer({}, {});
  expectError([&] { templateFor(HfTokenizer(save(plain))); }, "name a template with --template");
}

// Where each token lies in the text: through the NFC normalizer (a composed character lies where
// its parts did), the pre-tokenizer's pieces, added tokens; SentencePiece's prepended and
// replaced "▁"; ByteLevel's prefix space (where the piece's first character lies). The ids are
// encode()'s without spans.
TEST(HfTokenizer, SaysWhereEachTokenLies) {
  auto spansOf = [](HfTokenizer& t, const std::string& text) {
    std::vector<TokenSpan> spans;
    const std::vector<uint32_t> ids = t.encode(text, false, spans);
    EXPECT_EQ(ids, t.encode(text, false)) << text;
    EXPECT_EQ(spans.size(), ids.size()) << text;
    std::vector<std::pair<size_t, size_t>> pairs;
    for (const TokenSpan& s : spans) pairs.emplace_back(s.begin, s.end);
    return pairs;
  };
  using Spans = std::vector<std::pair<size_t, size_t>>;
  json file = tinyTokenizer({"ab"}, {"a b"});
  file["normalizer"] = {{"type", "NFC"}};
  addToken(file, 300, "<|x|>");
  HfTokenizer nfc(save(file));
  // "ab", " ", é (two bytes, from "e" and U+0301's three), <|x|>, "ab"
  EXPECT_EQ(nfc.encode("ab e\u0301<|x|>ab", false), (std::vector<uint32_t>{256, ' ', 0xC3, 0xA9, 300, 256}));
  EXPECT_EQ(spansOf(nfc, "ab e\u0301<|x|>ab"), (Spans{{0, 2}, {2, 3}, {3, 6}, {3, 6}, {6, 11}, {11, 13}}));
  file = tinyTokenizer({"ab"}, {"a b"});
  file["pre_tokenizer"]["add_prefix_space"] = true;
  HfTokenizer spaced(save(file));
  EXPECT_EQ(spaced.encode("ab", false), (std::vector<uint32_t>{' ', 256}));
  EXPECT_EQ(spansOf(spaced, "ab"), (Spans{{0, 1}, {0, 2}}));
  HfTokenizer piece(save(characterTokenizer({kSpiece, "a", "b", kSpiece + "a", kSpiece + "ab"},
                                            {kSpiece + " a", kSpiece + "a b"})));
  EXPECT_EQ(spansOf(piece, "ab ab"), (Spans{{0, 2}, {2, 5}}));       // "▁ab" twice: the first ▁ prepended
  EXPECT_EQ(spansOf(piece, "a</s>a"), (Spans{{0, 1}, {1, 5}, {5, 6}}));  // each stretch its own ▁
  EXPECT_EQ(spansOf(piece, "b\u00e9"), (Spans{{0, 1}, {0, 1}, {1, 2}, {2, 3}}));  // ▁, b, é's two byte tokens
}

// Mistral's [INST] format through a SentencePiece-style tokenizer: the ids are the whole
// conversation's, as Hugging Face encodes the rendered template (the reply continues the piece
// after "[/INST]", no "▁" of its own), the reply and its </s> counted; a token made of the
// prompt's end and the reply's start ("]A", with a merge for it) is counted and reported.
TEST(InstructionData, TheMaskFollowsTheWholeConversationsTokens) {
  std::vector<std::string> chars = {kSpiece, "[", "]", "/", "I", "N", "S", "T", "Q", "A", "b"};
  const std::vector<ChatPart> parts = {{"<s>[INST] Q [/INST]", false}, {"A b</s>", true}};
  for (bool merged : {false, true}) {
    std::vector<std::string> vocab = chars;
    if (merged) vocab.push_back("]A");
    json file = characterTokenizer(vocab, merged ? std::vector<std::string>{"] A"} : std::vector<std::string>{});
    addToken(file, 1, "<s>");
    HfTokenizer t(save(file));
    std::vector<uint32_t> ids;
    std::vector<uint8_t> counted;
    EXPECT_EQ(appendExample(t, parts, ids, counted), merged ? 1u : 0u);
    EXPECT_EQ(ids, t.encode("<s>[INST] Q [/INST]A b</s>", false));
    std::string reply;  // the counted tokens' text
    for (size_t i = 0; i < ids.size(); ++i)
      if (counted[i]) reply += t.bytesOf(ids[i]);
    EXPECT_EQ(reply, merged ? "]A b</s>" : "A b</s>") << merged;
    EXPECT_EQ(std::count(counted.begin(), counted.end(), 1), 4);  // "A" or "]A", "▁", "b", "</s>"
  }
}

// Issue 30 #1: a normalizer Sequence nested 50,000 deep, or an id that is a list nested 150,000
// deep (the message dumped it recursively), crashed the reader: nesting is bounded before any
// walk, and a value quoted in a message is quoted in brief.
TEST(HfTokenizer, DeepNestingIsRefusedWithoutRecursing) {
  json file = tinyTokenizer({}, {});
  file["normalizer"] = "@";
  std::string nested;
  for (int i = 0; i < 50000; ++i) nested += R"({"type": "Sequence", "normalizers": [)";
  nested += R"({"type": "NFC"})";
  for (int i = 0; i < 50000; ++i) nested += "]}";
  std::string text = file.dump();
  text.replace(text.find("\"@\""), 3, nested);
  const std::string path = test::scratchPath("deep.json");
  std::ofstream(path) << text;
  expectError([&] { HfTokenizer t(path); }, "nests lists and objects deeper than 64 levels");
  file = tinyTokenizer({}, {});
  file["model"]["vocab"]["zz"] = json::array();
  for (int i = 0; i < 100000; ++i) file["model"]["vocab"]["zz"].push_back(i);
  try {
    HfTokenizer t(save(file));
    ADD_FAILURE() << "a list id was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("an id a list of 100000 items that is not a whole number"), std::string::npos);
    EXPECT_LT(std::string(e.what()).size(), 300u) << "the message quotes an unbounded value";
  }
}

// The pattern of issue 30 #2, with a Split before ByteLevel as real tokenizers have.
json backtrackingTokenizer() {
  json file = tinyTokenizer({}, {});
  file["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", "(a+)+c|a"}}}, {"behavior", "Isolated"}},
                                     {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  addToken(file, 256, "<s>");
  return file;
}

// Issue 30 #2: ICU's time limit was per match, and text cut by added tokens into short stretches
// ran on without bound (348 bytes: 30 s; 100 KB: hours). One budget, linear in the text, stops it.
TEST(HfTokenizer, ABacktrackingPatternIsStoppedByOneBudgetForAllTheText) {
  HfTokenizer t(save(backtrackingTokenizer()));
  EXPECT_EQ(t.encode("aab<s>"), (std::vector<uint32_t>{'a', 'a', 'b', 256}));  // ordinary text passes
  std::string text;
  for (int i = 0; i < 12; ++i) text += std::string(25, 'a') + " x<s>";
  expectError([&] { t.encode(text); }, "pre-tokenizer pattern (a+)+c|a backtracks without bound");
}

// Issue 30 #3: each added token re-sorted all the others (100k tokens: over a minute); the split
// compared every token sharing a first byte at each byte of text. Both are now linear.
TEST(HfTokenizer, ManyAddedTokensLoadAndSplitInLinearTime) {
  json file = tinyTokenizer({}, {});
  for (uint32_t i = 0; i < 200000; ++i) addToken(file, 256 + i, "<t" + std::to_string(i) + ">");
  HfTokenizer t(save(file));
  EXPECT_EQ(t.encode("x<t199999>y<t5><t5"), (std::vector<uint32_t>{'x', 256 + 199999, 'y', 261, '<', 't', '5'}));
  file = tinyTokenizer({}, {});
  addToken(file, 256, std::string(2000, 'a'));
  expectError([&] { HfTokenizer long_token(save(file)); }, "added token 256 of 2000 bytes (at most 1024)");
}

// Issue 30 #4: six chained Replaces of "a" by 64 of them made 100 bytes 6.9e12.
TEST(HfTokenizer, NormalizersThatMultiplyTextAreStopped) {
  json file = tinyTokenizer({}, {});
  json steps = json::array();
  for (int i = 0; i < 6; ++i)
    steps.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", std::string(64, 'a')}});
  file["normalizer"] = {{"type", "Sequence"}, {"normalizers", steps}};
  HfTokenizer t(save(file));
  expectError([&] { t.encode(std::string(100, 'a')); }, "makes a text of 100 bytes longer than 32 times its size");
  EXPECT_EQ(t.encode("b").size(), 1u);
}

}  // namespace
}  // namespace mt
