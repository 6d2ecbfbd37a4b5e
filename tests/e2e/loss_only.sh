#!/usr/bin/env bash
# Validation runs only what the loss needs (plan 1.9 loss prefixes): for every kind of plan —
# resident, streamed, streamed with recompute, on-arrival, host embedding, vocabulary split,
# offloaded activations, bf16 — the loss-only run gives the whole step's loss bit for bit while
# running fewer instructions; mtrun's validation uses it.
# usage: loss_only.sh BIN_DIR CHECK WORK_DIR
set -euo pipefail
bin=$1 check=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
configs=(
  "gpt2-tiny --batch 2 --seq 16"
  "llama-tiny --batch 2 --seq 16 --schedule streamed"
  "llama-tiny --batch 2 --seq 16 --schedule streamed-recompute"
  "llama-tiny --batch 2 --seq 16 --schedule streamed --update on-arrival"
  "gpt2-tiny --batch 2 --seq 16 --embedding host --schedule streamed"
  "gpt2-tiny --batch 4 --seq 32 --vocab-chunks 3"
  "llama-tiny --batch 2 --seq 64 --schedule streamed-recompute --offload-activations on"
  "llama-tiny --batch 2 --seq 16 --precision bf16 --schedule streamed"
)
failed=0
for i in "${!configs[@]}"; do
  echo "== ${configs[$i]}"
  "$bin/mtc" ${configs[$i]} -o "p$i.plan" > /dev/null
  "$check" "p$i.plan" "p$i.safetensors" || failed=$((failed + 1))
done
# mtrun's validation goes through it: the held-out loss is printed and logged. --eval-only scores
# the last checkpoint as the run's last validation scored the same weights: the same line, bit for bit.
"$bin/mttok" --bytes /usr/share/games/fortunes/fortunes -o data.tok > /dev/null
"$bin/mtrun" p1.plan --data data.tok --steps 4 --val-fraction 0.1 --val-every 2 --val-batches 2 --log log.jsonl \
  --print-every 2 --checkpoint-dir ck | grep "validation loss" || failed=$((failed + 1))
before=$(ls -lA --time-style=full-iso ck)
"$bin/mtrun" p1.plan --data data.tok --val-fraction 0.1 --val-batches 2 --resume ck --eval-only --log eval.jsonl \
  > eval.out || failed=$((failed + 1))
grep "evaluation loss" eval.out || { echo "--eval-only printed no evaluation"; failed=$((failed + 1)); }
[ "$(grep val_loss log.jsonl | tail -1)" = "$(cat eval.jsonl)" ] ||
  { echo "--eval-only logged $(cat eval.jsonl), the run's last validation $(grep val_loss log.jsonl | tail -1)"; failed=$((failed + 1)); }
[ "$(ls -lA --time-style=full-iso ck)" = "$before" ] || { echo "--eval-only changed ck"; failed=$((failed + 1)); }
[ "$(grep -c val_loss log.jsonl)" -eq 2 ] || { echo "expected two validations in the log"; failed=$((failed + 1)); }
echo "$failed failed"
[ "$failed" -eq 0 ]
