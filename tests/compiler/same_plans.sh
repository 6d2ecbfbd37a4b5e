#!/usr/bin/env bash
# A refactor of the compiler changes no plan: two mtc binaries compile the same configurations
# (built-in presets of both families, every schedule and update, bf16 plans and staging, the host
# embedding, vocabulary chunks, token tiles, the activation offload, forward-only and decode
# plans, the --batch auto search, a model in the mt dialect) and their plans, initial weights and
# summaries (less the compile time) must be byte-identical. Not in ctest (it needs the old
# binary): run it by hand around a change, e.g. with a worktree of the commit before.
# usage: tests/compiler/same_plans.sh OLD_MTC NEW_MTC [WORK_DIR]
set -uo pipefail
old=$1 new=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${3:-$(mktemp -d)}
mkdir -p "$work"
configs=(
  "gpt2-tiny --batch 2 --seq 16"
  "llama-tiny --batch 2 --seq 32 --schedule streamed --update on-arrival"
  "qwen-tiny --batch 4 --seq 64 --device-mem 1400KiB"
  "qwen-tiny --batch 4 --seq 64 --device-mem 300KiB"
  "gpt2-demo --batch 4 --seq 64 --precision bf16"
  "llama-tiny --batch 2 --seq 32 --stream-dtype bf16 --embedding host --schedule streamed"
  "llama-tiny --batch 2 --seq 32 --vocab-chunks 4 --offload-activations on --schedule streamed"
  "llama-tiny --batch 2 --seq 64 --token-tiles 2"
  "gpt2-tiny --forward-only --kv-cache --batch 1 --seq 32"
  "llama-7b --no-weights --hw h100-pcie5 --batch 1 --seq 1024 --device-mem 20GiB"
  "qwen2.5-7b --no-weights --hw h100-pcie5 --precision bf16 --batch auto --seq 1024 --device-mem 76GiB --host-mem 480GB"
  "$root/models/tiny_mlp.mlir"
)
same=0 differ=0
for i in "${!configs[@]}"; do
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    # shellcheck disable=SC2086
    "$bin" ${configs[$i]} -o "$work/$side.$i.plan" 2>&1 | sed 's/compiled in [0-9.]* s/compiled in ? s/' \
      | sed "s|$work/$side|$work/SIDE|g" > "$work/$side.$i.txt"
  done
  files_same=1
  for ext in plan safetensors txt; do
    a="$work/old.$i.$ext" b="$work/new.$i.$ext"
    [ -e "$a" ] || [ -e "$b" ] || continue
    cmp -s "$a" "$b" || files_same=0
  done
  if [ $files_same = 1 ]; then
    same=$((same + 1)); echo "same:   ${configs[$i]}"
  else
    differ=$((differ + 1)); echo "DIFFER: ${configs[$i]}"; diff "$work/old.$i.txt" "$work/new.$i.txt" | head -5
  fi
done
echo "$same configurations byte-identical (plan, weights, summary), $differ differ"
[ $differ -eq 0 ]
