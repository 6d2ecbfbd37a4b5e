#!/usr/bin/env bash
# The README demo's model (gpt2-demo, batch 16 x 128, the fortunes corpus, the demo's learning
# rate) trained 200 steps as a bf16 plan ends within 2 % of the fp32 run's loss (the mean of
# the last 20 steps), on the CPU backend.
# usage: bf16_demo.sh BIN_DIR WORK_DIR
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
source "$here/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
corpus=$(find /usr/share/games/fortunes -type f ! -name '*.dat' ! -name '*.u8' | sort)
"$bin/mttok" --bytes $corpus -o fortunes.tok >/dev/null
"$bin/mtc" gpt2-demo --batch 16 --seq 128 -o fp32.plan --weights w0.safetensors >/dev/null
"$bin/mtc" gpt2-demo --batch 16 --seq 128 --precision bf16 -o bf16.plan --no-weights >/dev/null
for p in fp32 bf16; do
  "$bin/mtrun" $p.plan --data fortunes.tok --weights w0.safetensors --steps 200 --lr 2e-3 --warmup 50 \
    --print-every 100 --log $p.jsonl >/dev/null
done
tail20() { tail -20 "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/' | awk '{ s += $1 } END { printf "%.4f", s / NR }'; }
f=$(tail20 fp32.jsonl) b=$(tail20 bf16.jsonl)
check "bf16 ends at $b, fp32 at $f: within 2 %" "awk -v b=$b -v f=$f 'BEGIN { d = (b - f) / f; if (d < 0) d = -d; exit !(d <= 0.02) }'"
check "both learned (below 3.0)" "awk -v b=$b -v f=$f 'BEGIN { exit !(b < 3.0 && f < 3.0) }'"
finish
