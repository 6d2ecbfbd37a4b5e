#!/usr/bin/env bash
# mtrun --val-data FILE validates on a token file of its own: a run training on the first 3/4 of
# a byte corpus and validating on a file of its last 1/4 is, bit for bit, the run with the whole
# corpus and --val-fraction 0.25 (the same training windows, the same held-out windows): the same
# losses, validation losses and weights. The header names the file; both flags at once are refused.
# usage: val_data.sh BIN_DIR WORK_DIR
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
source "$here/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
for i in $(seq 1 400); do echo "$i: how vexingly quick daft zebras jump $((i % 17))"; done | head -c 8000 > whole.txt
head -c 6000 whole.txt > head.txt
tail -c 2000 whole.txt > tail.txt
for part in whole head tail; do "$bin/mttok" --bytes $part.txt -o $part.tok >/dev/null; done
"$bin/mtc" gpt2-tiny --batch 2 --seq 32 -o m.plan >/dev/null
common=(--steps 6 --val-every 3 --val-batches 3 --print-every 100)
"$bin/mtrun" m.plan --data whole.tok --val-fraction 0.25 "${common[@]}" --log fraction.jsonl \
  --export fraction.safetensors > fraction.txt
"$bin/mtrun" m.plan --data head.tok --val-data tail.tok "${common[@]}" --log file.jsonl \
  --export file.safetensors > file.txt
check "both runs validate twice" "[ \$(grep -c val_loss fraction.jsonl) -eq 2 ] && [ \$(grep -c val_loss file.jsonl) -eq 2 ]"
# The logs without the timings.
untimed() { sed 's/,"step_ms":[^,}]*//; s/,"tokens_per_s":[^,}]*//' "$1"; }
check "the same losses and validation losses, bit for bit" "diff <(untimed fraction.jsonl) <(untimed file.jsonl) >/dev/null"
check "the same weights, bit for bit" "same_tensors fraction.safetensors file.safetensors"
check "the header names the validation file" "grep -q 'data 6000 tokens, validation 2000 tokens (tail.tok)' file.txt"
check "and the share held out of --data" "grep -q 'data 8000 tokens (the last 2000 held out for validation)' fraction.txt"
finish
