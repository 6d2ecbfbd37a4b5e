#include <nlohmann/json.hpp>

#include "compiler/HuggingFaceConfig.h"

// config.json written for a built-in model (huggingFaceConfig).
namespace mt {

namespace {

// The keys of a llama-family config.json every architecture has, in transformers' order.
nlohmann::ordered_json llamaConfig(const ModelConfig& c, const char* architecture, const char* model_type,
                                   int64_t intermediate) {
  return {{"architectures", {architecture}},
          {"model_type", model_type},
          {"hidden_size", c.width},
          {"intermediate_size", intermediate},
          {"num_hidden_layers", c.layers},
          {"num_attention_heads", c.heads},
          {"num_key_value_heads", c.kv_heads},
          {"vocab_size", c.vocab},
          {"max_position_embeddings", c.context},
          {"rms_norm_eps", c.norm_eps},
          {"rope_theta", c.rope_theta},
          {"tie_word_embeddings", c.tied},
          {"hidden_act", "silu"}};
}

// A mixture of experts' config.json: Qwen3MoeForCausalLM (with q/k norms), Qwen2MoeForCausalLM
// (with a shared expert, q/k/v biases and heads width / heads wide), MixtralForCausalLM (neither,
// every layer's experts as wide as intermediate_size); "" for a shape none has (a sigmoid router's:
// only a GLM-4.5 folder's own config describes one).
std::string expertsConfig(const ModelConfig& c) {
  if (c.sigmoid_router || !c.shared_expert_gated) return "";
  const bool qwen2 = c.shared_expert_ffn > 0, qwen = c.qk_norm || qwen2;
  if (qwen2 ? (c.qk_norm || !c.qkv_bias || c.o_bias || c.headDim() * c.heads != c.width) : c.qkv_bias) return "";
  if (!qwen && (c.moe_every != 1 || !c.dense_layers.empty() || !c.normalize_topk)) return "";
  nlohmann::ordered_json config = qwen2  ? llamaConfig(c, "Qwen2MoeForCausalLM", "qwen2_moe", c.ffn)
                                  : qwen ? llamaConfig(c, "Qwen3MoeForCausalLM", "qwen3_moe", c.ffn)
                                         : llamaConfig(c, "MixtralForCausalLM", "mixtral", c.expert_ffn);
  config["num_experts_per_tok"] = c.experts_per_token;
  config["output_router_logits"] = c.router_aux_loss_coef > 0;
  if (c.router_aux_loss_coef > 0) config["router_aux_loss_coef"] = c.router_aux_loss_coef;
  if (c.head_dim && !qwen2) config["head_dim"] = c.head_dim;
  if (qwen) {
    config["num_experts"] = c.experts;
    config["moe_intermediate_size"] = c.expert_ffn;
    if (qwen2) config["shared_expert_intermediate_size"] = c.shared_expert_ffn;
    config["norm_topk_prob"] = c.normalize_topk;
    config["decoder_sparse_step"] = c.moe_every;
    config["mlp_only_layers"] = c.dense_layers;
    config["use_sliding_window"] = false;
    if (qwen2) config["qkv_bias"] = true;
    else config["attention_bias"] = false;
  } else {
    config["num_local_experts"] = c.experts;
  }
  return config.dump(2) + "\n";
}

// A YaRN scaling as rope_scaling (gpt-oss's; DeepSeek-V3's with its mscale and mscale_all_dim),
// null for another scaling or one with an explicit attention_factor, which these writers do not write.
nlohmann::ordered_json yarnScaling(const RopeScaling& r) {
  if (r.kind != RopeScaling::Kind::kYarn || r.attention_factor != 0.0) return nullptr;
  nlohmann::ordered_json scaling = {{"rope_type", "yarn"}, {"factor", r.factor}, {"beta_fast", r.beta_fast},
                                    {"beta_slow", r.beta_slow}, {"truncate", r.truncate}};
  if (r.original_context) scaling["original_max_position_embeddings"] = r.original_context;
  if (r.mscale > 0.0) scaling["mscale"] = r.mscale;
  if (r.mscale_all_dim > 0.0) scaling["mscale_all_dim"] = r.mscale_all_dim;
  return scaling;
}

// DeepSeek's mixtures (an ungated shared expert a whole number of experts wide, dense first layers):
// GLM-4.5's config.json (Glm4MoeForCausalLM: its sigmoid router, q/k/v biases); DeepSeek-V3's
// (DeepseekV3ForCausalLM) where the attention is latent (its rotary embedding unscaled or YaRN);
// DeepSeek-V2's (DeepseekV2ForCausalLM) where a latent attention's router is the softmax's, its
// pairs interleaved, its weights not renormalised; "" for another shape.
std::string deepseekMoeConfig(const ModelConfig& c) {
  const int64_t dense = static_cast<int64_t>(c.dense_layers.size());
  for (int64_t l = 0; l < dense; ++l)
    if (c.dense_layers[l] != l) return "";
  if (c.experts == 0 || c.shared_expert_gated || c.shared_expert_ffn % c.expert_ffn != 0 || c.moe_every != 1 ||
      c.o_bias || c.qk_norm_whole || c.router_aux_loss_coef > 0)
    return "";
  const bool deepseek = c.latentAttention(), v2 = !c.sigmoid_router;
  if (v2 && (!deepseek || !c.rope_interleave || c.normalize_topk)) return "";
  nlohmann::ordered_json config = v2         ? llamaConfig(c, "DeepseekV2ForCausalLM", "deepseek_v2", c.ffn)
                                  : deepseek ? llamaConfig(c, "DeepseekV3ForCausalLM", "deepseek_v3", c.ffn)
                                             : llamaConfig(c, "Glm4MoeForCausalLM", "glm4_moe", c.ffn);
  if (deepseek) {  // its latent attention (DeepseekV3Config's keys; head_dim as transformers writes it)
    if (c.rope_scaling.kind != RopeScaling::Kind::kNone) {
      config["rope_scaling"] = yarnScaling(c.rope_scaling);
      if (config["rope_scaling"].is_null()) return "";
    }
    config["q_lora_rank"] = c.q_lora_rank ? nlohmann::ordered_json(c.q_lora_rank) : nlohmann::ordered_json();
    config["kv_lora_rank"] = c.kv_lora_rank;
    config["qk_nope_head_dim"] = c.qk_nope_dim;
    config["qk_rope_head_dim"] = c.qk_rope_dim;
    config["v_head_dim"] = c.v_head_dim;
    config["head_dim"] = c.qk_rope_dim;
    if (!v2) config["rope_interleave"] = c.rope_interleave;
    config["attention_bias"] = false;
  } else {
    config["head_dim"] = c.headDim();
    config["partial_rotary_factor"] = static_cast<double>(c.rotaryDim()) / static_cast<double>(c.headDim());
    config["attention_bias"] = c.qkv_bias;
    config["use_qk_norm"] = c.qk_norm;
  }
  config["n_routed_experts"] = c.experts;
  config["num_experts_per_tok"] = c.experts_per_token;
  config["moe_intermediate_size"] = c.expert_ffn;
  config["n_shared_experts"] = c.shared_expert_ffn / c.expert_ffn;
  config["first_k_dense_replace"] = dense;
  config["n_group"] = c.router_groups;
  config["topk_group"] = c.router_groups_chosen;
  config["routed_scaling_factor"] = c.routed_scaling;
  config["norm_topk_prob"] = c.normalize_topk;
  if (v2) {
    config["topk_method"] = c.router_groups > 1 ? "group_limited_greedy" : "greedy";
    config["scoring_func"] = "softmax";
  } else {
    config["num_nextn_predict_layers"] = 0;
  }
  return config.dump(2) + "\n";
}

// OLMoE's config.json (OlmoeForCausalLM): q and k normed over their whole projections in Llama's
// pre-norm layers, experts as wide as intermediate_size in every layer, heads width / heads wide;
// "" for another shape. Its padding id written, null too: OlmoeConfig's default is 1, and
// transformers leaves that embedding row untrained.
std::string olmoeConfig(const ModelConfig& c) {
  if (c.sandwich_norms || c.qkv_bias != c.o_bias || c.headDim() * c.heads != c.width || c.experts == 0 ||
      c.moeLayers() != c.layers || c.expert_ffn != c.ffn || c.shared_expert_ffn ||
      c.rope_scaling.kind != RopeScaling::Kind::kNone)
    return "";
  nlohmann::ordered_json config = llamaConfig(c, "OlmoeForCausalLM", "olmoe", c.ffn);
  config["num_experts"] = c.experts;
  config["num_experts_per_tok"] = c.experts_per_token;
  config["norm_topk_prob"] = c.normalize_topk;
  config["output_router_logits"] = c.router_aux_loss_coef > 0;
  if (c.router_aux_loss_coef > 0) config["router_aux_loss_coef"] = c.router_aux_loss_coef;
  config["attention_bias"] = c.o_bias;
  config["clip_qkv"] = nullptr;
  config["pad_token_id"] = c.padding_id >= 0 ? nlohmann::ordered_json(c.padding_id) : nullptr;
  return config.dump(2) + "\n";
}

// gpt-oss's config.json (GptOssForCausalLM): its experts in every layer, a sink per head, the
// layers' windows as layer_types, its YaRN scaling where the model has one.
std::string gptOssConfig(const ModelConfig& c) {
  if (!c.attention_sinks || !c.o_bias || !c.qkv_bias || c.qk_norm || c.moeLayers() != c.layers) return "";
  nlohmann::ordered_json config = llamaConfig(c, "GptOssForCausalLM", "gpt_oss", c.expert_ffn);
  config["head_dim"] = c.headDim();
  config["attention_bias"] = true;
  config["attention_dropout"] = 0.0;
  config["num_local_experts"] = c.experts;
  config["num_experts_per_tok"] = c.experts_per_token;
  config["experts_per_token"] = c.experts_per_token;
  config["swiglu_limit"] = c.swiglu_limit;
  config["output_router_logits"] = c.router_aux_loss_coef > 0;
  if (c.router_aux_loss_coef > 0) config["router_aux_loss_coef"] = c.router_aux_loss_coef;
  std::vector<std::string> types;
  for (int64_t l = 0; l < c.layers; ++l) types.push_back(c.attentionWindow(l) ? "sliding_attention" : "full_attention");
  config["layer_types"] = types;
  config["sliding_window"] = c.sliding_window > 0 ? nlohmann::ordered_json(c.sliding_window) : nullptr;
  // Not null where unscaled: transformers reads a gpt-oss config without rotary settings as YaRN x 32.
  config["rope_scaling"] = c.rope_scaling.kind == RopeScaling::Kind::kNone
                               ? nlohmann::ordered_json{{"rope_type", "default"}}
                               : yarnScaling(c.rope_scaling);
  if (config["rope_scaling"].is_null()) return "";
  return config.dump(2) + "\n";
}


// The causal LM's config.json of a built-in model, "" for a shape no architecture has.
std::string causalConfig(const ModelConfig& c) {
  if (c.family == ModelFamily::kGpt2) {
    nlohmann::ordered_json config = {
        {"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"n_embd", c.width}, {"n_layer", c.layers},
        {"n_head", c.heads}, {"n_inner", c.ffn}, {"n_positions", c.context}, {"vocab_size", c.vocab},
        {"layer_norm_epsilon", c.norm_eps}, {"activation_function", "gelu_new"}, {"tie_word_embeddings", c.tied},
        // Trained without dropout: the config says so, and transformers then evaluates as trained.
        {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"resid_pdrop", 0.0}};
    return config.dump(2) + "\n";
  }
  if (c.family != ModelFamily::kLlama) return "";
  // Gemma's, Granite's, SmolLM3's, OLMo 2's and Ernie 4.5's (dense or not): only a folder's own config
  // (kept in the plan) describes one.
  if (c.gemmaForm() || c.graniteForm() || !c.nope_layers.empty() || !c.input_norms || c.rope_pairs_interleaved ||
      c.router_choice_bias)
    return "";
  if (c.expert_form == ModelConfig::ExpertForm::kGptOss) return gptOssConfig(c);
  if (c.sliding_window > 0) return "";  // a window only gpt-oss's form writes out
  if (c.qk_norm_whole) return olmoeConfig(c);
  if (c.sigmoid_router || c.latentAttention()) return deepseekMoeConfig(c);
  if (c.experts > 0) return expertsConfig(c);
  // Qwen2: q/k/v biases alone; Llama and Qwen3 bias all four projections or none (attention_bias).
  const bool qwen2 = !c.qk_norm && c.qkv_bias && !c.o_bias;
  if (!qwen2 && c.qkv_bias != c.o_bias) return "";
  nlohmann::ordered_json config =
      llamaConfig(c, c.qk_norm ? "Qwen3ForCausalLM" : qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM",
                  c.qk_norm ? "qwen3" : qwen2 ? "qwen2" : "llama", c.ffn);
  // (Qwen3Config's head_dim is 128 where absent, not hidden / heads.)
  if (c.head_dim || c.qk_norm) config["head_dim"] = c.headDim();
  if (qwen2 || c.qk_norm) config["use_sliding_window"] = false;
  if (!qwen2) config["attention_bias"] = c.o_bias;
  return config.dump(2) + "\n";
}

}  // namespace

std::string huggingFaceConfig(const ModelConfig& c) {
  const std::string causal = causalConfig(c);
  return causal.empty() || !c.hasScoreHead() ? causal : sequenceClassifierConfig(causal);
}

}  // namespace mt
