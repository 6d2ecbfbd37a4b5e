// Reading a tokenizer.json into HfTokenizer::Impl: every component checked, anything not
// implemented an error naming it.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "runtime/data/hf_tokenizer_impl.h"
#include "runtime/data/utf8.h"
#include "runtime/io/json_input.h"
#include "runtime/io/mapped_file.h"

namespace mt {

using nlohmann::json;

namespace hf {

// The file's path and the component being read, for messages.
struct Where {
  const std::string& path;
  std::string component;
  Error error(const std::string& what) const {
    return Error(path + ": " + component + ": " + what);
  }
  Error unsupported(const std::string& what) const {
    return Error(path + ": " + component + ": " + what +
                 " is not supported (mttok reads BPE tokenizers, byte-level as GPT-2, Llama 3 and Qwen 2/3, or over "
                 "characters with byte fallback as Mistral's)");
  }
};

}  // namespace hf

namespace {

using namespace hf;

// GPT-2's pre-tokenizer expression, which ByteLevel applies when its `use_regex` is true.
constexpr char kGpt2Pattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Oniguruma's \s under Unicode, as members of an ICU set (ICU's own \s lacks U+000B and U+0085).
constexpr char kOnigSpaceMembers[] = R"(\t-\r\x{85}\p{Z})";

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
    throw where.error("an id " + jsonBrief(value) + " that is not a whole number");
  if (value.get<uint64_t>() >= limit)
    throw where.error("an id " + jsonBrief(value) + " far past the tokens the file defines (ids must stay below " +
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

SplitStep compileSplit(const std::string& source, SplitStep::Behavior behavior, const Where& where) {
  SplitStep step;
  step.source = source;
  step.behavior = behavior;
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse_error{};
  step.pattern.reset(icu::RegexPattern::compile(icuPattern(source, where), 0, parse_error, status));
  if (U_FAILURE(status))
    throw where.error("pattern " + source + " does not compile (" + u_errorName(status) + " at offset " +
                      std::to_string(parse_error.offset) + ")");
  step.matcher.reset(step.pattern->matcher(status));
  if (U_FAILURE(status)) throw where.error("pattern " + source + ": " + u_errorName(status));
  return step;
}

// ICU's progress callback: one more unit of a pattern's work; false (stop the match) past the
// budget (see RegexBudget).
UBool U_CALLCONV spendRegexBudget(const void* context, int32_t /*steps*/) {
  auto* budget = static_cast<RegexBudget*>(const_cast<void*>(context));
  return ++budget->used <= budget->allowed();
}

NormalForm normalFormOf(const std::string& type) {
  return type == "NFC" ? NormalForm::NFC : type == "NFD" ? NormalForm::NFD : type == "NFKC" ? NormalForm::NFKC : NormalForm::NFKD;
}

// A `{"String": s}` pattern's string (Replace's); a regular expression is not read there.
std::string stringPattern(const json& component, const Where& where) {
  const json& pattern = member(component, "pattern", where);
  if (!pattern.is_object() || !pattern.contains("String") || !pattern.at("String").is_string())
    throw where.unsupported("a Replace whose pattern is not {\"String\": ...} (" + jsonBrief(pattern) + ")");
  const std::string text = pattern.at("String").get<std::string>();
  if (text.empty()) throw where.error("a Replace of the empty string");
  return text;
}

std::vector<NormalizerStep> readNormalizer(const json& normalizer, const Where& where) {
  if (normalizer.is_null()) return {};
  const std::string type = typeOf(normalizer, where);
  if (type == "Sequence") {
    std::vector<NormalizerStep> steps;
    const json& list = member(normalizer, "normalizers", where);
    if (!list.is_array()) throw where.error("'normalizers' is not a list");
    for (const json& item : list)
      for (NormalizerStep& step : readNormalizer(item, where)) steps.push_back(std::move(step));
    return steps;
  }
  NormalizerStep step;
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    step.form = normalFormOf(type);
  } else if (type == "Prepend") {
    step.kind = NormalizerStep::Kind::kPrepend;
    step.text = stringMember(normalizer, "prepend", where);
  } else if (type == "Replace") {
    step.kind = NormalizerStep::Kind::kReplace;
    step.text = stringPattern(normalizer, where);
    step.replacement = stringMember(normalizer, "content", where);
  } else {
    throw where.unsupported("normalizer " + type);
  }
  return {step};
}

}  // namespace

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
    const std::string behavior_name = stringMember(pre, "behavior", where);
    const SplitStep::Behavior behavior = behavior_name == "Isolated" ? SplitStep::Behavior::kIsolated
                                         : behavior_name == "Removed" ? SplitStep::Behavior::kRemoved
                                         : behavior_name == "MergedWithPrevious"
                                             ? SplitStep::Behavior::kMergedWithPrevious
                                             : throw where.unsupported("Split behavior " + behavior_name);
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
    splits.push_back(compileSplit(source, behavior, where));
  } else if (type == "ByteLevel") {
    byte_level = true;
    byte_level_step = splits.size();
    prefix_space = boolMember(pre, "add_prefix_space", false, where);
    if (boolMember(pre, "use_regex", true, where))
      splits.push_back(compileSplit(kGpt2Pattern, SplitStep::Behavior::kIsolated, where));
  } else {
    throw where.unsupported("pre-tokenizer " + type);
  }
}

void HfTokenizer::Impl::readModel(const json& model, const Where& where) {
  if (model.contains("type") && typeOf(model, where) != "BPE") throw where.unsupported("model " + typeOf(model, where));
  if (model.contains("dropout") && !model.at("dropout").is_null()) throw where.unsupported("BPE dropout");
  const bool byte_fallback = boolMember(model, "byte_fallback", false, where);
  if (byte_fallback != (alphabet == Alphabet::kCharacters))
    throw where.unsupported(byte_fallback ? "byte_fallback with a ByteLevel pre-tokenizer"
                                          : "a BPE over characters without byte_fallback (no pre-tokenizer, no ByteLevel)");
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
  // One id, one token: two entries on an id would stand for two texts, the BPE making the id of
  // one and the decoder writing the other (and the tokens of a piece would not spell it).
  std::vector<bool> taken(size, false);
  for (const auto& [token, id] : vocab) {
    if (taken[id])
      throw where.error("the entries " + jsonBrief(json(token_of[id])) + " and " + jsonBrief(json(token)) +
                        " share id " + std::to_string(id) + ": one id for two tokens");
    taken[id] = true;
    token_of[id] = token;
  }
  for (int b = 0; b < 256; ++b) {
    // Its byte-level character, or its <0xXX> token (byte_fallback).
    auto it = vocab.find(alphabet == Alphabet::kByteLevel ? byteLevelChars()[b] : fmt::format("<0x{:02X}>", b));
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
  added.reserve(list.size());
  for (const json& item : list) {
    AddedToken token;
    token.id = idValue(member(item, "id", where), id_limit, where);
    token.content = stringMember(item, "content", where);
    token.special = boolMember(item, "special", false, where);
    token.normalized = boolMember(item, "normalized", !token.special, where);
    if (token.content.empty()) throw where.error("added token " + std::to_string(token.id) + " has no content");
    if (token.content.size() > kMaxAddedTokenBytes)
      throw where.unsupported("added token " + std::to_string(token.id) + " of " + std::to_string(token.content.size()) +
                              " bytes (at most " + std::to_string(kMaxAddedTokenBytes) + ")");
    for (const char* flag : {"single_word", "lstrip", "rstrip"})
      if (boolMember(item, flag, false, where))
        throw where.unsupported(std::string("added token ") + token.content + " with " + flag);
    added.push_back(std::move(token));
  }
  normalized_splitter.build(added, [](const AddedToken& token) { return token.normalized; });
  raw_splitter.build(added, [](const AddedToken& token) { return !token.normalized; });
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
      throw where.error("TemplateProcessing piece " + jsonBrief(piece) + " is neither Sequence nor SpecialToken");
    const std::string name = stringMember(piece.at("SpecialToken"), "id", where);
    const json& ids = member(member(specials, name.c_str(), where), "ids", where);
    if (!ids.is_array()) throw where.error("special token " + name + "'s 'ids' is not a list");
    for (const json& id : ids) (seen_sequence ? suffix : prefix).push_back(idValue(id, id_limit, where));
  }
  if (!seen_sequence) throw where.error("TemplateProcessing's 'single' has no Sequence");
}

void HfTokenizer::Impl::readDecoder(const json& decoder_json, const Where& where) {
  if (alphabet == Alphabet::kByteLevel) {
    if (!decoder_json.is_null() && typeOf(decoder_json, where) != "ByteLevel")
      throw where.unsupported("decoder " + typeOf(decoder_json, where) + " with a ByteLevel pre-tokenizer");
    return;
  }
  // SentencePiece-style: Replace, ByteFallback, Fuse, Strip — each at most once, Strip after Fuse
  // (it then strips the whole text, not each token).
  if (decoder_json.is_null() || typeOf(decoder_json, where) != "Sequence")
    throw where.unsupported("a BPE over characters without a Sequence decoder of Replace, ByteFallback, Fuse, Strip");
  const json& list = member(decoder_json, "decoders", where);
  if (!list.is_array()) throw where.error("'decoders' is not a list");
  std::vector<std::string> seen;
  for (const json& step : list) {
    const std::string type = typeOf(step, where);
    if (std::find(seen.begin(), seen.end(), type) != seen.end()) throw where.unsupported("two " + type + " decoders");
    seen.push_back(type);
    if (type == "Replace") {
      decoder.replace_from = stringPattern(step, where);
      decoder.replace_to = stringMember(step, "content", where);
    } else if (type == "ByteFallback") {
      decoder.byte_fallback = true;
    } else if (type == "Fuse") {
    } else if (type == "Strip") {
      if (std::find(seen.begin(), seen.end(), "Fuse") == seen.end())
        throw where.unsupported("a Strip decoder before Fuse (per token)");
      decoder.strip_content = stringMember(step, "content", where);
      if (decodeUtf8(decoder.strip_content).size() != 1) throw where.error("Strip's content is not one character");
      const json& start = member(step, "start", where);
      const json& stop = member(step, "stop", where);
      if (!start.is_number_unsigned() || !stop.is_number_unsigned() || start.get<uint64_t>() > 1024 ||
          stop.get<uint64_t>() > 1024)
        throw where.error("Strip's start and stop are not small whole numbers");
      decoder.strip_start = start.get<size_t>();
      decoder.strip_stop = stop.get<size_t>();
    } else {
      throw where.unsupported("decoder " + type);
    }
  }
  if (!decoder.byte_fallback) throw where.unsupported("a BPE with byte_fallback whose decoder has no ByteFallback");
}

// What each id decodes to (before the text's ill-formed bytes are replaced). ByteLevel: a token
// whose characters are all in the byte-level alphabet stands for those bytes, any other (an
// added token) for its own UTF-8. Characters: a <0xXX> token its byte, any other token (added
// ones too, as in `tokenizers`) with Replace applied.
void HfTokenizer::Impl::decodeTable(const std::string& path) {
  text_of.resize(vocab_size);
  byte_token.assign(vocab_size, false);
  if (alphabet == Alphabet::kCharacters) {
    for (int b = 0; b < 256; ++b) byte_token[byte_ids[b]] = true;
    for (int b = 0; b < 256; ++b) text_of[byte_ids[b]] = std::string(1, static_cast<char>(b));
  }
  // The decoder's Replace may lengthen tokens: the table stays within the normalizers' bound of
  // the vocabulary's own size.
  size_t table_left = 1 << 20;
  for (const std::string& token : token_of) table_left += kMaxNormalizerGrowth * token.size();
  for (uint32_t id = 0; id < vocab_size; ++id) {
    const std::string& token = token_of[id];
    if (alphabet == Alphabet::kCharacters) {
      if (byte_token[id]) continue;  // its byte, above
      if (decoder.replace_from.empty()) {
        text_of[id] = token;
        continue;
      }
      std::optional<std::string> text = replaceAll(token, decoder.replace_from, decoder.replace_to, table_left);
      if (!text)
        throw Error(path + ": decoder: Replace makes the vocabulary's text more than " +
                    std::to_string(kMaxNormalizerGrowth) + " times longer: the tokenizer is refused");
      table_left -= text->size();
      text_of[id] = std::move(*text);
      continue;
    }
    std::string bytes;
    bool byte_level_token = true;
    for (char32_t c : decodeUtf8(token)) {
      const int b = byteLevelByte(c);
      byte_level_token &= b >= 0;
      bytes += static_cast<char>(b);
    }
    text_of[id] = byte_level_token ? bytes : token;
  }
}

void HfTokenizer::Impl::read(const std::string& path) {
  const json file = parseJsonInput(
      readWholeFile(path, "tokenizer file",
                    "(a Hugging Face tokenizer.json, a model folder holding one, or gpt2, llama3, qwen3, mistral, gpt-oss, gemma3)"),
      "tokenizer file " + path);
  if (!file.is_object()) throw Error(path + " is not a JSON object (a Hugging Face tokenizer.json)");
  auto optional = [&](const char* key) -> const json& {
    static const json null_value;
    return file.contains(key) ? file.at(key) : null_value;
  };
  for (const char* key : {"truncation", "padding"})
    if (!optional(key).is_null()) throw Where{path, key}.unsupported(std::string("a ") + key + " setting");
  normalizers = readNormalizer(optional("normalizer"), Where{path, "normalizer"});
  bool byte_level = false;
  readPreTokenizer(optional("pre_tokenizer"), Where{path, "pre_tokenizer"}, byte_level);
  // Without ByteLevel among the pre-tokenizers (or none at all): a SentencePiece-style BPE over
  // characters, whose model must say byte_fallback (Gemma 3's splits first, Mistral's not).
  alphabet = byte_level ? Alphabet::kByteLevel : Alphabet::kCharacters;
  const json& model = member(file, "model", Where{path, "file"});
  const json& added_json = optional("added_tokens");
  id_limit = idLimit((model.contains("vocab") ? model.at("vocab").size() : 0) +
                     (added_json.is_array() ? added_json.size() : 0));
  readModel(model, Where{path, "model"});
  readAddedTokens(added_json, Where{path, "added_tokens"});
  readPostProcessor(optional("post_processor"), Where{path, "post_processor"});
  readDecoder(optional("decoder"), Where{path, "decoder"});

  vocab_size = static_cast<uint32_t>(token_of.size());
  // An added token on a vocabulary entry's id must be that entry (GPT-2's <|endoftext|>, Llama 2's
  // <s>): another one would stand for two texts, the BPE making the id of the entry's, the
  // decoder writing the added token's (and the tokens of a piece would not spell it).
  for (const AddedToken& token : added)
    if (token.id < vocab_size && !token_of[token.id].empty() && token_of[token.id] != spelled(token.content))
      throw Where{path, "added_tokens"}.error("added token " + jsonBrief(json(token.content)) + " has id " +
                                              std::to_string(token.id) + ", the vocabulary's entry " +
                                              jsonBrief(json(token_of[token.id])) + ": one id for two tokens");
  for (const AddedToken& token : added) vocab_size = std::max(vocab_size, token.id + 1);
  token_of.resize(vocab_size);
  special.assign(vocab_size, false);
  for (const AddedToken& token : added) {
    token_of[token.id] = token.content;
    special[token.id] = token.special;
  }
  for (const auto* ids : {&prefix, &suffix})
    for (uint32_t id : *ids)
      if (id >= vocab_size)
        throw Where{path, "post_processor"}.error("special id " + std::to_string(id) + " is past the vocabulary");
  decodeTable(path);
  // A hostile pattern can backtrack for ever: every match draws on one budget (RegexBudget).
  for (SplitStep& step : splits) {
    UErrorCode status = U_ZERO_ERROR;
    step.matcher->setMatchCallback(spendRegexBudget, &regex_budget, status);
    if (U_FAILURE(status)) throw Error(std::string("ICU refused a regex callback: ") + u_errorName(status));
  }
}

}  // namespace mt
