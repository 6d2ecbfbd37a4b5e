#include <fmt/format.h>

#include "compiler/HuggingFaceConfigReader.h"

// The mixtures of experts routed as DeepSeek-V3's, beside the llama family's config: GLM-4.5's
// (Glm4MoeForCausalLM: GLM-4.5, GLM-4.5-Air, GLM-4.6) and DeepSeek-V3's own (DeepseekV3ForCausalLM:
// DeepSeek-V3, Kimi K2, Moonlight, with its latent attention); the checkpoints' multi-token
// prediction layers, which transformers does not read.
namespace mt::hf {

namespace {

// A whole number >= 0 under `key`, `fallback` where absent.
int64_t count(ConfigReader& r, const std::string& key, int64_t fallback) {
  const json& v = r.value(key);
  if (v.is_null()) return fallback;
  if (!v.is_number_integer() || v.get<int64_t>() < 0) throw r.error("'" + key + "' is not a whole number >= 0");
  return v.get<int64_t>();
}

// The config classes' defaults of the keys readSigmoidRouterExperts reads.
struct ExpertDefaults {
  int64_t experts, top_k, expert_ffn, dense_layers, groups, groups_chosen;
  double scaling;
};
constexpr ExpertDefaults kGlm4MoeDefaults{128, 8, 1408, 1, 1, 1, 1.0};    // Glm4MoeConfig's
constexpr ExpertDefaults kDeepseekV3Defaults{256, 8, 2048, 3, 8, 4, 2.5};  // DeepseekV3Config's

// The experts (the config class's defaults where absent): n_routed_experts SwiGLU experts of width
// moe_intermediate_size after the first first_k_dense_replace layers (those keep the dense MLP of
// intermediate_size), beside n_shared_experts shared ones added ungated (one SwiGLU MLP
// n_shared_experts times as wide); the sigmoid router, its choice by score + e_score_correction_bias
// within the n_group groups' best topk_group, its weights normalized (norm_topk_prob) and times
// routed_scaling_factor. transformers adds no load-balancing loss for it: output_router_logits and
// router_aux_loss_coef are inert.
void readSigmoidRouterExperts(ConfigReader& r, ModelConfig& c, const ExpertDefaults& d) {
  c.experts = r.integer("n_routed_experts", d.experts);
  c.experts_per_token = r.integer("num_experts_per_tok", d.top_k);
  c.expert_ffn = r.integer("moe_intermediate_size", d.expert_ffn);
  const int64_t shared = count(r, "n_shared_experts", 1);
  if (shared == 0)
    throw r.error("'n_shared_experts' is 0: transformers then holds a shared expert of width 0; no published model "
                  "has one, and mtc reads one or more");
  if (shared > kMaxWidth / c.expert_ffn)
    throw r.error(fmt::format("'n_shared_experts' {} times 'moe_intermediate_size' {} is wider than {}", shared,
                              c.expert_ffn, kMaxWidth));
  c.shared_expert_ffn = shared * c.expert_ffn;
  c.shared_expert_gated = false;
  const int64_t dense = count(r, "first_k_dense_replace", d.dense_layers);
  if (dense > c.layers)
    throw r.error(fmt::format("'first_k_dense_replace' {} is more than the {} layers", dense, c.layers));
  for (int64_t l = 0; l < dense; ++l) c.dense_layers.push_back(l);
  c.sigmoid_router = true;
  c.normalize_topk = r.boolean("norm_topk_prob", true);
  c.routed_scaling = r.number("routed_scaling_factor", d.scaling);
  c.router_groups = r.integer("n_group", d.groups);
  c.router_groups_chosen = r.integer("topk_group", d.groups_chosen);
  r.take("output_router_logits");
  r.take("router_aux_loss_coef");
}

}  // namespace

void readGlm4MoeExperts(ConfigReader& r, ModelConfig& c) { readSigmoidRouterExperts(r, c, kGlm4MoeDefaults); }

// DeepseekV3Config's keys (its defaults where absent): the latent attention's ranks and parts, the
// rotated pairs interleaved unless rope_interleave is false; the experts as GLM-4.5's. The original
// checkpoints' own keys: their router named (scoring_func sigmoid, topk_method noaux_tc: DeepSeek-V2's
// softmax routings refused), an MoE layer every layer after the dense ones (moe_layer_freq 1), the
// balance loss's and expert parallelism's settings inert, as in transformers. (The published FP8
// weights' quantization_config: compiler/HuggingFaceQuantization.cpp.)
void readDeepseekV3Keys(ConfigReader& r, ModelConfig& c) {
  c.kv_lora_rank = r.integer("kv_lora_rank", 512);
  // null: q_proj without a bottleneck (Moonlight's, DeepSeek-V2-Lite's); 1536 where absent.
  r.take("q_lora_rank");
  c.q_lora_rank = r.isNull("q_lora_rank") ? 0 : r.integer("q_lora_rank", 1536);
  c.qk_nope_dim = r.integer("qk_nope_head_dim", 128);
  c.qk_rope_dim = r.integer("qk_rope_head_dim", 64);
  c.v_head_dim = r.integer("v_head_dim", 128);
  c.rope_interleave = r.boolean("rope_interleave", true);
  c.head_dim = c.qk_nope_dim + c.qk_rope_dim;
  c.rotary_dim = c.qk_rope_dim;
  c.kv_heads = c.heads;
  if (r.has("head_dim") && r.integer("head_dim") != c.qk_rope_dim)  // transformers writes qk_rope_head_dim there
    throw r.error("'head_dim' is not 'qk_rope_head_dim': the folder contradicts itself");
  if (r.text("scoring_func", "sigmoid") != "sigmoid" || r.text("topk_method", "noaux_tc") != "noaux_tc")
    throw r.error("'scoring_func' and 'topk_method' name DeepSeek-V2's softmax routing: mtc reads DeepSeek-V3's "
                  "(sigmoid, noaux_tc)");
  r.require("moe_layer_freq", 1, "an MoE layer every moe_layer_freq-th layer is not supported; every layer after "
                                 "first_k_dense_replace is");
  for (const char* inert : {"aux_loss_alpha", "seq_aux", "ep_size", "auto_map"}) r.take(inert);
  readSigmoidRouterExperts(r, c, kDeepseekV3Defaults);
}

// The checkpoint's multi-token prediction layers (num_nextn_predict_layers: GLM-4.5's and
// DeepSeek-V3's one, at model.layers.<num_hidden_layers>), which transformers leaves unread.
int64_t readPredictionLayers(ConfigReader& r) {
  const int64_t layers = count(r, "num_nextn_predict_layers", 0);
  if (layers > kMaxLayers) throw r.error(fmt::format("'num_nextn_predict_layers' is more than {}", kMaxLayers));
  return layers;
}

std::string configWithoutPredictionLayers(const std::string& config_json) {
  nlohmann::ordered_json config = parseOrderedJsonInput(config_json, "the model's Hugging Face config");
  config["num_nextn_predict_layers"] = 0;
  return config.dump(2) + "\n";
}

}  // namespace mt::hf
