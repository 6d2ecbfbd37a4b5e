#!/usr/bin/env bash
# A bf16 plan (mtc --precision bf16, mt-mixed-precision) on the CPU backend, which emulates bf16
# storage around its f32 kernels: the summary and the plan say bf16; the arena shrinks; training
# stays within bf16 rounding of the fp32 plan (losses within 1e-2 relative over 10 steps) but not
# equal to it; and the invariants hold within the mode: resident, streamed-recompute, activations
# offloaded and (without clipping) on arrival train bit for bit alike; a run resumed from a
# checkpoint matches an uninterrupted one; every kernel the plan calls has a CUDA twin that takes
# bf16 (tests/kernels/cuda_twin_test.cc checks them where a GPU is).
# usage: bf16_plan.sh BIN_DIR WORK_DIR
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
source "$here/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
make_corpus

shape=(llama-tiny --layers 4 --width 64 --ffn 256 --vocab 512 --batch 4 --seq 32)
"$bin/mtc" "${shape[@]}" --schedule resident -o f32.plan --weights w0.safetensors > f32.txt
"$bin/mtc" "${shape[@]}" --schedule resident --precision bf16 -o bf16.plan --no-weights > bf16.txt
"$bin/mtc" "${shape[@]}" --schedule streamed-recompute --precision bf16 -o tight.plan --no-weights > tight.txt
"$bin/mtc" "${shape[@]}" --schedule streamed-recompute --offload-activations on --precision bf16 -o offload.plan \
  --no-weights > offload.txt
"$bin/mtc" "${shape[@]}" --schedule streamed --update on-arrival --precision bf16 -o arrival.plan --no-weights \
  > arrival.txt
# The summary's device arena in MiB, whatever unit it prints it in.
arena() {
  sed -n 's/.*device arena *\([0-9.]*\) \([A-Za-z]*\),.*/\1 \2/p' "$1" |
    awk '{ printf "%.3f", $1 * ($2 == "KiB" ? 1 / 1024 : $2 == "GiB" ? 1024 : $2 == "bytes" ? 1 / 1048576 : 1) }'
}
check "the summary says bf16 and what stays f32" \
  "grep -q '^  precision      bf16 (--precision bf16)' bf16.txt && grep -q 'the weights. gradients are f32' bf16.txt &&
   grep -q '^  precision      fp32' f32.txt"
"$bin/mtdump" bf16.plan > bf16.dump
"$bin/mtdump" offload.plan > offload.dump
check "the plan says bf16, streams bf16 copies of split masters and keeps no widen of a weight" \
  "grep -q 'precision bf16' bf16.dump && grep -q 'RESIDUAL *i16' bf16.dump && ! grep -q 'mt.widen' bf16.dump"
check "offloaded activations wait on the host as bf16" "grep -q 'ACTIVATION *bf16' offload.dump"
check "the arena shrinks: $(arena bf16.txt) vs $(arena f32.txt) MiB" \
  "awk -v b='$(arena bf16.txt)' -v f='$(arena f32.txt)' 'BEGIN { exit !(b > 0 && b < 0.7 * f) }'"
check "every kernel of the plan has a CUDA twin that takes bf16" "grep -q '^  backends cpu, cuda$' bf16.dump"

train f32.plan r.f32 w0.safetensors && train bf16.plan r.bf16 w0.safetensors
check "the loss falls in bf16 ($(head -1 r.bf16.loss) -> $(tail -1 r.bf16.loss))" \
  "awk 'NR == 1 { first = \$1 } END { exit !(\$1 < first - 0.5) }' r.bf16.loss"
worst=$(paste r.f32.loss r.bf16.loss | awk '{ d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > w) w = d } END { print w }')
check "losses within 1e-2 relative of the fp32 plan's (worst $worst)" "awk -v w='$worst' 'BEGIN { exit !(w <= 1e-2) }'"
check "... but not equal to them" "! cmp -s r.f32.loss r.bf16.loss"
for mode in tight offload; do
  train $mode.plan r.$mode w0.safetensors
  check "resident vs $mode: bit-identical losses and weights" \
    "cmp -s r.bf16.loss r.$mode.loss && same_tensors r.bf16.safetensors r.$mode.safetensors"
done
train bf16.plan n.bf16 w0.safetensors --grad-clip 0 && train arrival.plan n.arrival w0.safetensors --grad-clip 0
check "on arrival: bit-identical weights" "same_tensors n.bf16.safetensors n.arrival.safetensors"

# A checkpoint holds the fp32 master and moments.
check_resume tight.plan w0.safetensors
finish
