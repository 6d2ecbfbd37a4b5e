#!/usr/bin/env bash
# Weights streamed as bf16 staging copies (mtc --stream-dtype bf16, mt-stage-bf16): half the link
# bytes for the weights, no host bytes added (the master held split: its bf16 copy + a 16-bit
# residual, plan 1.7; tests/runtime/split_master_test.cc checks it bit for bit against an fp32
# master beside its copy); training stays within bf16 rounding of
# the fp32 plan (losses within 1e-2 relative after 10 steps) and the invariant holds within the
# mode: resident, streamed-recompute and on arrival agree bit for bit, and a run resumed from a
# checkpoint (staging copies rounded again from the loaded master) matches an uninterrupted one.
# usage: bf16_staging.sh BIN_DIR WORK_DIR
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
source "$here/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
make_corpus

shape=(llama-tiny --layers 4 --width 64 --ffn 256 --vocab 512 --batch 4 --seq 32)
"$bin/mtc" "${shape[@]}" --schedule resident -o f32.plan --weights w0.safetensors > f32.txt
"$bin/mtc" "${shape[@]}" --schedule resident --stream-dtype bf16 -o bf16.plan --no-weights > bf16.txt
"$bin/mtc" "${shape[@]}" --device-mem 2MiB --stream-dtype bf16 -o tight.plan --no-weights > tight.txt
"$bin/mtc" "${shape[@]}" --device-mem 2MiB --stream-dtype bf16 --update on-arrival -o arrival.plan --no-weights \
  > arrival.txt
# The summary's h2d bytes per step, in MiB whatever unit it prints them in.
mib() {
  sed -n "s/.* h2d \([0-9.]*\) \([A-Za-z]*\) (weights.*/\1 \2/p" "$1" |
    awk '{ printf "%.3f", $1 * ($2 == "KiB" ? 1 / 1024 : $2 == "GiB" ? 1024 : $2 == "bytes" ? 1 / 1048576 : 1) }'
}
check "the summary says the weights cross as bf16, and why the numbers move" \
  "grep -q 'weights cross the link 1.00x, as bf16' bf16.txt && grep -q '^  staging .*bf16 copies of the fp32 master' bf16.txt"
check "no host bytes added: 16.0 bytes/param as fp32, the split master named" \
  "grep -q '16.0 bytes/param: fp32 master weights (held as their bf16 copies + 16-bit residuals)' bf16.txt &&
   grep -q '16.0 bytes/param' f32.txt"
check "about half the h2d bytes ($(mib bf16.txt) vs $(mib f32.txt) MiB)" \
  "awk -v b='$(mib bf16.txt)' -v f='$(mib f32.txt)' 'BEGIN { exit !(b > 0 && b < 0.55 * f) }'"
check "the on-arrival plan holds about 12 bytes/param" "grep -q '12.[0-9] bytes/param' arrival.txt"
# --update auto: bf16 streaming costs no host bytes, so a --host-mem that holds the fp32 plan's
# deferred update (5.4 MB here) keeps it.
"$bin/mtc" "${shape[@]}" --device-mem 2MiB --stream-dtype bf16 --host-mem 5400000 -o hostmem.plan --no-weights \
  > hostmem.txt
"$bin/mtdump" --schedule hostmem.plan > hostmem.dump
check "--host-mem that holds 16 bytes/param keeps the deferred update with bf16 streaming" \
  "! grep -q 'chosen for --host-mem' hostmem.txt && grep -q ADAMW_PREVIOUS hostmem.dump"
"$bin/mtdump" bf16.plan > bf16.dump
check "the plan has the staging copies, residuals and split masters, and widens on the device" \
  "grep -q 'STAGING *bf16' bf16.dump && grep -q 'RESIDUAL *i16' bf16.dump &&
   grep -q 'PARAM .*(split: its STAGING + RESIDUAL)' bf16.dump && grep -q 'mt.widen' bf16.dump"

train f32.plan r.f32 w0.safetensors && train bf16.plan r.bf16 w0.safetensors && train tight.plan r.tight w0.safetensors
check "the loss falls with bf16 staging ($(head -1 r.bf16.loss) -> $(tail -1 r.bf16.loss))" \
  "awk 'NR == 1 { first = \$1 } END { exit !(\$1 < first - 0.5) }' r.bf16.loss"
check "losses within bf16 rounding of the fp32 plan's (1e-2 relative)" \
  "paste r.f32.loss r.bf16.loss | awk '{ d = \$1 - \$2; if (d < 0) d = -d; if (d > 1e-2 * \$1) bad = 1 } END { exit bad }'"
check "... but not equal to them (the weights the kernels see are rounded)" "! cmp -s r.f32.loss r.bf16.loss"
check "resident vs streamed-recompute: bit-identical losses" "cmp -s r.bf16.loss r.tight.loss"
check "resident vs streamed-recompute: bit-identical weights" "same_tensors r.bf16.safetensors r.tight.safetensors"
train bf16.plan n.bf16 w0.safetensors --grad-clip 0 && train arrival.plan n.arrival w0.safetensors --grad-clip 0
check "on arrival: bit-identical weights" "same_tensors n.bf16.safetensors n.arrival.safetensors"

# A checkpoint holds the fp32 master and moments; the resumed run splits the loaded master again.
check_resume tight.plan w0.safetensors
finish
