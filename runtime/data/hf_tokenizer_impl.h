// What HfTokenizer reads from a tokenizer.json (hf_tokenizer_read.cc) and encodes and decodes
// with (hf_tokenizer.cc): internal to the two.
#pragma once
#include <unicode/regex.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/data/hf_tokenizer.h"
#include "runtime/data/utf8.h"
#include "runtime/io/error.h"

namespace mt::hf {

enum class NormalForm { NFC, NFD, NFKC, NFKD };

struct Where;  // the file and the component being read (hf_tokenizer_read.cc)

// One normalizer: a Unicode normal form, Prepend (its text before a non-empty string) or
// Replace (every occurrence of a string by another, left to right).
struct NormalizerStep {
  enum class Kind { kUnicode, kPrepend, kReplace } kind = Kind::kUnicode;
  NormalForm form = NormalForm::NFC;  // kUnicode
  std::string text;                   // kPrepend: what is prepended; kReplace: what is replaced
  std::string replacement;            // kReplace
};

// What the model's BPE starts from: the bytes of each piece written as GPT-2's byte-level
// characters (ByteLevel), or the characters of the piece itself, one that the vocabulary lacks
// becoming its bytes' <0xXX> tokens (SentencePiece-style: Llama 2, Mistral; byte_fallback).
enum class Alphabet { kByteLevel, kCharacters };

struct AddedToken {
  uint32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
};

// The longest added token a file may define: real ones are a few dozen bytes, and a split's
// cost per byte of text is bounded by it.
inline constexpr size_t kMaxAddedTokenBytes = 1024;

// Splits text on a set of added tokens, leftmost-longest (as the Aho-Corasick automaton of
// `tokenizers` does), through a byte trie: at each position of the text the walk goes no deeper
// than the longest token, whatever the number of tokens (a list per first byte, each compared in
// turn, costs that number per byte of text).
class AddedTokenSplitter {
 public:
  // The tokens of `tokens` that `take` keeps (contents not empty). Built once: inserting costs
  // each token's length (a sort per token was quadratic: 100k added tokens took over a minute).
  template <typename Take>
  void build(const std::vector<AddedToken>& tokens, Take&& take) {
    nodes_.assign(1, Node{});
    for (const AddedToken& token : tokens) {
      if (!take(token)) continue;
      uint32_t node = 0;
      for (unsigned char byte : token.content) node = insert(node, byte);
      if (nodes_[node].id < 0) nodes_[node].id = token.id;  // a token written twice: the first wins
    }
  }
  // Calls piece(text, at) for every stretch between tokens and token(id, at, size) for every
  // token, in order (`at`: where it starts in `text`).
  template <typename Piece, typename Token>
  void split(const std::string& text, Piece&& piece, Token&& token) const {
    size_t gap = 0;
    for (size_t i = 0; i < text.size();) {
      int64_t found = -1;  // the longest token starting at i: its id
      size_t found_size = 0;
      uint32_t node = 0;
      for (size_t k = i; k < text.size(); ++k) {
        node = find(node, static_cast<unsigned char>(text[k]));
        if (node == 0) break;
        if (nodes_[node].id >= 0) found = nodes_[node].id, found_size = k + 1 - i;
      }
      if (found < 0) {
        ++i;
        continue;
      }
      if (i > gap) piece(text.substr(gap, i - gap), gap);
      token(static_cast<uint32_t>(found), i, found_size);
      i += found_size;
      gap = i;
    }
    if (gap < text.size()) piece(text.substr(gap), gap);
  }

 private:
  struct Node {
    int64_t id = -1;                                          // the token ending here, if any
    std::vector<std::pair<unsigned char, uint32_t>> children;  // byte -> node (never the root, 0)
  };
  // The child of `node` by `byte`; 0 (the root) for none.
  uint32_t find(uint32_t node, unsigned char byte) const {
    for (const auto& [b, next] : nodes_[node].children)
      if (b == byte) return next;
    return 0;
  }
  // The child of `node` by `byte`, made if there is none.
  uint32_t insert(uint32_t node, unsigned char byte) {
    if (const uint32_t next = find(node, byte)) return next;
    nodes_.push_back(Node{});
    const uint32_t next = static_cast<uint32_t>(nodes_.size() - 1);
    nodes_[node].children.emplace_back(byte, next);
    return next;
  }
  std::vector<Node> nodes_ = std::vector<Node>(1);  // [0]: the root
};

// One regular-expression split of the pre-tokenizer (the matcher refers to the pattern).
struct SplitStep {
  std::string source;  // the pattern as the file wrote it (for messages)
  std::unique_ptr<icu::RegexPattern> pattern;
  std::unique_ptr<icu::RegexMatcher> matcher;
  // `tokenizers`' behaviours: Isolated (a match is a piece of its own), Removed (matches dropped,
  // the rest kept), MergedWithPrevious (a match joins the stretch before it, where there is one).
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious };
  Behavior behavior = Behavior::kIsolated;
};

// The work every pre-tokenizer pattern may do, over all the text one tokenizer encodes. ICU
// calls back once per 10,000 backtracking states a match saves; real tokenizers' patterns save
// a few per byte, so a budget of a base plus one callback per 16 bytes encoded is never reached
// by them, while a pattern that backtracks without bound (`(a+)+c`) is stopped after work linear
// in the input, however the input is cut (a limit per match, or per stretch between added
// tokens, let a long input run for hours).
struct RegexBudget {
  static constexpr uint64_t kBaseCallbacks = 1000;
  static constexpr uint64_t kBytesPerCallback = 16;
  uint64_t bytes = 0;  // encoded so far
  uint64_t used = 0;   // callbacks so far
  uint64_t allowed() const { return kBaseCallbacks + bytes / kBytesPerCallback; }
};

// The decoder of a character-alphabet tokenizer, its steps in `tokenizers`' order: Replace in
// each token, ByteFallback (<0xXX> tokens are bytes; a run of them that is not UTF-8 becomes one
// U+FFFD per byte), Fuse, then Strip of the whole text.
struct CharacterDecoder {
  std::string replace_from, replace_to;  // Replace (empty: none)
  bool byte_fallback = false;
  std::string strip_content;  // one character
  size_t strip_start = 0, strip_stop = 0;
};

// `text` with every occurrence of `from` (not empty) replaced by `to`, left to right; nullopt
// as soon as the result would pass `max_bytes`. With `sources` (where each byte of `text` comes
// from), rewritten for the result: a replacement's bytes come from where its match's did.
inline std::optional<std::string> replaceAll(const std::string& text, const std::string& from, const std::string& to,
                                             size_t max_bytes = SIZE_MAX, std::vector<TokenSpan>* sources = nullptr) {
  std::string out;
  std::vector<TokenSpan> out_sources;
  auto keep = [&](size_t begin, size_t end) {  // text[begin, end) copied as it is
    out.append(text, begin, end - begin);
    if (sources) out_sources.insert(out_sources.end(), sources->begin() + begin, sources->begin() + end);
  };
  size_t at = 0;
  for (size_t found; (found = text.find(from, at)) != std::string::npos; at = found + from.size()) {
    if (out.size() + (found - at) + to.size() > max_bytes) return std::nullopt;
    keep(at, found);
    out.append(to);
    if (sources)
      out_sources.insert(out_sources.end(), to.size(),
                         TokenSpan{(*sources)[found].begin, (*sources)[found + from.size() - 1].end});
  }
  if (out.size() + (text.size() - at) > max_bytes) return std::nullopt;
  keep(at, text.size());
  if (sources) *sources = std::move(out_sources);
  return out;
}

// How much the normalizers may lengthen a text: NFKC/NFKD expand a character by at most 18
// (U+FDFA), Mistral's Replace of " " by "▁" triples spaces; chained Replaces that multiply the
// text (a -> 64 a, six times: 100 bytes to 7 TB) are stopped at this factor.
inline constexpr size_t kMaxNormalizerGrowth = 32;

}  // namespace mt::hf

namespace mt {

struct HfTokenizer::Impl {
  std::vector<hf::NormalizerStep> normalizers;
  std::vector<hf::SplitStep> splits;  // the Split steps, then ByteLevel's own pattern if it uses one
  size_t byte_level_step = 0;         // where ByteLevel comes among `splits`
  bool prefix_space = false;          // ByteLevel's add_prefix_space

  hf::Alphabet alphabet = hf::Alphabet::kByteLevel;
  std::unordered_map<std::string, uint32_t> vocab;  // vocabulary string -> id
  std::vector<std::string> text_of;                 // id -> the bytes it decodes to
  std::vector<bool> byte_token;                     // id -> a <0xXX> token (kCharacters)
  std::vector<std::string> token_of;                // id -> its vocabulary string (or added content)
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> merges;  // (left id, right id) -> (rank, merged id)
  std::array<uint32_t, 256> byte_ids{};             // each byte's own token
  bool ignore_merges = false;
  uint64_t id_limit = 0;  // ids are below it (see idLimit)
  uint32_t vocab_size = 0;
  hf::CharacterDecoder decoder;  // kCharacters

  std::vector<hf::AddedToken> added;
  std::vector<bool> special;          // id -> an added token marked special
  hf::AddedTokenSplitter raw_splitter, normalized_splitter;
  std::vector<uint32_t> prefix, suffix;  // the post-processor's special tokens around the text
  hf::RegexBudget regex_budget;           // shared by the matchers of `splits`

  // How the vocabulary spells `bytes`: in the byte-level alphabet, or as they are.
  std::string spelled(const std::string& bytes) const {
    return alphabet == hf::Alphabet::kByteLevel ? byteLevelString(bytes) : bytes;
  }

  // Reads the file at `path` into the fields above; throws mt::Error naming the file and the
  // first thing in it that is malformed or not supported.
  void read(const std::string& path);

 private:
  void readPreTokenizer(const nlohmann::json& pre, const hf::Where& where, bool& byte_level);
  void readModel(const nlohmann::json& model, const hf::Where& where);
  void readAddedTokens(const nlohmann::json& list, const hf::Where& where);
  void readPostProcessor(const nlohmann::json& post, const hf::Where& where);
  void readDecoder(const nlohmann::json& decoder, const hf::Where& where);
  void decodeTable(const std::string& path);
};

}  // namespace mt
