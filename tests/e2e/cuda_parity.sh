#!/usr/bin/env bash
# The same plans on the CUDA and the CPU backend: 10 steps of GPT-2 and Llama (GQA), resident
# and streamed-recompute under a small device budget, give the same losses (fp32: relative
# 1e-4; the GPU sums in another order) and the same weights (1e-3 relative, after 10 AdamW
# steps; backend_parity.py says which tensors it leaves out), and bf16 plans of both within bf16
# rounding of the CPU's emulation; Qwen3-MoE's and gpt-oss's tiny models alike, plans of
# packed examples, and preference (DPO) plans. Exits 77
# (ctest: skipped) where no GPU is usable, saying why.
# usage: cuda_parity.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
printf 'hello world, this is a small corpus for the tests.\n%.0s' {1..300} > corpus.txt
"$bin/mttok" --bytes corpus.txt -o corpus.tok >/dev/null
"$bin/mtc" llama-tiny --batch 2 --seq 32 --no-weights -o probe.plan >/dev/null
if ! probe=$("$bin/mtrun" probe.plan --data corpus.tok --steps 1 --backend cuda 2>&1); then
  echo "skipped: $probe"
  exit 77
fi
source "$(dirname "$0")/check.sh"
# both NAME MTC_FLAGS...: NAME.plan compiled with the flags, trained 10 steps on each backend on
# `data` (the corpus; the packed examples below set it).
data=(--data corpus.tok)
both() {
  local name=$1
  shift
  "$bin/mtc" "$@" --batch 4 --seq 32 -o $name.plan >/dev/null
  for backend in cpu cuda; do
    "$bin/mtrun" $name.plan "${data[@]}" --steps 10 --backend $backend --log $name.$backend.jsonl \
      --export $name.$backend.safetensors --dump-grads $name.$backend.grads.safetensors --print-every 100 >/dev/null
  done
}
for model in gpt2-tiny llama-tiny; do
  for budget in "" "--device-mem 1300KiB"; do
    name=$model${budget:+-streamed}
    both $name $model $budget
    check "$name: losses and weights on cuda match the cpu's" \
      "/usr/bin/python3 $(dirname "$0")/backend_parity.py $name 10"
  done
  # The bf16 plan: CUDA's bf16 kernels against the CPU's emulation (bf16 tolerances).
  both $model-mixed $model --precision bf16
  check "$model-mixed: losses and weights on cuda match the cpu's within bf16 rounding" \
    "/usr/bin/python3 $(dirname "$0")/backend_parity.py $model-mixed 10 cpu cuda --bf16"
done
# Mixtures of experts (the MoE twins end to end; Qwen2-MoE's shared expert, its gate's sigmoid
# broadcast over the width) and gpt-oss's sliding windows and sinks (our attention kernels with
# the window's mask and the sink's term), fp32 and as bf16 plans, and with their experts streamed
# in groups.
for model in qwen3-moe-tiny qwen2-moe-tiny gpt-oss-tiny; do
  both $model $model
  check "$model: losses and weights on cuda match the cpu's" \
    "/usr/bin/python3 $(dirname "$0")/backend_parity.py $model 10"
  both $model-mixed $model --precision bf16
  check "$model-mixed: losses and weights on cuda match the cpu's within bf16 rounding" \
    "/usr/bin/python3 $(dirname "$0")/backend_parity.py $model-mixed 10 cpu cuda --bf16"
  # The experts streamed in 2 groups (mt.grouped_matmul_into, made in place on the device).
  both $model-groups $model --schedule streamed-recompute --expert-groups 2
  check "$model-groups: losses and weights on cuda match the cpu's" \
    "/usr/bin/python3 $(dirname "$0")/backend_parity.py $model-groups 10"
done
# Packed examples (mtc --packed-examples): our attention kernels masking by each token's example,
# fp32 and bf16, with gpt-oss's window and sinks too.
/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$(dirname "$0")')
import mt_reference as ref
ref.write_example_corpus('corpus.tok', 'examples.tok')"
data=(--data examples.tok --rows packed-examples)
for model in llama-tiny gpt-oss-tiny; do
  both $model-packed $model --packed-examples
  check "$model-packed: losses and weights on cuda match the cpu's" \
    "/usr/bin/python3 $(dirname "$0")/backend_parity.py $model-packed 10"
  both $model-packed-mixed $model --packed-examples --precision bf16
  check "$model-packed-mixed: losses and weights on cuda match the cpu's within bf16 rounding" \
    "/usr/bin/python3 $(dirname "$0")/backend_parity.py $model-packed-mixed 10 cpu cuda --bf16"
done
# Preference training (mtc --objective dpo): the sequence log-probabilities' and the DPO loss's
# kernels end to end, after the reference pass's loss-only runs, fp32 and bf16; the LM head and
# the loss over vocabulary chunks (streamed); ORPO (no reference, means, the NLL term), SPPO (a
# loss of the two log-ratios apart) and AOT (sorted over the batch's pairs); KTO (labelled examples
# beside KL rows).
/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$(dirname "$0")')
import mt_reference as ref
ref.write_example_corpus('corpus.tok', 'pairs.tok', pairs=True)"
data=(--data pairs.tok --lr 1e-3)  # the next token's rate: weights that move (not DPO's default 1e-6)
both llama-tiny-dpo llama-tiny --objective dpo
check "llama-tiny-dpo: losses and weights on cuda match the cpu's" \
  "/usr/bin/python3 $(dirname "$0")/backend_parity.py llama-tiny-dpo 10"
both llama-tiny-dpo-mixed llama-tiny --objective dpo --precision bf16
check "llama-tiny-dpo-mixed: losses and weights on cuda match the cpu's within bf16 rounding" \
  "/usr/bin/python3 $(dirname "$0")/backend_parity.py llama-tiny-dpo-mixed 10 cpu cuda --bf16"
both llama-tiny-dpo-split llama-tiny --objective dpo --vocab-chunks 2 --schedule streamed
check "llama-tiny-dpo-split: losses and weights on cuda match the cpu's" \
  "/usr/bin/python3 $(dirname "$0")/backend_parity.py llama-tiny-dpo-split 10"
for loss in orpo sppo_hard aot; do
  both llama-tiny-$loss llama-tiny --objective dpo --dpo-loss $loss
  check "llama-tiny-$loss: losses and weights on cuda match the cpu's" \
    "/usr/bin/python3 $(dirname "$0")/backend_parity.py llama-tiny-$loss 10"
done
# KTO (mtc --objective kto): its loss's kernel with the labels' input and the KL rows.
/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$(dirname "$0")')
import mt_reference as ref
ref.write_example_corpus('corpus.tok', 'labelled.tok', pairs=True, labelled=True)"
data=(--data labelled.tok --lr 1e-3)
both llama-tiny-kto llama-tiny --objective kto --undesirable-weight 1.5
check "llama-tiny-kto: losses and weights on cuda match the cpu's" \
  "/usr/bin/python3 $(dirname "$0")/backend_parity.py llama-tiny-kto 10"
# A reward model (mtc --objective reward): the score head, each row's score at its position, the loss.
data=(--data pairs.tok --lr 1e-3)
both llama-tiny-reward llama-tiny --objective reward --center-rewards-coefficient 0.01
check "llama-tiny-reward: losses and weights on cuda match the cpu's" \
  "/usr/bin/python3 $(dirname "$0")/backend_parity.py llama-tiny-reward 10"
finish
