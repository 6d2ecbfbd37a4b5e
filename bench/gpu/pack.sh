#!/usr/bin/env bash
# Packs what bench/gpu/run.sh needs on the lent GPU machine, which has CUDA and PyTorch but none
# of our build dependencies (MLIR, protobuf, OpenBLAS, ...): mtrun, mttok and the CUDA twin tests
# built here with the shared libraries they need beyond glibc and CUDA, the plans compiled here
# (mtc needs no GPU), and a token file. Everything goes to .gpu/ (git-ignored, ~110 MiB), packed
# into .gpu.tar.xz (~25 MiB: the device tool carries at most 64 MiB), which the device tool carries:
#   run(command="tar xJf .gpu.tar.xz && bash bench/gpu/run.sh", carry=[".gpu.tar.xz"])
# usage: bash bench/gpu/pack.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/build.sh
rm -rf .gpu && mkdir -p .gpu/bin .gpu/lib .gpu/plans
cp build/bin/mtrun build/bin/mtgen build/bin/mt_cuda_twin_tests build/bin/mt_adamw_rate build/bin/kv_cache_check \
  build/bin/mt_gpu_kernel_rate .gpu/bin/
for lib in $(ldd build/bin/mtrun build/bin/mtgen build/bin/mt_cuda_twin_tests build/bin/mt_adamw_rate build/bin/kv_cache_check build/bin/mt_gpu_kernel_rate |
             awk '/=>/ { print $3 }' | sort -u); do
  case $(basename "$lib") in
    # glibc's and CUDA's own: the machine's versions must be used.
    # cuDNN too: its shim loads its engines from its own folder, which must be the machine's.
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libcuda.so* | libcudart* | libcublas* | libcudnn*) ;;
    *) cp -L "$lib" .gpu/lib/ ;;
  esac
done
corpus=$(find /usr/share/games/fortunes -type f ! -name '*.dat' ! -name '*.u8' | sort)
build/bin/mttok --bytes $corpus -o .gpu/corpus.tok >/dev/null

# Correctness: tiny models, resident and streamed-recompute, run on cpu and cuda by run.sh.
for model in gpt2-tiny llama-tiny; do
  build/bin/mtc $model --batch 4 --seq 32 --no-weights -o .gpu/plans/$model.plan >/dev/null
  build/bin/mtc $model --batch 4 --seq 32 --device-mem 1300KiB --no-weights -o .gpu/plans/$model-streamed.plan >/dev/null
done
# The LM head in vocabulary chunks (a budget the whole head does not fit: 8 chunks).
build/bin/mtc llama-tiny --layers 4 --width 64 --ffn 256 --vocab 4096 --batch 4 --seq 32 --device-mem 2MiB --no-weights \
  -o .gpu/plans/llama-tiny-split.plan >/dev/null
# A tied head in vocabulary chunks, its token embedding on the host (host lookup and scatter).
build/bin/mtc llama-tiny --tied --layers 4 --width 64 --ffn 256 --vocab 4096 --batch 4 --seq 32 --device-mem 2MiB \
  --no-weights -o .gpu/plans/llama-tiny-tied-split.plan >/dev/null
# Weights streamed as bf16 staging copies, widened on the device.
build/bin/mtc llama-tiny --batch 4 --seq 32 --device-mem 1300KiB --stream-dtype bf16 --no-weights \
  -o .gpu/plans/llama-tiny-bf16.plan >/dev/null
# Each block's token-wise work in 2 tiles along the tokens (mtc --token-tiles), fp32 and bf16.
build/bin/mtc llama-tiny --batch 2 --seq 64 --token-tiles 2 --no-weights -o .gpu/plans/llama-tiny-tiled.plan >/dev/null
build/bin/mtc llama-tiny --batch 2 --seq 64 --token-tiles 2 --precision bf16 --no-weights \
  -o .gpu/plans/llama-tiny-tiled-mixed.plan >/dev/null
# bf16 plans whose heads are 64 and 128 wide: attention on the tensor-core kernels
# (attention_mma_cuda.cu), 100 tokens (not a multiple of their 64-row tiles), grouped heads.
build/bin/mtc llama-tiny --width 256 --heads 4 --kv-heads 2 --ffn 512 --batch 2 --context 128 --seq 100 --precision bf16 \
  --no-weights -o .gpu/plans/llama-tiny-d64-mixed.plan >/dev/null
build/bin/mtc llama-tiny --width 256 --heads 2 --kv-heads 1 --ffn 512 --batch 2 --context 128 --seq 100 --precision bf16 \
  --no-weights -o .gpu/plans/llama-tiny-d128-mixed.plan >/dev/null
# The same heads over 128 tokens: cuDNN's fused attention before 9.16 takes multiples of 128
# (run.sh cudnn runs these on cuda with --attention cudnn against the CPU).
build/bin/mtc llama-tiny --width 256 --heads 4 --kv-heads 2 --ffn 512 --batch 2 --context 128 --seq 128 --precision bf16 \
  --no-weights -o .gpu/plans/llama-tiny-d64-s128-mixed.plan >/dev/null
build/bin/mtc llama-tiny --width 256 --heads 2 --kv-heads 1 --ffn 512 --batch 2 --context 128 --seq 128 --precision bf16 \
  --no-weights -o .gpu/plans/llama-tiny-d128-s128-mixed.plan >/dev/null
# Mixtures of experts (the twins of kernels/moe): Qwen3-MoE and Mixtral shapes, resident and
# streamed-recompute, and a bf16 plan around the f32 expert kernels; Qwen3-MoE's trained on its
# router's load-balancing loss too (the statistics' backward on the device); Qwen2-MoE's shared
# expert beside its experts (mt.unary's sigmoid, mt.binary's broadcast product on the device);
# GLM-4.5's sigmoid router (mt.moe_route_biased: its bias, groups and scale on the device);
# DeepSeek-V3's latent attention around it (mt.slice, mt.concat, mt.broadcast on the device);
# DeepSeek-V2's softmax router within groups.
for model in qwen3-moe-tiny qwen2-moe-tiny mixtral-tiny glm4-moe-tiny deepseek-v3-tiny deepseek-v2-tiny; do
  aux=()
  [ $model = qwen3-moe-tiny ] && aux=(--router-aux-loss 0.02)
  build/bin/mtc $model --batch 4 --seq 32 "${aux[@]}" --no-weights -o .gpu/plans/$model.plan >/dev/null
  build/bin/mtc $model --batch 4 --seq 32 "${aux[@]}" --device-mem 1300KiB --no-weights \
    -o .gpu/plans/$model-streamed.plan >/dev/null
done
build/bin/mtc qwen3-moe-tiny --batch 4 --seq 32 --router-aux-loss 0.02 --precision bf16 --no-weights \
  -o .gpu/plans/qwen3-moe-tiny-mixed.plan >/dev/null
build/bin/mtc qwen2-moe-tiny --batch 4 --seq 32 --precision bf16 --no-weights -o .gpu/plans/qwen2-moe-tiny-mixed.plan \
  >/dev/null
# gpt-oss (a window of 8 on its even layers, sinks, its biased experts, the clamped SwiGLU):
# resident, streamed-recompute and bf16 (our attention kernels with the window and the sinks).
build/bin/mtc gpt-oss-tiny --batch 4 --seq 32 --no-weights -o .gpu/plans/gpt-oss-tiny.plan >/dev/null
build/bin/mtc gpt-oss-tiny --batch 4 --seq 32 --device-mem 1300KiB --no-weights -o .gpu/plans/gpt-oss-tiny-streamed.plan \
  >/dev/null
build/bin/mtc gpt-oss-tiny --batch 4 --seq 32 --precision bf16 --no-weights -o .gpu/plans/gpt-oss-tiny-mixed.plan >/dev/null
# The experts streamed in 2 groups (mt.grouped_matmul_into in place on the device).
for model in qwen3-moe-tiny gpt-oss-tiny; do
  build/bin/mtc $model --batch 4 --seq 32 --schedule streamed-recompute --expert-groups 2 --no-weights \
    -o .gpu/plans/$model-groups.plan >/dev/null
done
# bf16 plans (mtc --precision bf16): resident and streamed-recompute, against the CPU's emulation.
for model in gpt2-tiny llama-tiny; do
  build/bin/mtc $model --batch 4 --seq 32 --precision bf16 --no-weights -o .gpu/plans/$model-mixed.plan >/dev/null
  build/bin/mtc $model --batch 4 --seq 32 --device-mem 700KiB --precision bf16 --no-weights \
    -o .gpu/plans/$model-mixed-streamed.plan >/dev/null
done
# Packed examples (mtc --packed-examples; run.sh trains them on .gpu/examples.tok with --rows
# packed-examples): our attention kernels masking by each token's example, fp32, bf16 with heads of
# 64 (the tensor cores both ways; packed calls never go to cuDNN), gpt-oss's window and sinks.
/usr/bin/python3 -c "import sys; sys.path.insert(0, 'tests/e2e'); import mt_reference as ref
ref.write_example_corpus('.gpu/corpus.tok', '.gpu/examples.tok')
# The preference plans' data a few hundred pairs: their reference pass scores every pair before the first
# step (the whole corpus's 80,521 pairs took 20 s on cuda and over a minute on the device's CPU).
ref.write_example_corpus('.gpu/corpus.tok', '.gpu/pairs.tok', pairs=True, tokens=8000)
ref.write_example_corpus('.gpu/corpus.tok', '.gpu/labelled.tok', pairs=True, labelled=True, tokens=8000)
print('.gpu/sft.tok:', ref.write_lognormal_examples('.gpu/sft.tok', 3000, 300, 24, 1023))"
build/bin/mtc llama-tiny --packed-examples --batch 4 --seq 64 --no-weights -o .gpu/plans/packed-llama-tiny.plan >/dev/null
build/bin/mtc llama-tiny --packed-examples --width 256 --heads 4 --kv-heads 2 --ffn 512 --batch 2 --context 128 --seq 100 \
  --precision bf16 --no-weights -o .gpu/plans/packed-llama-tiny-d64-mixed.plan >/dev/null
build/bin/mtc gpt-oss-tiny --packed-examples --batch 4 --seq 64 --no-weights -o .gpu/plans/packed-gpt-oss-tiny.plan >/dev/null
# Preference training (mtc --objective dpo; run.sh trains them on .gpu/pairs.tok): the sequence
# log-probabilities' and the DPO loss's twins end to end, with the reference pass's loss-only runs,
# fp32 (resident, streamed-recompute, streamed over 2 vocabulary chunks) and bf16; ORPO (no
# reference pass), SPPO (a loss of the two log-ratios apart) and AOT (sorted over the pairs); KTO
# (run.sh trains it on .gpu/labelled.tok).
build/bin/mtc llama-tiny --objective dpo --batch 4 --seq 32 --no-weights -o .gpu/plans/dpo-llama-tiny.plan >/dev/null
build/bin/mtc llama-tiny --objective dpo --batch 4 --seq 32 --schedule streamed-recompute --no-weights \
  -o .gpu/plans/dpo-llama-tiny-streamed.plan >/dev/null
build/bin/mtc llama-tiny --objective dpo --batch 4 --seq 32 --precision bf16 --no-weights \
  -o .gpu/plans/dpo-llama-tiny-mixed.plan >/dev/null
build/bin/mtc llama-tiny --objective dpo --batch 4 --seq 32 --schedule streamed --vocab-chunks 2 --no-weights \
  -o .gpu/plans/dpo-llama-tiny-split.plan >/dev/null
for loss in orpo sppo_hard aot; do
  build/bin/mtc llama-tiny --objective dpo --dpo-loss $loss --batch 4 --seq 32 --no-weights \
    -o .gpu/plans/dpo-llama-tiny-$loss.plan >/dev/null
done
build/bin/mtc llama-tiny --objective kto --undesirable-weight 1.5 --batch 4 --seq 32 --no-weights \
  -o .gpu/plans/kto-llama-tiny.plan >/dev/null
build/bin/mtc llama-tiny --objective reward --center-rewards-coefficient 0.01 --batch 4 --seq 32 --no-weights \
  -o .gpu/plans/dpo-llama-tiny-reward.plan >/dev/null  # (dpo-*: run.sh trains it on the pairs)
# Decode plans (mtc --kv-cache) beside window plans of the same models: kv_cache_check on cuda.
mkdir -p .gpu/kv .gpu/hf
for model in gpt2-tiny llama-tiny qwen-tiny gpt-oss-tiny; do
  build/bin/mtc $model --forward-only --batch 3 --seq 40 -o .gpu/kv/$model.window.plan >/dev/null
  build/bin/mtc $model --forward-only --kv-cache --batch 3 --seq 40 --no-weights -o .gpu/kv/$model.decode.plan >/dev/null
  build/bin/mtc $model --forward-only --kv-cache --batch 3 --seq 40 --precision bf16 --no-weights \
    -o .gpu/kv/$model.decode-bf16.plan >/dev/null
  build/bin/mtc $model --forward-only --batch 3 --seq 40 --precision bf16 --no-weights \
    -o .gpu/kv/$model.window-bf16.plan >/dev/null
done
# Hugging Face folders from mtrun --export-hf (f32 and bf16), for transformers to load there
# (gpt-oss's: transformers' own GptOssForCausalLM against hf_twins.py's twin: sinks, windows).
for model in llama-tiny qwen-tiny gpt-oss-tiny; do
  build/bin/mtc $model --batch 4 --seq 32 -o .gpu/hf/$model.plan >/dev/null
  for dtype in f32 bf16; do
    build/bin/mtrun .gpu/hf/$model.plan --data .gpu/corpus.tok --steps 3 --print-every 10 \
      --export-hf .gpu/hf/$model-$dtype --export-dtype $dtype >/dev/null
  done
done
# Gemma 3 (Gemma3ForCausalLM: hf_folders.py's tiny folder, its twin hf_twins.gemma_logits): transformers' own
# Gemma3ForCausalLM there against the twin (norms of 1 + weight, the scaled embedding, GeGLU, the
# scores by query_pre_attn_scalar, the sliding layers' own rotary base); Phi-3 (Phi3ForCausalLM:
# q, k and v in one qkv_proj, k and v shorter than q; gate and up in one gate_up_proj; windows);
# Phi-4-mini's rotary embedding (3/4 of each head, LongRoPE's long factors, a tied head); Granite
# (GraniteForCausalLM: its embedding, residual and attention multipliers, its logits' scaling);
# SmolLM3 (SmolLM3ForCausalLM: its NoPE layers); OLMo 2 (Olmo2ForCausalLM: norms after the sublayers);
# Gemma 2 (Gemma2ForCausalLM: its softcapped scores and logits, every other layer sliding); Gemma 1
# (GemmaForCausalLM: Gemma's norms before the sublayers alone; its legacy hidden_act "gelu", which
# the export names gelu_pytorch_tanh so that transformers 4.48 on computes the tanh form too);
# Qwen2-MoE (Qwen2MoeForCausalLM: its shared expert and the expert's sigmoid gate); OLMoE
# (OlmoeForCausalLM: q and k normed over the whole projections, experts in every layer); GraniteMoE
# (GraniteMoeForCausalLM: Granite's multipliers, every expert's gate and up in one input_linear);
# Granite 4.0 (GraniteMoeHybridForCausalLM with attention in every layer: its shared_mlp); GLM-4.5
# (Glm4MoeForCausalLM: its sigmoid router's e_score_correction_bias, ungated shared experts, half of
# each head rotated; the source's prediction layer not exported); DeepSeek-V3 (DeepseekV3ForCausalLM:
# its latent attention, q through a bottleneck, interleaved pairs, YaRN's softmax factor); OLMo 3
# (Olmo3ForCausalLM: three of four layers sliding, YaRN on the full-attention layer alone — which
# transformers 5 releases before huggingface/transformers#45945 apply to every layer); GLM-4
# (Glm4ForCausalLM: norms around both sublayers, gate_up_proj, half of each head in interleaved pairs);
# Exaone 4 (Exaone4ForCausalLM: OLMo 2's norms, per-head q/k norms, three of four layers sliding, the
# full-attention layer without a rotary embedding).
/usr/bin/python3 - <<'PY'
import sys
sys.path.insert(0, "tests/e2e")
import hf_folders
for spec_name, folder in (("gemma3-bf16", "gemma3-tiny"), ("phi3-bf16", "phi3-tiny"),
                          ("phi3-longrope-f32", "phi4mini-tiny"), ("granite-f32", "granite-tiny"),
                          ("smollm3-bf16", "smollm3-tiny"), ("olmo2-f32", "olmo2-tiny"),
                          ("gemma2-f32", "gemma2-tiny"), ("gemma-f32", "gemma-tiny"),
                          ("qwen2-moe-bf16", "qwen2-moe-tiny"), ("olmoe-bf16", "olmoe-tiny"),
                          ("granitemoe-bf16", "granitemoe-tiny"), ("granite4-f32", "granite4-tiny"),
                          ("glm4-moe-bf16", "glm4-tiny"), ("deepseek-v3-f32", "deepseek-tiny"),
                          ("olmo3-bf16", "olmo3-tiny"), ("glm4-bf16", "glm4dense-tiny"),
                          ("exaone4-bf16", "exaone4-tiny")):
    spec = hf_folders.MODELS[spec_name]
    hf_folders.write_folder(f".gpu/hf/{folder}-source", spec, hf_folders.hf_weights(spec["config"], False, spec["dtype"], 3))
PY
for model in gemma3-tiny phi3-tiny phi4mini-tiny granite-tiny smollm3-tiny olmo2-tiny gemma2-tiny gemma-tiny \
  qwen2-moe-tiny olmoe-tiny granitemoe-tiny granite4-tiny glm4-tiny deepseek-tiny olmo3-tiny glm4dense-tiny \
  exaone4-tiny; do
  build/bin/mtc .gpu/hf/$model-source --batch 4 --seq 32 -o .gpu/hf/$model.plan >/dev/null
  for dtype in f32 bf16; do
    build/bin/mtrun .gpu/hf/$model.plan --data .gpu/corpus.tok --steps 3 --print-every 10 \
      --export-hf .gpu/hf/$model-$dtype --export-dtype $dtype >/dev/null
  done
done
# ... and plans of that folder for run.sh's cuda-vs-cpu parity (the norms' 1 + weight in the CUDA
# kernels, mt.rmsnorm's offset): resident fp32, streamed-recompute, bf16.
build/bin/mtc .gpu/hf/gemma3-tiny-f32 --batch 4 --seq 32 -o .gpu/plans/gemma3-tiny.plan >/dev/null
build/bin/mtc .gpu/hf/gemma3-tiny-f32 --batch 4 --seq 32 --device-mem 1300KiB -o .gpu/plans/gemma3-tiny-streamed.plan >/dev/null
build/bin/mtc .gpu/hf/gemma3-tiny-f32 --batch 4 --seq 32 --precision bf16 -o .gpu/plans/gemma3-tiny-mixed.plan >/dev/null
# ... and of Gemma 2's softcaps (the attention kernels' cap, mt.softcap on the logits; the bf16
# plan's attention at head_dim 32 on our f32-math kernels, its logits' cap on bf16).
build/bin/mtc .gpu/hf/gemma2-tiny-f32 --batch 4 --seq 32 -o .gpu/plans/gemma2-tiny.plan >/dev/null
build/bin/mtc .gpu/hf/gemma2-tiny-f32 --batch 4 --seq 32 --precision bf16 -o .gpu/plans/gemma2-tiny-mixed.plan >/dev/null
# ... and of Phi-4-mini's rotary embedding (mt.rope's rotary dimension and LongRoPE in the CUDA twin).
build/bin/mtc .gpu/hf/phi4mini-tiny-f32 --batch 4 --seq 32 -o .gpu/plans/phi4mini-tiny.plan >/dev/null
build/bin/mtc .gpu/hf/phi4mini-tiny-f32 --batch 4 --seq 32 --precision bf16 -o .gpu/plans/phi4mini-tiny-mixed.plan >/dev/null
build/bin/mtc .gpu/hf/llama-tiny-bf16 --batch 4 --seq 32 --lora 4 --precision bf16 -o .gpu/plans/llama-tiny-lora-bf16only-mixed.plan \
  > .gpu/plans/llama-tiny-lora-bf16only-mixed.txt
grep -q 'bf16 copies alone' .gpu/plans/llama-tiny-lora-bf16only-mixed.txt ||
  { echo "llama-tiny-lora-bf16only-mixed: no frozen weight held as bf16 alone"; exit 1; }
# A reward model's folder (LlamaForSequenceClassification): AutoModelForSequenceClassification there.
build/bin/mtc llama-tiny --objective reward --batch 4 --seq 32 -o .gpu/hf/llama-tiny-reward.plan >/dev/null
build/bin/mtrun .gpu/hf/llama-tiny-reward.plan --data .gpu/pairs.tok --steps 3 --print-every 10 \
  --export-hf .gpu/hf/llama-tiny-reward-f32 >/dev/null
# PEFT adapter folders (mtrun --export-peft) on that Llama folder, each beside the same run's merged
# folder (--export-hf): run.sh loads each with peft there (bench/gpu/peft_check.py). LoRA with rank and
# alpha patterns, DoRA, rsLoRA with a module trained whole (modules_to_save), a reward model's (SEQ_CLS).
mkdir -p .gpu/peft
while read -r name objective flags; do
  data=.gpu/corpus.tok; [ "$objective" = reward ] && data=.gpu/pairs.tok
  build/bin/mtc .gpu/hf/llama-tiny-f32 --objective "$objective" --batch 4 --seq 32 $flags -o ".gpu/peft/$name.plan" >/dev/null
  build/bin/mtrun ".gpu/peft/$name.plan" --data "$data" --steps 3 --lr 1e-2 --print-every 10 \
    --export-hf ".gpu/peft/$name-merged" --export-peft ".gpu/peft/$name-adapter" >/dev/null
done <<'LIST'
lora next-token --lora 4 --lora-alpha 8 --lora-targets proj --lora-rank-pattern mlp\.=8 --lora-alpha-pattern o_proj=24
dora next-token --lora 4 --lora-alpha 12 --lora-dora
rslora next-token --lora 4 --lora-alpha 8 --lora-rslora --trainable model\.norm
reward reward --lora 4 --lora-alpha 8
LIST
# Gemma 3's LoRA (q, k, v, o and the GeGLU's projections) on its folder above: PEFT on
# transformers' Gemma3ForCausalLM there.
build/bin/mtc .gpu/hf/gemma3-tiny-f32 --batch 4 --seq 32 --lora 4 --lora-alpha 8 --lora-targets 'attn\.|mlp\.' \
  -o .gpu/peft/gemma3-lora.plan >/dev/null
build/bin/mtrun .gpu/peft/gemma3-lora.plan --data .gpu/corpus.tok --steps 3 --lr 1e-2 --print-every 10 \
  --export-hf .gpu/peft/gemma3-lora-merged --export-peft .gpu/peft/gemma3-lora-adapter >/dev/null
# Phi-3's LoRA on some parts of its fused layers (q and v of qkv_proj, up of gate_up_proj; o_proj
# whole): one adapter a fused layer, its B block-diagonal; PEFT on transformers' Phi3ForCausalLM.
build/bin/mtc .gpu/hf/phi3-tiny-f32 --batch 4 --seq 32 --lora 4 --lora-alpha 8 \
  --lora-targets 'attn\.(q|v|o)\.|mlp\.up\.' -o .gpu/peft/phi3-lora.plan >/dev/null
build/bin/mtrun .gpu/peft/phi3-lora.plan --data .gpu/corpus.tok --steps 3 --lr 1e-2 --print-every 10 \
  --export-hf .gpu/peft/phi3-lora-merged --export-peft .gpu/peft/phi3-lora-adapter >/dev/null
# ... and on Gemma 3's multimodal folder (Gemma3ForConditionalGeneration: that language model beside a
# tiny SigLIP tower, hf_folders.py's): its adapters under model.language_model., target_modules an
# expression sparing the tower; peft_check.py loads them onto transformers' multimodal model there.
/usr/bin/python3 - <<'PY'
import sys
sys.path.insert(0, "tests/e2e")
import hf_folders
spec = hf_folders.MODELS["gemma3-bf16"]
hf_folders.write_gemma3_multimodal(".gpu/hf/gemma3-mm", "model.language_model.",
                                  hf_folders.hf_weights(spec["config"], False, spec["dtype"], 3))
PY
build/bin/mtc .gpu/hf/gemma3-mm --batch 4 --seq 32 --lora 4 --lora-alpha 8 --lora-targets 'attn\.|mlp\.' \
  -o .gpu/peft/gemma3-mm-lora.plan >/dev/null
build/bin/mtrun .gpu/peft/gemma3-mm-lora.plan --data .gpu/corpus.tok --steps 3 --lr 1e-2 --print-every 10 \
  --export-hf .gpu/peft/gemma3-mm-lora-merged --export-peft .gpu/peft/gemma3-mm-lora-adapter >/dev/null
# gpt-oss's stacks of experts in PEFT's target_parameters form (with its attention's projections as
# target_modules), on the gpt-oss folder above: run.sh loads it on that folder.
build/bin/mtc .gpu/hf/gpt-oss-tiny-f32 --batch 4 --seq 32 --lora 4 --lora-alpha 8 --lora-targets 'attn\.' \
  --lora-experts 'moe\.' -o .gpu/peft/oss-experts.plan >/dev/null
build/bin/mtrun .gpu/peft/oss-experts.plan --data .gpu/corpus.tok --steps 3 --lr 1e-2 --print-every 10 \
  --export-hf .gpu/peft/oss-experts-merged --export-peft .gpu/peft/oss-experts-adapter >/dev/null
# Qwen3-MoE's stacks as each expert's layers in target_modules (transformers 4's per-expert
# nn.Linear; transformers 5 fuses them on loading: whether PEFT there loads this form is the
# question), on a Qwen3-MoE folder, which hf_transformers_check also loads.
build/bin/mtc qwen3-moe-tiny --batch 4 --seq 32 -o .gpu/peft/qwen3-moe-base.plan >/dev/null
build/bin/mtrun .gpu/peft/qwen3-moe-base.plan --data .gpu/corpus.tok --steps 3 --print-every 10 \
  --export-hf .gpu/hf/qwen3-moe-tiny-f32 >/dev/null
build/bin/mtc .gpu/hf/qwen3-moe-tiny-f32 --batch 4 --seq 32 --lora 4 --lora-alpha 8 --lora-targets 'attn\.' \
  --lora-experts 'moe\.' -o .gpu/peft/qwen3-experts.plan >/dev/null
build/bin/mtrun .gpu/peft/qwen3-experts.plan --data .gpu/corpus.tok --steps 3 --lr 1e-2 --print-every 10 \
  --export-hf .gpu/peft/qwen3-experts-merged --export-peft .gpu/peft/qwen3-experts-adapter >/dev/null
# ... and the same run's adapters in transformers 5's fused form (--peft-experts fused:
# target_parameters mlp.experts.gate_up_proj at twice the rank, down_proj), which PEFT 0.19.1 and
# later load there without converting.
build/bin/mtrun .gpu/peft/qwen3-experts.plan --data .gpu/corpus.tok --steps 3 --lr 1e-2 --print-every 10 \
  --export-hf .gpu/peft/qwen3-fused-merged --export-peft .gpu/peft/qwen3-fused-adapter --peft-experts fused >/dev/null
# Generation speed (run.sh bench, BENCH_GEN=1): Llama 3.2 1B's shape, a decode plan with a cache of
# 1024 positions, resident fp32 (its weights kept on the device between tokens) and bf16; the
# window plan of the same model for what a token cost before the cache.
build/bin/mtc llama-1b --forward-only --kv-cache --batch 1 --seq 1024 --no-weights -o .gpu/plans/gen-llama-1b.plan >/dev/null
build/bin/mtc llama-1b --forward-only --kv-cache --batch 1 --seq 1024 --precision bf16 --no-weights \
  -o .gpu/plans/gen-llama-1b-bf16.plan >/dev/null
build/bin/mtc llama-1b --forward-only --batch 1 --seq 1024 --no-weights -o .gpu/plans/gen-llama-1b-window.plan >/dev/null
# The kept activations offloaded to the host (copied out on the d2h stream, back on the h2d one).
build/bin/mtc llama-tiny --batch 4 --seq 32 --schedule streamed-recompute --offload-activations on --no-weights \
  -o .gpu/plans/llama-tiny-offload.plan >/dev/null
# LoRA and DoRA (mt-lora's adapters, DoRA's magnitude and norm: run.sh trains them on cpu and cuda), and a
# LoRA plan on the BF16 folder whose frozen weights are held as bf16 alone (plan 1.32's bf16_only).
build/bin/mtc llama-tiny --batch 4 --seq 32 --lora 4 --lora-alpha 12 --no-weights -o .gpu/plans/llama-tiny-lora.plan >/dev/null
build/bin/mtc llama-tiny --batch 4 --seq 32 --lora 4 --lora-alpha 12 --lora-dora --precision bf16 --no-weights \
  -o .gpu/plans/llama-tiny-dora-mixed.plan >/dev/null
# Speed: Llama shapes (most at context 1024) with a device budget far below parameters + optimizer
# state (16 bytes/param: 20 GB for 1B, 51 GB for 3B, 108 GB for 7B); 7B is the largest the
# machine's 128 GiB of host memory holds (on-arrival update: 12 bytes/param).
# llama-1b-untied: its own LM head (128256 x 2048), whole under 8 GiB, in 4 vocabulary chunks under
# 3 GiB (what the split costs); at context 8192 (batch 1) the head split under 4 GiB, and under 3
# GiB the kept activations offloaded to the host as well (what the offload costs). llama-1b-8k-tied:
# Llama 3.2 1B's own tied head at context 8192 under 3 GiB (the split with the token lookup on the
# host; with the lookup on the device it needs at least 10.0 GiB). llama-7b-bf16: llama-7b with its
# weights streamed as bf16 staging copies (half the h2d bytes). llama-1b-mixed, qwen7b-mixed: bf16
# plans; qwen7b-lora-mixed, qwen7b-dora-mixed: LoRA and DoRA of rank 16 on its 196 projections at
# 8 x 4096 (docs/perf.md's predictions of sessions 37 and 38); the 7B at the batch --batch auto picks for 76 GiB (the comparison with MegaTrain's 272
# model TFLOP/s on Qwen2.5-7B; on arrival: 12 bytes/param fit the machine's 128 GiB).
# qwen7b-lora-b1-mixed, qwen7b-lora-b1-copied-mixed: the LoRA at batch 1 x 2048, its frozen base kept on
# the device between steps (mtc --keep-frozen auto) and copied every step (off): docs/perf.md's
# prediction of session 43 (125.2 against 354.0 ms a step).
# llama-1b-mixed-rows, llama-1b-mixed-packed: the same bf16 model on .gpu/sft.tok's instruction-shaped
# examples (median 300 tokens), one per row (--rows examples) and packed (a plan of
# --packed-examples: attention on the tensor cores, masked by example): a pass's time each way.
# fp32 unless the line says --precision bf16 (bf16 is the GPU profiles' default).
while read -r name model budget extra; do
  precision=--precision=fp32; case "$extra" in *--precision*) precision="" ;; esac
  build/bin/mtc "$model" --device-mem "$budget" --hw h100-pcie5 $precision $extra --no-weights \
    -o ".gpu/plans/bench-$name.plan" > ".gpu/plans/bench-$name.txt"
done <<'LIST'
llama-1b llama-1b 8GiB --batch 4 --seq 1024
llama-3b llama-3b 8GiB --batch 4 --seq 1024
llama-7b llama-7b 8GiB --batch 4 --seq 1024 --update on-arrival --host-mem 110GiB
llama-1b-untied llama-1b 8GiB --batch 4 --seq 1024 --untied
llama-1b-split llama-1b 3GiB --batch 4 --seq 1024 --untied
llama-1b-8k llama-1b 4GiB --batch 1 --context 8192 --seq 8192 --untied
llama-1b-8k-offload llama-1b 3GiB --batch 1 --context 8192 --seq 8192 --untied
llama-1b-8k-tied llama-1b 3GiB --batch 1 --context 8192 --seq 8192
llama-7b-bf16 llama-7b 8GiB --batch 4 --seq 1024 --update on-arrival --host-mem 110GiB --stream-dtype bf16
llama-1b-mixed llama-1b 8GiB --batch 4 --seq 1024 --precision bf16
llama-1b-mixed-auto llama-1b 76GiB --batch auto --seq 1024 --precision bf16
llama-1b-mixed-rows llama-1b 76GiB --batch 32 --seq 1024 --precision bf16
llama-1b-mixed-packed llama-1b 76GiB --batch 32 --seq 1024 --precision bf16 --packed-examples
qwen7b-mixed qwen2.5-7b 76GiB --batch auto --seq 1024 --precision bf16 --update on-arrival --host-mem 110GiB
qwen7b-lora-mixed qwen2.5-7b 76GiB --batch 8 --seq 4096 --precision bf16 --lora 16 --lora-targets attn\.|mlp\.
qwen7b-dora-mixed qwen2.5-7b 76GiB --batch 8 --seq 4096 --precision bf16 --lora 16 --lora-targets attn\.|mlp\. --lora-dora
qwen7b-lora-b1-mixed qwen2.5-7b 76GiB --batch 1 --seq 2048 --precision bf16 --lora 16 --lora-targets attn\.|mlp\.
qwen7b-lora-b1-copied-mixed qwen2.5-7b 76GiB --batch 1 --seq 2048 --precision bf16 --lora 16 --lora-targets attn\.|mlp\. --keep-frozen off
LIST
du -sh .gpu
XZ_OPT=-T2 tar cJf .gpu.tar.xz .gpu
du -sh .gpu.tar.xz
