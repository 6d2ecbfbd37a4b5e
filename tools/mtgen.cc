// mtgen: sample text from a model through a forward-only plan (mtc --forward-only [--kv-cache]).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "runtime/backends/cpu_libraries.h"
#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/generation/end_tokens.h"
#include "runtime/generation/generator.h"
#include "runtime/data/chat_jinja.h"
#include "runtime/data/hf_tokenizer.h"
#include "runtime/io/mapped_file.h"
#include "runtime/plan/plan_format.h"
#include "runtime/training/run_setup.h"
#include "runtime/io/safetensors.h"
#include "runtime/data/utf8.h"
#include "runtime/plan/verifier.h"
#include "tools/folder_plan.h"
#include "tools/tool_main.h"

namespace {

struct Options {
  std::string plan_path, weights, tokenizer, prompt, prompt_file, end_of_text;
  std::string chat, system;                        // --chat: a user message (and --system's) to reply to
  std::string tools;                               // --tools: a JSON file of the functions it may call
  std::string conversation;                        // --conversation: a JSON file of the turns so far
  std::string chat_file;                           // --chat-file: instruction data, a reply to each conversation
  bool chatting() const { return !chat.empty() || !conversation.empty() || !chat_file.empty(); }
  std::optional<mt::ChatTemplate> chat_template;  // --template: a built-in one instead of the folder's
  bool no_thinking = false;                        // --no-thinking: Qwen 3's enable_thinking=False
  mt::BackendChoice backend = mt::BackendChoice::kAuto;
  bool bytes = false, greedy = false, no_stop = false, print_ids = false, other_tokenizer = false;
  mt::GenerationOptions generation;
  int64_t context = 1024;  // mtgen DIR: the key/value cache's tokens of the plan it compiles
  int64_t batch = 1;       // mtgen DIR: its rows (--chat-file: conversations replied to at once)
  bool folder = false;     // the plan was compiled from a model folder (mtgen DIR)
};

// Text in and out: byte tokens, or a Hugging Face tokenizer.
class Text {
 public:
  explicit Text(const Options& o) {
    if (!o.tokenizer.empty()) tokenizer_ = std::make_unique<mt::HfTokenizer>(mt::resolveTokenizerPath(o.tokenizer));
  }
  uint32_t vocab() const { return tokenizer_ ? tokenizer_->vocabSize() : 256; }
  // Whether every token from id `first` on is a special added token.
  bool specialFrom(uint32_t first) const {
    for (uint32_t id = first; id < vocab(); ++id)
      if (!tokenizer_ || !tokenizer_->isSpecial(id)) return false;
    return true;
  }
  uint32_t fingerprint() const { return tokenizer_ ? tokenizer_->fingerprint() : 0; }
  std::vector<uint32_t> encode(const std::string& text) const {
    if (tokenizer_) return tokenizer_->encode(text, /*add_special_tokens=*/true);
    return {reinterpret_cast<const unsigned char*>(text.data()),
            reinterpret_cast<const unsigned char*>(text.data()) + text.size()};
  }
  // --chat / --conversation: the conversation the flags give.
  static mt::ChatExample flagsConversation(const Options& o) {
    mt::ChatExample conversation = o.conversation.empty() ? mt::ChatExample{} : readConversation(o.conversation);
    if (!o.system.empty()) conversation.messages.push_back({"system", o.system});
    if (!o.chat.empty()) conversation.messages.push_back({"user", o.chat});
    if (!o.tools.empty()) {
      if (!conversation.tools.empty())
        throw mt::Error("--tools and the conversation file " + o.conversation + " both list tools: give them once");
      conversation.tools = readTools(o.tools);
    }
    if (conversation.messages.back().role == "assistant")
      throw mt::Error("the conversation " + o.conversation + " ends with a reply: end it with a user or tool message "
                      "(or add one with --chat) for the model to reply to");
    return conversation;
  }
  // The chat template of --chat, --conversation and --chat-file (said on standard error).
  mt::ChosenChatTemplate chatTemplate(const Options& o) const {
    mt::ChosenChatTemplate chosen = mt::chooseChatTemplate(*tokenizer_, o.chat_template);
    std::fprintf(stderr, "mtgen: chat template: %s\n", chosen.description.c_str());
    if (o.no_thinking) withoutThinking(chosen);
    return chosen;
  }
  // A conversation in the chat template, through the generation prompt (the template writes the
  // special tokens it wants: none are added).
  std::vector<uint32_t> encodeChat(const mt::ChosenChatTemplate& chosen, bool no_thinking,
                                   const mt::ChatExample& conversation) const {
    std::string prompt = chosen.own ? mt::renderGenerationPrompt(*chosen.own, *tokenizer_, conversation)
                                    : mt::generationPrompt(conversation, chosen.builtin);
    if (no_thinking && !chosen.own) prompt += mt::kQwen3EmptyThinking;  // as Qwen 3's template writes it
    return tokenizer_->encode(prompt, /*add_special_tokens=*/false);
  }
  // The JSON of `what` ("tools file PATH"), a file of at most kMaxExampleBytes, as an example.
  static nlohmann::ordered_json readJsonFile(const std::string& path, const std::string& what) {
    const std::string text = mt::readWholeFile(path, what, "");
    if (text.size() > mt::kMaxExampleBytes)
      throw mt::Error(what + " " + path + ": " + std::to_string(text.size()) + " bytes; at most " +
                      std::to_string(mt::kMaxExampleBytes >> 20) + " MiB is read");
    return mt::parseOrderedJsonInput(text, what + " " + path);
  }
  // --tools FILE: the functions' schemas, a JSON list as an example's "tools".
  static std::string readTools(const std::string& path) {
    const std::string tools = mt::toolsOf(readJsonFile(path, "tools file"), "tools file " + path);
    if (tools.empty()) throw mt::Error("tools file " + path + " lists no function: drop --tools");
    return tools;
  }
  // --conversation FILE: the turns so far, one JSON object in instruction data's messages (or
  // sharegpt) shape, its tools too.
  static mt::ChatExample readConversation(const std::string& path) {
    const std::string where = "conversation file " + path;
    const nlohmann::ordered_json turns = readJsonFile(path, "conversation file");
    if (turns.is_object() && !turns.contains("messages") && !turns.contains("conversations"))
      throw mt::Error(where + ": neither \"messages\" nor \"conversations\": a conversation to reply to is one "
                      "object in instruction data's messages (or sharegpt) shape");
    return mt::conversationOf(turns, where);
  }
  // --no-thinking: the template told enable_thinking=False (Qwen 3's then ends the prompt with an
  // empty thinking block: the model answers without reasoning); a template without the switch is
  // refused, as the flag would change nothing.
  static void withoutThinking(mt::ChosenChatTemplate& chosen) {
    if (!chosen.own) {
      if (chosen.builtin != mt::ChatTemplate::Qwen3)
        throw mt::Error(std::string("--no-thinking is Qwen 3's switch; the built-in ") +
                        mt::chatTemplateName(chosen.builtin) + " template has no thinking to leave out");
      return;
    }
    if (chosen.own->text.find("enable_thinking") == std::string::npos)
      throw mt::Error("--no-thinking: the chat template " + chosen.own->source +
                      " takes no enable_thinking (Qwen 3's does); drop the flag");
    nlohmann::json context = nlohmann::json::parse(chosen.own->context_json);
    context["enable_thinking"] = false;
    chosen.own->context_json = context.dump();
  }
  // A drawn token's bytes; none for an id the tokenizer lacks (a model's vocabulary padded past its
  // tokenizer's, as transformers' decode skips it), counted for unknownTokensNote.
  std::string bytesOf(uint32_t id) const {
    if (!tokenizer_) return std::string(1, char(id));
    if (tokenizer_->hasToken(id)) return tokenizer_->bytesOf(id);
    ++unknown_tokens_;
    return {};
  }
  // On standard error, where drawn tokens had no text.
  void unknownTokensNote() const {
    if (unknown_tokens_)
      std::fprintf(stderr, "mtgen: note: %zu drawn token%s the tokenizer has no text for (ids it has no token of: a "
                           "model's vocabulary is often padded past its tokenizer's), left out of the text\n",
                   unknown_tokens_, unknown_tokens_ == 1 ? "" : "s");
  }
  // The tokens that end a text: --eot's; else the model's own (eos_token_id of its folder's
  // generation_config.json or of its config.json) and the tokenizer's end-of-text; none for bytes.
  std::vector<uint32_t> stopTokens(const Options& o, const mt::plan::Plan& plan) const {
    if (o.no_stop || !tokenizer_) return {};
    if (!o.end_of_text.empty()) {
      const auto id = tokenizer_->tokenId(o.end_of_text);
      if (!id) throw mt::Error("--eot " + o.end_of_text + " is not a token of the tokenizer");
      return {*id};
    }
    struct stat st {};
    const bool folder = stat(o.tokenizer.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    return mt::modelEndTokens(plan, folder ? o.tokenizer : "", tokenizer_->endOfText(), vocab());
  }
  // "<|im_end|> (151645), <|endoftext|> (151643)"
  std::string describe(const std::vector<uint32_t>& ids) const {
    std::string text;
    for (uint32_t id : ids) text += fmt::format("{}{} ({})", text.empty() ? "" : ", ", tokenizer_->bytesOf(id), id);
    return text;
  }

 private:
  std::unique_ptr<mt::HfTokenizer> tokenizer_;
  mutable size_t unknown_tokens_ = 0;
};

// Writes text as it comes, holding back a character whose bytes have not all arrived.
class Printer {
 public:
  void add(const std::string& bytes) {
    pending_ += bytes;
    size_t complete = pending_.size();
    // A lead byte within the last three whose sequence is unfinished waits for its tail.
    for (size_t back = 1; back <= std::min<size_t>(3, pending_.size()); ++back) {
      const unsigned char c = pending_[pending_.size() - back];
      if ((c & 0xC0) == 0x80) continue;  // a continuation byte
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (need > back) complete = pending_.size() - back;
      break;
    }
    flush(complete);
  }
  void finish() { flush(pending_.size()); }

 private:
  void flush(size_t n) {
    const std::string text = mt::validUtf8(pending_.substr(0, n));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    pending_.erase(0, n);
  }
  std::string pending_;
};

std::optional<std::string> checkFlags(const Options& o) {
  const auto& s = o.generation.sampling;
  if (o.bytes && !o.tokenizer.empty()) return "--bytes and --tokenizer each choose the tokens: give one";
  if (!o.prompt.empty() + !o.prompt_file.empty() + (!o.chat.empty() || !o.conversation.empty()) + !o.chat_file.empty() != 1)
    return "give one of --prompt or --prompt-file (text to continue), --chat / --conversation (to reply to) or "
           "--chat-file (a reply to each conversation of a file)";
  if (o.chatting() && o.tokenizer.empty())
    return "--chat, --conversation and --chat-file need the model's --tokenizer (its folder's chat template)";
  if (!o.chat_file.empty() && (!o.system.empty() || !o.tools.empty()))
    return "--system and --tools with --chat-file: write them into the file's conversations (as instruction data: "
           "a system message, \"tools\")";
  if (!o.chatting() && (!o.system.empty() || o.chat_template || o.no_thinking || !o.tools.empty()))
    return "--system, --tools, --template and --no-thinking apply to --chat, --conversation or --chat-file";
  if (!o.conversation.empty() && !o.system.empty())
    return "--system with --conversation: write the system message into the conversation file";
  if (!(std::isfinite(s.temperature) && s.temperature >= 0)) return "--temperature must be 0 (greedy) or positive";
  if (!(s.top_p > 0 && s.top_p <= 1)) return "--top-p must be in (0, 1]";
  if (s.top_k < 0) return "--top-k must be 0 (all tokens) or positive";
  return std::nullopt;
}

// What the sampling took, on standard error: the new tokens of all rows over the whole time (the
// prompt's runs included).
void reportSpeed(const std::vector<std::vector<uint32_t>>& samples, size_t prompt_tokens, double seconds) {
  size_t drawn = 0;
  for (const auto& row : samples) drawn += row.size();
  std::fflush(stdout);
  std::fprintf(stderr, "mtgen: %zu new token%s in %.2f s (%.1f tokens/s; a %zu-token prompt)\n", drawn,
               drawn == 1 ? "" : "s", seconds, seconds > 0 ? drawn / seconds : 0.0, prompt_tokens);
}

// mtgen DIR: the folder's forward plan, compiled (or compiled before) into the cache; its
// tokenizer unless another is named.
void useFolder(Options& o) {
  const std::string dir = o.plan_path;
  const mt::FolderPlan folder = mt::folderPlan(dir, o.context, o.batch);
  std::fprintf(stderr, "mtgen: %s's forward plan with a %lld-token key/value cache, %lld row%s: %s (%s)\n", dir.c_str(),
               static_cast<long long>(o.context), static_cast<long long>(o.batch), o.batch == 1 ? "" : "s",
               folder.plan.c_str(),
               folder.cached ? "compiled before" : "compiled now; the next mtgen of this folder reuses it");
  o.plan_path = folder.plan;
  o.folder = true;
}

// A conversation of --chat-file to reply to: the example without its last reply, which becomes
// the reference the reply is compared with.
struct FileConversation {
  std::string where;
  std::vector<uint32_t> prompt;
  std::optional<std::string> reference;
};

// --chat-file: every conversation read and encoded first (a malformed one ends the run before
// anything is written), then a reply to each, the plan's rows replying to as many at once (a row
// whose reply ends takes the next conversation), printed in the file's order, one JSON object per line on standard output: {"where", "reply", "finish": "stop"
// (an end token) or "length" (--max-tokens), "reference" (the reply the example ended with),
// "ids" (with --ids)}. Each reply draws as a one-row run with --seed: a conversation's reply does
// not depend on the others or on the row it runs in.
int replyToEach(const Options& o, const Text& text, mt::Generator& generator) {
  const mt::ChosenChatTemplate chosen = text.chatTemplate(o);
  std::vector<FileConversation> conversations;
  mt::forEachExample(o.chat_file, mt::readWholeFile(o.chat_file, "chat file", ""),
                     [&](const mt::ChatExample& example, const std::string& where) {
                       mt::ChatExample conversation = example;
                       FileConversation c{where, {}, std::nullopt};
                       if (!conversation.messages.empty() && conversation.messages.back().role == "assistant") {
                         c.reference = conversation.messages.back().content;
                         conversation.messages.pop_back();
                       }
                       const std::string& last = conversation.messages.empty() ? "" : conversation.messages.back().role;
                       if (last != "user" && last != "tool")
                         throw mt::Error(where + ": nothing to reply to: a conversation ends with a user or tool "
                                                 "message, or with the one reply it is compared with");
                       c.prompt = text.encodeChat(chosen, o.no_thinking, conversation);
                       generator.checkPrompt(c.prompt, where);  // before any reply is written
                       conversations.push_back(std::move(c));
                     },
                     mt::ExamplesFor::kReplying);
  if (conversations.empty()) throw mt::Error("--chat-file " + o.chat_file + " holds no conversation");
  size_t drawn = 0, prompt_tokens = 0;
  auto print = [&](const FileConversation& c, const std::vector<uint32_t>& ids) {
    std::string reply;
    for (uint32_t id : ids) reply += text.bytesOf(id);
    nlohmann::ordered_json line = {{"where", c.where},
                                   {"reply", mt::validUtf8(reply)},
                                   {"finish", int64_t(ids.size()) < o.generation.max_tokens ? "stop" : "length"}};
    if (c.reference) line["reference"] = *c.reference;
    if (o.print_ids) line["ids"] = ids;
    // (A path's bytes that are not UTF-8 are replaced: `where` names the file as given.)
    std::printf("%s\n", line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    std::fflush(stdout);
    drawn += ids.size(), prompt_tokens += c.prompt.size();
  };
  const auto start = std::chrono::steady_clock::now();
  // Replies end in any order (a row takes the next conversation as its reply ends); each is
  // printed once those before it are.
  std::vector<std::vector<uint32_t>> prompts;
  for (const FileConversation& c : conversations) prompts.push_back(c.prompt);
  std::map<size_t, std::vector<uint32_t>> ended;
  size_t printed = 0;
  generator.generateAll(prompts, o.generation, [&](size_t i, std::vector<uint32_t> ids) {
    ended.emplace(i, std::move(ids));
    for (auto it = ended.find(printed); it != ended.end(); it = ended.find(printed)) {
      print(conversations[printed++], it->second);
      ended.erase(it);
    }
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "mtgen: %zu replies, %zu new tokens in %.2f s (%.1f tokens/s; %zu prompt tokens)\n",
               conversations.size(), drawn, seconds, seconds > 0 ? drawn / seconds : 0.0, prompt_tokens);
  text.unknownTokensNote();
  return 0;
}

int generate(Options& o) {
  if (mt::isModelFolder(o.plan_path)) useFolder(o);
  mt::plan::Plan plan = mt::readPlan(o.plan_path);
  mt::verifyPlan(plan);
  const Text text(o);
  if (!o.other_tokenizer)
    mt::checkModelTokenizer(plan, text.fingerprint(), "--tokenizer " + o.tokenizer, "--other-tokenizer");
  mt::HostStore store(plan);
  store.initialize(plan.init_seed());
  const std::string weights = mt::initialWeightsPath(o.weights, o.plan_path, plan);
  if (!weights.empty()) store.loadParams(mt::SafetensorsFile(weights));
  const mt::BackendKind kind = mt::chooseBackend(o.backend, false, plan);
  auto backend = mt::createBackend(kind, mt::CudaOptions{}, plan, store);
  mt::Generator generator(plan, store, *backend);
  if (o.folder)  // the folder's plan is compiled for --context: that is what to lengthen
    generator.setLengthenAdvice([](int64_t tokens) {
      return fmt::format("Give mtgen --context of at least {} (the prompt and the reply)", tokens + 256);
    });
  if (o.tokenizer.empty() && generator.vocab() != 256)
    throw mt::Error("the model's vocabulary is " + std::to_string(generator.vocab()) +
                    ", not bytes (256): name its tokenizer with --tokenizer");
  // A tokenizer may hold special tokens past the model's vocabulary that text never meant for it
  // uses (Gemma 3 1B's <image_soft_token>, 262,144 of a vocabulary of 262,144): a prompt holding
  // one is refused as any id past it; any other token there says another model's tokenizer.
  if (text.vocab() > generator.vocab() && !text.specialFrom(generator.vocab()))
    throw mt::Error("the tokenizer's vocabulary (" + std::to_string(text.vocab()) + ") is larger than the model's (" +
                    std::to_string(generator.vocab()) + "): it is not this model's tokenizer");
  if (o.greedy) o.generation.sampling.temperature = 0;
  o.generation.stop_tokens = text.stopTokens(o, plan);
  std::fprintf(stderr, "mtgen: %s | %lld %s%s, %s %lld tokens | weights %s | backend %s | %s\n",
               plan.model().name().c_str(), static_cast<long long>(generator.rows()),
               o.chat_file.empty() ? "sample" : "conversation",
               generator.rows() == 1 ? "" : o.chat_file.empty() ? "s" : "s at once",
               generator.cached() ? "key/value cache of" : "window of", static_cast<long long>(generator.window()), weights.empty() ? "the plan's seeded initializers" : weights.c_str(),
               kind == mt::BackendKind::kCuda ? "cuda" : "cpu",
               o.generation.sampling.temperature == 0 ? "greedy"
                   : fmt::format("temperature {}, top-k {}, top-p {}, seed {}", o.generation.sampling.temperature,
                                 o.generation.sampling.top_k, o.generation.sampling.top_p, o.generation.sampling.seed)
                         .c_str());
  if (!o.generation.stop_tokens.empty())
    std::fprintf(stderr, "mtgen: stops at %s\n", text.describe(o.generation.stop_tokens).c_str());
  if (!o.chat_file.empty()) return replyToEach(o, text, generator);
  // --chat prints the reply alone; a prompt is printed with its continuation.
  const std::string prompt = o.chatting()            ? std::string()
                             : o.prompt_file.empty() ? o.prompt
                                                     : mt::readWholeFile(o.prompt_file, "prompt file", "");
  const std::vector<uint32_t> prompt_ids =
      o.chatting() ? text.encodeChat(text.chatTemplate(o), o.no_thinking, Text::flagsConversation(o))
                   : text.encode(prompt);
  // One sample streams as it is drawn; several are printed one after another at the end.
  Printer printer;
  const bool stream = generator.rows() == 1 && !o.print_ids;
  if (stream) printer.add(prompt);
  const auto start = std::chrono::steady_clock::now();
  const auto samples = generator.generate(prompt_ids, o.generation, [&](int64_t, uint32_t id) {
    if (stream) printer.add(text.bytesOf(id));
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stream) {
    printer.finish();
    std::printf("\n");
    reportSpeed(samples, prompt_ids.size(), seconds);
    text.unknownTokensNote();
    return 0;
  }
  for (size_t r = 0; r < samples.size(); ++r) {
    if (samples.size() > 1) std::printf("--- sample %zu ---\n", r + 1);
    if (o.print_ids) {
      for (size_t i = 0; i < samples[r].size(); ++i) std::printf(i ? " %u" : "%u", samples[r][i]);
    } else {
      Printer row;
      row.add(prompt);
      for (uint32_t id : samples[r]) row.add(text.bytesOf(id));
      row.finish();
    }
    std::printf("\n");
  }
  reportSpeed(samples, prompt_ids.size(), seconds);
  text.unknownTokensNote();
  return 0;
}

// mtgen's flags, into `o`.
void addFlags(CLI::App& app, Options& o) {
  auto& s = o.generation.sampling;
  app.add_option("plan", o.plan_path,
                 "a forward-only plan (mtc --forward-only; with --kv-cache, fast), or a Hugging Face model folder "
                 "(compiled into such a plan once, then reused from ~/.cache/megatrain/mtgen)")
      ->required();
  app.add_option("--context", o.context,
                 "with a model folder: the key/value cache's tokens of the plan compiled for it (prompt and reply)")
      ->check(mt::positiveInteger())
      ->capture_default_str();
  app.add_option("--batch", o.batch,
                 "with a model folder: the rows of the plan compiled for it: samples of one prompt, or conversations "
                 "of --chat-file replied to at once")
      ->check(mt::positiveInteger())
      ->capture_default_str();
  app.add_option("--weights", o.weights, "weights (.safetensors, e.g. mtrun --export's); default: those mtc wrote "
                                         "beside the plan");
  app.add_flag("--bytes", o.bytes, "byte tokens (vocab 256; the default for such a model)");
  app.add_option("--tokenizer", o.tokenizer, "the model's Hugging Face tokenizer: FILE, FOLDER or gpt2|llama3|qwen3|mistral|gpt-oss|gemma3");
  app.add_option("--prompt", o.prompt, "the text to continue");
  app.add_option("--prompt-file", o.prompt_file, "... read from a file");
  app.add_option("--chat", o.chat,
                 "a user message to reply to, in the chat template of the --tokenizer folder (Jinja2, as transformers "
                 "renders it; or --template's built-in one): prints the reply");
  app.add_option("--system", o.system, "with --chat (not --conversation, whose file holds its own): a system "
                                       "message before it");
  app.add_option("--conversation", o.conversation,
                 "the turns so far to reply to: a JSON file in instruction data's messages (or sharegpt) shape, "
                 "tools, calls and their results too (a model tuned on calls answers from a tool's result); "
                 "--chat adds a user message after them");
  app.add_option("--chat-file", o.chat_file,
                 "instruction data (JSONL or a JSON array, as mttok --chat reads: alpaca, messages, sharegpt or "
                 "prompt-completion, tools too): a reply to each conversation, one JSON object a line on standard "
                 "output (where, reply, finish: stop or length, and the reference: the reply a conversation ends "
                 "with, which is left out of its prompt); a plan of batch B replies to B at once");
  app.add_option("--tools", o.tools,
                 "with --chat or --conversation: a JSON file listing the functions the model may call (their "
                 "schemas, as instruction data's \"tools\"), given to the folder's chat template: a model tuned on "
                 "calls replies with one");
  app.add_flag("--no-thinking", o.no_thinking,
               "with --chat, --conversation or --chat-file: Qwen 3's enable_thinking=False (the prompt ends with an empty "
               "thinking block: a reply without reasoning)");
  mt::choiceOf(app, "--template", o.chat_template,
               "with --chat, --conversation or --chat-file: a built-in chat template instead of the folder's own",
               mt::chatTemplateNames());
  app.add_option("--max-tokens", o.generation.max_tokens, "new tokens at most")->check(mt::positiveInteger())
      ->capture_default_str();
  app.add_option("--temperature", s.temperature, "softmax temperature; 0 = greedy")->capture_default_str();
  app.add_option("--top-k", s.top_k, "draw among the k most likely tokens; 0 = all")->capture_default_str();
  app.add_option("--top-p", s.top_p, "then among the fewest whose probability reaches p")->capture_default_str();
  app.add_flag("--greedy", o.greedy, "always the most likely token (as --temperature 0)");
  app.add_option("--seed", s.seed, "the draws' seed: the same seed, the same text")->capture_default_str();
  app.add_option("--eot", o.end_of_text,
                 "stop at this token only (default: the model's end tokens, eos_token_id of the --tokenizer "
                 "folder's generation_config.json or of the model's config.json, and the tokenizer's end-of-text)");
  app.add_flag("--no-stop", o.no_stop, "do not stop at an end token");
  app.add_flag("--other-tokenizer", o.other_tokenizer,
               "read and write text with another tokenizer than the model's own (refused otherwise)");
  app.add_flag("--ids", o.print_ids, "print the new token ids instead of text");
  mt::choiceOf(app, "--backend", o.backend, "where to run: the GPU when there is one (auto)", mt::backendChoiceNames())
      ->default_str("auto");
}

}  // namespace

int main(int argc, char** argv) {
  mt::configureCpuLibraries(argv);
  Options o;
  o.generation.sampling.seed = 1;
  CLI::App app{
      "mtgen: sample text from a model: the plan mtc --forward-only makes (tokens in, logits out) and its weights.\n\n"
      "Examples:\n"
      "  mtc gpt2-demo --forward-only --kv-cache --batch 1 --seq 128 -o gen.plan\n"
      "  mtgen gen.plan --weights trained.safetensors --prompt \"Q: \" --greedy\n"
      "  mtgen gen.plan --weights trained.safetensors --prompt \"Q: \" --temperature 0.8 --top-p 0.95 --seed 7\n"
      "  mtc Qwen2.5-0.5B/ --forward-only --kv-cache --batch 1 --seq 256 -o q.plan   (its weights beside it)\n"
      "  mtgen q.plan --tokenizer Qwen2.5-0.5B/ --prompt \"The capital of France is\" --max-tokens 20\n"
      "  mtgen q.plan --tokenizer Qwen2.5-0.5B-Instruct/ --chat \"Name three rivers.\"   (its chat template)\n"
      "  mtgen q.plan --tokenizer Qwen2.5-0.5B-Instruct/ --conversation turns.json --tools tools.json\n"
      "                                          (the reply to a conversation, e.g. after a tool's result)\n"
      "  mtgen Qwen2.5-0.5B-Instruct/ --chat \"Name three rivers.\"   (the folder compiled once, then reused)\n"
      "  mtgen tuned/ --chat-file held-out.jsonl --greedy > replies.jsonl   (a reply to each conversation)\n\n"
      "The text goes to standard output, what was run to standard error. A batch of B gives B samples of the\n"
      "same prompt (--chat-file: replies to B conversations at once). A --kv-cache plan runs one token's\n"
      "forward per token, attending over the keys and values of the tokens before it (the prompt is fed a\n"
      "token at a time; a full cache is rebuilt from the text's last seq/2 tokens); a plain --forward-only\n"
      "plan runs the whole window of the last seq tokens per token.\n"
      "Exit codes: 0 success, 1 bad input (message on stderr), 2 bad flags."};
  addFlags(app, o);
  if (const auto code = mt::parseFlags(app, argc, argv)) return *code;
  // A model folder brings its tokenizer; a plan brings its rows and cache.
  if (mt::isModelFolder(o.plan_path) && o.tokenizer.empty() && !o.bytes) o.tokenizer = o.plan_path;
  if (!mt::isModelFolder(o.plan_path) && (app.count("--batch") || app.count("--context"))) {
    std::fprintf(stderr, "mtgen: error: --batch and --context apply to a model folder; a plan's rows and cache are "
                         "compiled into it (mtc --batch, --seq)\n");
    return 2;
  }
  if (const auto problem = checkFlags(o)) {
    std::fprintf(stderr, "mtgen: error: %s\n", problem->c_str());
    return 2;
  }
  return mt::runTool("mtgen", [&] { return generate(o); });
}
