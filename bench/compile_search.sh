#!/usr/bin/env bash
# Compile time and memory at scale (issue 17): the 121B preset for one H200 with 1.5 TiB of
# host memory, --batch auto searching the batch that fits both budgets, must take under 10 s and
# 2 GiB; the one plan it chose, compiled alone, under 1 s; 7B at 512k for one GH200, its token
# tiles searched, under 60 s and 2 GiB. Measured with /usr/bin/time; prints a table (measured,
# target, ratio) and exits 1 if a target is missed.
# usage: bash bench/compile_search.sh   (run tools/build.sh first; MT_BIN: another build's bin)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${MT_BIN:-build/bin}
work=build/bench
mkdir -p "$work"
common=(llama-120b --no-weights --hw h200 --device-mem 139GiB --host-mem 1.5TiB --seq 1024)
measure() {  # measure NAME ARGS...: "seconds kib" of one mtc run
  local name=$1
  shift
  /usr/bin/time -f "%e %M" -o "$work/$name.time" "$bin/mtc" "$@" > "$work/$name.txt"
  cat "$work/$name.time"
}
read -r search_s search_kib < <(measure search "${common[@]}" --batch auto -o "$work/search.plan")
batch=$(sed -n 's/^  batch \([0-9]*\) x seq.*/\1/p' "$work/search.txt")
read -r one_s one_kib < <(measure one "${common[@]}" --batch "$batch" -o "$work/one.plan")
nproc=$(nproc)
printf '%-44s %10s %10s %7s\n' "llama-120b, H200 139 GiB + 1.5 TiB host ($nproc cores)" measured target ratio
failed=0
row() {  # row LABEL VALUE TARGET UNIT
  local ratio
  ratio=$(awk -v v="$2" -v t="$3" 'BEGIN { printf "%.2f", v / t }')
  printf '%-44s %8s %s %8s %s %7s\n' "$1" "$2" "$4" "$3" "$4" "$ratio"
  awk -v v="$2" -v t="$3" 'BEGIN { exit !(v < t) }' || failed=1
}
row "--batch auto search (chose batch $batch): time" "$search_s" 10 s
row "--batch auto search: peak memory" "$(awk -v k="$search_kib" 'BEGIN { printf "%.2f", k / 1048576 }')" 2 GiB
row "one plan (batch $batch): time" "$one_s" 1 s
# Long contexts: 7B at 512k for one GH200, the token tiles searched for the budget (the target
# ours: the tile search compiles each tile count's plans, up to ~130k ops a plan).
read -r tiles_s tiles_kib < <(measure tiles llama-7b --no-weights --hw gh200 --device-mem 90GiB --host-mem 480GB \
  --context 524288 --seq 524288 --batch 1 -o "$work/tiles.plan")
tiles=$(sed -n 's/.* in \([0-9]*\) tiles of .*/\1/p' "$work/tiles.txt")
row "llama-7b 512k, GH200: tile search ($tiles tiles): time" "$tiles_s" 60 s
row "llama-7b 512k, GH200: tile search: peak memory" "$(awk -v k="$tiles_kib" 'BEGIN { printf "%.2f", k / 1048576 }')" 2 GiB
exit $failed
