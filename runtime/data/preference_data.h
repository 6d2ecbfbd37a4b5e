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
//
// Unpaired data for KTO (mttok --unpaired; mtc --objective kto), as TRL's KTOTrainer reads it:
//   {"prompt": "..." | [messages], "completion": "..." | [messages], "label": true | false}
// each a prompt with one completion, desirable (true) or not; or a preference record above, which
// gives two, its chosen reply desirable and its rejected one not (TRL's unpair_preference_dataset).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/data/instruction_data.h"

namespace mt {

struct PreferencePair {
  ChatExample chosen, rejected;  // the same prompt, then each reply (its last assistant message)
  size_t prompt_messages = 0;    // how many messages of each are the prompt's
  // TRL's "margin" (RewardTrainer): how far the chosen reply's reward must beat the rejected
  // one's; a finite number where the record gives one.
  std::optional<float> margin;
};

struct LabelledExample {
  ChatExample example;         // the prompt, then the completion
  size_t prompt_messages = 0;  // how many of its messages are the prompt's
  bool desirable = false;
};

// One record; throws mt::Error naming `where` and what is wrong.
PreferencePair preferencePairOf(const nlohmann::ordered_json& record, const std::string& where);

// Calls `each` with every pair of a file's `text` (JSONL or one JSON array) in order and where it is.
void forEachPreferencePair(const std::string& path, const std::string& text,
                           const std::function<void(const PreferencePair&, const std::string& where)>& each);

// Calls `each` with every labelled example of a file's `text` (a preference record's two in turn,
// the chosen first) in order and where it is; throws mt::Error naming the record and what is wrong.
void forEachLabelledExample(const std::string& path, const std::string& text,
                            const std::function<void(const LabelledExample&, const std::string& where)>& each);

// KTO's KL row of `of`: its prompt with `from`'s completion (another example's: a completion the
// prompt did not ask for, whose log-ratio estimates how far the policy has moved).
ChatExample klExample(const LabelledExample& of, const LabelledExample& from);
// Whose completion example i's KL row takes: the first of examples (i + n/2) mod n, then the next
// ones, whose prompt is not example i's (a preference record's two examples share one; so do
// several completions of a prompt listed together), at most kKlTries of them; where none is found,
// the first tried (`same_prompt` says so). Needs two or more examples.
inline constexpr size_t kKlTries = 64;
size_t klSource(const std::vector<LabelledExample>& examples, size_t i, bool& same_prompt);

}  // namespace mt
