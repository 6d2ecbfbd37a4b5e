#!/usr/bin/env bash
# Mixtures of experts through the whole pipeline (issue 33; DESIGN.md §14): a Qwen3-MoE-shaped
# model of 4 layers trains bit for bit the same resident, streamed, streamed with every block
# recomputed and under a device budget (1.3 MiB) that forces streamed-recompute (invariant 1: streaming
# moves bytes, never numbers), resumes from a checkpoint bit for bit, follows the untiled plan in
# token tiles within fp32 rounding (the experts run on the whole batch; the products around them
# in tiles), trains as a bf16 plan with its loss falling, and samples the same greedy text
# through the key/value cache as over the whole window; the experts streamed in groups (bit for
# bit, also picked by a budget; Qwen2-MoE's shared expert beside them, its gradient norms too;
# GLM-4.5's sigmoid router with its frozen choice bias and ungated shared expert alike, DeepSeek-V3's
# latent attention around it; Qwen2-MoE's, OLMoE's, GLM-4.5's and DeepSeek-V3's presets exported to
# Hugging Face's form and back bit for bit).
# The summary names the experts and the
# active parameters. Every plan trains with the router's load-balancing loss (--router-aux-loss)
# and logs each step's choices per expert: they add up to every token's k choices in every layer.
# LoRA on the stacks of experts (--lora-experts) streams in groups bit for bit, merges into each
# expert on --export-hf, goes out (--export-peft) and back (--lora-from) in PEFT's forms (gpt-oss's
# target_parameters; Qwen3-MoE's and Mixtral's each expert's layer in target_modules), is read in
# transformers 5's fused form (Qwen3-MoE's and Mixtral's target_parameters, routers too), trains with
# dropout (Qwen3-MoE's: redrawn bit for bit in expert groups and recompute), and is refused with
# DoRA, with dropout on gpt-oss or on some experts of a stack only.
# usage: experts.sh BIN_DIR WORK_DIR
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
source "$here/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
make_corpus

model=(qwen3-moe-tiny --layers 4 --batch 4 --seq 32)
shape=("${model[@]}" --router-aux-loss 0.02)
"$bin/mtc" "${shape[@]}" --schedule resident -o resident.plan --weights w0.safetensors > resident.txt
"$bin/mtc" "${shape[@]}" --schedule streamed -o streamed.plan --no-weights > streamed.txt
"$bin/mtc" "${shape[@]}" --schedule streamed-recompute -o recompute.plan --no-weights > recompute.txt
"$bin/mtc" "${shape[@]}" --device-mem 1300KiB -o tight.plan --no-weights > tight.txt
check "the summary names the experts" \
  "grep -q '4 experts of width 32 (top 2, renormalised) in 4 of 4 layers' resident.txt"
check "the summary names the load-balancing loss" "grep -q 'load-balancing loss x 0.02 trained on' resident.txt"
"$bin/mtc" qwen3-moe-tiny --router-aux-loss inf -o x.plan > inf.err 2>&1
check "--router-aux-loss must be finite" "grep -q -- '--router-aux-loss: Value inf not in range' inf.err && [ ! -e x.plan ]"
"$bin/mtc" qwen3-moe-tiny --router-aux-loss 0.01 --forward-only --batch 1 -o x.plan > forward.err 2>&1
check "--router-aux-loss is refused for a forward-only plan" \
  "grep -q 'a --forward-only plan has none' forward.err && [ ! -e x.plan ]"
check "the summary gives the active parameters" "grep -Eq 'parameters .* \([0-9.]+ K active per token\)' resident.txt"
check "a 1.3 MiB budget picks streamed-recompute" "grep -q 'schedule streamed-recompute' tight.txt"
for plan in resident streamed recompute tight; do train $plan.plan $plan w0.safetensors; done
for plan in streamed recompute tight; do
  check "$plan: bit-identical losses" "cmp -s resident.loss $plan.loss"
  check "$plan: bit-identical weights" "same_tensors resident.safetensors $plan.safetensors"
done
check_resume streamed.plan w0.safetensors
"$bin/mtrun" resident.plan --data corpus.tok --weights w0.safetensors --steps 3 --log load.jsonl --print-every 100 \
  --report load.html >/dev/null
check "--report draws the load-balancing loss" "grep -q 'Router load-balancing loss' load.html && [ \"\$(grep -c '<svg' load.html)\" -eq 5 ]"
check "each step's expert choices add up to 4 x 32 tokens x top 2 x 4 layers, its aux loss logged" \
  "/usr/bin/python3 -c 'import json, sys; lines = [json.loads(l) for l in open(\"load.jsonl\")]; sys.exit(not (len(lines) == 3 and all(sum(l[\"expert_tokens\"]) == 1024 and len(l[\"expert_tokens\"]) == 4 and l[\"aux_loss\"] > 1.9 for l in lines)))'"
# --rows examples: each row an example from its start, padded; the router's statistics leave the
# padding out (the plan's token mask, as Hugging Face's attention mask does): each step's choices
# add up to 2 x 4 layers x the rows' example tokens, not the padded rows'.
/usr/bin/python3 - "$here" <<'PY'
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import mt_reference as ref
lengths = 6 + (np.arange(300) * 7) % 40  # 6 to 45 tokens: some rows padded, some cut
starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
tokens = (np.arange(int(lengths.sum())) * 31 + 7) % 256
ref.write_tokens("examples.tok", tokens, 256, np.ones(len(tokens), dtype=np.uint8), starts)
kept = []
for step in range(3):
    rows = [ref._mix(ref._mix(7 ^ 0x5EED) ^ ((step << 20) & ref.MASK64) ^ b) % len(starts) for b in range(4)]
    kept.append(sum(min(int(lengths[i]), 32) for i in rows))
json.dump(kept, open("examples.kept", "w"))
PY
"$bin/mtrun" resident.plan --data examples.tok --rows examples --seed 7 --weights w0.safetensors --steps 3 \
  --log examples.jsonl --print-every 100 > examples.txt
check "--rows examples: each step's expert choices count the rows' tokens, not their padding" \
  "/usr/bin/python3 -c 'import json, sys; kept = json.load(open(\"examples.kept\")); lines = [json.loads(l) for l in open(\"examples.jsonl\")]; sys.exit(not (len(lines) == 3 and all(sum(l[\"expert_tokens\"]) == 8 * k for l, k in zip(lines, kept)) and min(kept) < 128))' && ! grep -q 'padding is routed like any token' examples.txt"
"$bin/mtc" "${model[@]}" -o plain.plan --no-weights > plain.txt
train plain.plan plain w0.safetensors
check "without --router-aux-loss the losses differ (the auxiliary loss trains the router)" "! cmp -s resident.loss plain.loss"

"$bin/mtc" "${shape[@]}" --schedule resident --token-tiles 2 -o tiled.plan --no-weights > tiled.txt
train tiled.plan tiled w0.safetensors
check "token tiles: losses within 1e-6 of the untiled plan's" \
  "paste resident.loss tiled.loss | awk '{ d = \$1 - \$2; if (d < 0) d = -d; if (d > 1e-6 * \$1) bad = 1 } END { exit bad }'"

"$bin/mtc" "${shape[@]}" --precision bf16 -o bf16.plan --no-weights > bf16.txt
"$bin/mtrun" bf16.plan --data corpus.tok --weights w0.safetensors --steps 30 --lr 3e-3 --log bf16.jsonl \
  --print-every 100 >/dev/null
check "bf16: the loss falls over 30 steps" \
  "awk -F'\"loss\":' '{ split(\$2, a, \",\"); l[NR] = a[1] } END { exit !(l[NR] < l[1] - 0.5) }' bf16.jsonl"

# Experts streamed in groups (mt-split-experts): each stacked expert weight in groups of
# consecutive experts, each copied in a group ahead of its products. The same numbers bit for
# bit: streamed in 2 groups, recomputed in 4 (an expert each; resumed bit for bit), on arrival, a bf16 plan against
# the bf16 plan without groups, gpt-oss's form (weights as stored, biases, gate and up
# interleaved); and a budget too small for a layer's whole experts picks the groups itself.
"$bin/mtc" "${shape[@]}" --schedule streamed --expert-groups 2 -o groups2.plan --no-weights > groups2.txt
"$bin/mtc" "${shape[@]}" --schedule streamed-recompute --expert-groups 4 -o groups4.plan --no-weights >/dev/null
check "the summary names the groups" \
  "grep -q 'expert groups  12 stacked expert weights (layers.0.moe.gate.weight, ...) in 2 groups' groups2.txt"
for plan in groups2 groups4; do
  train $plan.plan $plan w0.safetensors
  check "$plan: bit-identical losses and weights" "cmp -s resident.loss $plan.loss && same_tensors resident.safetensors $plan.safetensors"
done
check_resume groups4.plan w0.safetensors
"$bin/mtc" "${shape[@]}" --update on-arrival -o arrival.plan --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" --update on-arrival --expert-groups 2 -o arrival_groups.plan --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" --precision bf16 --expert-groups 2 -o bf16_groups.plan --no-weights >/dev/null
for plan in arrival arrival_groups bf16 bf16_groups; do train $plan.plan $plan w0.safetensors; done
check "on arrival: bit-identical with and without groups" \
  "cmp -s arrival.loss arrival_groups.loss && same_tensors arrival.safetensors arrival_groups.safetensors"
check "bf16: bit-identical with and without groups" "cmp -s bf16.loss bf16_groups.loss && same_tensors bf16.safetensors bf16_groups.safetensors"
big=(qwen3-moe-tiny --layers 2 --experts 16 --expert-ffn 256 --batch 2 --seq 16)
"$bin/mtc" "${big[@]}" --schedule resident -o big_resident.plan --weights big0.safetensors >/dev/null
# (--vocab-chunks 1: a vocabulary split folds the loss in chunks, not bit for bit the whole's)
"$bin/mtc" "${big[@]}" --device-mem 5MiB --vocab-chunks 1 -o big_tight.plan --no-weights > big_tight.txt
"$bin/mtc" "${big[@]}" --device-mem 5MiB --vocab-chunks 1 --expert-groups 1 -o x.plan --no-weights > big_never.err 2>&1
check "a 5 MiB budget puts 16 experts of 256 in 2 groups (the fewest that fit; whole layers need 7.2 MiB)" \
  "grep -q 'in 2 groups of consecutive experts (the fewest that fit --device-mem)' big_tight.txt"
check "with --expert-groups 1 the same budget fits no plan" "grep -q 'raise --device-mem' big_never.err && [ ! -e x.plan ]"
for plan in big_resident big_tight; do train $plan.plan $plan big0.safetensors; done
check "big_tight: bit-identical losses and weights" \
  "cmp -s big_resident.loss big_tight.loss && same_tensors big_resident.safetensors big_tight.safetensors"
# Qwen2-MoE's shared expert beside the routed ones, in expert groups and recomputed: the same
# losses, gradient norms (each gradient's share added in the tensors' order, not in the order a
# schedule lands them) and weights as resident, bit for bit.
shared=(qwen2-moe-tiny --batch 4 --seq 32)
"$bin/mtc" "${shared[@]}" --schedule resident -o shared_resident.plan --weights shared0.safetensors > shared.txt
"$bin/mtc" "${shared[@]}" --schedule streamed-recompute --expert-groups 2 -o shared_groups.plan --no-weights >/dev/null
check "the summary names the shared expert" \
  "grep -q '4 experts of width 32 (top 2) beside a shared expert of width 48 (sigmoid-gated) in 2 of 2 layers' shared.txt"
# same_as_resident WHAT NAME WEIGHTS: NAME_resident.plan and NAME_groups.plan trained 10 steps from
# WEIGHTS give the same losses, gradient norms and weights, bit for bit.
same_as_resident() {
  local what=$1 name=$2 weights=$3
  for plan in ${name}_resident ${name}_groups; do
    train $plan.plan $plan $weights
    grep -o '"grad_norm":[^,]*' $plan.jsonl > $plan.norms
  done
  check "$what in expert groups: bit-identical losses, gradient norms and weights" \
    "cmp -s ${name}_resident.loss ${name}_groups.loss && cmp -s ${name}_resident.norms ${name}_groups.norms && [ \"\$(wc -l < ${name}_groups.norms)\" -eq 10 ] && same_tensors ${name}_resident.safetensors ${name}_groups.safetensors"
}
same_as_resident Qwen2-MoE shared shared0.safetensors
# ... and in token tiles (the shared expert's gate (B, T, 1) broadcast over each tile's rows):
# losses within fp32 rounding of the untiled plan's.
"$bin/mtc" "${shared[@]}" --schedule resident --token-tiles 2 -o shared_tiled.plan --no-weights >/dev/null
train shared_tiled.plan shared_tiled shared0.safetensors
check "Qwen2-MoE in token tiles: losses within 1e-6 of the untiled plan's" \
  "paste shared_resident.loss shared_tiled.loss | awk '{ d = \$1 - \$2; if (d < 0) d = -d; if (d > 1e-6 * \$1) bad = 1 } END { exit bad || NR != 10 }'"
# GLM-4.5's sigmoid router (its frozen choice bias streamed with the layer, 2 groups of 4 experts,
# x 2.5) and ungated shared expert, in expert groups and recomputed: the same losses, gradient
# norms and weights as resident, bit for bit. The bias (zeros at init) set to values that change
# the choice, so that a schedule which lost it would show.
glm=(glm4-moe-tiny --batch 4 --seq 32)
"$bin/mtc" "${glm[@]}" --schedule resident -o glm_resident.plan --weights glm0.safetensors > glm.txt
"$bin/mtc" "${glm[@]}" --schedule streamed-recompute --expert-groups 2 -o glm_groups.plan --no-weights >/dev/null
check "the summary names the sigmoid router, the ungated shared expert and the frozen bias" \
  "grep -q '8 experts of width 32 (top 2, sigmoid scores chosen with a frozen bias within 1 of 2 groups, renormalised, x 2.5) beside a shared expert of width 32 (ungated) in 2 of 3 layers' glm.txt && grep -q 'of which 16 frozen' glm.txt"
/usr/bin/python3 - "$here" <<'PY'
import sys
import torch
sys.path.insert(0, sys.argv[1])
import mt_reference as ref
w = ref.read_safetensors("glm0.safetensors")
for layer in (1, 2):
    w[f"layers.{layer}.moe.router.score_bias"] = torch.tensor([0.3, -0.2, 0.1, 0.0, -0.3, 0.2, 0.05, -0.1])
ref.write_safetensors("glm0.safetensors", w)
PY
same_as_resident GLM-4.5 glm glm0.safetensors
# DeepSeek-V3's latent attention (its slices, shared rotated key and padded values) around the same
# mixture: streamed and recomputed in expert groups, bit for bit.
deepseek=(deepseek-v3-tiny --batch 4 --seq 32)
"$bin/mtc" "${deepseek[@]}" --schedule resident -o ds_resident.plan --weights ds0.safetensors >/dev/null
"$bin/mtc" "${deepseek[@]}" --schedule streamed-recompute --expert-groups 2 -o ds_groups.plan --no-weights >/dev/null
same_as_resident DeepSeek-V3 ds ds0.safetensors
# DeepSeek-V2's softmax router within groups, its summary naming the rule.
deepseek2=(deepseek-v2-tiny --batch 4 --seq 32)
"$bin/mtc" "${deepseek2[@]}" --schedule resident -o ds2_resident.plan --weights ds20.safetensors > ds2.txt
"$bin/mtc" "${deepseek2[@]}" --schedule streamed-recompute --expert-groups 2 -o ds2_groups.plan --no-weights >/dev/null
check "DeepSeek-V2's summary names its routing" \
  "grep -q '8 experts of width 24 (top 3, within 2 of 4 groups by their best, x 2) beside a shared expert of width 48 (ungated) in 2 of 3 layers' ds2.txt"
same_as_resident DeepSeek-V2 ds2 ds20.safetensors
# The presets' Hugging Face forms compile back to the exported weights bit for bit: Qwen2-MoE's
# (Qwen2MoeForCausalLM, its shared expert), OLMoE's (OlmoeForCausalLM, its padding id null),
# GLM-4.5's (Glm4MoeForCausalLM, its router's bias and groups), DeepSeek-V3's (DeepseekV3ForCausalLM,
# its latent attention), DeepSeek-V2's (DeepseekV2ForCausalLM, its softmax router's groups).
"$bin/mtc" olmoe-tiny --batch 4 --seq 32 -o olmoe.plan --weights olmoe0.safetensors >/dev/null
for name in shared_resident:shared0:Qwen2MoeForCausalLM olmoe:olmoe0:OlmoeForCausalLM \
            glm_resident:glm0:Glm4MoeForCausalLM ds_resident:ds0:DeepseekV3ForCausalLM \
            ds2_resident:ds20:DeepseekV2ForCausalLM; do
  IFS=: read -r plan weights arch <<< "$name"
  "$bin/mtrun" $plan.plan --data corpus.tok --weights $weights.safetensors --steps 2 --export ${plan}_out.safetensors \
    --export-hf ${plan}_hf --print-every 100 >/dev/null
  "$bin/mtc" ${plan}_hf --batch 4 --seq 32 -o ${plan}_again.plan >/dev/null
  check "$arch: --export-hf of the preset compiles back to the same weights" \
    "grep -q '\"$arch\"' ${plan}_hf/config.json && same_tensors ${plan}_out.safetensors ${plan}_again.safetensors"
  # ... and the same model: from those weights, the preset's plan and the folder's train alike.
  train $plan.plan ${plan}_next ${plan}_out.safetensors
  train ${plan}_again.plan ${plan}_again_next ${plan}_again.safetensors
  check "$arch: the folder's config trains as the preset, bit for bit" "cmp -s ${plan}_next.loss ${plan}_again_next.loss"
done
"$bin/mtc" olmoe-tiny --objective reward -o x.plan > olmoe_reward.err 2>&1
check "an OLMoE reward model is refused (transformers has no OlmoeForSequenceClassification)" \
  "grep -q 'transformers has no OlmoeForSequenceClassification' olmoe_reward.err && [ ! -e x.plan ]"
"$bin/mtc" deepseek-v2-tiny --objective reward --batch 4 --seq 32 -o ds2_reward.plan > ds2_reward.txt 2>&1
check "a DeepSeek-V2 reward model compiles (transformers has DeepseekV2ForSequenceClassification)" \
  "grep -q 'objective      a reward model' ds2_reward.txt && [ -e ds2_reward.plan ]"
"$bin/mtc" qwen3-moe-tiny --expert-groups 5 -o x.plan > five.err 2>&1
check "--expert-groups past the experts is refused" \
  "grep -q -- '--expert-groups must be between 0 (as the budget needs) and the experts of a layer (4), not 5' five.err && [ ! -e x.plan ]"
"$bin/mtc" llama-tiny --expert-groups 2 -o x.plan > dense.err 2>&1
check "--expert-groups on a dense model is refused" "grep -q 'the model has no mixture of experts to split' dense.err && [ ! -e x.plan ]"

# cache_equals_window NAME PLAN WEIGHTS MODEL_ARGS...: PLAN trained 60 steps from WEIGHTS, then
# greedy text through a decode plan's key/value cache must be the whole-window plan's.
cache_equals_window() {
  local name=$1 plan=$2 weights=$3
  shift 3
  "$bin/mtrun" $plan --data corpus.tok --weights $weights --steps 60 --lr 3e-3 --export ${name}trained.safetensors \
    --print-every 100 > /dev/null
  "$bin/mtc" "$@" --forward-only --kv-cache --batch 1 --seq 64 -o ${name}cache.plan --no-weights >/dev/null
  "$bin/mtc" "$@" --forward-only --batch 1 --seq 64 -o ${name}window.plan --no-weights >/dev/null
  for kind in cache window; do
    "$bin/mtgen" ${name}$kind.plan --weights ${name}trained.safetensors --prompt "12: how" --greedy --max-tokens 24 \
      > ${name}$kind.out 2>/dev/null
  done
  check "${name:-qwen3-moe }greedy text through the cache = over the window" \
    "cmp -s ${name}cache.out ${name}window.out && [ -s ${name}cache.out ]"
}
cache_equals_window "" resident.plan w0.safetensors "${model[@]}"

# gpt-oss's form (sinks, an 8-token window on layer 0, biased experts, the clamped SwiGLU):
# streamed and under a budget bit for bit as resident, and greedy text through the cache (whose
# attention slides and has sinks too) as over the whole window.
oss=(gpt-oss-tiny --layers 4 --batch 4 --seq 32)
"$bin/mtc" "${oss[@]}" --schedule resident -o oss_resident.plan --weights oss0.safetensors > oss_resident.txt
"$bin/mtc" "${oss[@]}" --schedule streamed -o oss_streamed.plan --no-weights >/dev/null
"$bin/mtc" "${oss[@]}" --device-mem 1300KiB -o oss_tight.plan --no-weights >/dev/null
check "gpt-oss: the summary names its sinks, windows and experts" \
  "grep -q 'attention sinks, 8-token windows in 2 of 4 layers' oss_resident.txt && grep -q 'SwiGLU clamped at 0.1' oss_resident.txt"
"$bin/mtc" "${oss[@]}" --schedule streamed-recompute --expert-groups 2 -o oss_groups.plan --no-weights >/dev/null
for plan in oss_resident oss_streamed oss_tight oss_groups; do train $plan.plan $plan oss0.safetensors; done
for plan in oss_streamed oss_tight oss_groups; do
  check "$plan: bit-identical losses and weights" "cmp -s oss_resident.loss $plan.loss && same_tensors oss_resident.safetensors $plan.safetensors"
done
cache_equals_window oss_ oss_resident.plan oss0.safetensors "${oss[@]}"
# Sampling with the experts streamed in groups (a forward-only plan): the same greedy text.
"$bin/mtc" "${oss[@]}" --forward-only --kv-cache --batch 1 --seq 64 --expert-groups 2 -o oss_cache_groups.plan \
  --no-weights > oss_cache_groups.txt
"$bin/mtgen" oss_cache_groups.plan --weights oss_trained.safetensors --prompt "12: how" --greedy --max-tokens 24 \
  > oss_cache_groups.out 2>/dev/null
check "gpt-oss: greedy text through the cache with its experts in 2 groups = with them whole" \
  "cmp -s oss_cache.out oss_cache_groups.out && grep -q 'expert groups  8 stacked' oss_cache_groups.txt"
# The preset's Hugging Face form (GptOssForCausalLM: layer_types, sinks, experts in one tensor
# each) compiles back to the exported weights bit for bit.
# The tiny model's swiglu_limit (0.1) is one transformers does not apply (it clamps at 7.0): the
# export says so.
"$bin/mtrun" oss_resident.plan --data corpus.tok --weights oss0.safetensors --steps 2 --export oss_out.safetensors \
  --export-hf oss_hf --print-every 100 > oss_hf.txt
"$bin/mtc" oss_hf --batch 4 --seq 32 -o oss_again.plan > oss_again.txt
check "gpt-oss: --export-hf writes GptOssForCausalLM and compiles back to the same weights" \
  "grep -q '\"GptOssForCausalLM\"' oss_hf/config.json && grep -q 'sliding_attention' oss_hf/config.json && same_tensors oss_out.safetensors oss_again.safetensors"
check "gpt-oss: --export-hf says transformers clamps at 7.0 where the folder's swiglu_limit is 0.1" \
  "grep -q 'note: swiglu_limit 0.1: transformers' oss_hf.txt"

# LoRA on the stacks of experts (mtc --lora-experts, PEFT's target_parameters; torch_parity's
# *-lora-experts check the numbers against PyTorch): the adapter stacks are split into the expert
# groups with their experts, bit for bit as resident; --export-hf merges each expert's
# W_e + 2 B_e A_e (gpt-oss's stored (in, out), as its folder holds them), and the merged folder
# compiles back to those weights; without --lora-targets the stacks alone; DoRA beside them,
# dropout on gpt-oss's and a pattern that finds no stack are refused.
lora_experts=(--lora 4 --lora-alpha 8 --lora-targets 'attn\.' --lora-experts 'moe\.')
for form in qwen3 oss; do
  # the stacks: the experts' own, and an A and a B of each
  if [ $form = qwen3 ]; then base=("${shape[@]}") stacks=36; else base=("${oss[@]}") stacks=24; fi
  "$bin/mtc" "${base[@]}" "${lora_experts[@]}" --schedule resident -o ${form}_lx.plan --weights ${form}_lx0.safetensors \
    > ${form}_lx.txt
  "$bin/mtc" "${base[@]}" "${lora_experts[@]}" --schedule streamed-recompute --expert-groups 2 -o ${form}_lx_groups.plan \
    --no-weights > ${form}_lx_groups.txt
  rm -rf ${form}_lx_hf ${form}_peft
  train ${form}_lx.plan ${form}_lx ${form}_lx0.safetensors --lr 1e-2 --export-hf ${form}_lx_hf --export-peft ${form}_peft
  train ${form}_lx_groups.plan ${form}_lx_groups ${form}_lx0.safetensors --lr 1e-2
  check "$form, LoRA on experts in 2 groups: the adapter stacks split too, bit for bit as resident" \
    "grep -q 'expert groups  $stacks stacked expert weights' ${form}_lx_groups.txt && cmp -s ${form}_lx.loss ${form}_lx_groups.loss && same_tensors ${form}_lx.safetensors ${form}_lx_groups.safetensors"
  "$bin/mtc" ${form}_lx_hf --batch 4 --seq 32 -o ${form}_lx_again.plan > /dev/null
  check "$form, LoRA on experts: --export-hf merges each expert's W_e + 2 B_e A_e" \
    "/usr/bin/python3 - ${form}_lx.safetensors ${form}_lx_again.safetensors $form <<'EOF'
import sys; sys.path.insert(0, '$here')
import mt_reference as ref
trained, merged = ref.read_safetensors(sys.argv[1]), ref.read_safetensors(sys.argv[2])
stacks = [k[:-len('.lora_A.weight')] for k in trained if k.endswith('.lora_A.weight') and trained[k].dim() == 3]
assert len(stacks) == (12 if sys.argv[3] == 'qwen3' else 8), stacks
for s in stacks:
    delta = 2.0 * (trained[s + '.lora_B.weight'] @ trained[s + '.lora_A.weight'])
    want = trained[s + '.weight'] + (delta.transpose(1, 2) if sys.argv[3] == 'oss' else delta)
    assert ref.rel_err(merged[s + '.weight'], want) < 1e-6 and delta.abs().max() > 0, s
EOF"
done
check "LoRA on experts: the summary names the stacks" "grep -q 'on 16 weights and 12 stacks of experts (each expert its own)' qwen3_lx.txt"
# Qwen3-MoE's stacks in PEFT's form of transformers 4's layers (each expert's gate_proj, up_proj and
# down_proj an nn.Linear, which target_modules adapt one by one): expert e's lora_A (r, in) and
# lora_B (out, r) are the stacks' at e, and give --export-hf's merge.
check "LoRA on Qwen3-MoE's experts: --export-peft writes each expert's layer (target_modules)" \
  "/usr/bin/python3 - qwen3_peft qwen3_lx.safetensors qwen3_lx_again.safetensors <<'EOF'
import json, sys; sys.path.insert(0, '$here')
import mt_reference as ref
config = json.load(open(sys.argv[1] + '/adapter_config.json'))
assert sorted(config['target_modules']) == ['down_proj', 'gate_proj', 'k_proj', 'o_proj', 'q_proj', 'up_proj', 'v_proj'], config
assert 'target_parameters' not in config and (config['r'], config['lora_alpha'], config['rank_pattern']) == (4, 8, {}), config
peft = ref.read_safetensors(sys.argv[1] + '/adapter_model.safetensors')
trained, merged = ref.read_safetensors(sys.argv[2]), ref.read_safetensors(sys.argv[3])
for layer in range(4):
    for stack, name in (('gate', 'gate_proj'), ('up', 'up_proj'), ('down', 'down_proj')):
        ours = f'layers.{layer}.moe.{stack}'
        want = merged[ours + '.weight'] - trained[ours + '.weight']
        for e in range(4):
            key = f'base_model.model.model.layers.{layer}.mlp.experts.{e}.{name}.'
            a, b = peft[key + 'lora_A.weight'], peft[key + 'lora_B.weight']
            assert a.equal(trained[ours + '.lora_A.weight'][e]) and b.equal(trained[ours + '.lora_B.weight'][e]), key
            delta = 2.0 * (b @ a)
            assert delta.abs().max() > 0 and ref.rel_err(delta, want[e]) < 1e-5, (key, ref.rel_err(delta, want[e]))
assert len(peft) == 4 * (4 + 3 * 4) * 2, sorted(peft)
EOF"
# gpt-oss's stacks in PEFT's target_parameters form (its ParamWrapper's, as bench/gpu/peft_layout.py
# printed it from PEFT): the same 10 steps as oss_lx; each layer's gate_up_proj adapters under the
# experts module's base_layer (PEFT wraps down_proj around it), lora_A (E*r, in) and lora_B
# (out, r*E); read as PEFT reads them (B's column k*E + e), they give --export-hf's merge.
check "LoRA on gpt-oss's experts: --export-peft writes PEFT's target_parameters form" \
  "/usr/bin/python3 - oss_peft oss_lx.safetensors oss_lx_again.safetensors <<'EOF'
import json, sys, torch; sys.path.insert(0, '$here')
import mt_reference as ref
config = json.load(open(sys.argv[1] + '/adapter_config.json'))
assert config['target_parameters'] == ['down_proj', 'gate_up_proj'], config['target_parameters']
assert sorted(config['target_modules']) == ['k_proj', 'o_proj', 'q_proj', 'v_proj'], config['target_modules']
assert (config['r'], config['lora_alpha'], config['rank_pattern']) == (4, 8, {}), config
peft = ref.read_safetensors(sys.argv[1] + '/adapter_model.safetensors')
trained, merged = ref.read_safetensors(sys.argv[2]), ref.read_safetensors(sys.argv[3])
E, r, scale = 4, 4, 2.0
for layer in range(4):
    pre = f'base_model.model.model.layers.{layer}.mlp.experts.'
    for stack, key in (('gate_up', pre + 'base_layer.'), ('down', pre)):
        a, b = peft[key + 'lora_A.weight'], peft[key + 'lora_B.weight']
        ours = f'layers.{layer}.moe.{stack}'
        assert a.shape == (E * r, trained[ours + '.lora_A.weight'].shape[2]), (key, a.shape)
        a_e, b_e = a.reshape(E, r, a.shape[1]), b.reshape(b.shape[0], r, E).permute(2, 0, 1)
        delta = scale * torch.einsum('eri,eor->eio', a_e, b_e)
        want = merged[ours + '.weight'] - trained[ours + '.weight']
        assert delta.abs().max() > 0 and ref.rel_err(delta, want) < 1e-5, (key, ref.rel_err(delta, want))
assert len(peft) == 4 * 4 + 4 * 4 * 2, sorted(peft)
EOF"
# ... and mtc --lora-from reads that form back: on the model the adapters were trained from (its
# folder: a step at lr 0, B still zero, so --export-hf's merge is the base), the plan starts from
# the trained adapters bit for bit, the base weights unchanged. gate_up_proj alone, unnested, too.
same_adapters() {  # PLAN_WEIGHTS TRAINED START: the adapters as trained, the rest as they started
  /usr/bin/python3 - "$@" "$here" <<'EOF'
import sys; sys.path.insert(0, sys.argv[4])
import mt_reference as ref
back, trained, start = (ref.read_safetensors(f) for f in sys.argv[1:4])
assert sorted(back) == sorted(trained), sorted(set(back) ^ set(trained))
assert all(back[k].equal(trained[k] if 'lora_' in k else start[k]) for k in back), 'values differ'
assert any('lora_' in k and back[k].dim() == 3 for k in back), 'no stack adapters'
EOF
}
rm -rf oss_base && "$bin/mtrun" oss_lx.plan --data corpus.tok --weights oss_lx0.safetensors --steps 1 --lr 0 \
  --export-hf oss_base --print-every 100 > /dev/null
"$bin/mtc" oss_base --batch 4 --seq 32 --lora-from oss_peft -o oss_back.plan > oss_back.txt 2>&1
check "LoRA on gpt-oss's experts: --lora-from reads PEFT's target_parameters back bit for bit" \
  "grep -q 'on 16 weights and 8 stacks of experts' oss_back.txt && same_adapters oss_back.safetensors oss_lx.safetensors oss_lx0.safetensors"
rm -rf qwen3_base && "$bin/mtrun" qwen3_lx.plan --data corpus.tok --weights qwen3_lx0.safetensors --steps 1 --lr 0 \
  --export-hf qwen3_base --print-every 100 > /dev/null
"$bin/mtc" qwen3_base --batch 4 --seq 32 --lora-from qwen3_peft -o qwen3_back.plan > qwen3_back.txt 2>&1
check "LoRA on Qwen3-MoE's experts: --lora-from reads each expert's adapters back bit for bit" \
  "grep -q 'on 16 weights and 12 stacks of experts' qwen3_back.txt && same_adapters qwen3_back.safetensors qwen3_lx.safetensors qwen3_lx0.safetensors"
"$bin/mtc" qwen3_base --forward-only --batch 1 --seq 32 --lora-from qwen3_peft -o qwen3_fwd.plan > qwen3_fwd.txt 2>&1
check "... and merged into a forward-only plan bit for bit as --export-hf merges" \
  "same_tensors qwen3_fwd.safetensors qwen3_lx_again.safetensors || { tail -3 qwen3_fwd.txt; false; }"
# Transformers 5 fuses each layer's experts (mlp.experts.gate_up_proj (E, 2I, H), gate's rows then
# up's; down_proj (E, H, I); Mixtral's moved from block_sparse_moe to mlp), and PEFT adapts them in
# place (target_parameters). fuse_adapter converts a per-expert adapter as PEFT converts one on
# loading it into transformers 5 (its transformers_weight_conversion): gate_up_proj's lora_A the
# experts' A of gate and up side by side in the rank (E*2r, H), its lora_B their B block-diagonal
# (2I, 2r*E) with expert e's rank k in column k*E + e, rank and alpha doubled by pattern;
# down_proj's lora_A (E*r, I), lora_B (H, r*E). The adapters under the experts module, gate_up_proj's
# nested in down_proj's (base_layer). A router ("gate", no nn.Linear there) becomes gate.weight.
fuse_adapter() {  # SRC DST LAYOUT(qwen3|mixtral)
  rm -rf "$2" && mkdir -p "$2"
  /usr/bin/python3 - "$@" "$here" <<'EOF'
import json, sys, torch; sys.path.insert(0, sys.argv[4])
import mt_reference as ref
src, dst, layout = sys.argv[1:4]
block, gate, up, down = {'qwen3': ('mlp', 'gate_proj', 'up_proj', 'down_proj'),
                         'mixtral': ('block_sparse_moe', 'w1', 'w3', 'w2')}[layout]
peft, config = ref.read_safetensors(src + '/adapter_model.safetensors'), json.load(open(src + '/adapter_config.json'))
fused = {k.replace('.block_sparse_moe.gate.', '.mlp.gate.'): v for k, v in peft.items() if '.experts.' not in k}
E, r, alpha = 4, config['r'], config['lora_alpha']
def experts_b(b):  # (E, out, r') -> PEFT's (out, r'*E)
    return b.permute(2, 0, 1).flatten(0, 1).T.contiguous()
layers = sorted({int(k.split('.')[4]) for k in peft if '.experts.' in k})
for layer in layers:
    v4, v5 = f'base_model.model.model.layers.{layer}.{block}.experts.', f'base_model.model.model.layers.{layer}.mlp.experts.'
    stack = lambda leaf, ab: torch.stack([peft[f'{v4}{e}.{leaf}.lora_{ab}.weight'] for e in range(E)])
    b_gate, b_up = stack(gate, 'B'), stack(up, 'B')
    fused[v5 + 'base_layer.lora_A.weight'] = torch.cat([stack(gate, 'A'), stack(up, 'A')], dim=1).flatten(0, 1)
    fused[v5 + 'base_layer.lora_B.weight'] = experts_b(torch.stack([torch.block_diag(b_gate[e], b_up[e]) for e in range(E)]))
    fused[v5 + 'lora_A.weight'] = stack(down, 'A').flatten(0, 1)
    fused[v5 + 'lora_B.weight'] = experts_b(stack(down, 'B'))
ref.write_safetensors(dst + '/adapter_model.safetensors', fused)
config['target_parameters'] = ['gate_up_proj', 'down_proj'] + ['gate.weight'] * ('gate' in config['target_modules'])
config['target_modules'] = [m for m in config['target_modules'] if m not in (gate, up, down, 'gate')]
config['rank_pattern'], config['alpha_pattern'] = {r'.*\.gate_up_proj': 2 * r}, {r'.*\.gate_up_proj': 2 * alpha}
config['lora_dropout'] = 0.0
json.dump(config, open(dst + '/adapter_config.json', 'w'))
EOF
}
close_tensors() {  # A B: the same tensors, each within 1e-6 of the other (relative)
  /usr/bin/python3 - "$@" "$here" <<'EOF'
import sys; sys.path.insert(0, sys.argv[3])
import mt_reference as ref
a, b = ref.read_safetensors(sys.argv[1]), ref.read_safetensors(sys.argv[2])
assert sorted(a) == sorted(b), sorted(set(a) ^ set(b))
bad = [(k, ref.rel_err(a[k], b[k])) for k in a if ref.rel_err(a[k], b[k]) > 1e-6]
assert not bad, bad[:3]
EOF
}
fuse_adapter qwen3_peft qwen3_fused qwen3
"$bin/mtc" qwen3_base --forward-only --batch 1 --seq 32 --lora-from qwen3_fused -o qwen3_fused_fwd.plan \
  > qwen3_fused_fwd.txt 2>&1
check "Qwen3-MoE's experts in transformers 5's fused form (target_parameters): merged as the per-expert form merges" \
  "close_tensors qwen3_fused_fwd.safetensors qwen3_fwd.safetensors || { tail -3 qwen3_fused_fwd.txt; false; }"
# To train on: gate's and up's stacks each take PEFT's one lora_A (E, 2r, H) and their rows of its
# lora_B (rank 2r, alpha 2 alpha: the same scale), trained apart from there; down's as it is.
"$bin/mtc" qwen3_base --batch 4 --seq 32 --lora-from qwen3_fused -o qwen3_fused.plan > qwen3_fused.txt 2>&1
rm -rf qwen3_fused_hf && "$bin/mtrun" qwen3_fused.plan --data corpus.tok --weights qwen3_fused.safetensors --steps 1 \
  --lr 0 --export-hf qwen3_fused_hf --print-every 100 > /dev/null
"$bin/mtc" qwen3_fused_hf --batch 4 --seq 32 -o qwen3_fused_again.plan > /dev/null
check "... and trained on: gate and up both from the shared lora_A, each its rows of lora_B; merged by --export-hf alike" \
  "grep -q 'on 16 weights and 12 stacks of experts' qwen3_fused.txt && close_tensors qwen3_fused_again.safetensors qwen3_lx_again.safetensors && \
   /usr/bin/python3 - qwen3_fused.safetensors qwen3_lx.safetensors <<'EOF'
import sys, torch; sys.path.insert(0, '$here')
import mt_reference as ref
back, trained = ref.read_safetensors(sys.argv[1]), ref.read_safetensors(sys.argv[2])
for layer in range(4):
    s = lambda stack, ab, w=trained: w[f'layers.{layer}.moe.{stack}.lora_{ab}.weight']
    shared = torch.cat([s('gate', 'A'), s('up', 'A')], dim=1)
    zeros = torch.zeros_like(s('gate', 'B'))
    assert s('gate', 'A', back).equal(shared) and s('up', 'A', back).equal(shared), layer
    assert s('gate', 'B', back).equal(torch.cat([s('gate', 'B'), zeros], 2)), layer
    assert s('up', 'B', back).equal(torch.cat([zeros, s('up', 'B')], 2)), layer
    assert s('down', 'A', back).equal(s('down', 'A')) and s('down', 'B', back).equal(s('down', 'B')), layer
EOF"
# Against PEFT's own formula, not the conversion: gate_up_proj alone (its keys unnested), A and B
# dense and random: the merge gives each expert's gate rows and up rows of PEFT's delta,
# einsum('o r e, e r i -> e o i', B (2I, R, E), A (E, R, H)) x alpha / R, and leaves down as it was.
/usr/bin/python3 - "$here" <<'EOF'
import json, shutil, sys, torch; sys.path.insert(0, sys.argv[1])
import mt_reference as ref
shutil.rmtree('qwen3_dense', True); shutil.copytree('qwen3_fused', 'qwen3_dense')
w = ref.read_safetensors('qwen3_dense/adapter_model.safetensors')
g = torch.Generator().manual_seed(7)
for layer in range(4):
    pre = f'base_model.model.model.layers.{layer}.mlp.experts.'
    for ab in 'AB':
        del w[pre + f'lora_{ab}.weight']
        t = w.pop(pre + f'base_layer.lora_{ab}.weight')
        w[pre + f'lora_{ab}.weight'] = 0.1 * torch.randn(t.shape, generator=g)
ref.write_safetensors('qwen3_dense/adapter_model.safetensors', w)
c = json.load(open('qwen3_dense/adapter_config.json'))
c['target_parameters'] = ['gate_up_proj']
json.dump(c, open('qwen3_dense/adapter_config.json', 'w'))
shutil.rmtree('qwen3_moved', True); shutil.copytree('qwen3_dense', 'qwen3_moved')
c['target_modules'].append('down_proj')  # PEFT moves it to down_proj's fused parameter
json.dump(c, open('qwen3_moved/adapter_config.json', 'w'))
EOF
"$bin/mtc" qwen3_base --forward-only --batch 1 --seq 32 -o qwen3_plain_fwd.plan > /dev/null
"$bin/mtc" qwen3_base --forward-only --batch 1 --seq 32 --lora-from qwen3_dense -o qwen3_dense_fwd.plan \
  > qwen3_dense_fwd.txt 2>&1
check "a fused gate_up_proj alone, dense random adapters: PEFT's delta merged" \
  "/usr/bin/python3 - <<'EOF' || { tail -3 qwen3_dense_fwd.txt; false; }
import sys, torch; sys.path.insert(0, '$here')
import mt_reference as ref
got, plain, adapter = (ref.read_safetensors(f) for f in ('qwen3_dense_fwd.safetensors', 'qwen3_plain_fwd.safetensors',
                                                           'qwen3_dense/adapter_model.safetensors'))
E, I = 4, 32
for layer in range(4):
    pre = f'base_model.model.model.layers.{layer}.mlp.experts.'
    a, b = adapter[pre + 'lora_A.weight'], adapter[pre + 'lora_B.weight']
    R = a.shape[0] // E
    delta = torch.einsum('ore,eri->eoi', b.reshape(b.shape[0], R, E), a.reshape(E, R, a.shape[1])) * (16 / R)
    for stack, rows in (('gate', slice(0, I)), ('up', slice(I, 2 * I))):
        name = f'layers.{layer}.moe.{stack}.weight'
        assert ref.rel_err(got[name], plain[name] + delta[:, rows]) < 1e-6, (name, ref.rel_err(got[name], plain[name] + delta[:, rows]))
    assert got[f'layers.{layer}.moe.down.weight'].equal(plain[f'layers.{layer}.moe.down.weight']), layer
EOF"
"$bin/mtc" qwen3_base --forward-only --batch 1 --seq 32 --lora-from qwen3_moved -o x.plan > qwen3_moved.err 2>&1
check "--lora-from: an expert's layer's name in target_modules beside the fused form (PEFT moves it there) refused" \
  "grep -q \"target_modules lists 'down_proj' beside transformers 5's fused experts\" qwen3_moved.err && [ ! -e x.plan ] || \
   { cat qwen3_moved.err; false; }"
# --export-peft --peft-experts fused writes that form itself: the same tensors as the conversion,
# r 4 with gate_up_proj's rank and alpha doubled by pattern, read back as it merges. Adapters of two
# scales on one layer's gate and up (one fused adapter has one), and the flag on a plan without such
# experts or without --export-peft, refused.
rm -rf qwen3_fused_out
"$bin/mtrun" qwen3_lx.plan --data corpus.tok --weights qwen3_lx.safetensors --steps 1 --lr 0 \
  --export-peft qwen3_fused_out --peft-experts fused --print-every 100 > /dev/null
"$bin/mtc" qwen3_base --forward-only --batch 1 --seq 32 --lora-from qwen3_fused_out -o qwen3_fused_out_fwd.plan \
  > /dev/null 2>&1
check "--export-peft --peft-experts fused: transformers 5's form as PEFT converts it, merged back alike" \
  "/usr/bin/python3 - <<'EOF' && close_tensors qwen3_fused_out_fwd.safetensors qwen3_fwd.safetensors
import json, sys; sys.path.insert(0, '$here')
import mt_reference as ref
out, want = ref.read_safetensors('qwen3_fused_out/adapter_model.safetensors'), ref.read_safetensors('qwen3_fused/adapter_model.safetensors')
assert sorted(out) == sorted(want) and all(out[k].equal(want[k]) for k in out), sorted(set(out) ^ set(want))
c = json.load(open('qwen3_fused_out/adapter_config.json'))
assert (c['target_parameters'], sorted(c['target_modules'])) == (['down_proj', 'gate_up_proj'], ['k_proj', 'o_proj', 'q_proj', 'v_proj']), c
assert (c['r'], c['lora_alpha'], c['rank_pattern'], c['alpha_pattern']) == (4, 8, {'gate_up_proj': 8}, {'gate_up_proj': 16}), c
EOF"
"$bin/mtc" "${shape[@]}" --lora 4 --lora-experts 'moe\.' --lora-rank-pattern 'moe\.gate=8' -o two_scales.plan \
  --weights two_scales0.safetensors > /dev/null
rm -rf x_peft
"$bin/mtrun" two_scales.plan --data corpus.tok --weights two_scales0.safetensors --steps 1 --export-peft x_peft \
  --peft-experts fused > two_scales.err 2>&1
"$bin/mtrun" oss_lx.plan --data corpus.tok --weights oss_lx0.safetensors --steps 1 --export-peft x_peft \
  --peft-experts fused > fused_oss.err 2>&1
"$bin/mtrun" qwen3_lx.plan --data corpus.tok --weights qwen3_lx0.safetensors --steps 1 --peft-experts fused \
  > fused_alone.err 2>&1
check "--peft-experts fused: two scales in one gate_up_proj, no such experts, no --export-peft: refused before the run" \
  "grep -q \"'layers.0.moe.gate.weight' and 'layers.0.moe.up.weight' have adapters of other scales\" two_scales.err && \
   grep -q 'adapts no stack of experts or router of Qwen3-MoE or Mixtral' fused_oss.err && \
   grep -q -- '--peft-experts says how --export-peft writes' fused_alone.err && [ ! -e x_peft ] || \
   { cat two_scales.err fused_oss.err fused_alone.err; false; }"
# PEFT 0.19.0 wrote such stacks' adapters with in and out swapped (and earlier PEFT on transformers
# 5's fused experts): such shapes are named; where in and out are equal (gate_up_proj here: 64 and
# 2 x 32) and peft_version says such a PEFT, refused. A file holding both forms for one stack too.
/usr/bin/python3 - "$here" <<'EOF'
import json, shutil, sys; sys.path.insert(0, sys.argv[1])
import mt_reference as ref
shutil.rmtree('qwen3_swapped', True); shutil.copytree('qwen3_fused', 'qwen3_swapped')
w = ref.read_safetensors('qwen3_swapped/adapter_model.safetensors')
key = 'base_model.model.model.layers.0.mlp.experts.lora_A.weight'  # down_proj's (E*r, I) as (E*r, H)
w[key] = w[key].new_zeros(w[key].shape[0], 64)
ref.write_safetensors('qwen3_swapped/adapter_model.safetensors', w)
for version in ('0.18.1', '0.19.1'):
    shutil.rmtree('qwen3_v' + version, True); shutil.copytree('qwen3_fused', 'qwen3_v' + version)
    c = json.load(open('qwen3_fused/adapter_config.json')); c['peft_version'] = version
    json.dump(c, open(f'qwen3_v{version}/adapter_config.json', 'w'))
shutil.rmtree('qwen3_both', True); shutil.copytree('qwen3_fused', 'qwen3_both')
w = ref.read_safetensors('qwen3_both/adapter_model.safetensors')
w.update({k: v for k, v in ref.read_safetensors('qwen3_peft/adapter_model.safetensors').items() if '.experts.0.gate_proj.' in k})
ref.write_safetensors('qwen3_both/adapter_model.safetensors', w)
EOF
"$bin/mtc" qwen3_base --batch 4 --seq 32 --lora-from qwen3_swapped -o x.plan > qwen3_swapped.err 2>&1
"$bin/mtc" qwen3_base --batch 4 --seq 32 --lora-from qwen3_v0.18.1 -o w.plan > qwen3_old.err 2>&1
"$bin/mtc" qwen3_base --batch 4 --seq 32 --lora-from qwen3_both -o y.plan > qwen3_both.err 2>&1
"$bin/mtc" qwen3_base --batch 4 --seq 32 --lora-from qwen3_v0.19.1 -o qwen3_v.plan > qwen3_v.txt 2>&1
check "--lora-from: a fused stack's adapter swapped, PEFT 0.18.1 on a square stack, both forms in one file: refused" \
  "grep -q 'its stack.s in and out the other way round, as PEFT 0.19.0 wrote such adapters' qwen3_swapped.err && \
   grep -q 'PEFT 0.18.1 wrote it, which may hold the adapters of model.layers.0.mlp.experts.gate_up_proj (as many inputs as outputs, 64)' qwen3_old.err && \
   grep -q \"holds 'base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_A.weight', transformers 4's adapter\" qwen3_both.err && \
   [ ! -e x.plan ] && [ ! -e w.plan ] && [ ! -e y.plan ] && [ -e qwen3_v.plan ] || \
   { cat qwen3_swapped.err qwen3_old.err qwen3_both.err qwen3_v.txt; false; }"
# The experts of layers 0 to 2 alone, layer 0's at rank 8: target_modules names each expert's layer
# (a leaf would find layer 3 too), rank_pattern one key for all of layer 0's experts; out and back
# bit for bit, merged as --export-hf merges.
"$bin/mtc" "${shape[@]}" --lora 4 --lora-experts 'layers\.[012]\.moe\.' --lora-rank-pattern 'layers\.0\.moe=8' \
  -o qwen3_some.plan --weights qwen3_some0.safetensors > /dev/null
rm -rf qwen3_some_peft qwen3_some_hf qwen3_some_base
"$bin/mtrun" qwen3_some.plan --data corpus.tok --weights qwen3_some0.safetensors --steps 3 --lr 1e-2 \
  --export qwen3_some.safetensors --export-peft qwen3_some_peft --export-hf qwen3_some_hf --print-every 100 > /dev/null
"$bin/mtrun" qwen3_some.plan --data corpus.tok --weights qwen3_some0.safetensors --steps 1 --lr 0 \
  --export-hf qwen3_some_base --print-every 100 > /dev/null
"$bin/mtc" qwen3_some_base --batch 4 --seq 32 --lora-from qwen3_some_peft -o qwen3_some_back.plan > /dev/null 2>&1
"$bin/mtc" qwen3_some_hf --batch 4 --seq 32 -o qwen3_some_merged.plan > /dev/null
"$bin/mtc" qwen3_some_base --forward-only --batch 1 --seq 32 --lora-from qwen3_some_peft -o qwen3_some_fwd.plan \
  > qwen3_some_fwd.txt 2>&1
check "Qwen3-MoE, the experts of 3 layers, one at rank 8: each expert named, one pattern key, back and merged bit for bit" \
  "/usr/bin/python3 -c \"import json; c = json.load(open('qwen3_some_peft/adapter_config.json')); \
assert len(c['target_modules']) == 3 * 3 * 4 and 'model.layers.1.mlp.experts.3.down_proj' in c['target_modules'], c; \
assert c['rank_pattern'] == {r'layers\\\\.0\\\\.mlp\\\\.experts\\\\.[0-9]+\\\\.' + p: 8 for p in ('down_proj', 'gate_proj', 'up_proj')}, c\" && \
   same_adapters qwen3_some_back.safetensors qwen3_some.safetensors qwen3_some0.safetensors && \
   { same_tensors qwen3_some_fwd.safetensors qwen3_some_merged.safetensors || { tail -3 qwen3_some_fwd.txt; false; }; }"
# Refused: target_modules on some experts of a stack only. Dropout: trained on, and merged.
/usr/bin/python3 -c "import json; c = json.load(open('qwen3_some_peft/adapter_config.json')); \
c['target_modules'].remove('model.layers.0.mlp.experts.2.gate_proj'); json.dump(c, open('qwen3_some_peft/adapter_config.json', 'w'))"
"$bin/mtc" qwen3_some_base --forward-only --batch 1 --seq 32 --lora-from qwen3_some_peft -o x.plan > qwen3_part.err 2>&1
check "--lora-from: target_modules on 3 of a stack's 4 experts refused" \
  "grep -q 'target_modules adapt model.layers.0.mlp.experts.0.gate_proj but not model.layers.0.mlp.experts.2.gate_proj: mtc.s adapters on a stack of experts are on every expert' qwen3_part.err && [ ! -e x.plan ]"
# ... and another rank for one expert of a stack, an expert's layer saved whole, and (as PEFT 0.20
# reads it: layer 1 alone) layers_to_transform where the file holds every layer's experts, as PEFT
# before 0.20 would have written it (choosing by the expert's index).
for damage in "rank_pattern={r'layers\\.0\\.mlp\\.experts\\.1\\.up_proj': 8}" "modules_to_save=['experts.3.down_proj']" \
  "layers_to_transform=[1]"; do
  rm -rf qwen3_damaged && cp -r qwen3_peft qwen3_damaged
  /usr/bin/python3 -c "import json; c = json.load(open('qwen3_damaged/adapter_config.json')); c.update(dict($damage)); \
json.dump(c, open('qwen3_damaged/adapter_config.json', 'w'))"
  "$bin/mtc" qwen3_base --batch 4 --seq 32 --lora-from qwen3_damaged -o x.plan > qwen3_damaged.err 2>&1
  check "--lora-from: $damage refused on a stack of experts" \
    "grep -qE 'gives model.layers.0.mlp.experts.1.up_proj another rank or alpha than model.layers.0.mlp.experts.0.up_proj|modules_to_save.s .experts.3.down_proj. saves model.layers.0.mlp.experts.3.down_proj, one expert.s layer|model.layers.0.mlp.experts.*with layers_to_transform, PEFT before 0.20 chose' qwen3_damaged.err && [ ! -e x.plan ] || { cat qwen3_damaged.err; false; }"
done
/usr/bin/python3 -c "import json; c = json.load(open('qwen3_peft/adapter_config.json')); c['lora_dropout'] = 0.1; \
json.dump(c, open('qwen3_peft/adapter_config.json', 'w'))"
"$bin/mtc" qwen3_base --batch 4 --seq 32 --lora-from qwen3_peft -o qwen3_drop.plan > qwen3_drop.txt 2>&1
"$bin/mtc" qwen3_base --forward-only --batch 1 --seq 32 --lora-from qwen3_peft -o qwen3_fwd_drop.plan \
  > qwen3_fwd_drop.txt 2>&1
check "--lora-from: dropout on the experts' layers trained on, and merged for sampling" \
  "grep -q 'dropout 0.1 before A) on 16 weights and 12 stacks of experts' qwen3_drop.txt && [ -e qwen3_fwd_drop.plan ]"
# PEFT's all-linear on transformers 4's Qwen3-MoE adapted the routers and each expert's layers too
# (all nn.Linear there): a folder holding single experts' adapters reads all-linear so, bit for bit.
"$bin/mtc" "${shape[@]}" --lora 4 --lora-targets 'attn\.|moe\.router' --lora-experts 'moe\.' -o all.plan \
  --weights all0.safetensors > /dev/null
rm -rf all_peft all_base
"$bin/mtrun" all.plan --data corpus.tok --weights all0.safetensors --steps 2 --lr 1e-2 --export all.safetensors \
  --export-peft all_peft --print-every 100 > /dev/null
"$bin/mtrun" all.plan --data corpus.tok --weights all0.safetensors --steps 1 --lr 0 --export-hf all_base --print-every 100 \
  > /dev/null
# ... and in transformers 5's form, the routers by target_parameters (gate.weight) too: merged alike,
# and trained on from the routers' adapters as written.
fuse_adapter all_peft all_fused qwen3
"$bin/mtc" all_base --forward-only --batch 1 --seq 32 --lora-from all_peft -o all_fwd.plan > /dev/null 2>&1
"$bin/mtc" all_base --forward-only --batch 1 --seq 32 --lora-from all_fused -o all_fused_fwd.plan > all_fused_fwd.txt 2>&1
"$bin/mtc" all_base --batch 4 --seq 32 --lora-from all_fused -o all_fused.plan > all_fused.txt 2>&1
rm -rf all_fused_out && "$bin/mtrun" all.plan --data corpus.tok --weights all.safetensors --steps 1 --lr 0 \
  --export-peft all_fused_out --peft-experts fused --print-every 100 > /dev/null
check "Qwen3-MoE in transformers 5's form with the routers (target_parameters gate.weight): merged, trained on, written" \
  "close_tensors all_fused_fwd.safetensors all_fwd.safetensors && grep -q 'on 20 weights and 12 stacks of experts' all_fused.txt && \
   /usr/bin/python3 -c \"import sys; sys.path.insert(0, '$here'); import mt_reference as ref; \
a, b = ref.read_safetensors('all_fused.safetensors'), ref.read_safetensors('all.safetensors'); \
keys = [k for k in b if '.moe.router.lora_' in k]; assert len(keys) == 8 and all(a[k].equal(b[k]) for k in keys), keys; \
out, want = ref.read_safetensors('all_fused_out/adapter_model.safetensors'), ref.read_safetensors('all_fused/adapter_model.safetensors'); \
assert sorted(out) == sorted(want) and all(out[k].equal(want[k]) for k in out), sorted(set(out) ^ set(want))\" && \
   grep -q '\"gate.weight\"' all_fused_out/adapter_config.json \
   || { tail -3 all_fused_fwd.txt all_fused.txt; false; }"
/usr/bin/python3 -c "import json; c = json.load(open('all_peft/adapter_config.json')); assert 'gate' in c['target_modules'], c; \
c['target_modules'] = 'all-linear'; json.dump(c, open('all_peft/adapter_config.json', 'w'))"
"$bin/mtc" all_base --batch 4 --seq 32 --lora-from all_peft -o all_back.plan > all_back.txt 2>&1
check "--lora-from: all-linear over single experts' adapters (transformers 4's) adapts routers and experts, bit for bit" \
  "grep -q 'on 20 weights and 12 stacks of experts' all_back.txt && same_adapters all_back.safetensors all.safetensors all0.safetensors || { tail -3 all_back.txt; false; }"
# Mixtral's experts: each expert's w1, w3 and w2 (transformers 4's MixtralBlockSparseTop2MLP).
"$bin/mtc" mixtral-tiny --batch 2 --seq 16 --lora 4 --lora-experts 'moe\.' -o mix.plan --weights mix0.safetensors > /dev/null
rm -rf mix_peft mix_base
"$bin/mtrun" mix.plan --data corpus.tok --weights mix0.safetensors --steps 2 --lr 1e-2 --export mix.safetensors \
  --export-peft mix_peft --print-every 100 > /dev/null
"$bin/mtrun" mix.plan --data corpus.tok --weights mix0.safetensors --steps 1 --lr 0 --export-hf mix_base \
  --print-every 100 > /dev/null
"$bin/mtc" mix_base --batch 2 --seq 16 --lora-from mix_peft -o mix_back.plan > /dev/null 2>&1
check "Mixtral's experts: each expert's w1, w2, w3 out and back bit for bit" \
  "grep -q '\"target_modules\": \[' mix_peft/adapter_config.json && \
   /usr/bin/python3 -c \"import json; c = json.load(open('mix_peft/adapter_config.json')); assert sorted(c['target_modules']) == ['w1', 'w2', 'w3'], c\" && \
   same_adapters mix_back.safetensors mix.safetensors mix0.safetensors"
# ... and in transformers 5's fused form (Mixtral's experts under mlp there, w1's rows before w3's).
fuse_adapter mix_peft mix_fused mixtral
"$bin/mtc" mix_base --forward-only --batch 1 --seq 16 --lora-from mix_peft -o mix_fwd.plan > /dev/null 2>&1
"$bin/mtc" mix_base --forward-only --batch 1 --seq 16 --lora-from mix_fused -o mix_fused_fwd.plan > mix_fused_fwd.txt 2>&1
check "Mixtral's experts in transformers 5's fused form: merged as the per-expert form merges" \
  "grep -q 'base_model.model.model.layers.0.mlp.experts.base_layer.lora_A.weight' <(/usr/bin/python3 -c \"import sys; sys.path.insert(0, '$here'); import mt_reference as ref; print(*ref.read_safetensors('mix_fused/adapter_model.safetensors'))\") && \
   close_tensors mix_fused_fwd.safetensors mix_fwd.safetensors || { tail -3 mix_fused_fwd.txt; false; }"
"$bin/mtc" "${oss[@]}" --lora 4 --lora-experts 'moe\.gate_up' --lora-rank-pattern 'layers\.0\.moe=8' -o oss_gu.plan \
  --weights oss_gu0.safetensors > /dev/null
rm -rf oss_gu_peft oss_gu_base
rm -rf oss_gu_hf
"$bin/mtrun" oss_gu.plan --data corpus.tok --weights oss_gu0.safetensors --steps 3 --lr 1e-2 --export oss_gu.safetensors \
  --export-peft oss_gu_peft --export-hf oss_gu_hf --print-every 100 > /dev/null
"$bin/mtrun" oss_gu.plan --data corpus.tok --weights oss_gu0.safetensors --steps 1 --lr 0 --export-hf oss_gu_base \
  --print-every 100 > /dev/null
"$bin/mtc" oss_gu_base --batch 4 --seq 32 --lora-from oss_gu_peft -o oss_gu_back.plan > /dev/null 2>&1
/usr/bin/python3 - "$here" > oss_gu_keys.txt 2>&1 <<'EOF'
import sys; sys.path.insert(0, sys.argv[1])
import mt_reference as ref
print(sorted(ref.read_safetensors('oss_gu_peft/adapter_model.safetensors'))[0])
import json
pattern = json.load(open('oss_gu_peft/adapter_config.json'))['rank_pattern']
open('oss_gu_pattern.txt', 'w').write(''.join(f'{key}={rank}\n' for key, rank in pattern.items()))
EOF
check "LoRA on gpt-oss's gate_up_proj alone, layer 0's at rank 8: unnested keys, rank_pattern, read back bit for bit" \
  "grep -q '\"target_modules\": \[\]' oss_gu_peft/adapter_config.json && \
   grep -qxF 'layers\.0\.mlp\.experts\.gate_up_proj=8' oss_gu_pattern.txt && \
   grep -qx 'base_model.model.model.layers.0.mlp.experts.lora_A.weight' oss_gu_keys.txt && \
   same_adapters oss_gu_back.safetensors oss_gu.safetensors oss_gu0.safetensors"
"$bin/mtc" oss_gu_hf --batch 4 --seq 32 -o oss_gu_merged.plan > /dev/null
"$bin/mtc" oss_gu_base --forward-only --batch 1 --seq 32 --lora-from oss_gu_peft -o oss_gu_fwd.plan > oss_gu_fwd.txt 2>&1
check "... and merged into a forward-only plan (unnested, layer 0 at rank 8) bit for bit as --export-hf merges" \
  "same_tensors oss_gu_fwd.safetensors oss_gu_merged.safetensors || { tail -3 oss_gu_fwd.txt; false; }"
"$bin/mtc" oss_base --forward-only --batch 1 --seq 32 --lora-from oss_peft -o oss_fwd.plan > oss_fwd.txt 2>&1
check "--lora-from's adapters on experts, forward-only: merged bit for bit as --export-hf merges" \
  "same_tensors oss_fwd.safetensors oss_lx_again.safetensors || { tail -3 oss_fwd.txt; false; }"
/usr/bin/python3 -c "import json; c = json.load(open('oss_peft/adapter_config.json')); c['lora_dropout'] = 0.1; \
json.dump(c, open('oss_peft/adapter_config.json', 'w'))"
"$bin/mtc" oss_base --batch 4 --seq 32 --lora-from oss_peft -o x.plan > oss_drop.err 2>&1
check "--lora-from: target_parameters with dropout refused" \
  "grep -q 'target_parameters with lora_dropout above 0: PEFT' oss_drop.err && [ ! -e x.plan ]"
"$bin/mtc" "${shape[@]}" "${lora_experts[@]}" --lora-dora -o x.plan > lx_beside.err 2>&1
check "LoRA on experts: --lora-dora refused" "grep -q -- '--lora-experts takes no --lora-dora' lx_beside.err && [ ! -e x.plan ]"
"$bin/mtc" "${oss[@]}" "${lora_experts[@]}" --lora-dropout 0.1 -o x.plan > lx_oss_drop.err 2>&1
check "LoRA on gpt-oss's experts: --lora-dropout refused (PEFT's target_parameters have none)" \
  "grep -q -- '--lora-dropout with --lora-experts on gpt-oss.s stacks of experts' lx_oss_drop.err && [ ! -e x.plan ]"
# Dropout on Qwen3-MoE's stacks (torch_parity's qwen3-moe-tiny-lora-experts-dropout checks the numbers):
# each routed row's mask redrawn, not stored: in 2 expert groups under recompute, bit for bit.
"$bin/mtc" "${shape[@]}" "${lora_experts[@]}" --lora-dropout 0.1 --schedule resident -o lxd.plan --weights lxd0.safetensors \
  > /dev/null
"$bin/mtc" "${shape[@]}" "${lora_experts[@]}" --lora-dropout 0.1 --schedule streamed-recompute --expert-groups 2 \
  -o lxd_groups.plan --no-weights > /dev/null
train lxd.plan lxd lxd0.safetensors --lr 1e-2
train lxd_groups.plan lxd_groups lxd0.safetensors --lr 1e-2
check "LoRA with dropout on experts, in 2 groups under recompute: bit for bit as resident" \
  "cmp -s lxd.loss lxd_groups.loss && same_tensors lxd.safetensors lxd_groups.safetensors && ! cmp -s lxd.loss qwen3_lx.loss"
rm -rf x_peft
"$bin/mtrun" lxd.plan --data corpus.tok --weights lxd0.safetensors --steps 1 --export-peft x_peft --peft-experts fused \
  > lxd_fused.err 2>&1
check "--peft-experts fused with dropout refused before the run (PEFT's adapters on parameters take none)" \
  "grep -q 'fused experts and routers take no dropout' lxd_fused.err && [ ! -e x_peft ] || { cat lxd_fused.err; false; }"
"$bin/mtc" "${shape[@]}" --lora 4 --lora-experts 'moe\.' --lora-dropout 0 -o alone.plan --no-weights > alone.txt
check "LoRA on experts without --lora-targets: the stacks alone (dropout 0 is none)" \
  "grep -q 'on 0 weights and 12 stacks of experts' alone.txt"
"$bin/mtc" llama-tiny --lora 4 --lora-experts 'attn\.' -o x.plan > lx_none.err 2>&1
check "LoRA on experts: a pattern that finds no stack refused" \
  "grep -q -- '--lora-experts finds no stack of experts' lx_none.err && [ ! -e x.plan ]"
finish
