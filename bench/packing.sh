#!/usr/bin/env bash
# Packed examples against one example per row: the replies' tokens trained per second (the loss's
# counted targets, the work a fine-tuning run is for) and the time of a pass over the examples,
# mtrun --rows packed-examples (a plan of mtc --packed-examples) beside --rows examples, same model
# (llama-bench: 6 layers, width 384, context 512), batch 8 x seq 512, same instruction-shaped data: 3000
# examples of 24 to 511 tokens, most short (median ~100), the second half of each counted. The
# prediction: a pass takes as many steps as its rows over the batch, so packing divides the pass's
# time by (rows of one per row) / (rows packed), if a packed step costs what a padded one does.
# usage: bash bench/packing.sh [STEPS]   (run tools/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-6}
bin=build/bin
work=build/bench/packing
mkdir -p "$work"
/usr/bin/python3 -c "import sys; sys.path.insert(0, 'tests/e2e'); import mt_reference as ref
print(ref.write_lognormal_examples('$work/sft.tok', 3000, 100, 24, 511))"
$bin/mtc llama-bench --context 512 --batch 8 --seq 512 -o $work/rows.plan > /dev/null
$bin/mtc llama-bench --context 512 --batch 8 --seq 512 --packed-examples -o $work/packed.plan --no-weights > /dev/null

# run NAME PLAN ROWS: the steady state (every step but the first) of STEPS steps: counted targets
# per second, seconds per step; and the rows a pass takes.
declare -A counted_s step_s pass_rows
run() {
  $bin/mtrun "$2" --data $work/sft.tok --weights $work/rows.safetensors --rows "$3" --steps "$steps" \
    --log $work/$1.jsonl --print-every 1000 > $work/$1.txt
  read -r counted_s[$1] step_s[$1] < <(tail -n +2 $work/$1.jsonl |
    sed 's/.*"step_ms":\([0-9.]*\).*"tokens_counted":\([0-9]*\).*/\1 \2/' |
    awk '{ ms += $1; c += $2; n++ } END { printf "%.0f %.3f\n", c / (ms / 1000), ms / n / 1000 }')
  pass_rows[$1]=$(sed -n 's/.*over the \([0-9]*\) training examples (one per row.*/\1/p; s/.*packed into about \([0-9]*\) rows a pass.*/\1/p' $work/$1.txt)
}
run rows $work/rows.plan examples
run packed $work/packed.plan packed-examples
predicted=$(awk -v a="${pass_rows[rows]}" -v b="${pass_rows[packed]}" 'BEGIN { printf "%.2f", a / b }')

printf '\nllama-bench (6L/384), batch 8 x seq 512, %s steps, %d cores (%s)\n' "$steps" "$(nproc)" "$(date -u +%Y-%m-%d)"
printf '%-34s %14s %9s %10s %12s %9s\n' "rows" "counted tok/s" "s/step" "rows/pass" "s/pass" "vs one"
for name in rows packed; do
  pass_s=$(awk -v r="${pass_rows[$name]}" -v s="${step_s[$name]}" 'BEGIN { printf "%.0f", r / 8 * s }')
  [ $name = rows ] && base=$pass_s
  label=$([ $name = rows ] && echo "--rows examples (one per row)" || echo "--rows packed-examples")
  printf '%-34s %14s %9s %10s %12s %9s\n' "$label" "${counted_s[$name]}" "${step_s[$name]}" "${pass_rows[$name]}" \
    "$pass_s" "$(awk -v a=$base -v b=$pass_s 'BEGIN { printf "%.2fx", a / b }')"
done
printf 'predicted (rows per pass, one per row / packed): %sx\n' "$predicted"
