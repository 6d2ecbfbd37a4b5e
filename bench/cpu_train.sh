#!/usr/bin/env bash
# CPU training throughput: mtrun against PyTorch 1.13 (same OpenBLAS kernels, same cores) on
# GPT 6 layers, width 384, 6 heads, context 256, batch 8, vocab 256, AdamW, same initial
# weights and batches. Prints a table with the ratio and the compute floor.
# usage: bash bench/cpu_train.sh [STEPS]   (run tools/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-8}
bin=build/bin
work=build/bench
mkdir -p "$work"
corpus=$(find /usr/share/games/fortunes -type f ! -name '*.dat' ! -name '*.u8' | sort)
$bin/mttok --bytes $corpus -o $work/fortunes.tok >/dev/null
summary=$($bin/mtc gpt2-bench --batch 8 --seq 256 -o $work/bench.plan)
flops=$(sed -n 's/.*per step *\([0-9.e+]*\) FLOP.*/\1/p' <<<"$summary")

$bin/mtrun $work/bench.plan --data $work/fortunes.tok --weights $work/bench.safetensors --steps "$steps" \
  --lr 1e-3 --log $work/mtrun.jsonl --print-every 1000 > $work/mtrun.txt
core=$(sed -n 's/.*(OpenBLAS \([A-Za-z0-9]*\)).*/\1/p' $work/mtrun.txt | head -1)
# Steady state: every step but the first.
mt_tok_s=$(tail -n +2 $work/mtrun.jsonl | sed 's/.*"step_ms":\([0-9.]*\).*/\1/' |
           awk -v t=2048 '{ s += $1; n++ } END { printf "%.0f", t * n / (s / 1000) }')

# The peer runs with the library settings mtrun gives itself (runtime/backends/cpu_libraries.h):
# they speed PyTorch up as much (its OpenMP ops share the cores with OpenBLAS's threads too).
libs=(OPENBLAS_CORETYPE=$core OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=passive)
cfg='{"family":"gpt2","layers":6,"width":384,"heads":6,"kv_heads":6,"tied":true}'
torch_json=$(env "${libs[@]}" /usr/bin/python3 bench/torch_train.py $work/bench.safetensors \
  $work/fortunes.tok "$steps" 8 256 "$cfg")
torch_tok_s=$(sed 's/.*"tokens_per_s": \([0-9.]*\).*/\1/' <<<"$torch_json" | awk '{ printf "%.0f", $1 }')

gflops=$(env "${libs[@]}" build/bin/mt_sgemm_rate 2048 384 1536)
floor_tok_s=$(awk -v f="$flops" -v g="$gflops" 'BEGIN { printf "%.0f", 2048 / (f / (g * 1e9)) }')

printf '\nGPT 6L/384/6h, T=256, B=8, V=256, AdamW, %s steps, %d cores, OpenBLAS %s (%s)\n' \
  "$steps" "$(nproc)" "$core" "$(date -u +%Y-%m-%d)"
printf '%-42s %12s %10s\n' "system" "tokens/s" "vs torch"
printf '%-42s %12s %10s\n' "mtrun (CPU backend)" "$mt_tok_s" "$(awk -v a=$mt_tok_s -v b=$torch_tok_s 'BEGIN{printf "%.2fx", a/b}')"
printf '%-42s %12s %10s\n' "PyTorch 1.13 (same BLAS, same settings)" "$torch_tok_s" "1.00x"
printf '%-42s %12s %10s\n' "floor: $flops FLOP at $gflops GFLOP/s" "$floor_tok_s" "$(awk -v a=$floor_tok_s -v b=$torch_tok_s 'BEGIN{printf "%.2fx", a/b}')"
