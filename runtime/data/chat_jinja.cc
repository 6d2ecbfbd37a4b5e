#include "runtime/data/chat_jinja.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/io/mapped_file.h"

extern char** environ;

namespace mt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

// A template far past any real one (Qwen 3's is 4 KiB), and what the renderer may print back per
// byte of examples sent (tokenizing already costs some 45 times an example's size).
constexpr size_t kMaxTemplateBytes = size_t{1} << 20;
constexpr size_t kOutputPerInputByte = 64;

// The renderer: transformers' Jinja environment (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loop controls, {% generation %}, tojson, raise_exception, strftime_now). For each
// example, its rendering and the byte ranges the loss counts: the {% generation %} blocks where
// the template has them (transformers' assistant mask), else each reply from where the
// conversation before it, rendered with the generation prompt, ends through the first special
// token after that of those the template writes right after a reply (a probe conversation says
// which: ChatML's <|im_end|>, harmony's <|end|> and <|return|>, not its <|channel|>; for a reply
// of tool calls, the one call_enders finds after the last call, harmony's <|call|>) that the
// generation prompt's assistant header does not follow (harmony's reply may be an analysis
// message, then the final answer or a call). Each example's tools are the template's `tools`. Exit 3: the template failed ({"error", "example"} on stdout); exit 4: no Jinja2.
constexpr char kRenderer[] = R"PY(
import json, sys
from datetime import datetime
try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.exit(4)

OPEN, CLOSE = "\ue000", "\ue001"  # private-use marks around a generation block's output

class Generation(Extension):
    tags = {"generation"}
    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_mark"), [], [], body).set_lineno(lineno)
    def _mark(self, caller):
        return OPEN + caller() + CLOSE

def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

def strftime_now(fmt):
    return datetime.now().strftime(fmt)

def marked_spans(text):
    plain, spans, start = [], [], None
    for ch in text:
        if ch == OPEN:
            start = len("".join(plain).encode("utf-8"))
        elif ch == CLOSE and start is not None:
            spans.append([start, len("".join(plain).encode("utf-8"))])
            start = None
        else:
            plain.append(ch)
    return "".join(plain), spans

# The probes' texts: private-use characters no template writes, so each is found where it landed.
PROBE_USER, PROBE_REPLY, PROBE_RESULT = "\ue002", "\ue003", "\ue005"
PROBE_ARGUMENTS = ("\ue004", "\ue006")  # two calls' arguments

def reply_enders(render, specials):
    # The special tokens the template writes right after a reply's content (ChatML's <|im_end|>,
    # harmony's <|end|> and <|return|>): where a reply ends, and not at a marker inside the reply
    # the model writes itself (harmony's <|channel|>final<|message|>). A template that cannot
    # render the probe keeps them all.
    try:
        text = render([{"role": "user", "content": PROBE_USER}, {"role": "assistant", "content": PROBE_REPLY}] * 2,
                      False, None)
    except Exception:
        return specials
    return [s for s in specials if PROBE_REPLY + s in text] or specials

SCHEMA = {"type": "function", "function": {"name": "probe", "description": "A probe.",
                                           "parameters": {"type": "object", "properties": {}}}}

def render_calls(render, arguments):
    # A probe conversation whose reply calls `probe` once per arguments, then a tool's result and a
    # reply, rendered; None where the template cannot (with the tool's schema, or without it).
    calls = [{"type": "function", "function": {"name": "probe", "arguments": a}} for a in arguments]
    messages = [{"role": "user", "content": PROBE_USER}, {"role": "assistant", "content": "", "tool_calls": calls},
                {"role": "tool", "content": PROBE_RESULT}, {"role": "assistant", "content": PROBE_REPLY}]
    for tools in ([SCHEMA], None):
        try:
            return render(messages, False, tools)
        except Exception:
            pass
    return None

def call_enders(render, specials, enders):
    # The special token that ends a reply of tool calls: among those between the last call's
    # arguments and the tool's result that do not also sit between two calls (not a token that
    # closes each call), one that ends a reply anyway where there is one (ChatML's <|im_end|>), else
    # the first (harmony's <|call|>); none where the template cannot render a call. Templates that
    # take one call per reply (Llama 3.1's) are probed with one.
    text = render_calls(render, PROBE_ARGUMENTS) or render_calls(render, PROBE_ARGUMENTS[:1])
    at = sorted(i for i in (text.find(a) for a in PROBE_ARGUMENTS) if i >= 0) if text else []
    if not at:
        return []
    between = text[at[0]:at[-1]]
    result = text.find(PROBE_RESULT, at[-1])
    window = text[at[-1]:result if result >= 0 else len(text)]
    found = sorted((window.find(s), -len(s), s) for s in specials if s in window and s not in between)
    preferred = [f for f in found if f[2] in enders] or found
    return [preferred[0][2]] if preferred else []

def reads_text_arguments(render):
    # Whether the template writes a call's arguments with tojson even when they are JSON text
    # (Qwen 2.5's, gpt-oss's, Llama 3.1's): then OpenAI's text arguments are read into their object
    # first, as those templates expect one (else the model would learn a quoted string); a template
    # that writes text as it is (Qwen 3's, DeepSeek's) gets the text as given.
    text_arguments = '{"probe": 1}'
    text = render_calls(render, [text_arguments])
    return text is not None and json.dumps(text_arguments, ensure_ascii=False) in text

def with_argument_objects(messages):
    def read(call):
        function = call.get("function", call) if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            function = dict(function, arguments=json.loads(function["arguments"]))
            return dict(call, function=function) if "function" in call else function
        return call
    return [dict(m, tool_calls=[read(c) for c in m["tool_calls"]]) if m.get("tool_calls") else m for m in messages]

def assistant_header(render):
    # What the generation prompt adds (ChatML's <|im_start|>assistant\n, harmony's <|start|>assistant):
    # an ender followed by it is not a reply's end, the model goes on with another message of its
    # own (harmony's analysis message before the final answer or the call). None where unclear.
    try:
        bare, prompted = (render([{"role": "user", "content": PROBE_USER}], p, None) for p in (False, True))
    except Exception:
        return None
    return prompted[len(bare):] if prompted.startswith(bare) and len(prompted) > len(bare) else None

def reply_end(text, start, stop, enders, header, reply):
    # Through the first ender after `start` that the assistant's header does not follow, before
    # `stop` (where the next reply starts; None for the last message). A reply with messages after
    # it and no ender before the next reply cannot be told apart from them.
    end = start
    while True:
        ends = [at + len(s) for s in enders for at in [text.find(s, end)] if at >= 0]
        if not ends:
            if end > start:
                return end
            if stop is None:
                return len(text)
            raise ValueError(f"reply {reply}: no token the template ends a reply with follows it before the next "
                             "messages: the reply cannot be told apart from them")
        end = min(ends)
        if stop is not None and end > stop:
            raise ValueError(f"reply {reply}: the first token the template ends a reply with comes after the next "
                             "reply's start: the reply cannot be told apart")
        if not header or not text.startswith(header, end) or (stop is not None and end + len(header) >= stop):
            return end

with open(sys.argv[1], encoding="utf-8") as f:
    job = json.load(f)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, Generation])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now
index, out = -1, []
try:
    template = env.from_string(job["template"])
    render = lambda messages, prompt, tools: template.render(messages=messages, add_generation_prompt=prompt,
                                                             tools=tools, documents=None, **job["context"])
    enders = reply_enders(render, job["specials"])
    enders += [s for s in call_enders(render, job["specials"], enders) if s not in enders]
    header = assistant_header(render)
    read_arguments = reads_text_arguments(render)
    for index, example in enumerate(job["examples"]):
        messages, tools = example["messages"], example["tools"]
        if read_arguments:
            messages = with_argument_objects(messages)
        if job.get("generation_prompt"):
            out.append({"text": marked_spans(render(messages, True, tools))[0], "counted": []})
            continue
        text, spans = marked_spans(render(messages, False, tools))
        if not spans:
            starts = []  # (the reply's index, where it starts)
            for i, message in enumerate(messages):
                if message["role"] != "assistant":
                    continue
                prefix, _ = marked_spans(render(messages[:i], True, tools))
                if not text.startswith(prefix):
                    raise ValueError(f"reply {i}: the conversation before it, rendered with the generation prompt, "
                                     "is not how the whole conversation's rendering begins (the template renders "
                                     "earlier turns differently once later ones follow): the reply cannot be told "
                                     "apart (gpt-oss's, for one, drops a call's thinking once a final answer follows: "
                                     "leave that thinking out, end the example at the call, or give the folder a "
                                     "template whose replies sit in {% generation %} blocks, as TRL's training "
                                     "copies of the templates have)")
                starts.append((i, len(prefix)))
            for n, (i, start) in enumerate(starts):
                # The next reply's start bounds this one; after the last reply, the end of the text
                # where no message follows it, else the end of the text with an ender required.
                stop = starts[n + 1][1] if n + 1 < len(starts) else (None if i + 1 == len(messages) else len(text))
                end = reply_end(text, start, stop, enders, header, i)
                spans.append([len(text[:start].encode("utf-8")), len(text[:end].encode("utf-8"))])
        out.append({"text": text, "counted": spans})
except Exception as e:
    json.dump({"error": f"{type(e).__name__}: {e}", "example": index}, sys.stdout)
    sys.exit(3)
json.dump({"renderings": out}, sys.stdout, ensure_ascii=False)
)PY";

// A special token's content in tokenizer_config.json: a string, or {"content": ...}.
std::optional<std::string> tokenContent(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value.at("content").is_string())
    return value.at("content").get<std::string>();
  return std::nullopt;
}

// `job` written to a fresh temporary file (O_EXCL: no file or link of that name followed).
class TempJobFile {
 public:
  explicit TempJobFile(const std::string& bytes) {
    const char* tmp = std::getenv("TMPDIR");
    path_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/mttok-chat-XXXXXX";
    const int fd = mkstemp(path_.data());
    if (fd < 0) throw Error("cannot create a temporary file for the chat template's renderer: " + std::string(std::strerror(errno)));
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) {
        ::close(fd);
        ::unlink(path_.c_str());
        throw Error("cannot write " + path_ + ": " + std::strerror(errno));
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  ~TempJobFile() { ::unlink(path_.c_str()); }
  TempJobFile(const TempJobFile&) = delete;
  TempJobFile& operator=(const TempJobFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs Python's renderer on `job_path`; its exit code and standard output (at most `limit` bytes).
std::pair<int, std::string> runRenderer(const std::string& job_path, size_t limit) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw Error(std::string("cannot start the chat template's renderer: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // Debian's Python, which python3-jinja2 installs into; -I: no PYTHONPATH or user site-packages.
  const std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<std::string> args = {python, "-I", "-c", kRenderer, job_path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    throw Error("cannot run " + python + " to render the chat template (" + std::strerror(spawned) +
                "): install Python 3 with Jinja2 (tools/setup.sh: python3-jinja2), or name a built-in template "
                "with --template");
  }
  std::string output;
  char buffer[65536];
  bool too_long = false;
  for (;;) {
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (output.size() + static_cast<size_t>(n) > limit) {
      too_long = true;
      ::kill(pid, SIGKILL);
      break;
    }
    output.append(buffer, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (too_long)
    throw Error("the chat template rendered more than " + std::to_string(limit >> 20) + " MiB for these examples: a "
                "template that multiplies text is not rendered");
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

// The parts of one rendering: the counted byte ranges (ascending, apart) and the text between.
std::vector<ChatPart> partsOf(const std::string& text, const json& counted, const std::string& where) {
  std::vector<ChatPart> parts;
  size_t at = 0;
  for (const json& range : counted) {
    const size_t start = range.at(0).get<size_t>(), end = range.at(1).get<size_t>();
    if (start < at || end < start || end > text.size())
      throw Error(where + ": the chat template's replies overlap: it cannot be masked");
    if (start > at) parts.push_back({text.substr(at, start - at), false});
    if (end > start) parts.push_back({text.substr(start, end - start), true});
    at = end;
  }
  if (at < text.size()) parts.push_back({text.substr(at), false});
  return parts;
}

}  // namespace

std::optional<FolderChatTemplate> folderChatTemplate(const std::string& tokenizer_json) {
  const fs::path folder = fs::path(tokenizer_json).parent_path();
  std::error_code ec;
  const fs::path jinja = folder / "chat_template.jinja", config_path = folder / "tokenizer_config.json";
  FolderChatTemplate found;
  json config = json::object();
  if (fs::is_regular_file(config_path, ec)) {
    const std::string text = readWholeFile(config_path.string(), "tokenizer_config.json", "");
    config = parseJsonInput(text, "tokenizer_config.json " + config_path.string());
    if (!config.is_object()) throw Error("tokenizer_config.json " + config_path.string() + " is not a JSON object");
  }
  if (fs::is_regular_file(jinja, ec)) {
    found.text = readWholeFile(jinja.string(), "chat template", "");
    found.source = jinja.string();
  } else if (config.contains("chat_template")) {
    const json& t = config.at("chat_template");
    if (t.is_string()) {
      found.text = t.get<std::string>();
    } else if (t.is_array()) {
      for (const json& named : t)
        if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
            named.at("template").is_string())
          found.text = named.at("template").get<std::string>();
      if (found.text.empty())
        throw Error("tokenizer_config.json " + config_path.string() +
                    ": \"chat_template\" is a list without one named \"default\": name a built-in template with "
                    "--template");
    } else if (!t.is_null()) {
      throw Error("tokenizer_config.json " + config_path.string() + ": \"chat_template\" is " + jsonBrief(t) +
                  ", neither a string nor a list of named templates");
    }
    found.source = config_path.string() + " (chat_template)";
  }
  if (found.text.empty()) return std::nullopt;
  if (found.text.size() > kMaxTemplateBytes)
    throw Error(found.source + ": a chat template of " + std::to_string(found.text.size()) + " bytes; at most " +
                std::to_string(kMaxTemplateBytes >> 20) + " MiB is rendered");
  json context = json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"})
    if (config.contains(key))
      if (const auto content = tokenContent(config.at(key))) context[key] = *content;
  found.context_json = context.dump();
  return found;
}

namespace {

// The renderer's answer for `examples`: {"renderings": [{"text", "counted"}]}. Throws mt::Error
// naming the example the template failed on.
json runJob(const FolderChatTemplate& chat_template, const HfTokenizer& tokenizer,
            const std::vector<ChatExample>& examples, const std::vector<std::string>& where,
            bool generation_prompt) {
  std::vector<std::string> specials;
  for (uint32_t id = 0; id < tokenizer.vocabSize(); ++id)
    if (tokenizer.isSpecial(id)) specials.push_back(tokenizer.bytesOf(id));
  // Ordered: the tools' and calls' keys reach the template in the data's order.
  ordered_json job = {{"template", chat_template.text},
                      {"context", ordered_json::parse(chat_template.context_json)},
                      {"specials", specials},
                      {"generation_prompt", generation_prompt}};
  ordered_json& list = job["examples"] = ordered_json::array();
  for (const ChatExample& example : examples) {
    ordered_json turns = ordered_json::array();
    for (const ChatMessage& m : example.messages) {
      turns.push_back({{"role", m.role}, {"content", m.content}});
      if (m.reasoning) turns.back()[reasoningFieldName(m.reasoning_field)] = *m.reasoning;
      if (!m.tool_fields.empty()) turns.back().update(ordered_json::parse(m.tool_fields));
    }
    list.push_back({{"messages", std::move(turns)},
                    {"tools", example.tools.empty() ? ordered_json() : ordered_json::parse(example.tools)}});
  }
  const std::string bytes = job.dump(-1, ' ', false, json::error_handler_t::replace);
  const TempJobFile file(bytes);
  const auto [code, output] = runRenderer(file.path(), bytes.size() * kOutputPerInputByte + (size_t{16} << 20));
  if (code == 4)
    throw Error("rendering " + chat_template.source + " needs Python's Jinja2, the engine transformers renders "
                "chat templates with: install python3-jinja2 (tools/setup.sh does), or name a built-in template "
                "with --template");
  json result;
  try {
    result = json::parse(output);
  } catch (const json::exception&) {
    throw Error("the chat template's renderer (Python) failed (exit " + std::to_string(code) + ") on " +
                chat_template.source);
  }
  if (code != 0 || !result.contains("renderings")) {
    const int64_t index = result.value("example", int64_t{-1});
    const std::string at = index >= 0 && index < static_cast<int64_t>(where.size()) ? where[index] + ": " : "";
    throw Error(at + "the chat template " + chat_template.source + " failed: " + result.value("error", "(no message)"));
  }
  if (!result.at("renderings").is_array() || result.at("renderings").size() != examples.size())
    throw Error("the chat template's renderer returned another number of renderings than examples");
  return result;
}

}  // namespace

std::vector<std::vector<ChatPart>> renderWithJinja(const FolderChatTemplate& chat_template, const HfTokenizer& tokenizer,
                                                   const std::vector<ChatExample>& examples,
                                                   const std::vector<std::string>& where) {
  const json result = runJob(chat_template, tokenizer, examples, where, /*generation_prompt=*/false);
  std::vector<std::vector<ChatPart>> rendered;
  const json& renderings = result.at("renderings");
  for (size_t i = 0; i < renderings.size() && i < examples.size(); ++i)
    rendered.push_back(partsOf(renderings[i].at("text").get<std::string>(), renderings[i].at("counted"), where[i]));
  return rendered;
}

ChosenChatTemplate chooseChatTemplate(const HfTokenizer& tokenizer, std::optional<ChatTemplate> requested) {
  ChosenChatTemplate chosen;
  if (!requested) chosen.own = folderChatTemplate(tokenizer.path());
  if (chosen.own) {
    chosen.description = chosen.own->source + ", rendered by Jinja2 as transformers renders it";
    return chosen;
  }
  chosen.builtin = requested ? *requested : templateFor(tokenizer);
  chosen.description = std::string("the built-in ") + chatTemplateName(chosen.builtin) +
                       (requested ? " (--template)" : " (the folder has none; the tokenizer's special tokens imply it)");
  return chosen;
}

std::string renderGenerationPrompt(const FolderChatTemplate& chat_template, const HfTokenizer& tokenizer,
                                   const ChatExample& conversation) {
  const json result = runJob(chat_template, tokenizer, {conversation}, {"the conversation"}, /*generation_prompt=*/true);
  return result.at("renderings").at(0).at("text").get<std::string>();
}

}  // namespace mt
