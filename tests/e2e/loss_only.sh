#!/usr/bin/env bash
# Validation runs only what the loss needs (plan 1.9 loss prefixes): for every kind of plan —
# resident, streamed, streamed with recompute, on-arrival, host embedding, vocabulary split,
# offloaded activations, bf16, LoRA (its frozen base kept on the device; copied every step, some
# of its copies kept all the same, past the loss prefixes) — the loss-only run gives the whole
# step's loss bit for bit while running fewer instructions, and whole runs after a validation that
# skip the copies the device keeps give the loss and gradients of runs that copy everything;
# mtrun's validation uses it.
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
  "llama-tiny --batch 2 --seq 16 --lora 4 --schedule streamed-recompute"
  "llama-tiny --batch 2 --seq 16 --lora 4 --schedule streamed --keep-frozen off"
)
failed=0
for i in "${!configs[@]}"; do
  echo "== ${configs[$i]}"
  "$bin/mtc" ${configs[$i]} -o "p$i.plan" > /dev/null
  "$check" "p$i.plan" "p$i.safetensors" || failed=$((failed + 1))
done
# mtrun's validation goes through it: the held-out loss is printed and logged.
"$bin/mttok" --bytes /usr/share/games/fortunes/fortunes -o data.tok > /dev/null
"$bin/mtrun" p1.plan --data data.tok --steps 4 --val-fraction 0.1 --val-every 2 --val-batches 2 --log log1.jsonl \
  --print-every 2 --checkpoint-dir ck1 | grep "validation loss" || failed=$((failed + 1))
[ "$(grep -c val_loss log1.jsonl)" -eq 2 ] || { echo "expected two validations in the log"; failed=$((failed + 1)); }
# --eval-only scores the last checkpoint as the run's last validation scored the same weights: the
# same line, bit for bit, the folder untouched, and its host holding no optimizer state (4 bytes a
# parameter: the bf16 plan's master is its bf16 copy and residual): the streamed fp32 plan and the bf16 one.
"$bin/mtrun" p7.plan --data data.tok --steps 2 --val-fraction 0.1 --val-batches 2 --log log7.jsonl \
  --checkpoint-dir ck7 > /dev/null || failed=$((failed + 1))
for i in 1 7; do
  before=$(ls -lA --time-style=full-iso "ck$i")
  "$bin/mtrun" "p$i.plan" --data data.tok --val-fraction 0.1 --val-batches 2 --resume "ck$i" --eval-only \
    --log "eval$i.jsonl" > "eval$i.out" || failed=$((failed + 1))
  grep "evaluation loss" "eval$i.out" || { echo "p$i: --eval-only printed no evaluation"; failed=$((failed + 1)); }
  [ "$(grep val_loss "log$i.jsonl" | tail -1)" = "$(cat "eval$i.jsonl")" ] ||
    { echo "p$i: --eval-only logged $(cat "eval$i.jsonl"), the run's last validation $(grep val_loss "log$i.jsonl" |
      tail -1)"; failed=$((failed + 1)); }
  [ "$(ls -lA --time-style=full-iso "ck$i")" = "$before" ] || { echo "p$i: --eval-only changed ck$i"; failed=$((failed + 1)); }
done
for i in 1 7; do
  grep -q "host .* (4.0 bytes/param)" "eval$i.out" || { echo "p$i: $(grep host "eval$i.out")"; failed=$((failed + 1)); }
done
echo "$failed failed"
[ "$failed" -eq 0 ]
