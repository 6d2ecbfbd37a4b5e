#include "runtime/data/preference_data.h"

#include <nlohmann/json.hpp>

#include "runtime/io/error.h"

namespace mt {
namespace {

using Json = nlohmann::ordered_json;

// A reply's messages: a string is one assistant message; a list must end with one.
std::vector<ChatMessage> replyOf(const Json& value, const std::string& where) {
  if (value.is_string()) return {{"assistant", value.get<std::string>()}};
  std::vector<ChatMessage> messages = readTurns(value, /*sharegpt=*/false, where);
  if (messages.back().role != "assistant")
    throw Error(where + ": the reply ends with a " + messages.back().role + " message, not the assistant's");
  return messages;
}

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

}  // namespace

PreferencePair preferencePairOf(const Json& record, const std::string& where) {
  if (!record.is_object()) throw Error(where + ": not a JSON object");
  for (const char* key : {"chosen", "rejected"})
    if (!record.contains(key))
      throw Error(where + ": no \"" + key + "\": a preference record holds a prompt, a \"chosen\" and a "
                  "\"rejected\" reply");
  PreferencePair pair;
  const Json& chosen = record.at("chosen");
  const Json& rejected = record.at("rejected");
  if (!record.contains("prompt")) {
    if (!chosen.is_array() || !rejected.is_array())
      throw Error(where + ": no \"prompt\": then \"chosen\" and \"rejected\" must be whole conversations (lists of "
                  "messages)");
    pair.chosen.messages = replyOf(chosen, where + ": chosen");
    pair.rejected.messages = replyOf(rejected, where + ": rejected");
    requireSharedPrompt(pair, where);
    return pair;
  }
  const Json& prompt = record.at("prompt");
  std::vector<ChatMessage> messages;
  if (prompt.is_string()) messages.push_back({"user", prompt.get<std::string>()});
  else messages = readTurns(prompt, /*sharegpt=*/false, where + ": prompt");
  if (messages.back().role == "assistant")
    throw Error(where + ": the prompt ends with the assistant's message: nothing is left for a reply to answer");
  pair.chosen.messages = pair.rejected.messages = messages;
  for (ChatMessage& m : replyOf(chosen, where + ": chosen")) pair.chosen.messages.push_back(std::move(m));
  for (ChatMessage& m : replyOf(rejected, where + ": rejected")) pair.rejected.messages.push_back(std::move(m));
  return pair;
}

void forEachPreferencePair(const std::string& path, const std::string& text,
                           const std::function<void(const PreferencePair&, const std::string& where)>& each) {
  forEachRecord(path, text, [&](const Json& record, const std::string& where) {
    each(preferencePairOf(record, where), where);
  });
}

}  // namespace mt
