#!/usr/bin/env bash
# Compiling the largest presets takes seconds and little memory: no weights are materialised.
# usage: compile_scale.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
mkdir -p "$work"
for model in llama-70b llama-120b; do
  /usr/bin/time -f "$model: %e s, %M KiB peak" "$bin/mtc" "$model" --batch 1 --seq 4096 --no-weights \
    --hw h100-pcie5 -o "$work/$model.plan" > "$work/$model.txt" 2> "$work/$model.time"
  cat "$work/$model.time"
  read -r seconds kib < <(awk '{print $2, $4}' "$work/$model.time")
  awk -v s="$seconds" -v k="$kib" 'BEGIN { exit !(s < 10 && k < 2 * 1024 * 1024) }' ||
    { echo "0 passed, 1 failed: $model took $seconds s / $kib KiB"; exit 1; }
done
echo "2 passed, 0 failed"
