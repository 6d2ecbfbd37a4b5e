#!/usr/bin/env bash
# Activations the backward reads kept on the host (mt-offload-activations): at a long context
# the block inputs outgrow the budget; mtc offloads them when nothing else fits, says how many
# bytes move, and training gives bit-identical losses and weights to the all-resident plan
# (deferred and on-arrival update). A resident schedule with the offload forced is refused; forced
# under a budget, the schedule chosen is a streamed one.
# usage: activation_offload.sh BIN_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$(readlink -f "$0")")/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
make_corpus

# Context 512, width 64: each block input is 256 KiB, eight of them kept.
shape=(llama-tiny --layers 8 --width 64 --ffn 128 --context 512 --batch 2 --seq 512)
"$bin/mtc" "${shape[@]}" --schedule resident -o resident.plan --weights w0.safetensors > resident.txt
"$bin/mtc" "${shape[@]}" --schedule streamed-recompute --offload-activations off -o kept.plan --no-weights > kept.txt
"$bin/mtc" "${shape[@]}" --device-mem 6MiB -o tight.plan --no-weights > tight.txt
"$bin/mtc" "${shape[@]}" --device-mem 6MiB --update on-arrival -o arrival.plan --no-weights > arrival.txt
# The summary's device arena in MiB, whatever unit it prints it in.
arena() {
  sed -n 's/.*device arena *\([0-9.]*\) \([A-Za-z]*\),.*/\1 \2/p' "$1" |
    awk '{ printf "%.3f", $1 * ($2 == "KiB" ? 1 / 1024 : $2 == "GiB" ? 1024 : $2 == "bytes" ? 1 / 1048576 : 1) }'
}
check "kept on the device, streamed-recompute needs more than 6 MiB ($(arena kept.txt) MiB)" \
  "awk -v a='$(arena kept.txt)' 'BEGIN { exit !(a > 6) }'"
check "6 MiB offloads them and says so" "grep -q 'activations moved [0-9.]* MiB (kept ones offloaded.*the budget needs it)' tight.txt"
check "the on-arrival plan offloads them too" "grep -q 'activations moved [0-9.]* MiB (kept ones offloaded' arrival.txt"
check "the resident plan moves none" "grep -q 'activations moved none' resident.txt"
# (Untiled: token tiles, tests/e2e/token_tiles.sh, fit it without the offload.)
"$bin/mtc" "${shape[@]}" --device-mem 6MiB --offload-activations off --token-tiles 1 -o off.plan --no-weights > off.txt 2>&1
check "without the offload (or tiles) 6 MiB is refused, naming the smallest budget" \
  "[ $? -eq 1 ] && grep -q 'raise --device-mem to at least' off.txt && [ ! -e off.plan ]"
"$bin/mtc" "${shape[@]}" --schedule resident --offload-activations on -o bad.plan --no-weights > bad.txt 2>&1
check "a resident schedule with the offload forced is refused" \
  "[ $? -eq 1 ] && grep -q 'needs a streamed schedule' bad.txt && [ ! -e bad.plan ]"
# The offload forced where the budget would fit the resident schedule: the schedule chosen is a
# streamed one (--batch auto's trials too; they once all failed, reported as 'not even batch 1 fits').
"$bin/mtc" llama-tiny --layers 2 --seq 32 --batch auto --device-mem 4MiB --offload-activations on -o auto.plan \
  --no-weights > auto.txt 2>&1
check "the offload forced under a budget: a streamed schedule chosen, --batch auto too" \
  "[ $? -eq 0 ] && grep -q 'schedule streamed.*chosen for the budget' auto.txt && grep -q 'activations moved [0-9.]* MiB' auto.txt"
"$bin/mtc" llama-tiny --layers 2 --batch 2 --seq 32 --offload-activations on -o free.plan --no-weights > free.txt 2>&1
check "... and without a budget: streamed" "[ $? -eq 0 ] && grep -q 'schedule streamed, no budget' free.txt"

train resident.plan resident w0.safetensors && train tight.plan tight w0.safetensors
check "offloaded vs resident: bit-identical losses" "cmp -s resident.loss tight.loss"
check "offloaded vs resident: bit-identical weights" "same_tensors resident.safetensors tight.safetensors"
train resident.plan resident.noclip w0.safetensors --grad-clip 0 && train arrival.plan arrival w0.safetensors --grad-clip 0
check "offloaded on-arrival vs resident: bit-identical losses" "cmp -s resident.noclip.loss arrival.loss"
check "offloaded on-arrival vs resident: bit-identical weights" "same_tensors resident.noclip.safetensors arrival.safetensors"
# GPT-2's backward reads its positions (i32) too: only activations are offloaded, so its plan
# verifies and trains (it offloaded the positions once, and mtrun refused the plan).
"$bin/mtc" gpt2-tiny --layers 2 --batch 2 --seq 32 --schedule streamed-recompute --offload-activations on \
  -o gpt2.plan > gpt2.txt
check "gpt2 with its activations offloaded trains" \
  "'$bin/mtrun' gpt2.plan --data corpus.tok --steps 2 --print-every 100 >/dev/null && grep -q 'offloaded to the host' gpt2.txt"
finish
