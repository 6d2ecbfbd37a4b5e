#include <fmt/format.h>

#include "compiler/HuggingFaceConfigReader.h"

// GLM-4.5's config beside the llama family's (Glm4MoeForCausalLM: GLM-4.5, GLM-4.5-Air, GLM-4.6):
// its mixture of experts, routed as DeepSeek-V3's, and the checkpoint's multi-token prediction
// layers, which transformers does not read.
namespace mt::hf {

namespace {

// A whole number >= 0 under `key`, `fallback` where absent.
int64_t count(ConfigReader& r, const std::string& key, int64_t fallback) {
  const json& v = r.value(key);
  if (v.is_null()) return fallback;
  if (!v.is_number_integer() || v.get<int64_t>() < 0) throw r.error("'" + key + "' is not a whole number >= 0");
  return v.get<int64_t>();
}

}  // namespace

// Glm4MoeConfig's experts (transformers' defaults where absent): n_routed_experts SwiGLU experts of
// width moe_intermediate_size after the first first_k_dense_replace layers (those keep the dense
// MLP of intermediate_size), beside n_shared_experts shared ones added ungated (one SwiGLU MLP
// n_shared_experts times as wide); the sigmoid router, its choice by score + e_score_correction_bias
// within the n_group groups' best topk_group, its weights normalized (norm_topk_prob) and times
// routed_scaling_factor. transformers adds no load-balancing loss for it: output_router_logits and
// router_aux_loss_coef are inert.
void readGlm4MoeExperts(ConfigReader& r, ModelConfig& c) {
  c.experts = r.integer("n_routed_experts", 128);
  c.experts_per_token = r.integer("num_experts_per_tok", 8);
  c.expert_ffn = r.integer("moe_intermediate_size", 1408);
  const int64_t shared = count(r, "n_shared_experts", 1);
  if (shared == 0)
    throw r.error("'n_shared_experts' is 0: transformers' Glm4MoeMoE then holds a shared expert of width 0; no "
                  "published GLM-4.5 has one, and mtc reads one or more");
  if (shared > kMaxWidth / c.expert_ffn)
    throw r.error(fmt::format("'n_shared_experts' {} times 'moe_intermediate_size' {} is wider than {}", shared,
                              c.expert_ffn, kMaxWidth));
  c.shared_expert_ffn = shared * c.expert_ffn;
  c.shared_expert_gated = false;
  const int64_t dense = count(r, "first_k_dense_replace", 1);
  if (dense > c.layers)
    throw r.error(fmt::format("'first_k_dense_replace' {} is more than the {} layers", dense, c.layers));
  for (int64_t l = 0; l < dense; ++l) c.dense_layers.push_back(l);
  c.sigmoid_router = true;
  c.normalize_topk = r.boolean("norm_topk_prob", true);
  c.routed_scaling = r.number("routed_scaling_factor", 1.0);
  c.router_groups = r.integer("n_group", 1);
  c.router_groups_chosen = r.integer("topk_group", 1);
  r.take("output_router_logits");
  r.take("router_aux_loss_coef");
}

// The checkpoint's multi-token prediction layers (num_nextn_predict_layers: GLM-4.5's one, at
// model.layers.<num_hidden_layers>), which transformers' Glm4MoeModel leaves unread.
int64_t readGlm4MoePredictionLayers(ConfigReader& r) {
  const int64_t layers = count(r, "num_nextn_predict_layers", 0);
  if (layers > kMaxLayers) throw r.error(fmt::format("'num_nextn_predict_layers' is more than {}", kMaxLayers));
  return layers;
}

std::string glm4MoeConfigToKeep(const std::string& config_json) {
  nlohmann::ordered_json config = parseOrderedJsonInput(config_json, "the model's Hugging Face config");
  config["num_nextn_predict_layers"] = 0;
  return config.dump(2) + "\n";
}

}  // namespace mt::hf
