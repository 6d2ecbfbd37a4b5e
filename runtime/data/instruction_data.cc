#include "runtime/data/instruction_data.h"

#include <algorithm>
#include <ctime>
#include <functional>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/data/utf8.h"

namespace mt {
namespace {

using Json = nlohmann::ordered_json;  // keys in the data's order: a template's tojson writes them so

std::string stringField(const Json& object, const char* key, const std::string& where) {
  if (!object.contains(key)) throw Error(where + ": no \"" + key + "\"");
  if (!object.at(key).is_string()) throw Error(where + ": \"" + key + "\" is not a string");
  return object.at(key).get<std::string>();
}

bool present(const Json& object, const char* key) { return object.contains(key) && !object.at(key).is_null(); }

// An assistant message's tool calls as transformers takes them: a list of {"function": {"name",
// "arguments"}} (OpenAI's shape) or of {"name", "arguments"}, the arguments an object or their
// JSON text (OpenAI's), kept as given: the renderer reads text into its object for the templates
// that write `arguments | tojson` (chat_jinja.cc).
void checkToolCalls(const Json& calls, const std::string& where) {
  if (!calls.is_array()) throw Error(where + ": \"tool_calls\" is " + jsonBrief(calls) + ", not a list of calls");
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = where + ": tool call " + std::to_string(i);
    if (!calls[i].is_object()) throw Error(at + " is not an object");
    const Json& function = calls[i].contains("function") ? calls[i].at("function") : calls[i];
    if (!function.is_object()) throw Error(at + ": \"function\" is not an object");
    if (stringField(function, "name", at).empty()) throw Error(at + ": an empty \"name\"");
    if (!function.contains("arguments"))
      throw Error(at + ": no \"arguments\" (an object of the arguments, or its JSON as a string)");
    const Json& arguments = function.at("arguments");
    if (arguments.is_string()) {
      if (!parseOrderedJsonInput(arguments.get<std::string>(), at + ": \"arguments\"").is_object())
        throw Error(at + ": \"arguments\" is text that is not a JSON object's (" + jsonBrief(arguments) + ")");
    } else if (!arguments.is_object()) {
      throw Error(at + ": \"arguments\" is " + jsonBrief(arguments) + ", neither an object nor its JSON as a string");
    }
  }
}

// A message of the messages shape: role and content, an assistant's reasoning_content (or
// thinking) and tool_calls, a tool result's tool_call_id and name.
ChatMessage messageOf(const Json& m, const std::string& at) {
  const std::string role = stringField(m, "role", at);
  if (role != "system" && role != "user" && role != "assistant" && role != "tool")
    throw Error(at + ": role '" + role + "' is not one of system, user, assistant, tool");
  ChatMessage message{role, ""};
  Json tool_fields = Json::object();
  // An empty list calls nothing, as in a template's `if message.tool_calls`.
  if (present(m, "tool_calls") && !(m.at("tool_calls").is_array() && m.at("tool_calls").empty())) {
    if (role != "assistant") throw Error(at + ": \"tool_calls\" on a " + role + " message: only a reply calls tools");
    checkToolCalls(m.at("tool_calls"), at);
    tool_fields["tool_calls"] = m.at("tool_calls");
  }
  // A reply of tool calls without content (OpenAI writes null) renders as an empty content: Qwen 3's
  // template, among others, cannot take null.
  if (tool_fields.empty() || present(m, "content")) message.content = stringField(m, "content", at);
  for (const auto field : {ChatMessage::ReasoningField::ReasoningContent, ChatMessage::ReasoningField::Thinking}) {
    const char* name = reasoningFieldName(field);
    if (!present(m, name)) continue;
    if (role != "assistant") throw Error(at + ": \"" + name + "\" on a " + role + " message: only a reply reasons");
    if (message.reasoning)
      throw Error(at + ": both \"reasoning_content\" and \"thinking\": give the reasoning once, under the name the "
                  "model's template reads (Qwen 3's reasoning_content, gpt-oss's thinking)");
    message.reasoning = stringField(m, name, at);
    message.reasoning_field = field;
  }
  if (role == "tool")
    for (const char* key : {"tool_call_id", "name"})
      if (present(m, key)) tool_fields[key] = stringField(m, key, at);
  if (!tool_fields.empty()) message.tool_fields = tool_fields.dump(-1, ' ', false, Json::error_handler_t::replace);
  return message;
}

// A message of the sharegpt shape, LLaMA-Factory's function calling included: a function_call's
// value is the JSON of a call {"name", "arguments"} or of a list of them, an observation a tool's
// result.
ChatMessage sharegptMessageOf(const Json& m, const std::string& at) {
  static const std::pair<const char*, const char*> kRoles[] = {
      {"system", "system"}, {"human", "user"}, {"gpt", "assistant"}, {"function_call", "assistant"}, {"observation", "tool"}};
  const std::string from = stringField(m, "from", at);
  const auto role = std::find_if(std::begin(kRoles), std::end(kRoles), [&](const auto& r) { return from == r.first; });
  if (role == std::end(kRoles))
    throw Error(at + ": \"from\" '" + from + "' is not one of system, human, gpt, function_call, observation");
  ChatMessage message{role->second, stringField(m, "value", at)};
  if (from == "function_call") {
    Json calls = parseOrderedJsonInput(message.content, at + ": the function_call's value");
    if (!calls.is_array()) calls = Json::array({calls});
    Json tool_calls = Json::array();
    for (const Json& call : calls) {
      if (!call.is_object())
        throw Error(at + ": the function_call's value is neither a call {\"name\", \"arguments\"} nor a list of them");
      tool_calls.push_back({{"type", "function"}, {"function", call}});
    }
    if (tool_calls.empty()) throw Error(at + ": the function_call's value lists no call");
    message.content.clear();
    checkToolCalls(tool_calls, at);
    message.tool_fields = Json{{"tool_calls", tool_calls}}.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  return message;
}

}  // namespace

std::vector<ChatMessage> readTurns(const Json& list, bool sharegpt, const std::string& where) {
  if (!list.is_array() || list.empty()) throw Error(where + ": the conversation is not a list of messages");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + ": message " + std::to_string(i);
    if (!list[i].is_object()) throw Error(at + " is not an object");
    messages.push_back(sharegpt ? sharegptMessageOf(list[i], at) : messageOf(list[i], at));
  }
  return messages;
}

namespace {

// Python's str.isspace() over a code point: what Jinja's `trim` strips.
bool pythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string trim(const std::string& text) {
  const std::vector<char32_t> cps = decodeUtf8(text);
  size_t begin = 0, end = cps.size();
  while (begin < end && pythonSpace(cps[begin])) ++begin;
  while (end > begin && pythonSpace(cps[end - 1])) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) appendUtf8(out, cps[i]);
  return out;
}

std::string lstripNewlines(const std::string& text) { return text.substr(std::min(text.find_first_not_of('\n'), text.size())); }
std::string rstripNewlines(const std::string& text) { return text.substr(0, text.find_last_not_of('\n') + 1); }

// A reply as Qwen 3's template reads it: its reasoning (reasoning_content, else what a content
// holding </think> has before the first </think>, after the last <think> there, line breaks
// stripped) and its content (after the last </think>, leading line breaks stripped).
std::pair<std::string, std::string> qwen3Reply(const ChatMessage& m) {
  if (m.reasoning && m.reasoning_field == ChatMessage::ReasoningField::ReasoningContent) return {*m.reasoning, m.content};
  const size_t close = m.content.find("</think>");
  if (close == std::string::npos) return {"", m.content};
  const std::string before = rstripNewlines(m.content.substr(0, close));
  const size_t open = before.rfind("<think>");
  return {lstripNewlines(open == std::string::npos ? before : before.substr(open + 7)),
          lstripNewlines(m.content.substr(m.content.rfind("</think>") + 8))};
}

// LLaMA-Factory's "history": earlier [user, assistant] turns of an alpaca record.
void appendHistory(const Json& history, std::vector<ChatMessage>& messages, const std::string& where) {
  if (!history.is_array()) throw Error(where + ": \"history\" is not a list of [user, assistant] pairs");
  for (size_t i = 0; i < history.size(); ++i) {
    const Json& pair = history[i];
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
      throw Error(where + ": \"history\" item " + std::to_string(i) + " is not a [user, assistant] pair of strings");
    messages.push_back({"user", pair[0].get<std::string>()});
    messages.push_back({"assistant", pair[1].get<std::string>()});
  }
}

}  // namespace

const std::map<std::string, std::optional<ChatTemplate>>& chatTemplateNames() {
  static const std::map<std::string, std::optional<ChatTemplate>> names = {
      {"chatml", ChatTemplate::ChatML}, {"qwen3", ChatTemplate::Qwen3}, {"llama3", ChatTemplate::Llama3},
      {"harmony", ChatTemplate::Harmony}, {"mistral", ChatTemplate::Mistral}};
  return names;
}

const char* chatTemplateName(ChatTemplate chat_template) {
  for (const auto& [name, t] : chatTemplateNames())
    if (t == chat_template) return name.c_str();
  return "?";
}

const char* reasoningFieldName(ChatMessage::ReasoningField field) {
  return field == ChatMessage::ReasoningField::Thinking ? "thinking" : "reasoning_content";
}

std::string toolsOf(const Json& value, const std::string& where) {
  Json tools = value;
  if (tools.is_string()) {
    if (tools.get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos) return "";
    tools = parseOrderedJsonInput(tools.get<std::string>(), where + ": \"tools\"");
  }
  if (!tools.is_array()) throw Error(where + ": \"tools\" is " + jsonBrief(tools) + ", not a list of the functions' schemas");
  for (size_t i = 0; i < tools.size(); ++i)
    if (!tools[i].is_object()) throw Error(where + ": tool " + std::to_string(i) + " is not an object (a function's schema)");
  return tools.empty() ? "" : tools.dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool ChatExample::usesTools() const {
  return !tools.empty() ||
         std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) { return m.holdsTools(); });
}

// A record that is preference data (a DPO pair in any shape, KTO's labelled prompt and completion)
// is not instruction data: trained on as such, its undesirable completion would be learnt, or its
// replies lost. (A "label" beside messages, a conversation or an instruction is other metadata.)
static void refusePreferenceRecord(const Json& example, const std::string& where) {
  if (example.contains("chosen") || example.contains("rejected"))
    throw Error(where + ": \"chosen\"/\"rejected\": this is a preference pair, not instruction data: tokenise it "
                "with mttok --preferences for a plan of mtc --objective dpo or reward");
  const bool shaped = example.contains("messages") || example.contains("conversations") || example.contains("instruction");
  if (!shaped && example.contains("label"))
    throw Error(where + ": a \"label\": this is KTO's unpaired feedback (a completion labelled desirable or not), "
                "not instruction data: tokenise it with mttok --unpaired for a plan of mtc --objective kto");
}

ChatExample readExample(const std::string& json_line, const std::string& where) {
  return exampleOf(parseOrderedJsonInput(json_line, where), where);
}

ChatExample exampleOf(const Json& example, const std::string& where) {
  // (A reply to it is another matter: mtgen --chat-file replies to preference data's prompts.)
  if (example.is_object()) refusePreferenceRecord(example, where);
  ChatExample result = conversationOf(example, where);
  bool replies = false;
  for (const ChatMessage& m : result.messages) replies |= m.role == "assistant";
  if (!replies) throw Error(where + ": no assistant message: nothing in it would be trained");
  return result;
}

std::vector<ChatMessage> promptMessages(const Json& prompt, const std::string& where) {
  std::vector<ChatMessage> messages;
  if (prompt.is_string()) messages.push_back({"user", prompt.get<std::string>()});
  else messages = readTurns(prompt, /*sharegpt=*/false, where + ": prompt");
  if (messages.back().role == "assistant")
    throw Error(where + ": the prompt ends with the assistant's message: nothing is left for a reply to answer");
  return messages;
}

std::vector<ChatMessage> replyMessages(const Json& value, const std::string& where) {
  if (value.is_string()) return {{"assistant", value.get<std::string>()}};
  std::vector<ChatMessage> messages = readTurns(value, /*sharegpt=*/false, where);
  if (messages.back().role != "assistant")
    throw Error(where + ": the reply ends with a " + messages.back().role + " message, not the assistant's");
  return messages;
}

ChatExample conversationOf(const Json& example, const std::string& where) {
  if (!example.is_object()) throw Error(where + ": not a JSON object");
  ChatExample result;
  std::vector<ChatMessage>& messages = result.messages;
  if (example.contains("messages")) {
    messages = readTurns(example.at("messages"), /*sharegpt=*/false, where);
  } else if (example.contains("conversations")) {
    messages = readTurns(example.at("conversations"), /*sharegpt=*/true, where);
  } else if (example.contains("instruction")) {
    std::string prompt = stringField(example, "instruction", where);
    if (example.contains("input") && !example.at("input").is_null()) {
      const std::string input = stringField(example, "input", where);
      if (!input.empty()) prompt += "\n\n" + input;
    }
    if (example.contains("system")) messages.push_back({"system", stringField(example, "system", where)});
    if (example.contains("history") && !example.at("history").is_null())
      appendHistory(example.at("history"), messages, where);
    messages.push_back({"user", prompt});
    // Without "output": a prompt to reply to (training refuses it: no reply to learn).
    if (example.contains("output")) messages.push_back({"assistant", stringField(example, "output", where)});
  } else if (example.contains("prompt")) {  // TRL's prompt-completion shape, or a preference record's
    messages = promptMessages(example.at("prompt"), where);
    // Then its reply (the reference a reply to the prompt is compared with): the completion, or a
    // pair's chosen one, not a completion labelled undesirable. Without one, a prompt to reply to;
    // training refuses it (no reply to learn), and preference records (exampleOf).
    const bool undesirable = example.contains("label") && example.at("label") == false;
    const char* reply = example.contains("completion") ? "completion" : example.contains("chosen") ? "chosen" : nullptr;
    if (reply && !undesirable)
      for (ChatMessage& m : replyMessages(example.at(reply), where + ": " + reply)) messages.push_back(std::move(m));
  } else if (example.contains("chosen")) {  // a pair of whole conversations (HH-RLHF's): its chosen one
    messages = readTurns(example.at("chosen"), /*sharegpt=*/false, where + ": chosen");
  } else {
    throw Error(where + ": neither \"messages\", \"conversations\", alpaca's \"instruction\"/\"output\" nor "
                "\"prompt\"/\"completion\"");
  }
  if (present(example, "tools")) result.tools = toolsOf(example.at("tools"), where);
  return result;
}

namespace {

// The offset of the first byte of `text` that is not well-formed UTF-8, or npos.
size_t firstInvalidUtf8(std::string_view text) {
  const std::string valid = validUtf8(std::string(text));
  if (valid == text) return std::string_view::npos;
  size_t i = 0;
  while (i < text.size() && i < valid.size() && text[i] == valid[i]) ++i;
  return i;
}

// The error for text that is not UTF-8, naming the byte and where, and the fix.
Error notUtf8(const std::string& where, std::string_view text, size_t at, const char* of) {
  return Error(fmt::format("{}: not UTF-8 text (byte 0x{:02X} at byte {} of {}): instruction data is read as UTF-8, "
                           "as JSON is; convert the file first (e.g. iconv -f latin1 -t utf-8)",
                           where, static_cast<unsigned char>(text[at]), at, of));
}

}  // namespace

void forEachExample(const std::string& path, const std::string& text,
                    const std::function<void(const ChatExample&, const std::string& where)>& each, ExamplesFor use) {
  forEachRecord(path, text, [&](const Json& example, const std::string& where) {
    each(use == ExamplesFor::kTraining ? exampleOf(example, where) : conversationOf(example, where), where);
  });
}

void forEachRecord(const std::string& path, const std::string& text,
                   const std::function<void(const nlohmann::ordered_json&, const std::string& where)>& each) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {  // one JSON array of examples
    if (text.size() > kMaxExampleArrayBytes)
      throw Error(path + ": a JSON array of " + std::to_string(text.size() >> 20) + " MiB; arrays of at most " +
                  std::to_string(kMaxExampleArrayBytes >> 20) + " MiB are read: write it as JSONL (one example per "
                  "line) instead");
    if (const size_t bad = firstInvalidUtf8(text); bad != std::string_view::npos) {
      const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n'));
      throw notUtf8(path + ":" + std::to_string(line), text, bad, "the file");
    }
    const Json examples = parseOrderedJsonInput(text, path);
    for (size_t i = 0; i < examples.size(); ++i) {
      const std::string where = path + ": record " + std::to_string(i);
      each(examples[i], where);
    }
    return;
  }
  int64_t number = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t line_end = std::min(text.find('\n', at), text.size());
    const std::string_view line(text.data() + at, line_end - at);
    at = line_end + 1;
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = path + ":" + std::to_string(number);
    if (line.size() > kMaxExampleBytes)
      throw Error(where + ": an example of " + std::to_string(line.size()) + " bytes; examples (lines) of at most " +
                  std::to_string(kMaxExampleBytes >> 20) + " MiB are read: split it into several");
    if (const size_t bad = firstInvalidUtf8(line); bad != std::string_view::npos) throw notUtf8(where, line, bad, "the line");
    each(parseOrderedJsonInput(std::string(line), where), where);
  }
}

namespace {

// Today's date as strftime_now("%Y-%m-%d") gives it to a Jinja template (local time).
std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char date[16];
  return std::string(date, std::strftime(date, sizeof date, "%Y-%m-%d", &local));
}

// A reply's content and thinking as harmony's template takes them: its channel markers belong in
// the template.
void checkHarmonyReply(const ChatMessage& m) {
  for (const char* marker : {"<|channel|>analysis<|message|>", "<|channel|>final<|message|>"})
    if (m.content.find(marker) != std::string::npos || (m.reasoning && m.reasoning->find(marker) != std::string::npos))
      throw Error(std::string("a reply holding harmony's channel markers (") + marker + "): gpt-oss's template "
                  "refuses them; give the final answer alone as the content and the analysis alone as the "
                  "message's \"thinking\"");
}

// gpt-oss's harmony format as its chat template renders a conversation for training (no tools,
// reasoning effort medium, the last reply's thinking; instruction_data.h).
void renderHarmony(const std::vector<ChatMessage>& messages, const std::function<void(std::string, bool)>& add) {
  add("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
      "2024-06\nCurrent date: " + today() + "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, "
      "final. Channel must be included for every message.<|end|>", false);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system") {
      if (i != 0)
        throw Error("a system message after the first: gpt-oss's template takes the first message alone as the "
                    "developer's instructions (and drops later ones); merge it into the first");
      if (!m.content.empty()) add("<|start|>developer<|message|># Instructions\n\n" + m.content + "\n\n<|end|>", false);
    } else if (m.role == "user") {
      add("<|start|>user<|message|>" + m.content + "<|end|>", false);
    } else {
      checkHarmonyReply(m);
      add("<|start|>assistant", false);
      const bool last = i + 1 == messages.size();
      // The last reply's "thinking" as its analysis message, which the model writes before the
      // final answer; earlier replies lose it, as the template drops their chain of thought.
      if (last && m.reasoning && m.reasoning_field == ChatMessage::ReasoningField::Thinking)
        add("<|channel|>analysis<|message|>" + *m.reasoning + "<|end|><|start|>assistant", true);
      add("<|channel|>final<|message|>" + m.content + (last ? "<|return|>" : "<|end|>"), true);
    }
  }
}

// Mistral's [INST] format as Mixtral-8x7B-Instruct's template renders it (instruction_data.h).
void renderMistral(const std::vector<ChatMessage>& messages, const std::function<void(std::string, bool)>& add) {
  add("<s>", false);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system")
      throw Error("a system message: Mistral's template takes user and assistant turns only; put the instructions in "
                  "the first user message");
    if ((m.role == "user") != (i % 2 == 0))
      throw Error("message " + std::to_string(i) + " (" + m.role + "): Mistral's template needs the turns to "
                  "alternate user, assistant, user, ...");
    if (m.role == "user") add("[INST] " + m.content + " [/INST]", false);
    else add(m.content + "</s>", true);
  }
}

Error builtinWithoutTools(ChatTemplate chat_template, const char* what) {
  return Error(std::string(what) + ": the built-in template " + chatTemplateName(chat_template) +
               " renders no tools; render with the tokenizer folder's own chat template (the default where the folder "
               "has one: drop --template), as transformers does");
}

}  // namespace

std::vector<ChatPart> renderExample(const ChatExample& example, ChatTemplate chat_template) {
  if (!example.tools.empty()) throw builtinWithoutTools(chat_template, "\"tools\"");
  return renderChat(example.messages, chat_template);
}

std::vector<ChatPart> renderChat(const std::vector<ChatMessage>& messages, ChatTemplate chat_template) {
  for (const ChatMessage& m : messages)
    if (m.holdsTools())
      throw builtinWithoutTools(chat_template, m.role == "tool" ? "a tool's result" : "a reply of tool calls");
  std::vector<ChatPart> parts;
  auto add = [&](std::string text, bool counted) {
    if (text.empty()) return;
    if (!parts.empty() && parts.back().counted == counted) {
      parts.back().text += text;
    } else {
      parts.push_back({std::move(text), counted});
    }
  };
  if (chat_template == ChatTemplate::Harmony) {
    renderHarmony(messages, add);
    return parts;
  }
  if (chat_template == ChatTemplate::Mistral) {
    renderMistral(messages, add);
    return parts;
  }
  if (chat_template == ChatTemplate::Llama3) {
    add("<|begin_of_text|>", false);
    for (const ChatMessage& m : messages) {
      add("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n", false);
      add(trim(m.content) + "<|eot_id|>", m.role == "assistant");
    }
    return parts;
  }
  size_t last_user = 0;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "user") last_user = i;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool reply = m.role == "assistant";
    if (chat_template != ChatTemplate::Qwen3 || !reply) {
      add("<|im_start|>" + m.role + "\n", false);
      add(m.content + "<|im_end|>", reply);
      add("\n", false);
      continue;
    }
    // Qwen 3: a reply after the last user message opens with its thinking block, the last one
    // always (empty, not counted: what the generation prompt without thinking writes), another
    // where it reasons (counted: the model writes it after the prompt); earlier replies lose it.
    const auto [reasoning, content] = qwen3Reply(m);
    const bool block = i > last_user && (i + 1 == messages.size() || !reasoning.empty());
    const std::string stripped = lstripNewlines(rstripNewlines(reasoning));
    add("<|im_start|>assistant\n" + std::string(block && stripped.empty() ? kQwen3EmptyThinking : ""), false);
    add((block && !stripped.empty() ? "<think>\n" + stripped + "\n</think>\n\n" : "") +
            (block ? lstripNewlines(content) : content) + "<|im_end|>",
        true);
    add("\n", false);
  }
  return parts;
}

std::string generationPrompt(const ChatExample& conversation, ChatTemplate chat_template) {
  std::string text;
  for (const ChatPart& part : renderExample(conversation, chat_template)) text += part.text;
  switch (chat_template) {
    case ChatTemplate::Llama3: return text + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatTemplate::Harmony: return text + "<|start|>assistant";
    case ChatTemplate::Mistral: return text;  // the last user turn's [/INST] is the prompt's end
    case ChatTemplate::ChatML:
    case ChatTemplate::Qwen3: break;
  }
  return text + "<|im_start|>assistant\n";
}

const char* turnMarker(ChatTemplate chat_template) {
  switch (chat_template) {
    case ChatTemplate::Llama3: return "<|start_header_id|>";
    case ChatTemplate::Harmony: return "<|start|>";
    case ChatTemplate::Mistral: return "<s>";  // its [INST] markers are text in Mistral's vocabulary
    case ChatTemplate::ChatML:
    case ChatTemplate::Qwen3: break;
  }
  return "<|im_start|>";
}

ChatTemplate templateFor(const HfTokenizer& tokenizer) {
  if (tokenizer.tokenId("<|start_header_id|>")) return ChatTemplate::Llama3;
  if (tokenizer.tokenId("<|im_start|>")) return tokenizer.tokenId("<think>") ? ChatTemplate::Qwen3 : ChatTemplate::ChatML;
  if (tokenizer.tokenId("<|start|>") && tokenizer.tokenId("<|channel|>")) return ChatTemplate::Harmony;
  throw Error("the tokenizer " + tokenizer.path() +
              " has neither ChatML's <|im_start|>, Llama 3's <|start_header_id|> nor harmony's <|start|> and "
              "<|channel|>: name a template with --template (Mistral's [INST] format: --template mistral)");
}

size_t reasoningLeftOut(const std::vector<ChatMessage>& messages, const std::vector<ChatPart>& parts) {
  std::string text;
  for (const ChatPart& part : parts) text += part.text;
  size_t left_out = 0;
  for (const ChatMessage& m : messages)
    if (m.reasoning) {
      const std::string reasoning = trim(*m.reasoning);
      left_out += !reasoning.empty() && text.find(reasoning) == std::string::npos;
    }
  return left_out;
}

size_t appendExample(HfTokenizer& tokenizer, const std::vector<ChatPart>& parts, std::vector<uint32_t>& ids,
                     std::vector<uint8_t>& counted) {
  // The parts' bytes as the tokenizer reads them (malformed UTF-8 replaced), and where each
  // counted part lies in the whole.
  std::string whole;
  std::vector<TokenSpan> counted_parts;
  for (const ChatPart& part : parts) {
    const size_t begin = whole.size();
    whole += validUtf8(part.text);
    if (part.counted && whole.size() > begin) counted_parts.push_back({begin, whole.size()});
  }
  std::vector<TokenSpan> spans;
  const std::vector<uint32_t> whole_ids = tokenizer.encode(whole, /*add_special_tokens=*/false, spans);
  size_t crossing = 0;
  auto part = counted_parts.begin();  // the first counted part not wholly before the token
  for (size_t i = 0; i < whole_ids.size(); ++i) {
    const TokenSpan span = spans[i];
    while (part != counted_parts.end() && part->end <= span.begin) ++part;
    const bool overlaps = part != counted_parts.end() && part->begin < span.end;
    counted.push_back(overlaps ? 1 : 0);
    crossing += overlaps && (span.begin < part->begin || span.end > part->end);
  }
  ids.insert(ids.end(), whole_ids.begin(), whole_ids.end());
  return crossing;
}

}  // namespace mt
