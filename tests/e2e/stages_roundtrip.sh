#!/usr/bin/env bash
# Every stage mtc can print (--emit) parses back and verifies (mt-opt), for both families and
# both the resident and the streamed-recompute schedule.
# usage: stages_roundtrip.sh BIN_DIR
set -euo pipefail
bin=$1
count=0
for model in gpt2-tiny llama-tiny; do
  for stage in input fuse attach-loss autodiff partition recompute schedule memory; do
    for schedule in resident streamed-recompute; do
      "$bin/mtc" "$model" --batch 2 --seq 8 --schedule "$schedule" --emit="$stage" | "$bin/mt-opt" --verify-each >/dev/null
      count=$((count + 1))
    done
  done
done
echo "$count passed, 0 failed"
