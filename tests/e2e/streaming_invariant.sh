#!/usr/bin/env bash
# DESIGN.md invariant 1: streaming changes where bytes live, never the numbers. For GPT-2 and
# Llama, plans compiled all-resident, streamed, streamed with every block recomputed, and
# streamed-recompute under a tiny device budget (5 MiB, less than the parameters alone; the
# last blocks keep their activations there) give bit-identical losses and weights after
# 10 steps on the CPU backend; so does the on-arrival update against the resident plan, both
# without clipping. And a model
# whose parameters + optimizer state exceed 10x the device budget trains with its loss falling.
# usage: streaming_invariant.sh BIN_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$(readlink -f "$0")")/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
for i in $(seq 1 600); do echo "$i: how vexingly quick daft zebras jump $((i % 17))"; done > corpus.txt
"$bin/mttok" --bytes corpus.txt -o corpus.tok >/dev/null

arena() { sed -n 's/.*device arena *\([0-9.]* [KMG]iB\).*/\1/p' "$1"; }
shape=(--layers 12 --width 128 --ffn 512 --batch 4 --seq 32)
for model in gpt2-tiny llama-tiny; do
  "$bin/mtc" $model "${shape[@]}" --schedule resident -o $model.resident.plan > $model.resident.txt
  "$bin/mtc" $model "${shape[@]}" --schedule streamed -o $model.streamed.plan --weights s.safetensors > $model.streamed.txt
  "$bin/mtc" $model "${shape[@]}" --schedule streamed-recompute -o $model.recompute.plan --no-weights > $model.recompute.txt
  # A budget far below the parameters: mtc must pick streamed-recompute, and recompute only
  # what the budget needs (the last blocks keep their activations).
  "$bin/mtc" $model "${shape[@]}" --device-mem 5MiB -o $model.tight.plan --weights t.safetensors > $model.tight.txt
  check "$model: a 5 MiB budget picks streamed-recompute" "grep -q 'schedule streamed-recompute' $model.tight.txt"
  check "$model: without a budget every block is recomputed" "grep -q \"each block's forward runs twice\" $model.recompute.txt"
  check "$model: with 5 MiB some blocks keep their activations" "grep -q 'the budget has room' $model.tight.txt"
  params=$(sed -n 's/.*parameters *\([0-9.]*\) M.*/\1/p' $model.tight.txt)
  check "$model: parameters alone ($params M) exceed the 5 MiB budget" \
    "awk -v p=$params 'BEGIN { exit !(p * 1e6 * 4 > 5 * 1048576) }'"
  for plan in resident streamed recompute tight; do
    "$bin/mtrun" $model.$plan.plan --data corpus.tok --weights $model.resident.safetensors --steps 10 \
      --log $model.$plan.jsonl --export $model.$plan.out.safetensors --print-every 100 >/dev/null
    sed 's/.*"loss":\([^,]*\),.*/\1/' $model.$plan.jsonl > $model.$plan.loss
  done
  for plan in streamed recompute tight; do
    check "$model $plan: bit-identical losses" "cmp -s $model.resident.loss $model.$plan.loss"
    check "$model $plan: bit-identical weights" "same_tensors $model.resident.out.safetensors $model.$plan.out.safetensors"
  done
  echo "$model arenas: resident $(arena $model.resident.txt), streamed $(arena $model.streamed.txt), tight $(arena $model.tight.txt)"
  # The on-arrival update (each parameter updated as its gradient lands; no global clipping, so
  # both run with --grad-clip 0) under the tiny budget, against the resident plan.
  "$bin/mtc" $model "${shape[@]}" --device-mem 5MiB --update on-arrival -o $model.arrival.plan --no-weights > $model.arrival.txt
  check "$model: the on-arrival plan lands gradients in a buffer, not per parameter" \
    "grep -q 'gradient landing buffer' $model.arrival.txt"
  for plan in resident arrival; do
    "$bin/mtrun" $model.$plan.plan --data corpus.tok --weights $model.resident.safetensors --steps 10 --grad-clip 0 \
      --log $model.$plan.noclip.jsonl --export $model.$plan.noclip.safetensors --print-every 100 >/dev/null
    sed 's/.*"loss":\([^,]*\),.*/\1/' $model.$plan.noclip.jsonl > $model.$plan.noclip.loss
  done
  check "$model on-arrival: bit-identical losses" "cmp -s $model.resident.noclip.loss $model.arrival.noclip.loss"
  check "$model on-arrival: bit-identical weights" \
    "same_tensors $model.resident.noclip.safetensors $model.arrival.noclip.safetensors"
done

# Parameters + AdamW state (16 bytes/param) more than 10x the device budget, and it learns.
"$bin/mtc" llama-tiny --layers 8 --width 128 --ffn 512 --batch 2 --seq 32 --device-mem 3MiB -o big.plan > big.txt
params=$(sed -n 's/.*parameters *\([0-9.]*\) M.*/\1/p' big.txt)
check "state exceeds 10x the 3 MiB budget ($params M params)" \
  "awk -v p=$params 'BEGIN { exit !(p * 1e6 * 16 > 10 * 3 * 1048576) }'"
"$bin/mtrun" big.plan --data corpus.tok --steps 40 --lr 3e-3 --log big.jsonl --print-every 100 >/dev/null
first=$(head -1 big.jsonl | sed 's/.*"loss":\([^,]*\),.*/\1/')
last=$(tail -1 big.jsonl | sed 's/.*"loss":\([^,]*\),.*/\1/')
echo "tiny-budget model: $(sed -n 's/.*device arena *\([^,]*\),.*/\1/p' big.txt) arena, loss $first -> $last"
check "tiny-budget model learns" "awk -v a=$first -v b=$last 'BEGIN { exit !(b < 0.7 * a) }'"

# --batch auto: the best predicted throughput among the largest batch that fits (one more does
# not) and eighths of it; the chosen batch predicts at least the largest's tokens/s.
"$bin/mtc" llama-tiny --batch auto --seq 32 --device-mem 2MiB --no-weights -o auto.plan > auto.txt
batch=$(sed -n 's/.*batch \([0-9]*\) x seq.*/\1/p' auto.txt)
largest=$(sed -n 's/.*the largest that fits [-a-z ]*, \([0-9]*\),.*/\1/p' auto.txt)
largest=${largest:-$batch}
check "--batch auto chose a batch ($batch of at most $largest) and says why" \
  "[ -n '$batch' ] && grep -q 'best predicted throughput' auto.txt"
# (--batch auto searches untiled plans: token tiles are for what no batch fits untiled.)
check "batch $((largest + 1)) does not fit 2 MiB untiled" \
  "! '$bin/mtc' llama-tiny --batch $((largest + 1)) --seq 32 --device-mem 2MiB --token-tiles 1 --no-weights -o more.plan >/dev/null 2>&1"
tokens_per_s() {  # predicted tokens/s of llama-tiny at batch $1 under 2 MiB
  "$bin/mtc" llama-tiny --batch "$1" --seq 32 --device-mem 2MiB --no-weights -o b$1.plan |
    sed -n 's/.*predicted step \([0-9.]*\) ms.*/\1/p' | awk -v b="$1" '{ printf "%.0f", b * 32 / ($1 / 1000) }'
}
chosen_rate=$(tokens_per_s "$batch") largest_rate=$(tokens_per_s "$largest")
check "batch $batch predicts at least batch $largest's throughput ($chosen_rate >= $largest_rate tokens/s)" \
  "[ '$chosen_rate' -ge '$largest_rate' ]"

finish
