#include "runtime/data/preference_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "runtime/io/error.h"

namespace mt {
namespace {

using Json = nlohmann::ordered_json;

bool sameMessage(const ChatMessage& a, const ChatMessage& b) {
  return a.role == b.role && a.content == b.content && a.reasoning == b.reasoning && a.tool_fields == b.tool_fields;
}

// Implicit prompt: the two conversations must share every message before their last ones.
void requireSharedPrompt(const PreferencePair& pair, const std::string& where) {
  const auto &c = pair.chosen.messages, &r = pair.rejected.messages;
  const bool same = c.size() == r.size() && std::equal(c.begin(), c.end() - 1, r.begin(), sameMessage);
  if (!same)
    throw Error(where + ": \"chosen\" and \"rejected\" differ before their last reply: a pair is one prompt with two "
                "replies (give the prompt as \"prompt\" and the replies alone)");
}

// An unpaired record: a prompt, its completion and a boolean label.
LabelledExample labelledExampleOf(const Json& record, const std::string& where) {
  for (const char* key : {"prompt", "completion", "label"})
    if (!record.contains(key))
      throw Error(where + ": no \"" + key + "\": an unpaired record holds a \"prompt\", a \"completion\" and a "
                  "\"label\" (true: desirable), or is a preference record (\"chosen\", \"rejected\")");
  if (!record.at("label").is_boolean())
    throw Error(where + ": \"label\" is " + record.at("label").dump() + ", not true (desirable) or false");
  LabelledExample out;
  out.example.messages = promptMessages(record.at("prompt"), where);
  out.prompt_messages = out.example.messages.size();
  for (ChatMessage& m : replyMessages(record.at("completion"), where + ": completion"))
    out.example.messages.push_back(std::move(m));
  out.desirable = record.at("label").get<bool>();
  return out;
}

// A record's "margin": a number a float holds finite.
float marginOf(const Json& margin, const std::string& where) {
  const double value = margin.is_number() ? margin.get<double>() : NAN;
  if (!std::isfinite(value) || std::fabs(value) > std::numeric_limits<float>::max())
    throw Error(where + ": \"margin\" is " + margin.dump() + ", not a finite number (TRL's reward margin: how far "
                "the chosen reply's reward must beat the rejected one's)");
  return static_cast<float>(value);
}

}  // namespace

PreferencePair preferencePairOf(const Json& record, const std::string& where) {
  if (!record.is_object()) throw Error(where + ": not a JSON object");
  for (const char* key : {"chosen", "rejected"})
    if (!record.contains(key))
      throw Error(where + ": no \"" + key + "\": a preference record holds a prompt, a \"chosen\" and a "
                  "\"rejected\" reply");
  PreferencePair pair;
  if (record.contains("margin")) pair.margin = marginOf(record.at("margin"), where);
  const Json& chosen = record.at("chosen");
  const Json& rejected = record.at("rejected");
  if (!record.contains("prompt")) {
    if (!chosen.is_array() || !rejected.is_array())
      throw Error(where + ": no \"prompt\": then \"chosen\" and \"rejected\" must be whole conversations (lists of "
                  "messages)");
    pair.chosen.messages = replyMessages(chosen, where + ": chosen");
    pair.rejected.messages = replyMessages(rejected, where + ": rejected");
    requireSharedPrompt(pair, where);
    pair.prompt_messages = pair.chosen.messages.size() - 1;
    return pair;
  }
  const std::vector<ChatMessage> messages = promptMessages(record.at("prompt"), where);
  pair.prompt_messages = messages.size();
  pair.chosen.messages = pair.rejected.messages = messages;
  for (ChatMessage& m : replyMessages(chosen, where + ": chosen")) pair.chosen.messages.push_back(std::move(m));
  for (ChatMessage& m : replyMessages(rejected, where + ": rejected")) pair.rejected.messages.push_back(std::move(m));
  return pair;
}

void forEachLabelledExample(const std::string& path, const std::string& text,
                            const std::function<void(const LabelledExample&, const std::string& where)>& each) {
  forEachRecord(path, text, [&](const Json& record, const std::string& where) {
    if (!record.is_object()) throw Error(where + ": not a JSON object");
    if (record.contains("completion") || !record.contains("chosen")) {
      each(labelledExampleOf(record, where), where);
      return;
    }
    const PreferencePair pair = preferencePairOf(record, where);
    each({pair.chosen, pair.prompt_messages, true}, where + " (chosen)");
    each({pair.rejected, pair.prompt_messages, false}, where + " (rejected)");
  });
}

size_t klSource(const std::vector<LabelledExample>& examples, size_t i, bool& same_prompt) {
  const size_t n = examples.size();
  const auto prompt = [&](size_t e) {
    const auto begin = examples[e].example.messages.begin();
    return std::make_pair(begin, begin + static_cast<std::ptrdiff_t>(examples[e].prompt_messages));
  };
  const auto [begin, end] = prompt(i);
  size_t first = n;  // the first candidate that is not example i itself
  for (size_t k = 0; k < std::min(n, kKlTries); ++k) {
    const size_t j = (i + n / 2 + k) % n;
    if (j == i) continue;
    if (first == n) first = j;
    const auto [other, other_end] = prompt(j);
    if (!std::equal(begin, end, other, other_end, sameMessage)) {
      same_prompt = false;
      return j;
    }
  }
  same_prompt = true;
  return first;
}

ChatExample klExample(const LabelledExample& of, const LabelledExample& from) {
  ChatExample kl = of.example;
  kl.messages.resize(of.prompt_messages);
  const auto completion = from.example.messages.begin() + static_cast<std::ptrdiff_t>(from.prompt_messages);
  kl.messages.insert(kl.messages.end(), completion, from.example.messages.end());
  return kl;
}

void forEachPreferencePair(const std::string& path, const std::string& text,
                           const std::function<void(const PreferencePair&, const std::string& where)>& each) {
  forEachRecord(path, text, [&](const Json& record, const std::string& where) {
    each(preferencePairOf(record, where), where);
  });
}

}  // namespace mt
