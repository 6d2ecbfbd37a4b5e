#!/usr/bin/env bash
# LoRA and DoRA against full fine-tuning of the same model, on the CPU backend: 4 Llama layers of
# width 256 (GQA 8:4, MLP 704), batch 8 x 256 tokens, rank 16 on all 7 projections of each layer
# (mtc --lora-targets 'attn\.|mlp\.'), AdamW. Runs alternate, ROUNDS of each (the median of their
# steady-state ms/step is reported), then one --profile run of the DoRA plan splits its step by
# kernel: its products (mt.matmul), and its elementwise kernels and sums (mt.mul, mt.add, mt.scale,
# mt.sum_to, mt.binary, mt.unary, mt.fill: the whole plan's, where DoRA's passes over the
# products' outputs and its norms are most of them; docs/perf.md).
# usage: bash bench/lora_cpu.sh [ROUNDS] [STEPS]   (run tools/build.sh first; MT_BIN=DIR runs other binaries,
# e.g. a copy of an earlier build's, to compare)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} steps=${2:-8}
bin=${MT_BIN:-build/bin}
work=${MT_BENCH_WORK:-build/bench/lora}
mkdir -p "$work"
corpus=$(find /usr/share/games/fortunes -type f ! -name '*.dat' ! -name '*.u8' | sort)
$bin/mttok --bytes $corpus -o $work/fortunes.tok >/dev/null
shape=(llama-tiny --layers 4 --width 256 --heads 8 --kv-heads 4 --ffn 704 --context 256 --batch 8 --seq 256)
lora=(--lora 16 --lora-alpha 32 --lora-targets 'attn\.|mlp\.')
$bin/mtc "${shape[@]}" -o $work/full.plan > $work/full.txt
$bin/mtc "${shape[@]}" "${lora[@]}" -o $work/lora.plan > $work/lora.txt
$bin/mtc "${shape[@]}" "${lora[@]}" --lora-dora -o $work/dora.plan > $work/dora.txt

# Steady-state ms/step of one run (every step after the first).
step_ms() {
  $bin/mtrun "$work/$1.plan" --data $work/fortunes.tok --steps "$steps" --print-every 1000 --log "$work/$1.jsonl" \
    > /dev/null
  tail -n +2 "$work/$1.jsonl" | sed 's/.*"step_ms":\([0-9.]*\).*/\1/' | awk '{ s += $1; n++ } END { printf "%.1f\n", s / n }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
: > $work/full.ms; : > $work/lora.ms; : > $work/dora.ms
for ((r = 0; r < rounds; r++)); do
  for plan in full lora dora; do step_ms $plan >> $work/$plan.ms; done
done
full=$(median < $work/full.ms) lora_ms=$(median < $work/lora.ms) dora=$(median < $work/dora.ms)

$bin/mtrun $work/dora.plan --data $work/fortunes.tok --steps "$steps" --print-every 1000 --profile > $work/profile.txt
kernel_ms() { awk -v pat="$1" '$1 ~ pat && $3 == "ms/step" { s += $2 } END { printf "%.1f", s }' $work/profile.txt; }
products=$(kernel_ms '^mt[.]matmul$')
elementwise=$(kernel_ms '^mt[.](mul|add|scale|sum_to|binary|unary|fill)$')
trained() { sed -n 's/.*lora .*: \([0-9.]* [KMB]\) trained.*/\1/p' "$work/$1.txt"; }
ratio() { awk -v a="$1" -v b="$full" 'BEGIN { printf "%.2fx", a / b }'; }

printf '\n4 Llama layers, width 256, batch 8 x 256, rank 16 on 28 projections, %s steps x %s rounds (median), %d cores (%s)\n' \
  "$steps" "$rounds" "$(nproc)" "$(date -u +%Y-%m-%d)"
printf '%-58s %12s %12s\n' "run" "ms/step" "vs full"
printf '%-58s %12s %12s\n' "full fine-tuning (every parameter trained)" "$full" "1.00x"
printf '%-58s %12s %12s\n' "LoRA ($(trained lora) trained)" "$lora_ms" "$(ratio "$lora_ms")"
printf '%-58s %12s %12s\n' "DoRA ($(trained dora) trained)" "$dora" "$(ratio "$dora")"
printf '%-58s %12s\n' "  the DoRA plan's products, mt.matmul (profile run)" "$products"
printf '%-58s %12s\n' "  the DoRA plan's elementwise kernels and sums (profile run)" "$elementwise"
