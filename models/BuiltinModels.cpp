// The built-in models' presets, their parameter counts, the checks of a config and the rotary
// scaling's attributes (models/BuiltinModels.h); their IR is models/ModelBuilder.cpp's.
#include "models/BuiltinModels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/moe/routing.h"
#include "kernels/rope/rope.h"

namespace mt {

namespace {

// DeepSeek's latent attention's projections and norms in one layer: q (or q_a, its norm and q_b),
// kv_a, its norm, kv_b, o.
int64_t latentAttentionParams(const ModelConfig& c) {
  const int64_t q_out = c.heads * c.headDim();
  const int64_t q = c.q_lora_rank ? c.width * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * q_out : c.width * q_out;
  return q + c.width * (c.kv_lora_rank + c.qk_rope_dim) + c.kv_lora_rank +
         c.kv_lora_rank * c.heads * (c.qk_nope_dim + c.v_head_dim) + c.heads * c.v_head_dim * c.width;
}

// Parameters of `c` counting `routed` of each MoE layer's experts.
int64_t countParams(const ModelConfig& c, int64_t routed) {
  const int64_t kv_width = c.kv_heads * c.headDim();
  // The output head: a reward model's score (width), else the LM head where it is not the embedding.
  const int64_t head = c.hasScoreHead() ? c.width : c.tied ? 0 : c.vocab * c.width;
  if (c.family == ModelFamily::kGpt2) {
    const int64_t per_layer = 4 * c.width                                     // two layer norms
                              + c.width * c.width * 2 + 2 * c.width * kv_width  // q, proj; k, v
                              + 2 * c.width + 2 * kv_width                      // their biases
                              + 2 * c.width * c.ffn + c.ffn + c.width;          // mlp
    return c.layers * per_layer + c.vocab * c.width + c.context * c.width + 2 * c.width + head;  // wte, wpe, ln_f
  }
  const int64_t q_width = c.heads * c.headDim();
  const int64_t attention =
      c.latentAttention() ? 2 * c.width + latentAttentionParams(c)
                          : (c.sandwich_norms ? 4 : 2) * c.width +                         // norms
                                2 * c.width * q_width + 2 * c.width * kv_width +           // q, o; k, v
                                (c.qkv_bias ? q_width + 2 * kv_width : 0) + (c.o_bias ? c.width : 0) +
                                // q and k normed per head, or (OLMo 2, OLMoE) over their whole projections
                                (c.qk_norm ? (c.qk_norm_whole ? q_width + kv_width : 2 * c.headDim()) : 0);
  const bool oss = c.expert_form == ModelConfig::ExpertForm::kGptOss;
  // gpt-oss: the router's bias, each expert's gate_up and down biases; a router's choice bias
  const int64_t router = c.experts * c.width + (oss || c.routerScoreBias() ? c.experts : 0);
  const int64_t expert = 3 * c.width * c.expert_ffn + (oss ? 2 * c.expert_ffn + c.width : 0);
  // Qwen2-MoE's shared expert and its gate (GLM-4.5's: none), which every token uses.
  const int64_t shared =
      c.shared_expert_ffn ? 3 * c.width * c.shared_expert_ffn + (c.shared_expert_gated ? c.width : 0) : 0;
  int64_t total = c.vocab * c.width + c.width + head;  // embed, norm, head
  for (int64_t l = 0; l < c.layers; ++l)
    total += attention + (c.attention_sinks ? c.heads : 0) +
             (c.isMoeLayer(l) ? router + routed * expert + shared : 3 * c.width * c.ffn);
  return total;
}

}  // namespace

static_assert(static_cast<int64_t>(RopeScaling::Kind::kLinear) == static_cast<int64_t>(RopeScalingKind::kLinear) &&
                  static_cast<int64_t>(RopeScaling::Kind::kLlama3) == static_cast<int64_t>(RopeScalingKind::kLlama3) &&
                  static_cast<int64_t>(RopeScaling::Kind::kYarn) == static_cast<int64_t>(RopeScalingKind::kYarn) &&
                  static_cast<int64_t>(RopeScaling::Kind::kLongRope) == static_cast<int64_t>(RopeScalingKind::kLongRope),
              "a config's rope scaling kinds are the rope kernels'");

RopeScalingAttrs ropeScalingAttrs(const ModelConfig& c, int64_t seq, bool by_position) {
  const RopeScaling& r = c.rope_scaling;
  RopeScalingAttrs out;
  out.kind = static_cast<int64_t>(r.kind);
  if (r.kind == RopeScaling::Kind::kNone) return out;
  double factor = r.factor, a = 0.0, b = 0.0, cc = 0.0, attention = 1.0;
  if (r.kind == RopeScaling::Kind::kLlama3) {
    a = r.low_freq_factor, b = r.high_freq_factor, cc = static_cast<double>(r.original_context);
  } else if (r.kind == RopeScaling::Kind::kYarn) {
    // transformers' _compute_yarn_parameters (in double, as Python computes them): the config's
    // factor as given (transformers 4.48-4.55 took the two contexts' ratio where the original was
    // named; earlier and later versions, 5 among them, the factor), the correction range from the
    // original context, else the config's own (not a --context that shortens the sequences).
    const double context = static_cast<double>(r.context ? r.context : c.context);
    const double original = r.original_context ? static_cast<double>(r.original_context) : context;
    attention = r.attention_factor > 0.0                         ? r.attention_factor
                : r.mscale > 0.0 && r.mscale_all_dim > 0.0 ? r.yarnMscale(r.mscale) / r.yarnMscale(r.mscale_all_dim)
                                                               : r.yarnMscale(1.0);
    const double dim = static_cast<double>(c.rotaryDim()), base = c.rope_theta;
    const auto correction = [&](double rotations) {
      return dim * std::log(original / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
    };
    double low = correction(r.beta_fast), high = correction(r.beta_slow);
    if (r.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;  // a ramp of one pair
    a = low, b = high - low;
  } else if (r.kind == RopeScaling::Kind::kLongRope) {
    // transformers' _compute_longrope_parameters: where the config names the original context,
    // the factor is the two contexts' ratio (Phi-3's; the config reader refuses another factor
    // beside it), else its own; the attention factor from it unless given. Its
    // longrope_frequency_update takes the long factors where the largest position + 1 passes the
    // original context: each call's (a = 2), or a sequence's of `seq` tokens (a = 1 or 0).
    const double context = static_cast<double>(r.context ? r.context : c.context);
    const double original = r.original_context ? static_cast<double>(r.original_context) : context;
    factor = r.original_context ? context / original : r.factor > 0.0 ? r.factor : 1.0;
    attention = r.attention_factor > 0.0 ? r.attention_factor
                : factor <= 1.0          ? 1.0
                                         : std::sqrt(1.0 + std::log(factor) / std::log(original));
    cc = original;
    const LongRopeChoice choice = by_position                          ? LongRopeChoice::kByPosition
                                  : static_cast<double>(seq) > original ? LongRopeChoice::kLong
                                                                        : LongRopeChoice::kShort;
    a = static_cast<double>(static_cast<int64_t>(choice));
  }
  out.values = {static_cast<float>(factor), static_cast<float>(a), static_cast<float>(b), static_cast<float>(cc),
                static_cast<float>(attention)};
  if (r.kind == RopeScaling::Kind::kLongRope)
    for (const auto* factors : {&r.short_factor, &r.long_factor})
      for (double pair : *factors) out.values.push_back(static_cast<float>(pair));
  return out;
}

int64_t ModelConfig::numParams() const { return countParams(*this, experts); }
int64_t ModelConfig::numActiveParams() const { return countParams(*this, experts_per_token); }

namespace {

// gpt-oss (GptOssForCausalLM): Llama's attention with q/k/v/o biases, a sink per head and a
// 128-token window on every other layer (the even ones), YaRN from a 4,096-token original context,
// and in every layer `experts` of its own form (ModelConfig::ExpertForm::kGptOss), top 4.
ModelConfig gptOss(int64_t layers, int64_t experts) {
  ModelConfig c{ModelFamily::kLlama, layers, 2880, 64, 8, 2880, 201088, 131072, false, 1e-5, 150000.0, true, 64};
  c.experts = experts, c.experts_per_token = 4, c.expert_ffn = 2880, c.normalize_topk = false;
  c.rope_scaling.kind = RopeScaling::Kind::kYarn;
  c.rope_scaling.context = 131072, c.rope_scaling.original_context = 4096, c.rope_scaling.factor = 32.0;
  c.rope_scaling.truncate = false;
  c.o_bias = true, c.attention_sinks = true, c.sliding_window = 128;
  for (int64_t l = 0; l < layers; l += 2) c.sliding_layers.push_back(l);
  c.expert_form = ModelConfig::ExpertForm::kGptOss, c.swiglu_limit = 7.0;
  return c;
}

// Test-sized: 2 layers of width 64, 4 experts of width 32, top 2; a window of 8 on layer 0; the
// SwiGLU clamped at 0.1 so that a test-sized model's small activations reach the clamps; no
// rope scaling (the YaRN kernels are checked on their own).
ModelConfig gptOssTiny() {
  ModelConfig c{ModelFamily::kLlama, 2, 64, 4, 2, 176, 256, 64, false, 1e-5, 10000.0, true};
  c.experts = 4, c.experts_per_token = 2, c.expert_ffn = 32, c.normalize_topk = false;
  c.o_bias = true, c.attention_sinks = true, c.sliding_window = 8, c.sliding_layers = {0};
  c.expert_form = ModelConfig::ExpertForm::kGptOss, c.swiglu_limit = 0.1;
  return c;
}

// Qwen2-MoE (Qwen2MoeForCausalLM): `attention`'s Qwen2 shape (q/k/v biases) with `experts` of
// width `expert_ffn` in every layer, the top k as the softmax gives them (norm_topk_prob false),
// beside a shared expert of width `shared_ffn`.
ModelConfig qwen2Moe(ModelConfig attention, int64_t experts, int64_t top_k, int64_t expert_ffn, int64_t shared_ffn) {
  ModelConfig c = attention;
  c.experts = experts, c.experts_per_token = top_k, c.expert_ffn = expert_ffn, c.normalize_topk = false;
  c.shared_expert_ffn = shared_ffn;
  return c;
}

// OLMoE (OlmoeForCausalLM): `attention`'s Llama shape with q and k normed over their whole
// projections (OLMo 2's norms, in Llama's pre-norm layers) and `experts` as wide as its MLP in
// every layer, the top k as the softmax gives them (norm_topk_prob false).
ModelConfig olmoe(ModelConfig attention, int64_t experts, int64_t top_k) {
  ModelConfig c = attention;
  c.qk_norm = c.qk_norm_whole = true;
  c.experts = experts, c.experts_per_token = top_k, c.expert_ffn = c.ffn, c.normalize_topk = false;
  return c;
}

// GLM-4.5 (Glm4MoeForCausalLM): `attention` (q/k/v biases, heads `head_dim` wide) with half of each
// head rotated, its first `dense` layers' MLPs dense (`ffn` wide), the others `experts` of width
// `expert_ffn` beside `shared` shared ones (one MLP as wide as they together), added ungated; the
// sigmoid router's top k by score + its frozen bias within `groups_chosen` of `groups`,
// renormalised, times `scaling`.
ModelConfig glm4Moe(ModelConfig attention, int64_t dense, int64_t experts, int64_t top_k, int64_t expert_ffn,
                    double scaling, int64_t groups = 1, int64_t groups_chosen = 1, int64_t shared = 1) {
  ModelConfig c = attention;
  c.rotary_dim = c.headDim() / 2;
  c.experts = experts, c.experts_per_token = top_k, c.expert_ffn = expert_ffn, c.normalize_topk = true;
  for (int64_t l = 0; l < dense; ++l) c.dense_layers.push_back(l);
  c.shared_expert_ffn = shared * expert_ffn, c.shared_expert_gated = false;
  c.sigmoid_router = true, c.routed_scaling = scaling, c.router_groups = groups, c.router_groups_chosen = groups_chosen;
  return c;
}

// DeepSeek-V3 (DeepseekV3ForCausalLM): GLM-4.5's mixture (glm4Moe) around DeepSeek's latent
// attention: q through a rank-`q_rank` bottleneck (0: q_proj), keys and values from a
// rank-`kv_rank` latent, each head's `nope` unrotated and `rope` rotated elements (interleaved
// pairs), values `v` wide; one key/value head per head.
ModelConfig deepseekV3(ModelConfig mixture, int64_t q_rank, int64_t kv_rank, int64_t nope, int64_t rope, int64_t v) {
  ModelConfig c = mixture;
  c.q_lora_rank = q_rank, c.kv_lora_rank = kv_rank, c.qk_nope_dim = nope, c.qk_rope_dim = rope, c.v_head_dim = v;
  c.head_dim = nope + rope, c.rotary_dim = rope, c.kv_heads = c.heads;
  return c;
}

// `c` with DeepSeek-V3's YaRN: `factor` times an `original` context, its corrections from
// `beta_fast` and `beta_slow` rotations, mscale and mscale_all_dim 1 (the scores' factor
// mscale(factor)^2 in the latent attention, cos and sin unscaled).
ModelConfig deepseekYarn(ModelConfig c, double factor, int64_t original, double beta_fast, double beta_slow) {
  c.rope_scaling.kind = RopeScaling::Kind::kYarn;
  c.rope_scaling.context = c.context, c.rope_scaling.original_context = original, c.rope_scaling.factor = factor;
  c.rope_scaling.beta_fast = beta_fast, c.rope_scaling.beta_slow = beta_slow;
  c.rope_scaling.mscale = c.rope_scaling.mscale_all_dim = 1.0;
  return c;
}

// DeepSeek-V2 (DeepseekV2ForCausalLM): DeepSeek-V3's shape (deepseekV3 of glm4Moe, glm4Moe's groups
// and scale) with the softmax router — the top k of its probabilities, within the groups whose best
// probabilities are largest where there are groups, not renormalised — and DeepSeek-V2's YaRN
// mscale and mscale_all_dim 0.707 where it scales (the scores' factor mscale(factor, 0.707)^2).
ModelConfig deepseekV2(ModelConfig c) {
  c.sigmoid_router = false, c.normalize_topk = false;
  if (c.rope_scaling.kind == RopeScaling::Kind::kYarn) c.rope_scaling.mscale = c.rope_scaling.mscale_all_dim = 0.707;
  return c;
}

}  // namespace

const std::vector<ModelPreset>& modelPresets() {
  static const std::vector<ModelPreset> presets = {
      {"gpt2-tiny", {ModelFamily::kGpt2, 2, 64, 4, 4, 256, 256, 64, true}, "test-sized GPT-2, byte vocab"},
      {"gpt2-demo", {ModelFamily::kGpt2, 4, 256, 4, 4, 1024, 256, 128, true}, "the README demo: 3.2M params, byte vocab"},
      {"gpt2-bench", {ModelFamily::kGpt2, 6, 384, 6, 6, 1536, 256, 256, true}, "the CPU benchmark model (bench/cpu_train)"},
      {"gpt2-124m", {ModelFamily::kGpt2, 12, 768, 12, 12, 3072, 50257, 1024, true}, "GPT-2 small"},
      {"gpt2-350m", {ModelFamily::kGpt2, 24, 1024, 16, 16, 4096, 50257, 1024, true}, "GPT-2 medium"},
      {"gpt2-774m", {ModelFamily::kGpt2, 36, 1280, 20, 20, 5120, 50257, 1024, true}, "GPT-2 large"},
      {"gpt2-1.5b", {ModelFamily::kGpt2, 48, 1600, 25, 25, 6400, 50257, 1024, true}, "GPT-2 XL"},
      {"llama-tiny", {ModelFamily::kLlama, 2, 64, 4, 2, 176, 256, 64, false}, "test-sized Llama, GQA 4:2, byte vocab"},
      {"llama-bench", {ModelFamily::kLlama, 6, 384, 6, 2, 1024, 256, 256, false}, "CPU-sized Llama, byte vocab"},
      {"llama-1b", {ModelFamily::kLlama, 16, 2048, 32, 8, 8192, 128256, 8192, true, 1e-5, 500000.0}, "Llama 3.2 1B shape"},
      {"llama-3b", {ModelFamily::kLlama, 28, 3072, 24, 8, 8192, 128256, 8192, true, 1e-5, 500000.0}, "Llama 3.2 3B shape"},
      {"llama-7b", {ModelFamily::kLlama, 32, 4096, 32, 32, 11008, 32000, 4096, false}, "Llama 2 7B shape"},
      {"llama-8b", {ModelFamily::kLlama, 32, 4096, 32, 8, 14336, 128256, 8192, false, 1e-5, 500000.0}, "Llama 3 8B shape"},
      {"llama-13b", {ModelFamily::kLlama, 40, 5120, 40, 40, 13824, 32000, 4096, false}, "Llama 2 13B shape"},
      {"llama-70b", {ModelFamily::kLlama, 80, 8192, 64, 8, 28672, 128256, 8192, false, 1e-5, 500000.0}, "Llama 3 70B shape"},
      {"llama-120b", {ModelFamily::kLlama, 96, 10240, 80, 8, 32768, 128256, 8192, false, 1e-5, 500000.0}, "a 121B Llama-style model"},
      // Qwen2.5 (Qwen2ForCausalLM): Llama with q/k/v biases, an untied head, 152,064 tokens.
      {"qwen-tiny", {ModelFamily::kLlama, 2, 64, 4, 2, 176, 256, 64, false, 1e-6, 1e6, true}, "test-sized Qwen2: q/k/v biases, GQA 4:2"},
      {"qwen2.5-7b", {ModelFamily::kLlama, 28, 3584, 28, 4, 18944, 152064, 131072, false, 1e-6, 1e6, true}, "Qwen2.5 7B shape"},
      {"qwen2.5-14b", {ModelFamily::kLlama, 48, 5120, 40, 8, 13824, 152064, 131072, false, 1e-5, 1e6, true}, "Qwen2.5 14B shape"},
      {"qwen2.5-32b", {ModelFamily::kLlama, 64, 5120, 40, 8, 27648, 152064, 131072, false, 1e-5, 1e6, true}, "Qwen2.5 32B shape"},
      {"qwen2.5-72b", {ModelFamily::kLlama, 80, 8192, 64, 8, 29568, 152064, 131072, false, 1e-5, 1e6, true}, "Qwen2.5 72B shape"},
      // Qwen3 (Qwen3ForCausalLM): Llama with heads of 128 whatever the width, RMSNorm of each head
      // of q and k before the rotary embedding, no biases, 151,936 tokens.
      {"qwen3-tiny", {ModelFamily::kLlama, 2, 64, 4, 2, 176, 256, 64, false, 1e-6, 1e6, false, 32, true},
       "test-sized Qwen3: heads of 32 in width 64, q/k norms, GQA 4:2"},
      {"qwen3-0.6b", {ModelFamily::kLlama, 28, 1024, 16, 8, 3072, 151936, 40960, true, 1e-6, 1e6, false, 128, true}, "Qwen3 0.6B shape"},
      {"qwen3-1.7b", {ModelFamily::kLlama, 28, 2048, 16, 8, 6144, 151936, 40960, true, 1e-6, 1e6, false, 128, true}, "Qwen3 1.7B shape"},
      {"qwen3-4b", {ModelFamily::kLlama, 36, 2560, 32, 8, 9728, 151936, 40960, true, 1e-6, 1e6, false, 128, true}, "Qwen3 4B shape"},
      {"qwen3-8b", {ModelFamily::kLlama, 36, 4096, 32, 8, 12288, 151936, 40960, false, 1e-6, 1e6, false, 128, true}, "Qwen3 8B shape"},
      {"qwen3-14b", {ModelFamily::kLlama, 40, 5120, 40, 8, 17408, 151936, 40960, false, 1e-6, 1e6, false, 128, true}, "Qwen3 14B shape"},
      {"qwen3-32b", {ModelFamily::kLlama, 64, 5120, 64, 8, 25600, 151936, 40960, false, 1e-6, 1e6, false, 128, true}, "Qwen3 32B shape"},
      // Mixtures of experts (DESIGN.md §14): Qwen3-MoE (Qwen3MoeForCausalLM: Qwen3's attention, 128
      // experts of width moe_intermediate_size, top 8 renormalised) and Mixtral (MixtralForCausalLM:
      // Llama's attention, 8 experts of width intermediate_size, top 2 renormalised). `ffn` is the
      // config's intermediate_size, used by dense layers only (none in these presets).
      {"qwen3-moe-tiny", {ModelFamily::kLlama, 2, 64, 4, 2, 176, 256, 64, false, 1e-6, 1e6, false, 32, true, 4, 2, 32, true},
       "test-sized Qwen3-MoE: 4 experts of width 32, top 2"},
      {"qwen3-30b-a3b", {ModelFamily::kLlama, 48, 2048, 32, 4, 6144, 151936, 40960, false, 1e-6, 1e6, false, 128, true, 128, 8, 768, true},
       "Qwen3-30B-A3B shape: 128 experts, top 8"},
      {"qwen3-235b-a22b", {ModelFamily::kLlama, 94, 4096, 64, 4, 12288, 151936, 40960, false, 1e-6, 1e6, false, 128, true, 128, 8, 1536, true},
       "Qwen3-235B-A22B shape: 128 experts, top 8"},
      {"qwen2-moe-tiny", qwen2Moe({ModelFamily::kLlama, 2, 64, 4, 2, 176, 256, 64, false, 1e-6, 1e6, true}, 4, 2, 32, 48),
       "test-sized Qwen2-MoE: 4 experts of width 32, top 2, a shared expert of width 48"},
      {"qwen1.5-moe-a2.7b",
       qwen2Moe({ModelFamily::kLlama, 24, 2048, 16, 16, 5632, 151936, 8192, false, 1e-6, 1e6, true}, 60, 4, 1408, 5632),
       "Qwen1.5-MoE-A2.7B shape: 60 experts, top 4, a shared expert"},
      {"qwen2-57b-a14b",
       qwen2Moe({ModelFamily::kLlama, 28, 3584, 28, 4, 18944, 151936, 32768, false, 1e-6, 1e6, true}, 64, 8, 2560, 20480),
       "Qwen2-57B-A14B shape: 64 experts, top 8, a shared expert"},
      {"olmoe-tiny", olmoe({ModelFamily::kLlama, 2, 64, 4, 2, 48, 256, 64, false, 1e-5, 1e4}, 4, 2),
       "test-sized OLMoE: 4 experts of width 48, top 2, q and k normed whole"},
      {"olmoe-1b-7b", olmoe({ModelFamily::kLlama, 16, 2048, 16, 16, 1024, 50304, 4096, false, 1e-5, 1e4}, 64, 8),
       "OLMoE-1B-7B shape: 64 experts, top 8"},
      {"mixtral-tiny", {ModelFamily::kLlama, 2, 64, 4, 2, 176, 256, 64, false, 1e-5, 1e6, false, 0, false, 4, 2, 48, true},
       "test-sized Mixtral: 4 experts of width 48, top 2"},
      {"mixtral-8x7b", {ModelFamily::kLlama, 32, 4096, 32, 8, 14336, 32000, 32768, false, 1e-5, 1e6, false, 0, false, 8, 2, 14336, true},
       "Mixtral 8x7B shape: 8 experts, top 2"},
      {"mixtral-8x22b", {ModelFamily::kLlama, 56, 6144, 48, 8, 16384, 32768, 65536, false, 1e-5, 1e6, false, 0, false, 8, 2, 16384, true},
       "Mixtral 8x22B shape: 8 experts, top 2"},
      {"glm4-moe-tiny",
       glm4Moe({ModelFamily::kLlama, 3, 64, 4, 2, 96, 256, 64, false, 1e-5, 1e6, true, 32, true}, 1, 8, 2, 32, 2.5, 2, 1),
       "test-sized GLM-4.5: a dense first layer, then 8 experts of width 32 (top 2 of the better of 2 groups by "
       "the sigmoid router, x 2.5) beside a shared one"},
      {"glm-4.5-air",
       glm4Moe({ModelFamily::kLlama, 46, 4096, 96, 8, 10944, 151552, 131072, false, 1e-5, 1e6, true, 128, false}, 1,
               128, 8, 1408, 1.0),
       "GLM-4.5-Air shape: 128 experts, top 8, a shared expert, the first layer dense"},
      {"glm-4.5",
       glm4Moe({ModelFamily::kLlama, 92, 5120, 96, 8, 12288, 151552, 131072, false, 1e-5, 1e6, true, 128, true}, 3,
               160, 8, 1536, 2.5),
       "GLM-4.5 shape: 160 experts, top 8, a shared expert, the first 3 layers dense, q/k norms"},
      {"deepseek-v3-tiny",
       deepseekYarn(deepseekV3(glm4Moe({ModelFamily::kLlama, 3, 64, 4, 4, 96, 256, 64, false, 1e-6, 1e4}, 1, 8, 2, 32,
                                       2.5, 4, 2),
                               24, 16, 16, 8, 12),
                    4.0, 16, 32.0, 1.0),
       "test-sized DeepSeek-V3: latent attention (q from rank 24, keys and values from rank 16), 8 experts of width 32 "
       "in 4 groups (top 2 from 2) beside a shared one, a dense first layer, YaRN x4 from 16 tokens"},
      {"deepseek-v3",
       deepseekYarn(deepseekV3(glm4Moe({ModelFamily::kLlama, 61, 7168, 128, 128, 18432, 129280, 163840, false, 1e-6,
                                        1e4},
                                       3, 256, 8, 2048, 2.5, 8, 4),
                               1536, 512, 128, 64, 128),
                    40.0, 4096, 32.0, 1.0),
       "DeepSeek-V3 / R1 shape: latent attention, 256 experts in 8 groups (top 8 from 4), a shared one, the first 3 "
       "layers dense, YaRN x40"},
      {"kimi-k2",
       deepseekYarn(deepseekV3(glm4Moe({ModelFamily::kLlama, 61, 7168, 64, 64, 18432, 163840, 131072, false, 1e-6,
                                        50000.0},
                                       1, 384, 8, 2048, 2.827),
                               1536, 512, 128, 64, 128),
                    32.0, 4096, 1.0, 1.0),
       "Kimi K2 shape (DeepseekV3ForCausalLM): latent attention, 384 experts (top 8), a shared one, the first layer "
       "dense, YaRN x32"},
      {"moonlight-16b-a3b",
       deepseekV3(glm4Moe({ModelFamily::kLlama, 27, 2048, 16, 16, 11264, 163840, 8192, false, 1e-5, 50000.0}, 1, 64, 6,
                          1408, 2.446, 1, 1, 2),
                  0, 512, 128, 64, 128),
       "Moonlight-16B-A3B shape (DeepseekV3ForCausalLM): latent attention, 64 experts, top 6, 2 shared"},
      {"deepseek-v2-tiny",
       deepseekV2(deepseekYarn(deepseekV3(glm4Moe({ModelFamily::kLlama, 3, 64, 4, 4, 96, 256, 64, false, 1e-6, 1e4}, 1,
                                                  8, 3, 24, 2.0, 4, 2, 2),
                                          0, 16, 16, 8, 16),
                               4.0, 16, 32.0, 1.0)),
       "test-sized DeepSeek-V2: latent attention (q_proj, keys and values from rank 16), 8 experts of width 24 in 4 "
       "groups (the softmax's top 3 from the 2 with the best probabilities, x 2) beside 2 shared, a dense first "
       "layer, YaRN x4 from 16 tokens"},
      {"deepseek-v2-lite",
       deepseekV2(deepseekYarn(deepseekV3(glm4Moe({ModelFamily::kLlama, 27, 2048, 16, 16, 10944, 102400, 163840, false,
                                                   1e-6, 1e4},
                                                  1, 64, 6, 1408, 1.0, 1, 1, 2),
                                          0, 512, 128, 64, 128),
                               40.0, 4096, 32.0, 1.0)),
       "DeepSeek-V2-Lite shape: latent attention (q_proj), 64 experts (the softmax's top 6) beside 2 shared, the "
       "first layer dense, YaRN x40"},
      {"deepseek-v2",
       deepseekV2(deepseekYarn(deepseekV3(glm4Moe({ModelFamily::kLlama, 60, 5120, 128, 128, 12288, 102400, 163840,
                                                   false, 1e-6, 1e4},
                                                  1, 160, 6, 1536, 16.0, 8, 3, 2),
                                          1536, 512, 128, 64, 128),
                               40.0, 4096, 32.0, 1.0)),
       "DeepSeek-V2 / V2.5 shape: latent attention, 160 experts in 8 groups (the softmax's top 6 from 3, x 16) beside "
       "2 shared, the first layer dense, YaRN x40"},
      {"gpt-oss-tiny", gptOssTiny(), "test-sized gpt-oss: sinks, a window of 8 on layer 0, 4 experts of width 32, top 2"},
      {"gpt-oss-20b", gptOss(24, 32), "gpt-oss-20b shape: 32 experts, top 4, sinks, 128-token windows on alternate layers"},
      {"gpt-oss-120b", gptOss(36, 128), "gpt-oss-120b shape: 128 experts, top 4, sinks, 128-token windows on alternate layers"},
  };
  return presets;
}

const ModelPreset* findModelPreset(const std::string& name) {
  for (const auto& p : modelPresets())
    if (p.name == name) return &p;
  return nullptr;
}

namespace {

// DeepSeek's latent attention: "" or what is wrong. Its heads are q/k's two parts wide (the values
// padded to them), one key/value head per head, the rotary embedding over the rotated part alone.
std::string validateLatentAttention(const ModelConfig& c) {
  const bool any = c.kv_lora_rank || c.q_lora_rank || c.qk_nope_dim || c.qk_rope_dim || c.v_head_dim;
  if (!any) return "";
  if (!c.latentAttention()) return "q_lora_rank and the heads' parts are options of the latent attention (kv_lora_rank)";
  for (int64_t v : {c.kv_lora_rank, c.q_lora_rank, c.qk_nope_dim, c.qk_rope_dim, c.v_head_dim})
    if (v < 0 || v > kMaxWidth) return "the latent attention's ranks and widths must lie in [0, " + std::to_string(kMaxWidth) + "]";
  if (c.family != ModelFamily::kLlama || c.qkv_bias || c.o_bias || c.qk_norm || c.gemmaForm() || c.graniteForm() ||
      c.sandwich_norms || !c.input_norms)
    return "the latent attention is an option of the llama family's plain layers (no biases, q/k norms, Gemma's or "
           "Granite's forms)";
  if (c.qk_rope_dim < 2 || c.qk_rope_dim % 2 != 0 || c.qk_nope_dim < 1 || c.v_head_dim < 1)
    return "the latent attention needs an even rotated part (qk_rope_dim) of 2 or more, an unrotated one "
           "(qk_nope_dim) and values (v_head_dim) of 1 or more";
  if (c.headDim() != c.qk_nope_dim + c.qk_rope_dim || c.rotaryDim() != c.qk_rope_dim || c.kv_heads != c.heads)
    return "the latent attention's heads are qk_nope_dim + qk_rope_dim wide (head_dim), the rotary embedding over "
           "qk_rope_dim of them, one key/value head per head";
  if (c.v_head_dim > c.headDim())
    return "the latent attention's values (v_head_dim " + std::to_string(c.v_head_dim) +
           ") must be no wider than its heads' q and k (" + std::to_string(c.headDim()) + ")";
  return "";
}

// The architectures' forms of the llama family (Gemma's, Granite's, OLMo 2's norms, SmolLM3's NoPE
// layers): "" or what is wrong.
std::string validateArchitectureForms(const ModelConfig& c) {
  if (c.gemmaForm()) {
    if (c.family != ModelFamily::kLlama || c.experts > 0)
      return "Gemma's norms, scaled embedding, GeGLU, local rotary base, attention scalar and softcaps are options "
             "of the llama family's dense models";
    if (!(c.rope_local_theta >= 0.0 && std::isfinite(c.rope_local_theta)) ||
        !(c.query_pre_attn_scalar >= 0.0 && std::isfinite(c.query_pre_attn_scalar)))
      return "rope_local_theta and query_pre_attn_scalar must be finite and not negative (0: none)";
    for (double cap : {c.attn_softcap, c.final_softcap})
      if (!(cap >= 0.0 && std::isfinite(static_cast<float>(cap))) || (cap > 0.0 && !(static_cast<float>(cap) > 0.0f)))
        return "the attention and final logit softcaps must be positive and in f32's range (0: none)";
  }
  if (c.graniteForm()) {
    if (c.family != ModelFamily::kLlama) return "Granite's multipliers are options of the llama family";
    auto f32Positive = [](double m) { return static_cast<float>(m) > 0.0f && std::isfinite(static_cast<float>(m)); };
    for (double m : {c.embedding_multiplier, c.residual_multiplier, c.logits_scaling})
      if (!f32Positive(m) || !f32Positive(1.0 / m))
        return "Granite's embedding, residual and logits multipliers must be positive, they and their inverses in "
               "f32's range";
    if (c.attention_multiplier != 0.0 && (!f32Positive(c.attention_multiplier) ||
                                          !f32Positive(c.attention_multiplier * std::sqrt(c.headDim()))))
      return "Granite's attention multiplier must be positive and in f32's range (0: head_dim^-1/2)";
  }
  if (c.qk_norm_whole && !c.qk_norm) return "qk_norm_whole is a form of qk_norm";
  if (c.rope_pairs_interleaved && (c.family != ModelFamily::kLlama || c.latentAttention() || c.rotaryDim() % 2 != 0))
    return "interleaved rotary pairs are a llama attention's over an even number of each head's elements";
  if (std::string problem = validateLatentAttention(c); !problem.empty()) return problem;
  if (!c.input_norms && !c.sandwich_norms) return "a model without input norms needs the sandwich norms after its sublayers";
  for (int64_t l : c.nope_layers)
    if (c.family != ModelFamily::kLlama || l < 0 || l >= c.layers)
      return "a layer without the rotary embedding must be a llama model's layer, got " + std::to_string(l);
  return "";
}

// A mixture of experts' shared expert and router beyond the plain softmax top k: the sigmoid
// router (GLM-4.5's, DeepSeek-V3's), the softmax router's choice bias (Ernie 4.5's), the choice
// within groups (DeepSeek's) and the weights' scale
// (routed_scaling_factor): "" or what is wrong. The kernel's limits (kernels/moe/moe_cpu.cc
// checkRouting).
std::string validateRouter(const ModelConfig& c) {
  if (!c.shared_expert_gated && c.shared_expert_ffn == 0) return "an ungated shared expert needs shared_expert_ffn";
  const bool groups = c.router_groups != 1 || c.router_groups_chosen != 1;
  if (!c.routerScoreBias() && !groups && c.routed_scaling == 1.0) return "";
  if (c.expert_form != ModelConfig::ExpertForm::kSwiglu)
    return "the sigmoid router, a choice bias, groups of experts and routed_scaling are options of the SwiGLU experts";
  if (c.sigmoid_router && c.router_choice_bias)
    return "router_choice_bias is the softmax router's; the sigmoid router has its bias already";
  if (!std::isfinite(static_cast<float>(c.routed_scaling)))
    return "routed_scaling (routed_scaling_factor) must be finite in f32";
  if (!groups) return "";
  if (!routing::splitsIntoGroups(c.experts, c.router_groups))
    return "router_groups (n_group) " + std::to_string(c.router_groups) + " must lie in [2, " +
           std::to_string(routing::kMaxGroups) + "] and split the " + std::to_string(c.experts) +
           " experts into equal groups of two or more";
  if (c.router_groups_chosen < 1 || c.router_groups_chosen > c.router_groups)
    return "router_groups_chosen (topk_group) " + std::to_string(c.router_groups_chosen) + " must lie in [1, " +
           std::to_string(c.router_groups) + "]";
  // Fewer would choose experts outside the groups, which DeepSeek's routers never mean to.
  if (c.router_groups_chosen * (c.experts / c.router_groups) < c.experts_per_token)
    return "router_groups_chosen (topk_group) " + std::to_string(c.router_groups_chosen) + " groups of " +
           std::to_string(c.experts / c.router_groups) + " experts hold fewer than the " +
           std::to_string(c.experts_per_token) + " each token chooses";
  return "";
}

}  // namespace

std::string validateConfig(const ModelConfig& c, int64_t seq) {
  if (c.family == ModelFamily::kNone) return "a built-in model needs a family: gpt2 or llama";
  if (c.layers <= 0 || c.width <= 0 || c.heads <= 0 || c.ffn <= 0 || c.vocab <= 0 || c.context <= 0)
    return "layers, width, heads, ffn, vocab and context must be positive";
  // Bounds that keep every size product in int64 and the IR (built layer by layer) in memory; the
  // largest published models are far inside them (~130 layers, width 16,384, 128k context).
  if (c.layers > kMaxLayers) return "layers " + std::to_string(c.layers) + ": at most " + std::to_string(kMaxLayers) + " are supported";
  if (c.width > kMaxWidth || c.ffn > kMaxWidth)
    return "width and ffn must be at most " + std::to_string(kMaxWidth) + ", got " + std::to_string(c.width) +
           " and " + std::to_string(c.ffn);
  if (c.context > kMaxContext)
    return "context " + std::to_string(c.context) + " is more than " + std::to_string(kMaxContext) + " tokens";
  if (c.padding_id < -1 || c.padding_id >= c.vocab)
    return "padding_id " + std::to_string(c.padding_id) + " is not a token of the " + std::to_string(c.vocab) +
           "-token vocabulary (-1: none)";
  if (c.head_dim < 0 || c.head_dim > kMaxWidth) return "head_dim must be between 0 (width / heads) and " + std::to_string(kMaxWidth);
  if (c.rotary_dim < 0 || c.rotary_dim > c.headDim() || c.rotary_dim % 2 != 0)
    return "rotary_dim must be even and between 0 (the whole head) and the head's width";
  if (c.rope_scaling.kind == RopeScaling::Kind::kLongRope) {
    const size_t pairs = static_cast<size_t>(c.rotaryDim() / 2);
    if (pairs > static_cast<size_t>(kMaxRopePairs) || c.rope_scaling.short_factor.size() != pairs ||
        c.rope_scaling.long_factor.size() != pairs)
      return "longrope needs a short and a long factor for each of the rotation's " + std::to_string(pairs) +
             " pairs (at most " + std::to_string(kMaxRopePairs) + ")";
    for (const auto* factors : {&c.rope_scaling.short_factor, &c.rope_scaling.long_factor})
      for (double f : *factors)
        if (!(static_cast<float>(f) > 0.0f) || !std::isfinite(static_cast<float>(f)))
          return "longrope's factors must be positive and finite in f32";
  }
  if (c.head_dim == 0 && c.width % c.heads != 0)
    return "width " + std::to_string(c.width) + " is not divisible by " + std::to_string(c.heads) + " heads";
  if (c.family == ModelFamily::kGpt2 && (c.head_dim || c.qk_norm || c.o_bias))
    return "gpt2's heads are width / heads wide, without q/k norms, its biases its own (head_dim, qk_norm and o_bias "
           "are llama options)";
  if (c.kv_heads <= 0 || c.heads % c.kv_heads != 0)
    return "heads " + std::to_string(c.heads) + " must be a multiple of kv_heads " + std::to_string(c.kv_heads);
  if (c.family == ModelFamily::kGpt2 && c.kv_heads != c.heads) return "gpt2 has no grouped-query heads (kv_heads = heads)";
  if (c.family == ModelFamily::kGpt2 && c.qkv_bias) return "gpt2 always has its q/k/v biases (qkv_bias is a llama option)";
  if (c.family == ModelFamily::kLlama && c.headDim() % 2 != 0) return "llama's rotary embedding needs an even head dim";
  if (c.experts < 0 || c.experts_per_token < 0 || c.expert_ffn < 0 || c.moe_every < 0)
    return "experts, experts_per_token, expert_ffn and moe_every must not be negative";
  if (c.experts > 0) {
    if (c.family != ModelFamily::kLlama) return "mixtures of experts are a llama option (Qwen3-MoE, Mixtral)";
    if (c.experts > kMaxExperts) return "experts " + std::to_string(c.experts) + ": at most " + std::to_string(kMaxExperts) + " are supported";
    if (c.experts_per_token < 1 || c.experts_per_token > c.experts)
      return "experts_per_token " + std::to_string(c.experts_per_token) + " must lie in [1, " + std::to_string(c.experts) + "]";
    if (c.expert_ffn < 1 || c.expert_ffn > kMaxWidth)
      return "expert_ffn must lie in [1, " + std::to_string(kMaxWidth) + "], got " + std::to_string(c.expert_ffn);
    if (c.moe_every < 1) return "moe_every (decoder_sparse_step) must be positive";
    if (c.expert_form == ModelConfig::ExpertForm::kGptOss && !(c.swiglu_limit > 0.0 && std::isfinite(c.swiglu_limit)))
      return "swiglu_limit must be finite and positive";
    if (c.shared_expert_ffn < 0 || c.shared_expert_ffn > kMaxWidth)
      return "shared_expert_ffn must lie in [0 (none), " + std::to_string(kMaxWidth) + "], got " +
             std::to_string(c.shared_expert_ffn);
    if (c.shared_expert_ffn > 0 && c.expert_form != ModelConfig::ExpertForm::kSwiglu)
      return "a shared expert is an option of the SwiGLU experts (Qwen2-MoE's), not gpt-oss's";
    if (std::string problem = validateRouter(c); !problem.empty()) return problem;
  }
  if (c.experts == 0 && c.shared_expert_ffn != 0) return "a shared expert needs a mixture of experts beside it";
  if (c.family != ModelFamily::kLlama && (c.sliding_window || c.attention_sinks || c.expert_form != ModelConfig::ExpertForm::kSwiglu))
    return "sliding windows, attention sinks and gpt-oss's experts are llama options";
  if (std::string problem = validateArchitectureForms(c); !problem.empty()) return problem;
  if (c.sliding_window < 0) return "sliding_window must not be negative (0: none)";
  for (int64_t l : c.sliding_layers)
    if (l < 0 || l >= c.layers)
      return "sliding layer " + std::to_string(l) + " is not a layer of " + std::to_string(c.layers);
  if (seq <= 0 || seq > c.context)
    return "seq " + std::to_string(seq) + " must be between 1 and the context length " + std::to_string(c.context);
  if (c.vocab > (int64_t{1} << 31)) return "vocab too large";
  return "";
}

std::string formatParamCount(int64_t count) {
  const double n = static_cast<double>(count);
  if (n >= 1e9) return fmt::format("{:.3f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f} M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f} K", n / 1e3);
  return std::to_string(count);
}

std::string validateBatch(int64_t batch, int64_t seq) {
  constexpr int64_t kMaxRows = (int64_t{1} << 31) - 1;  // BLAS's int32 dimensions
  if (batch <= 0) return "--batch must be positive (or auto)";
  if (batch > kMaxRows / seq)
    return "batch " + std::to_string(batch) + " x seq " + std::to_string(seq) +
           " is more than 2^31 - 1 tokens per step (the matrix products' row limit): lower --batch";
  return "";
}

}  // namespace mt
