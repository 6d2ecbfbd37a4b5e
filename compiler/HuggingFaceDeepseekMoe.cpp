#include <fmt/format.h>

#include "compiler/HuggingFaceConfigReader.h"

// The mixtures of experts with DeepSeek's shared experts, beside the llama family's config: those
// routed as DeepSeek-V3's, GLM-4.5's (Glm4MoeForCausalLM: GLM-4.5, GLM-4.5-Air, GLM-4.6) and
// DeepSeek-V3's own (DeepseekV3ForCausalLM: DeepSeek-V3, Kimi K2, Moonlight, with its latent
// attention); DeepSeek-V2's softmax router; Ernie 4.5's biased softmax router; the checkpoints'
// multi-token prediction layers, which transformers does not read.
namespace mt::hf {

namespace {

// A whole number >= 0 under `key`, `fallback` where absent.
int64_t count(ConfigReader& r, const std::string& key, int64_t fallback) {
  const json& v = r.value(key);
  if (v.is_null()) return fallback;
  if (!v.is_number_integer() || v.get<int64_t>() < 0) throw r.error("'" + key + "' is not a whole number >= 0");
  return v.get<int64_t>();
}

// DeepSeek's shared experts: `shared` of c.expert_ffn added ungated, as one SwiGLU MLP `shared` times
// as wide (none for 0); `key`, the count's name, for the refusal of one too wide.
void readSharedExperts(ConfigReader& r, ModelConfig& c, const char* key, int64_t shared) {
  if (shared > kMaxWidth / c.expert_ffn)
    throw r.error(fmt::format("'{}' {} times 'moe_intermediate_size' {} is wider than {}", key, shared, c.expert_ffn,
                              kMaxWidth));
  if (shared > 0) c.shared_expert_ffn = shared * c.expert_ffn, c.shared_expert_gated = false;
}

// The config classes' defaults of the keys readDeepseekExperts reads (top_k none: required).
struct ExpertDefaults {
  int64_t experts;
  std::optional<int64_t> top_k;
  int64_t expert_ffn, dense_layers, shared, groups, groups_chosen;
  double scaling;
};
constexpr ExpertDefaults kGlm4MoeDefaults{128, 8, 1408, 1, 1, 1, 1, 1.0};     // Glm4MoeConfig's
constexpr ExpertDefaults kDeepseekV3Defaults{256, 8, 2048, 3, 1, 8, 4, 2.5};  // DeepseekV3Config's
constexpr ExpertDefaults kDeepseekV2Defaults{64, std::nullopt, 1407, 0, 2, 1, 1, 1.0};  // DeepseekV2Config's

// The experts (the config class's defaults where absent): n_routed_experts SwiGLU experts of width
// moe_intermediate_size after the first first_k_dense_replace layers (those keep the dense MLP of
// intermediate_size), beside n_shared_experts shared ones added ungated (one SwiGLU MLP
// n_shared_experts times as wide); the weights times routed_scaling_factor. The router's choice
// (the groups, its scores) is the caller's to read.
void readDeepseekExperts(ConfigReader& r, ModelConfig& c, const ExpertDefaults& d) {
  c.experts = r.integer("n_routed_experts", d.experts);
  c.experts_per_token = r.integer("num_experts_per_tok", d.top_k);
  c.expert_ffn = r.integer("moe_intermediate_size", d.expert_ffn);
  const int64_t shared = count(r, "n_shared_experts", d.shared);
  if (shared == 0)
    throw r.error("'n_shared_experts' is 0: transformers then holds a shared expert of width 0; no published model "
                  "has one, and mtc reads one or more");
  readSharedExperts(r, c, "n_shared_experts", shared);
  const int64_t dense = count(r, "first_k_dense_replace", d.dense_layers);
  if (dense > c.layers)
    throw r.error(fmt::format("'first_k_dense_replace' {} is more than the {} layers", dense, c.layers));
  for (int64_t l = 0; l < dense; ++l) c.dense_layers.push_back(l);
  c.routed_scaling = r.number("routed_scaling_factor", d.scaling);
}

// The sigmoid router (GLM-4.5's, DeepSeek-V3's): its choice by score + e_score_correction_bias
// within the n_group groups' best topk_group, its weights normalized (norm_topk_prob).
// transformers adds no load-balancing loss for it: output_router_logits and router_aux_loss_coef
// are inert.
void readSigmoidRouter(ConfigReader& r, ModelConfig& c, const ExpertDefaults& d) {
  c.sigmoid_router = true;
  c.normalize_topk = r.boolean("norm_topk_prob", true);
  c.router_groups = r.integer("n_group", d.groups);
  c.router_groups_chosen = r.integer("topk_group", d.groups_chosen);
  r.take("output_router_logits");
  r.take("router_aux_loss_coef");
}

// DeepSeek's multi-head latent attention (DeepseekV2Config's and DeepseekV3Config's keys, their
// defaults where absent): q through q_proj (q_lora_rank null) or a bottleneck, keys and values from
// a rank-kv_lora_rank latent, each head's parts; one key/value head per head.
void readLatentAttention(ConfigReader& r, ModelConfig& c) {
  c.kv_lora_rank = r.integer("kv_lora_rank", 512);
  // null: q_proj without a bottleneck (Moonlight's, DeepSeek-V2-Lite's); 1536 where absent.
  r.take("q_lora_rank");
  c.q_lora_rank = r.isNull("q_lora_rank") ? 0 : r.integer("q_lora_rank", 1536);
  c.qk_nope_dim = r.integer("qk_nope_head_dim", 128);
  c.qk_rope_dim = r.integer("qk_rope_head_dim", 64);
  c.v_head_dim = r.integer("v_head_dim", 128);
  c.head_dim = c.qk_nope_dim + c.qk_rope_dim;
  c.rotary_dim = c.qk_rope_dim;
  c.kv_heads = c.heads;
  if (r.has("head_dim") && r.integer("head_dim") != c.qk_rope_dim)  // transformers writes qk_rope_head_dim there
    throw r.error("'head_dim' is not 'qk_rope_head_dim': the folder contradicts itself");
  r.require("moe_layer_freq", 1, "an MoE layer every moe_layer_freq-th layer is not supported; every layer after "
                                 "first_k_dense_replace is");
  // The original code's balance loss and expert parallelism, which transformers does not run.
  for (const char* inert : {"aux_loss_alpha", "seq_aux", "ep_size", "auto_map"}) r.take(inert);
}

}  // namespace

void readGlm4MoeExperts(ConfigReader& r, ModelConfig& c) {
  readDeepseekExperts(r, c, kGlm4MoeDefaults);
  readSigmoidRouter(r, c, kGlm4MoeDefaults);
}

// DeepseekV3Config's keys: the latent attention, its rotated pairs interleaved unless
// rope_interleave is false; the experts as GLM-4.5's. The original checkpoints' own keys: their
// router named (scoring_func sigmoid, topk_method noaux_tc: DeepSeek-V2's softmax routings are
// DeepseekV2ForCausalLM's), an MoE layer every layer after the dense ones (moe_layer_freq 1), the
// balance loss's and expert parallelism's settings inert, as in transformers. (The published FP8
// weights' quantization_config: compiler/HuggingFaceQuantization.cpp.)
void readDeepseekV3Keys(ConfigReader& r, ModelConfig& c) {
  readLatentAttention(r, c);
  c.rope_interleave = r.boolean("rope_interleave", true);
  if (r.text("scoring_func", "sigmoid") != "sigmoid" || r.text("topk_method", "noaux_tc") != "noaux_tc")
    throw r.error("'scoring_func' and 'topk_method' name DeepSeek-V2's softmax routing: a DeepseekV3ForCausalLM "
                  "routes as DeepSeek-V3 (sigmoid, noaux_tc); DeepSeek-V2's folders say DeepseekV2ForCausalLM");
  readDeepseekExperts(r, c, kDeepseekV3Defaults);
  readSigmoidRouter(r, c, kDeepseekV3Defaults);
}

// DeepseekV2Config's keys (DeepSeek-V2, -V2-Lite, -V2.5, -Coder-V2): the latent attention as
// DeepSeek-V3's, its pairs always interleaved (transformers' DeepseekV2 turns them as complex
// numbers); the softmax router, the top k of the probabilities (topk_method "greedy") or within
// the topk_group of n_group groups whose best probabilities are largest ("group_limited_greedy"),
// weighed by the probabilities alone times routed_scaling_factor.
void readDeepseekV2Keys(ConfigReader& r, ModelConfig& c) {
  readLatentAttention(r, c);
  c.rope_interleave = true;
  r.require("rope_interleave", true, "DeepSeek-V2 always turns interleaved pairs (transformers' DeepseekV2 reads "
                                     "no rope_interleave)");
  r.require("scoring_func", "softmax", "DeepSeek-V2's router scores by a softmax (transformers' DeepseekV2Moe); a "
                                       "sigmoid router is DeepSeek-V3's (DeepseekV3ForCausalLM)");
  // transformers' DeepseekV2Moe does not renormalise; DeepSeek's own code does where this is true
  // (no published model sets it): the two disagree, so neither is guessed.
  r.require("norm_topk_prob", false, "transformers' DeepseekV2 ignores it while DeepSeek's own code renormalises the "
                                     "chosen weights; no published DeepSeek-V2 sets it");
  readDeepseekExperts(r, c, kDeepseekV2Defaults);
  c.normalize_topk = false;
  const std::string method = r.text("topk_method", "greedy");
  if (method == "group_limited_greedy") {
    c.router_groups = r.integer("n_group");
    c.router_groups_chosen = r.integer("topk_group");
  } else if (method == "greedy") {
    r.take("n_group"), r.take("topk_group");  // unread by a greedy choice, as in transformers
  } else {
    throw r.error("'topk_method' is \"" + method + "\": DeepSeek-V2 chooses by \"greedy\" or "
                  "\"group_limited_greedy\" (DeepSeek-V3's \"noaux_tc\" is DeepseekV3ForCausalLM's)");
  }
}

// Ernie4_5_MoeConfig's keys (its defaults where absent: ERNIE-4.5-21B-A3B's). Layer l is a
// mixture where (l + 1) % moe_layer_interval == 0 and moe_layer_start_index <= l <=
// moe_layer_end_index (-1: the last layer), as Ernie4_5_MoeDecoderLayer decides; the others keep
// the dense MLP of intermediate_size. Its router (Ernie4_5_MoeSparseMoeBlock): the softmax of the
// logits in f32, the top moe_k chosen by probability + moe_statics.e_score_correction_bias (frozen),
// their probabilities divided by their sum clamped at moe_norm_min (mtc divides by the sum: the two
// differ only where the chosen probabilities add up to less than moe_norm_min, which is at most
// 1e-12 here); moe_num_shared_experts experts of moe_intermediate_size added ungated. transformers
// adds Mixtral's load-balancing loss where output_router_logits is true, counting each token's top k
// by probability alone, without the bias: refused, as mtc counts the choices it makes.
void readErnie45MoeExperts(ConfigReader& r, ModelConfig& c) {
  c.experts = r.integer("moe_num_experts", 64);
  c.experts_per_token = r.integer("moe_k", 6);
  c.expert_ffn = r.integer("moe_intermediate_size", 1536);
  readSharedExperts(r, c, "moe_num_shared_experts", count(r, "moe_num_shared_experts", 2));
  const int64_t first = count(r, "moe_layer_start_index", 1);
  int64_t last = c.layers - 1;
  if (const json& end = r.value("moe_layer_end_index"); !end.is_null() && end != -1) {
    if (!end.is_number_integer() || end.get<int64_t>() < 0)
      throw r.error("'moe_layer_end_index' is " + jsonBrief(end) + ": a layer index, or -1 for the last layer");
    last = std::min(end.get<int64_t>(), last);
  }
  c.moe_every = r.integer("moe_layer_interval", 1);
  for (int64_t l = 0; l < c.layers; ++l)
    if (l < first || l > last) c.dense_layers.push_back(l);
  c.normalize_topk = true;
  c.router_choice_bias = true;
  const double norm_min = r.fraction("moe_norm_min", 1e-12);
  if (norm_min > 1e-12)
    throw r.error(fmt::format("'moe_norm_min' {:g} is above 1e-12: transformers divides the chosen probabilities by "
                              "their sum clamped there, mtc by the sum itself, which agree only for a floor of at "
                              "most 1e-12 (Ernie4_5_MoeConfig's)", norm_min));
  r.require("moe_gate_act", "softmax", "transformers' Ernie 4.5 routes by a softmax whatever the original code's "
                                       "moe_gate_act says");
  r.require("output_router_logits", false, "transformers' load-balancing loss for Ernie 4.5 counts each token's "
                                           "top k without the correction bias the router chooses by; mtc counts the "
                                           "choices made: train without it (false)");
  r.take("router_aux_loss_coef");
  // The original code's capacity, gate name, balancing switch and multi-token prediction loss weight,
  // which transformers does not read (its prediction layers: readPredictionLayers).
  for (const char* inert : {"moe_capacity", "moe_gate", "moe_use_aux_free", "multi_token_pred_lambda"}) r.take(inert);
}

// The checkpoint's multi-token prediction layers (num_nextn_predict_layers: GLM-4.5's and
// DeepSeek-V3's one, at model.layers.<num_hidden_layers>; Ernie 4.5's, its model.mtp_* weights),
// which transformers leaves unread.
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
