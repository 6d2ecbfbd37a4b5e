// Instruction data for supervised fine-tuning: JSONL examples rendered with a chat template into
// token ids and a loss mask that counts only what the model is taught to write (the assistant's
// replies and the token that ends each reply).
//
// One JSON object per line (JSONL), or one JSON array of them (Stanford Alpaca's alpaca_data.json),
// each in any of three shapes:
//   alpaca    {"instruction": "...", "input": "..." (optional), "output": "...", "system": "..." (optional),
//              "history": [["user turn", "reply"], ...] (optional, LLaMA-Factory's earlier turns)}
//             -> system; each history pair as user and assistant; user: instruction, then "\n\n" and
//                input when there is one; assistant: output
//   messages  {"messages": [{"role": "system"|"user"|"assistant"|"tool", "content": "..."}, ...],
//              "tools": [...] (optional)}: an assistant message's "reasoning_content" (or gpt-oss's
//              "thinking") and "tool_calls", a tool message's "tool_call_id" and "name", as
//              transformers passes them
//   sharegpt  {"conversations": [{"from": "system"|"human"|"gpt"|"function_call"|"observation",
//              "value": "..."}, ...], "tools": "..." (optional)}: LLaMA-Factory's function calling,
//              a function_call's value the JSON of a call {"name", "arguments"} or a list of them
// Tools (the functions a model may call) reach a folder's own template only (Jinja2): the built-in
// templates refuse them.
// Templates (what Hugging Face's chat templates render, without a generation prompt):
//   chatml  <|im_start|>ROLE\nCONTENT<|im_end|>\n per message (Qwen 2/2.5)
//   qwen3   chatml, a reply after the last user message opening with its thinking block
//           <think>\nREASONING\n</think>\n\n (the last one always, empty without reasoning; the
//           reasoning from reasoning_content, or from a content holding </think>), as Qwen 3's
//           template; earlier replies without their reasoning
//   llama3  <|begin_of_text|>, then <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
//           per message, CONTENT trimmed of surrounding white space
//   harmony gpt-oss: <|start|>system<|message|>(the identity, knowledge cutoff, today's date,
//           reasoning medium, the valid channels)<|end|>; a first system message as the developer's
//           <|start|>developer<|message|># Instructions\n\nCONTENT\n\n<|end|>; <|start|>user<|message|>
//           CONTENT<|end|>; <|start|>assistant<|channel|>final<|message|>CONTENT, then <|return|>
//           for the conversation's last message, else <|end|> (the model writes from <|channel|> on);
//           the last reply's "thinking" before it as <|start|>assistant<|channel|>analysis<|message|>
//           THINKING<|end|> (earlier replies' dropped, as the template drops them)
//   mistral Mistral / Mixtral Instruct v0.1: <s>, then [INST] USER [/INST] per user turn and
//           REPLY</s> per reply; roles alternate from a user turn, no system message (the
//           template refuses both as Mixtral's does); its generation prompt adds nothing
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/data/hf_tokenizer.h"

namespace mt {

enum class ChatTemplate { ChatML, Qwen3, Llama3, Harmony, Mistral };

// Qwen 3's empty thinking block: before its last reply without reasoning, and what its
// generation prompt adds with enable_thinking=False.
inline constexpr char kQwen3EmptyThinking[] = "<think>\n\n</think>\n\n";
// The built-in templates by their flag names (--template), and each one's name.
const std::map<std::string, std::optional<ChatTemplate>>& chatTemplateNames();
const char* chatTemplateName(ChatTemplate chat_template);

struct ChatMessage {
  std::string role;  // system, user, assistant or tool
  std::string content;  // "" for a reply of tool calls whose content is null or absent (OpenAI's)
  // An assistant message's reasoning (the messages shape's "reasoning_content", or gpt-oss's
  // "thinking", passed to a template under the data's name): Qwen 3's template renders it in a
  // <think> block, harmony's as the last reply's analysis message; the other built-ins, as their
  // templates, leave it out.
  std::optional<std::string> reasoning = std::nullopt;
  enum class ReasoningField { ReasoningContent, Thinking } reasoning_field = ReasoningField::ReasoningContent;
  // The message's tool fields, for a folder's template: a JSON object holding an assistant
  // message's "tool_calls" or a tool message's "tool_call_id" and "name", keys in the data's order
  // (a template's tojson writes them so). Empty without.
  std::string tool_fields = {};
  // A tool's result, or a reply of tool calls: what only a folder's template renders.
  bool holdsTools() const { return role == "tool" || !tool_fields.empty(); }
};

// The data's name of a reasoning field: "reasoning_content" or "thinking".
const char* reasoningFieldName(ChatMessage::ReasoningField field);

// One example: its conversation and the functions its model may call.
struct ChatExample {
  std::vector<ChatMessage> messages;
  // The example's "tools" (apply_chat_template's tools=): a JSON array of the functions' schemas,
  // keys in the data's order. Empty without.
  std::string tools = {};
  // Whether the example holds tools, tool calls or tool results: only a folder's template renders them.
  bool usesTools() const;
};

// The functions a model may call, as a template takes them: a list of their schemas (objects), or
// LLaMA-Factory's JSON text of one; returned as JSON text, keys in the data's order ("" for an
// empty list). Throws mt::Error naming `where` for anything else.
std::string toolsOf(const nlohmann::ordered_json& tools, const std::string& where);

// One example (parsed, or a JSONL line); throws mt::Error naming `where` (file:line) and what is wrong.
ChatExample exampleOf(const nlohmann::ordered_json& example, const std::string& where);
// The same shapes without the assistant message an example needs: a conversation a model replies to.
ChatExample conversationOf(const nlohmann::ordered_json& conversation, const std::string& where);
ChatExample readExample(const std::string& json_line, const std::string& where);
// A list of messages in the messages shape, or with `sharegpt` in the sharegpt shape; throws
// mt::Error naming `where` and the message that is malformed.
std::vector<ChatMessage> readTurns(const nlohmann::ordered_json& list, bool sharegpt, const std::string& where);
// TRL's prompt-completion records, as --preferences and --unpaired read their parts: a prompt
// string is a user message, a list must not end with the assistant's; a reply (completion) string
// is an assistant message, a list must end with one. Throw mt::Error naming `where` (a prompt's
// malformed message: `where`: prompt).
std::vector<ChatMessage> promptMessages(const nlohmann::ordered_json& prompt, const std::string& where);
std::vector<ChatMessage> replyMessages(const nlohmann::ordered_json& reply, const std::string& where);

// The longest example (a JSONL line) and the largest JSON array file read: far past any
// sequence a model trains on, and bounded, since tokenizing takes some 45 times an example's size.
inline constexpr size_t kMaxExampleBytes = size_t{16} << 20;
inline constexpr size_t kMaxExampleArrayBytes = size_t{1} << 30;

// What a file's examples are read for: training on (each must hold a reply: exampleOf), or
// replying to (any conversation: conversationOf; mtgen --chat-file).
enum class ExamplesFor { kTraining, kReplying };
// Calls `each` with every example of a file's `text` in order and where it is (path:line for
// JSONL, "path: record N" in a JSON array: a text whose first character is '['). Blank lines are
// skipped. Throws mt::Error naming where an example is malformed or too large.
void forEachExample(const std::string& path, const std::string& text,
                    const std::function<void(const ChatExample&, const std::string& where)>& each,
                    ExamplesFor use = ExamplesFor::kTraining);
// The same over the file's records as JSON, whatever their shape (preference pairs: mttok
// --preferences), each checked to be well-formed UTF-8 and no larger than kMaxExampleBytes.
void forEachRecord(const std::string& path, const std::string& text,
                   const std::function<void(const nlohmann::ordered_json&, const std::string& where)>& each);

// A stretch of a rendered conversation and whether its tokens are targets of the loss.
struct ChatPart {
  std::string text;
  bool counted = false;
};
// Both throw mt::Error for tools, tool calls or tool results, which the built-in templates do not
// render.
std::vector<ChatPart> renderChat(const std::vector<ChatMessage>& messages, ChatTemplate chat_template);
std::vector<ChatPart> renderExample(const ChatExample& example, ChatTemplate chat_template);

// `conversation` in a built-in template, then the header of the assistant's turn (what
// add_generation_prompt=True appends): what a chat model reads before it writes its reply.
// Throws mt::Error for tools, as renderExample.
std::string generationPrompt(const ChatExample& conversation, ChatTemplate chat_template);

// The template a tokenizer's special tokens imply: <|start_header_id|> -> llama3, <|im_start|>
// with <think> -> qwen3, <|im_start|> -> chatml, <|start|> with <|channel|> -> harmony. Throws
// mt::Error when none fits.
ChatTemplate templateFor(const HfTokenizer& tokenizer);

// The special token that opens a turn in `chat_template` (a tokenizer without it renders the
// markers as plain text).
const char* turnMarker(ChatTemplate chat_template);

// How many of `messages`' replies have a reasoning (reasoning_content or thinking) that their
// rendering, `parts`, does not hold (trimmed): the template left it out, and it is not trained.
size_t reasoningLeftOut(const std::vector<ChatMessage>& messages, const std::vector<ChatPart>& parts);

// Appends one rendered example's ids and loss mask (1 = counted) to `ids` and `counted`: the ids
// of the whole conversation encoded at once (Hugging Face's apply_chat_template with
// tokenize=True), each token counted where its text overlaps a counted part (as transformers'
// assistant mask counts a token holding any character of a reply). Returns how many tokens
// cross the edge of a counted part (a prompt's end and a reply's start in one token, counted).
size_t appendExample(HfTokenizer& tokenizer, const std::vector<ChatPart>& parts, std::vector<uint32_t>& ids,
                     std::vector<uint8_t>& counted);

}  // namespace mt
