#!/usr/bin/env bash
# The model written in the mt dialect (models/tiny_mlp.mlir) compiles, trains, and learns.
# usage: sample_trains.sh BIN_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
bin=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
for i in $(seq 1 300); do echo "abcabcabd $((i % 10)) the cat sat on the mat"; done > corpus.txt
"$bin/mttok" --bytes corpus.txt -o corpus.tok
"$bin/mtc" "$src/models/tiny_mlp.mlir" -o tiny.plan
"$bin/mtrun" tiny.plan --data corpus.tok --steps 60 --lr 1e-2 --log log.jsonl --print-every 20
first=$(head -1 log.jsonl | sed 's/.*"loss":\([0-9.]*\).*/\1/')
last=$(tail -1 log.jsonl | sed 's/.*"loss":\([0-9.]*\).*/\1/')
echo "loss $first -> $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a * 0.6) }' || { echo "0 passed, 1 failed: loss did not fall"; exit 1; }
echo "1 passed, 0 failed"
