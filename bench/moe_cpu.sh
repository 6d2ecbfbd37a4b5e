#!/usr/bin/env bash
# A mixture of experts against the dense model of the same active size, on the CPU backend
# (issue 33): 4 layers of width 256, 8 experts of width 512 with the top 2 (1,024 active MLP
# columns a token) against one MLP of width 1,024; batch 8 x 256 tokens, the same attention and
# vocabulary. Runs alternate, ROUNDS of each (the median of their steady-state ms/step is
# reported), then one --profile run of the MoE splits its step into the experts' products and the
# routing (router, dispatch, combine, their gradients and the load-balancing statistics). The
# MoE streamed (weights copied in per block) with its experts whole and in 4 groups (mtc
# --expert-groups 4) gives what the groups cost: the same products, a zero fill per chain.
# usage: bash bench/moe_cpu.sh [ROUNDS] [STEPS]   (run tools/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} steps=${2:-8}
bin=build/bin
work=build/bench/moe
mkdir -p "$work"
corpus=$(find /usr/share/games/fortunes -type f ! -name '*.dat' ! -name '*.u8' | sort)
$bin/mttok --bytes $corpus -o $work/fortunes.tok >/dev/null
shape=(--layers 4 --width 256 --heads 4 --kv-heads 2 --context 256 --batch 8 --seq 256)
$bin/mtc mixtral-tiny "${shape[@]}" --experts 8 --experts-per-token 2 --expert-ffn 512 -o $work/moe.plan > $work/moe.txt
$bin/mtc llama-tiny "${shape[@]}" --ffn 1024 -o $work/dense.plan > $work/dense.txt
moe_args=(mixtral-tiny "${shape[@]}" --experts 8 --experts-per-token 2 --expert-ffn 512 --schedule streamed)
$bin/mtc "${moe_args[@]}" -o $work/streamed.plan > /dev/null
$bin/mtc "${moe_args[@]}" --expert-groups 4 -o $work/groups.plan > /dev/null

# Steady-state ms/step of one run (every step after the first).
step_ms() {
  $bin/mtrun "$work/$1.plan" --data $work/fortunes.tok --steps "$steps" --print-every 1000 --log "$work/$1.jsonl" \
    > /dev/null
  tail -n +2 "$work/$1.jsonl" | sed 's/.*"step_ms":\([0-9.]*\).*/\1/' | awk '{ s += $1; n++ } END { printf "%.1f\n", s / n }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
: > $work/dense.ms; : > $work/moe.ms; : > $work/streamed.ms; : > $work/groups.ms
for ((r = 0; r < rounds; r++)); do
  for plan in dense moe streamed groups; do step_ms $plan >> $work/$plan.ms; done
done
dense=$(median < $work/dense.ms) moe=$(median < $work/moe.ms)
streamed=$(median < $work/streamed.ms) groups=$(median < $work/groups.ms)

$bin/mtrun $work/moe.plan --data $work/fortunes.tok --steps "$steps" --print-every 1000 --profile > $work/profile.txt
kernel_ms() { awk -v pat="$1" '$1 ~ pat && $3 == "ms/step" { s += $2 } END { printf "%.1f", s }' $work/profile.txt; }
experts=$(kernel_ms '^mt\.grouped_matmul')
routing=$(kernel_ms '^mt\.moe_')
params() { sed -n 's/.*parameters *\([0-9.]* [KMB]\).*/\1/p' "$work/$1.txt"; }
active=$(sed -n 's/.*(\([0-9.]* [KMB]\) active per token).*/\1/p' $work/moe.txt)

printf '\n4 layers, width 256, batch 8 x 256, AdamW, %s steps x %s rounds (median), %d cores (%s)\n' \
  "$steps" "$rounds" "$(nproc)" "$(date -u +%Y-%m-%d)"
printf '%-58s %12s %10s\n' "model" "ms/step" "vs dense"
printf '%-58s %12s %10s\n' "dense: MLP of width 1024 ($(params dense) parameters)" "$dense" "1.00x"
printf '%-58s %12s %10s\n' "MoE: 8 experts of 512, top 2 ($(params moe), $active active)" "$moe" \
  "$(awk -v a=$moe -v b=$dense 'BEGIN { printf "%.2fx", a / b }')"
printf '%-58s %12s\n' "  of which the experts' grouped products (profile run)" "$experts"
printf '%-58s %12s\n' "  of which routing: mt.moe_* (profile run)" "$routing"
printf '%-58s %12s %10s\n' "MoE streamed, experts whole" "$streamed" \
  "$(awk -v a=$streamed -v b=$dense 'BEGIN { printf "%.2fx", a / b }')"
printf '%-58s %12s %10s\n' "MoE streamed, experts in 4 groups (vs whole: $(awk -v a=$groups -v b=$streamed 'BEGIN { printf "%.2fx", a / b }'))" \
  "$groups" "$(awk -v a=$groups -v b=$dense 'BEGIN { printf "%.2fx", a / b }')"
