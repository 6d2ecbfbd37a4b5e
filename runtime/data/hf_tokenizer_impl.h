// What HfTokenizer reads from a tokenizer.json (hf_tokenizer_read.cc) and encodes and decodes
// with (hf_tokenizer.cc): internal to the two.
#pragma once
#include <unicode/regex.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/data/hf_tokenizer.h"
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

// Splits text on a set of added tokens, leftmost-longest (as the Aho-Corasick automaton of
// `tokenizers` does): candidates are indexed by their first byte, longest first.
class AddedTokenSplitter {
 public:
  void add(const AddedToken& token) {
    auto& list = by_first_byte_[static_cast<unsigned char>(token.content[0])];
    list.push_back(&token);
    std::stable_sort(list.begin(), list.end(),
                     [](const AddedToken* a, const AddedToken* b) { return a->content.size() > b->content.size(); });
  }
  // Calls piece(text) for every stretch between tokens and token(id) for every token, in order.
  template <typename Piece, typename Token>
  void split(const std::string& text, Piece&& piece, Token&& token) const {
    size_t gap = 0;
    for (size_t i = 0; i < text.size();) {
      const AddedToken* found = nullptr;
      for (const AddedToken* t : by_first_byte_[static_cast<unsigned char>(text[i])]) {
        if (text.compare(i, t->content.size(), t->content) == 0) {
          found = t;
          break;
        }
      }
      if (!found) {
        ++i;
        continue;
      }
      if (i > gap) piece(text.substr(gap, i - gap));
      token(found->id);
      i += found->content.size();
      gap = i;
    }
    if (gap < text.size()) piece(text.substr(gap));
  }

 private:
  std::array<std::vector<const AddedToken*>, 256> by_first_byte_;
};

// One regular-expression split of the pre-tokenizer (the matcher refers to the pattern).
struct SplitStep {
  std::string source;  // the pattern as the file wrote it (for messages)
  std::unique_ptr<icu::RegexPattern> pattern;
  std::unique_ptr<icu::RegexMatcher> matcher;
  bool remove_matches = false;  // behavior "Removed": the matches are dropped, the rest kept
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

// `text` with every occurrence of `from` (not empty) replaced by `to`, left to right.
inline std::string replaceAll(const std::string& text, const std::string& from, const std::string& to) {
  std::string out;
  size_t at = 0;
  for (size_t found; (found = text.find(from, at)) != std::string::npos; at = found + from.size())
    out.append(text, at, found - at).append(to);
  return out.append(text, at, std::string::npos);
}

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

  std::vector<hf::AddedToken> added;  // stable: the splitters point into it
  std::vector<bool> special;          // id -> an added token marked special
  hf::AddedTokenSplitter raw_splitter, normalized_splitter;
  std::vector<uint32_t> prefix, suffix;  // the post-processor's special tokens around the text

  // Reads the file at `path` into the fields above; throws mt::Error naming the file and the
  // first thing in it that is malformed or not supported.
  void read(const std::string& path);

 private:
  void readPreTokenizer(const nlohmann::json& pre, const hf::Where& where, bool& byte_level);
  void readModel(const nlohmann::json& model, const hf::Where& where);
  void readAddedTokens(const nlohmann::json& list, const hf::Where& where);
  void readPostProcessor(const nlohmann::json& post, const hf::Where& where);
  void readDecoder(const nlohmann::json& decoder, const hf::Where& where);
  void decodeTable();
};

}  // namespace mt
