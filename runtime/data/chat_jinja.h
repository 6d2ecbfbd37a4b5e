// A model folder's own chat template (tokenizer_config.json's "chat_template", or
// chat_template.jinja), rendered as transformers renders it: by Python's Jinja2 (Debian's
// python3-jinja2) in a sandboxed environment with transformers' settings (trim_blocks,
// lstrip_blocks, loop controls, tojson, raise_exception, strftime_now) and the folder's special
// tokens (bos_token, eos_token, ...) in the context. A home-made Jinja would drift from what the
// model was trained on; this is the engine the templates are written for.
//
// The loss mask: a reply starts where the template's generation prompt ends (the conversation
// up to the reply, rendered with add_generation_prompt=True, must be where the whole rendering
// begins) and runs through the first special token the template writes after it (the end of
// the turn the model must learn to emit; for a reply of tool calls, the one after the last call's
// arguments, not between calls, that a probe finds: ChatML's <|im_end|>, harmony's <|call|>), and
// on where the assistant's header follows it (harmony's analysis message, then the final answer
// or a call: one reply). An example's tools are the template's `tools`; arguments given as JSON
// text are read into their object for a template that writes them with tojson.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "runtime/data/hf_tokenizer.h"
#include "runtime/data/instruction_data.h"

namespace mt {

struct FolderChatTemplate {
  std::string text;                // the Jinja source
  std::string source;              // where it was found, for messages
  std::string context_json;        // {"bos_token": ..., "eos_token": ..., ...}: the folder's special tokens
};

// The chat template of the folder holding `tokenizer_json`, if it has one: chat_template.jinja,
// else tokenizer_config.json's "chat_template" (a string, or a list of {name, template}: the one
// named "default"). Throws mt::Error for a malformed tokenizer_config.json.
std::optional<FolderChatTemplate> folderChatTemplate(const std::string& tokenizer_json);

// Each example rendered with the template: its parts, the replies counted (see above).
// `where` names each example for errors. Throws mt::Error naming the example and the template's
// complaint, or saying how to install Jinja2 where Python lacks it.
std::vector<std::vector<ChatPart>> renderWithJinja(const FolderChatTemplate& chat_template, const HfTokenizer& tokenizer,
                                                   const std::vector<ChatExample>& examples,
                                                   const std::vector<std::string>& where);

// The template mttok --chat and mtgen --chat render with: --template's built-in one where given,
// else the tokenizer folder's own, else the built-in the tokenizer's special tokens imply.
struct ChosenChatTemplate {
  std::optional<FolderChatTemplate> own;  // set: render with Jinja2
  ChatTemplate builtin = ChatTemplate::ChatML;
  std::string description;  // for the tool to say which
};
ChosenChatTemplate chooseChatTemplate(const HfTokenizer& tokenizer, std::optional<ChatTemplate> requested);

// The conversation rendered with the generation prompt (add_generation_prompt=True), its tools in
// the template's `tools`: what a chat model reads before it writes its reply.
std::string renderGenerationPrompt(const FolderChatTemplate& chat_template, const HfTokenizer& tokenizer,
                                   const ChatExample& conversation);

}  // namespace mt
