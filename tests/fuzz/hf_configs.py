#!/usr/bin/env python3
"""Writes config.json seeds for the hf_config fuzz harness into DIR: the one-layer Llama of width 8
its weights file fits (tests/fuzz/fuzz_hf_config.cc), the same shape as Qwen2, Qwen3 (head_dim,
layer_types), Mistral, Phi-3, Granite (its multipliers, its dropout), SmolLM3 (its NoPE layers) and
OLMo 2, OLMo 3 (its windows, YaRN on the full layers), GLM-4 (its norms, half-rotated heads), Seed-OSS (its
biases, its dropout), Exaone 4 (its window named, its full-attention layer without the rotary embedding),
Ernie 4.5 (its interleaved rotary pairs), Qwen2-MoE (its experts and shared expert), OLMoE, GraniteMoE (its multipliers and experts), GLM-4.5 (its
sigmoid router's groups and scale, its prediction layer), DeepSeek-V3 (its latent attention, YaRN),
DeepSeek-V2 (its softmax router's groups, YaRN's mscale), Qwen3's
fine-grained FP8 quantization_config, a Llama's compressed-tensors FP8 one, a GPT-2, a Llama reward model (LlamaForSequenceClassification, one label),
Gemma 3's text model and its multimodal folder's config (the text model nested), Mistral 3's
multimodal config (Mistral's nested), Gemma 2 (its
softcaps, the keys its published configs carry beside Gemma2Config's), and one nested as deep as a
file may be (64 levels)."""
import json
import os
import sys

llama = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=8, intermediate_size=16,
             num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, vocab_size=16,
             max_position_embeddings=32, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
             hidden_act="silu", attention_bias=False, torch_dtype="float32", bos_token_id=1, eos_token_id=[2, 3])
seeds = {
    "llama.json": llama,
    "qwen2.json": dict(llama, architectures=["Qwen2ForCausalLM"], model_type="qwen2", use_sliding_window=False,
                       sliding_window=4096, max_window_layers=28),
    "qwen3.json": dict(llama, architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=4,
                       layer_types=["full_attention"], use_sliding_window=False, sliding_window=None),
    "mistral.json": dict(llama, architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=16),
    "phi3.json": dict(llama, architectures=["Phi3ForCausalLM"], model_type="phi3", sliding_window=16, resid_pdrop=0.0,
                      embd_pdrop=0.0, original_max_position_embeddings=32, rope_scaling=None,
                      auto_map={"AutoConfig": "configuration_phi3.Phi3Config"}, pad_token_id=0),
    "granite.json": dict(llama, architectures=["GraniteForCausalLM"], model_type="granite", embedding_multiplier=12.0,
                         residual_multiplier=0.22, attention_multiplier=0.0078125, logits_scaling=8.0,
                         attention_dropout=0.1, pad_token_id=0),
    "smollm3.json": dict(llama, architectures=["SmolLM3ForCausalLM"], model_type="smollm3", no_rope_layers=[1],
                         no_rope_layer_interval=4, pretraining_tp=2, use_sliding_window=False, sliding_window=None,
                         max_window_layers=28, pad_token_id=0),
    "olmo2.json": dict(llama, architectures=["Olmo2ForCausalLM"], model_type="olmo2", pad_token_id=0),
    "glm4.json": dict(llama, architectures=["Glm4ForCausalLM"], model_type="glm4", head_dim=4,
                      partial_rotary_factor=0.5, attention_bias=True, pad_token_id=0),
    "seed-oss.json": dict(llama, architectures=["SeedOssForCausalLM"], model_type="seed_oss", head_dim=4,
                          attention_bias=True, attention_out_bias=False, attention_dropout=0.1, residual_dropout=0.1),
    "exaone4.json": dict(llama, architectures=["Exaone4ForCausalLM"], model_type="exaone4", sliding_window=8,
                         sliding_window_pattern="LLLG", layer_types=["full_attention"]),
    "olmo3.json": dict(llama, architectures=["Olmo3ForCausalLM"], model_type="olmo3", pad_token_id=0, sliding_window=8,
                       layer_types=["sliding_attention"], rope_scaling=dict(rope_type="yarn", factor=2.0,
                                                                            original_max_position_embeddings=16)),
    "qwen2-moe.json": dict(llama, architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe", num_experts=2,
                           num_experts_per_tok=1, moe_intermediate_size=8, shared_expert_intermediate_size=8,
                           norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[], use_sliding_window=False,
                           sliding_window=4096, max_window_layers=28, output_router_logits=False),
    "olmoe.json": dict(llama, architectures=["OlmoeForCausalLM"], model_type="olmoe", num_experts=2,
                       num_experts_per_tok=1, norm_topk_prob=False, clip_qkv=None, output_router_logits=True,
                       router_aux_loss_coef=0.01, pad_token_id=0),
    "granitemoe.json": dict(llama, architectures=["GraniteMoeForCausalLM"], model_type="granitemoe",
                            embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0078125,
                            logits_scaling=6.0, num_local_experts=2, num_experts_per_tok=1,
                            output_router_logits=False, router_aux_loss_coef=0.001, pad_token_id=0),
    "glm4-moe.json": dict(llama, architectures=["Glm4MoeForCausalLM"], model_type="glm4_moe", tie_word_embeddings=False,
                          attention_bias=True, use_qk_norm=True, n_routed_experts=4, num_experts_per_tok=2,
                          moe_intermediate_size=8, n_shared_experts=1, first_k_dense_replace=0, n_group=2,
                          topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True, num_nextn_predict_layers=1,
                          partial_rotary_factor=0.5, pad_token_id=0),
    "deepseek-v3.json": dict(llama, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
                             num_key_value_heads=2, tie_word_embeddings=False, q_lora_rank=None, kv_lora_rank=4,
                             qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2, head_dim=2, rope_interleave=True,
                             n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=8, n_shared_experts=1,
                             first_k_dense_replace=0, n_group=2, topk_group=1, routed_scaling_factor=2.5,
                             scoring_func="sigmoid", topk_method="noaux_tc", moe_layer_freq=1,
                             num_nextn_predict_layers=1,
                             rope_scaling=dict(type="yarn", factor=4.0, original_max_position_embeddings=8,
                                               mscale=1.0, mscale_all_dim=1.0)),
    "deepseek-v2.json": dict(llama, architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v2",
                             num_key_value_heads=2, tie_word_embeddings=False, q_lora_rank=None, kv_lora_rank=4,
                             qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2, n_routed_experts=4,
                             num_experts_per_tok=2, moe_intermediate_size=8, n_shared_experts=2,
                             first_k_dense_replace=0, n_group=2, topk_group=1, routed_scaling_factor=16.0,
                             scoring_func="softmax", topk_method="group_limited_greedy", norm_topk_prob=False,
                             moe_layer_freq=1, aux_loss_alpha=0.001, seq_aux=True,
                             rope_scaling=dict(type="yarn", factor=4.0, original_max_position_embeddings=8,
                                               mscale=0.707, mscale_all_dim=0.707)),
    # Qwen3-8B-FP8's quantization_config (the weights file's F32 tensors have no scales: read as they are).
    "qwen3-fp8.json": dict(llama, architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=4,
                           quantization_config=dict(activation_scheme="dynamic", fmt="e4m3", quant_method="fp8",
                                                    weight_block_size=[128, 128])),
    # An llm-compressor FP8-dynamic quantization_config (again no scales in the weights file).
    "llama-fp8-dynamic.json": dict(llama, quantization_config=dict(
        quant_method="compressed-tensors", format="float-quantized", quantization_status="compressed",
        config_groups=dict(group_0=dict(
            targets=["Linear"], output_activations=None, format=None,
            weights=dict(num_bits=8, type="float", symmetric=True, strategy="channel", dynamic=False,
                         group_size=None, block_structure=None, actorder=None, observer="minmax", observer_kwargs={}),
            input_activations=dict(num_bits=8, type="float", symmetric=True, strategy="token", dynamic=True,
                                   observer=None))),
        ignore=["lm_head"], kv_cache_scheme=None, global_compression_ratio=1.24, sparsity_config={})),
    "gpt2.json": dict(architectures=["GPT2LMHeadModel"], model_type="gpt2", n_embd=8, n_layer=1, n_head=2,
                      n_positions=32, vocab_size=16, layer_norm_epsilon=1e-5, activation_function="gelu_new"),
    "llama-reward.json": dict(llama, architectures=["LlamaForSequenceClassification"], id2label={"0": "LABEL_0"},
                              label2id={"LABEL_0": 0}, pad_token_id=0, problem_type="regression"),
}
gemma3 = dict(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", hidden_size=8, intermediate_size=16,
              num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=4, vocab_size=16,
              max_position_embeddings=32, query_pre_attn_scalar=4, sliding_window=4, sliding_window_pattern=2,
              layer_types=["sliding_attention", "full_attention"], rope_theta=1e6, rope_local_base_freq=1e4,
              rope_scaling={"rope_type": "linear", "factor": 8.0}, final_logit_softcapping=None,
              attn_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh", dtype="bfloat16")
seeds["gemma3.json"] = gemma3
seeds["gemma3-multimodal.json"] = dict(
    architectures=["Gemma3ForConditionalGeneration"], model_type="gemma3", mm_tokens_per_image=256,
    text_config={k: v for k, v in gemma3.items() if k not in ("architectures", "dtype")}, vision_config={},
    torch_dtype="bfloat16", eos_token_id=[1, 106])
seeds["ernie4_5.json"] = dict(llama, architectures=["Ernie4_5ForCausalLM"], model_type="ernie4_5", head_dim=4,
                             use_bias=False)
seeds["ernie4_5-moe.json"] = dict(llama, architectures=["Ernie4_5_MoeForCausalLM"], model_type="ernie4_5_moe",
                                 num_hidden_layers=2, moe_num_experts=4, moe_k=2, moe_intermediate_size=8, moe_num_shared_experts=1,
                                 moe_layer_start_index=1, moe_layer_end_index=-1, moe_layer_interval=1,
                                 moe_norm_min=1e-12, moe_capacity=[4, 4, 4], moe_use_aux_free=True,
                                 num_nextn_predict_layers=1, use_bias=False)
seeds["mistral3-multimodal.json"] = dict(
    architectures=["Mistral3ForConditionalGeneration"], model_type="mistral3", image_token_index=10,
    projector_hidden_act="gelu", vision_feature_layer=-1, multimodal_projector_bias=False, spatial_merge_size=2,
    text_config={k: v for k, v in seeds["mistral.json"].items() if k not in ("architectures", "torch_dtype")},
    vision_config=dict(model_type="pixtral"), torch_dtype="bfloat16")
seeds["gemma2.json"] = dict(
    architectures=["Gemma2ForCausalLM"], model_type="gemma2", hidden_size=8, intermediate_size=16, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=1, head_dim=4, vocab_size=16, max_position_embeddings=32,
    query_pre_attn_scalar=4, sliding_window=4, sliding_window_size=4, rope_theta=1e4, attn_logit_softcapping=50.0,
    final_logit_softcapping=30.0, hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh",
    cache_implementation="hybrid", pad_token_id=0, torch_dtype="float32")
seeds["gemma.json"] = dict(
    architectures=["GemmaForCausalLM"], model_type="gemma", hidden_size=8, intermediate_size=16, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=1, head_dim=4, vocab_size=16, max_position_embeddings=32,
    rope_theta=1e4, rope_scaling=None, hidden_act="gelu", hidden_activation="gelu_pytorch_tanh", pad_token_id=0,
    torch_dtype="bfloat16")
deep = "x"
for _ in range(60):
    deep = [deep]
seeds["deep.json"] = dict(llama, rope_scaling={"type": "linear", "factor": deep})
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, config in seeds.items():
    with open(os.path.join(out, name), "w") as f:
        json.dump(config, f)
