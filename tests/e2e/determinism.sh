#!/usr/bin/env bash
# The same plan, weights, data and seed give bit-identical losses and trained weights, run after
# run (the ground invariant 1 of DESIGN.md stands on: streaming may move bytes, never numbers).
# usage: determinism.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
for i in $(seq 1 400); do echo "line $i: pack my box with five dozen liquor jugs $((i * 7 % 11))"; done > corpus.txt
"$bin/mttok" --bytes corpus.txt -o corpus.tok >/dev/null
"$bin/mtc" llama-tiny --batch 4 --seq 64 -o m.plan >/dev/null
for run in 1 2; do
  "$bin/mtrun" m.plan --data corpus.tok --weights m.safetensors --steps 12 --log "run$run.jsonl" \
    --export "run$run.safetensors" --print-every 100 >/dev/null
  sed 's/.*"loss":\([^,]*\),.*/\1/' "run$run.jsonl" > "loss$run.txt"
done
cmp loss1.txt loss2.txt || { echo "0 passed, 1 failed: losses differ between runs"; exit 1; }
cmp run1.safetensors run2.safetensors || { echo "0 passed, 1 failed: trained weights differ"; exit 1; }
echo "losses: $(paste -sd' ' loss1.txt)"
# Validation passes (no update) leave training untouched.
for every in 0 3; do
  "$bin/mtrun" m.plan --data corpus.tok --weights m.safetensors --steps 9 --val-fraction 0.2 --val-every $every \
    --log "val$every.jsonl" --print-every 100 >/dev/null
  grep -v val_loss "val$every.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/' > "valloss$every.txt"
done
cmp valloss0.txt valloss3.txt || { echo "0 passed, 1 failed: validation changed the training losses"; exit 1; }
[ "$(grep -c val_loss val3.jsonl)" -eq 3 ] || { echo "0 passed, 1 failed: expected 3 validation losses"; exit 1; }
echo "2 passed, 0 failed"
