// Preference data for DPO (mttok --preferences; mtc --objective dpo): each record a prompt with a
// chosen and a rejected reply, in the shapes TRL's DPOTrainer reads:
//   explicit prompt  {"prompt": "..." | [messages], "chosen": "..." | [messages],
//                     "rejected": "..." | [messages]}: a prompt string is a user message, a reply
//                     string an assistant message; lists are in the messages shape
//                     ({"role", "content"}), each reply's ending with an assistant message
//   implicit prompt  {"chosen": [messages], "rejected": [messages]}: two whole conversations that
//                     share every message before their last reply (Anthropic's HH-RLHF shape)
// Each pair becomes two examples, the prompt then its chosen reply and the prompt then its
// rejected one; a model is trained to prefer the first.
#pragma once
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "runtime/data/instruction_data.h"

namespace mt {

struct PreferencePair {
  ChatExample chosen, rejected;  // the same prompt, then each reply (its last assistant message)
};

// One record; throws mt::Error naming `where` and what is wrong.
PreferencePair preferencePairOf(const nlohmann::ordered_json& record, const std::string& where);

// Calls `each` with every pair of a file's `text` (JSONL or one JSON array) in order and where it is.
void forEachPreferencePair(const std::string& path, const std::string& text,
                           const std::function<void(const PreferencePair&, const std::string& where)>& each);

}  // namespace mt
