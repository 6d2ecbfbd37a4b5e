#include "runtime/plan/huggingface_names.h"

#include <cstring>
#include <span>
#include <string_view>
#include <utility>

namespace mt {

CheckpointLayout checkpointLayoutOf(const std::string& architecture) {
  // By the family's prefix: the causal LM and its ...ForSequenceClassification name tensors alike.
  return architecture.starts_with("MixtralFor")  ? CheckpointLayout::kMixtral
         : architecture.starts_with("GptOssFor") ? CheckpointLayout::kGptOss
         : architecture.starts_with("Phi3For")   ? CheckpointLayout::kPhi3
         : architecture.starts_with("GraniteMoeFor") ? CheckpointLayout::kGraniteMoe
         : architecture.starts_with("GraniteMoeHybridFor") ? CheckpointLayout::kGraniteHybrid
         : architecture.starts_with("Glm4MoeFor") || architecture.starts_with("DeepseekV3For") ||
                 architecture.starts_with("DeepseekV2For")
             ? CheckpointLayout::kGlm4Moe
         : architecture.starts_with("Ernie4_5_MoeFor") ? CheckpointLayout::kErnie45Moe
         : architecture.starts_with("Glm4For")         ? CheckpointLayout::kGlm4
                                                 : CheckpointLayout::kLlama;
}

bool holdsFusedLinearLayers(CheckpointLayout layout) {
  return layout == CheckpointLayout::kPhi3 || layout == CheckpointLayout::kGlm4 ||
         layout == CheckpointLayout::kGraniteHybrid;
}

namespace {
// The llama family's parameter `name` as Hugging Face checkpoints spell it ("layers.3.attn.q.weight"
// -> "model.layers.3.self_attn.q_proj.weight"), or "" if it has none. A stacked expert weight
// ("layers.3.moe.gate.weight", experts x out x in) has a '*' where the expert's index goes.
std::string huggingFaceName(const std::string& name, CheckpointLayout experts) {
  static const std::pair<const char*, const char*> kLayerParts[] = {
      {"attn_norm.weight", "input_layernorm.weight"}, {"mlp_norm.weight", "post_attention_layernorm.weight"},
      {"attn.q.", "self_attn.q_proj."},             {"attn.k.", "self_attn.k_proj."},
      {"attn.v.", "self_attn.v_proj."},             {"attn.o.", "self_attn.o_proj."},
      {"mlp.gate.", "mlp.gate_proj."},              {"mlp.up.", "mlp.up_proj."},
      {"mlp.down.", "mlp.down_proj."},
      {"attn.q_norm.", "self_attn.q_norm."},        {"attn.k_norm.", "self_attn.k_norm."},
      {"attn.sinks", "self_attn.sinks"},
      // DeepSeek's latent attention (q_a/q_b where q has a bottleneck, kv_a with the shared rotated key).
      {"attn.q_a.", "self_attn.q_a_proj."},         {"attn.q_a_norm.", "self_attn.q_a_layernorm."},
      {"attn.q_b.", "self_attn.q_b_proj."},         {"attn.kv_a.", "self_attn.kv_a_proj_with_mqa."},
      {"attn.kv_a_norm.", "self_attn.kv_a_layernorm."}, {"attn.kv_b.", "self_attn.kv_b_proj."},
      // Gemma's norms around both sublayers (its MLP's input norm is pre_feedforward_layernorm).
      {"attn_post_norm.weight", "post_attention_layernorm.weight"},
      {"mlp_pre_norm.weight", "pre_feedforward_layernorm.weight"},
      {"mlp_post_norm.weight", "post_feedforward_layernorm.weight"}};
  // Qwen3-MoE's, and Qwen2-MoE's with its shared expert and that expert's gate.
  static const std::pair<const char*, const char*> kQwen3MoeParts[] = {
      {"moe.router.", "mlp.gate."}, {"moe.gate.", "mlp.experts.*.gate_proj."},
      {"moe.up.", "mlp.experts.*.up_proj."}, {"moe.down.", "mlp.experts.*.down_proj."},
      {"moe.shared.gate.", "mlp.shared_expert.gate_proj."}, {"moe.shared.up.", "mlp.shared_expert.up_proj."},
      {"moe.shared.down.", "mlp.shared_expert.down_proj."}, {"moe.shared_gate.", "mlp.shared_expert_gate."}};
  static const std::pair<const char*, const char*> kMixtralParts[] = {
      {"moe.router.", "block_sparse_moe.gate."}, {"moe.gate.", "block_sparse_moe.experts.*.w1."},
      {"moe.up.", "block_sparse_moe.experts.*.w3."}, {"moe.down.", "block_sparse_moe.experts.*.w2."}};
  static const std::pair<const char*, const char*> kGptOssParts[] = {
      {"moe.router.", "mlp.router."},
      {"moe.gate_up.weight", "mlp.experts.gate_up_proj"}, {"moe.gate_up.bias", "mlp.experts.gate_up_proj_bias"},
      {"moe.down.weight", "mlp.experts.down_proj"},       {"moe.down.bias", "mlp.experts.down_proj_bias"}};
  using Parts = std::span<const std::pair<const char*, const char*>>;
  const Parts expert_parts = experts == CheckpointLayout::kMixtral  ? Parts(kMixtralParts)
                             : experts == CheckpointLayout::kGptOss ? Parts(kGptOssParts)
                                                                : Parts(kQwen3MoeParts);
  if (name == "embed.weight") return "model.embed_tokens.weight";
  if (name == "norm.weight") return "model.norm.weight";
  if (name == "lm_head.weight") return "lm_head.weight";
  if (name == "score.weight") return "score.weight";  // a ...ForSequenceClassification's head, GPT-2's too
  if (name.rfind("layers.", 0) == 0) {
    const size_t dot = name.find('.', 7);
    if (dot == std::string::npos) return "";
    const std::string layer = name.substr(0, dot + 1), part = name.substr(dot + 1);
    for (const auto& [ours, theirs] : kLayerParts)
      if (part.rfind(ours, 0) == 0) return "model." + layer + theirs + part.substr(std::strlen(ours));
    for (const auto& [ours, theirs] : expert_parts)
      if (part.rfind(ours, 0) == 0) return "model." + layer + theirs + part.substr(std::strlen(ours));
  }
  return "";
}

// Phi-3's fused projections: a layer's `part` ("attn.k.weight") as the part of its fused tensor
// ("self_attn.qkv_proj.weight", part 1 of 3); none for a parameter held alone.
std::optional<HuggingFacePlace> phi3FusedPart(const std::string& layer, const std::string& part) {
  static const char* const kQkv[] = {"attn.q.weight", "attn.k.weight", "attn.v.weight"};
  static const char* const kGateUp[] = {"mlp.gate.weight", "mlp.up.weight"};
  for (int64_t i = 0; i < 3; ++i)
    if (part == kQkv[i]) return HuggingFacePlace{"model." + layer + "self_attn.qkv_proj.weight", false, i, 3};
  for (int64_t i = 0; i < 2; ++i)
    if (part == kGateUp[i]) return HuggingFacePlace{"model." + layer + "mlp.gate_up_proj.weight", false, i, 2};
  return std::nullopt;
}

// GLM-4's layer: a layer's `part` ("mlp_pre_norm.weight") as its tensor: the norms around both
// sublayers by GLM-4's names, the MLP's gate and up parts 0 and 1 of gate_up_proj (Phi-3's); none
// where Llama's names hold.
std::optional<HuggingFacePlace> glm4Part(const std::string& layer, const std::string& part) {
  const std::string prefix = "model." + layer;
  if (part == "attn_post_norm.weight") return HuggingFacePlace{prefix + "post_self_attn_layernorm.weight"};
  if (part == "mlp_pre_norm.weight") return HuggingFacePlace{prefix + "post_attention_layernorm.weight"};
  if (part == "mlp_post_norm.weight") return HuggingFacePlace{prefix + "post_mlp_layernorm.weight"};
  if (part == "mlp.gate.weight") return HuggingFacePlace{prefix + "mlp.gate_up_proj.weight", false, 0, 2};
  if (part == "mlp.up.weight") return HuggingFacePlace{prefix + "mlp.gate_up_proj.weight", false, 1, 2};
  return std::nullopt;
}

// GraniteMoE's mixture: a layer's `part` ("moe.up.weight") as its tensor (the experts' gate and up
// parts 0 and 1 of input_linear); none for a parameter outside the mixture.
std::optional<HuggingFacePlace> graniteMoePart(const std::string& layer, const std::string& part) {
  const std::string block = "model." + layer + "block_sparse_moe.";
  if (part == "moe.router.weight") return HuggingFacePlace{block + "router.layer.weight"};
  if (part == "moe.gate.weight") return HuggingFacePlace{block + "input_linear.weight", false, 0, 2};
  if (part == "moe.up.weight") return HuggingFacePlace{block + "input_linear.weight", false, 1, 2};
  if (part == "moe.down.weight") return HuggingFacePlace{block + "output_linear.weight"};
  return std::nullopt;
}

// Granite 4.0's MLP: a layer's `part` ("mlp.up.weight") as its shared_mlp tensor (gate and up parts 0
// and 1 of input_linear); none for another parameter.
std::optional<HuggingFacePlace> graniteHybridPart(const std::string& layer, const std::string& part) {
  const std::string mlp = "model." + layer + "shared_mlp.";
  if (part == "mlp.gate.weight") return HuggingFacePlace{mlp + "input_linear.weight", false, 0, 2};
  if (part == "mlp.up.weight") return HuggingFacePlace{mlp + "input_linear.weight", false, 1, 2};
  if (part == "mlp.down.weight") return HuggingFacePlace{mlp + "output_linear.weight"};
  return std::nullopt;
}

// GLM-4.5's mixture beyond Qwen3-MoE's names: a layer's `part` ("moe.shared.up.weight") as its
// shared experts' tensor or the router's choice bias; none for another parameter.
std::optional<HuggingFacePlace> glm4MoePart(const std::string& layer, const std::string& part) {
  const std::string mlp = "model." + layer + "mlp.";
  if (part == "moe.router.score_bias")
    return HuggingFacePlace{mlp + "gate.e_score_correction_bias", false, 0, 1, false, false, true};
  for (const char* proj : {"gate", "up", "down"})
    if (part == std::string("moe.shared.") + proj + ".weight")
      return HuggingFacePlace{mlp + "shared_experts." + proj + "_proj.weight"};
  return std::nullopt;
}

// Ernie 4.5's mixture: GLM-4.5's names but for the router's choice bias, its Ernie4_5_MoeStatics'
// (1, E) e_score_correction_bias (one group of experts); the router and the bias kept in F32, as
// transformers keeps them (_keep_in_fp32_modules_strict: gate, moe_statics).
std::optional<HuggingFacePlace> ernie45MoePart(const std::string& layer, const std::string& part) {
  const std::string mlp = "model." + layer + "mlp.";
  if (part == "moe.router.score_bias")
    return HuggingFacePlace{mlp + "moe_statics.e_score_correction_bias", false, 0, 1, false, true, true};
  if (part == "moe.router.weight") return HuggingFacePlace{mlp + "gate.weight", false, 0, 1, false, false, true};
  return glm4MoePart(layer, part);
}

// A layer's parameter `part` where `layout` holds it otherwise than Llama's names say (Phi-3's and
// Granite 4.0's fused layers, GLM-4's norms and fused MLP, GraniteMoE's experts, GLM-4.5's and Ernie
// 4.5's shared experts); none where Llama's names hold.
std::optional<HuggingFacePlace> layoutPart(CheckpointLayout layout, const std::string& layer, const std::string& part) {
  switch (layout) {
    case CheckpointLayout::kPhi3: return phi3FusedPart(layer, part);
    case CheckpointLayout::kGraniteMoe: return graniteMoePart(layer, part);
    case CheckpointLayout::kGraniteHybrid: return graniteHybridPart(layer, part);
    case CheckpointLayout::kGlm4Moe: return glm4MoePart(layer, part);
    case CheckpointLayout::kErnie45Moe: return ernie45MoePart(layer, part);
    case CheckpointLayout::kGlm4: return glm4Part(layer, part);
    default: return std::nullopt;
  }
}

// For a layer's parameter `param` of Qwen3-MoE, Mixtral, GLM-4.5 or Ernie 4.5, the mixture block
// transformers 5 has in that layer ("model.layers.3.mlp") and the parameter's name within the layer
// ("moe.up.weight"), which the callers match; none for gpt-oss or a parameter outside the layers.
std::optional<std::pair<std::string, std::string>> fusedBlock(const std::string& param, CheckpointLayout experts) {
  const bool fused_experts = experts == CheckpointLayout::kLlama || experts == CheckpointLayout::kMixtral ||
                             experts == CheckpointLayout::kGlm4Moe || experts == CheckpointLayout::kErnie45Moe;
  if (!fused_experts || !param.starts_with("layers.")) return std::nullopt;
  const size_t dot = param.find('.', 7);
  if (dot == std::string::npos) return std::nullopt;
  return std::pair{"model." + param.substr(0, dot) + ".mlp", param.substr(dot + 1)};
}
}  // namespace

std::optional<FusedExpertsPlace> fusedExpertsPlace(const std::string& param, CheckpointLayout experts) {
  const auto block = fusedBlock(param, experts);
  if (!block) return std::nullopt;
  const std::string experts_module = block->first + ".experts.", &part = block->second;
  if (part == "moe.gate.weight") return FusedExpertsPlace{experts_module + "gate_up_proj", 0, 2};
  if (part == "moe.up.weight") return FusedExpertsPlace{experts_module + "gate_up_proj", 1, 2};
  if (part == "moe.down.weight") return FusedExpertsPlace{experts_module + "down_proj", 0, 1};
  return std::nullopt;
}

std::string fusedRouterName(const std::string& param, CheckpointLayout experts) {
  const auto block = fusedBlock(param, experts);
  return block && block->second == "moe.router.weight" ? block->first + ".gate.weight" : "";
}

bool peftMovesToFused(const std::string& target, CheckpointLayout experts) {
  static const char* const kQwen3Moe[] = {"gate", "gate_proj", "up_proj", "down_proj"};
  static const char* const kMixtral[] = {"gate", "w1", "w2", "w3"};
  // (GLM-4.5's and Ernie 4.5's experts carry Qwen3-MoE's names, and transformers 5 fuses them alike.)
  if (experts != CheckpointLayout::kLlama && experts != CheckpointLayout::kMixtral &&
      experts != CheckpointLayout::kGlm4Moe && experts != CheckpointLayout::kErnie45Moe)
    return false;
  for (const char* name : experts == CheckpointLayout::kMixtral ? std::span<const char* const>(kMixtral)
                                                            : std::span<const char* const>(kQwen3Moe))
    if (target == name || target.ends_with(std::string(".") + name)) return true;
  return false;
}

std::string expertTensorName(const HuggingFacePlace& place, int64_t e) { return expertTensorName(place.name, e); }

std::string expertTensorName(std::string name, int64_t e) {
  const size_t star = name.find('*');
  return star == std::string::npos ? name : name.replace(star, 1, std::to_string(e));
}

HuggingFacePlace huggingFacePlace(const std::string& param, const std::string& gpt2_body, CheckpointLayout layout) {
  if (param.starts_with("layers.")) {
    const size_t dot = param.find('.', 7);
    if (dot != std::string::npos)
      if (auto own = layoutPart(layout, param.substr(0, dot + 1), param.substr(dot + 1))) return *own;
  }
  if (std::string llama = huggingFaceName(param, layout); !llama.empty()) {
    const bool per_expert = llama.find('*') != std::string::npos;
    return {llama, false, 0, 1, per_expert};
  }
  if (param == "wte.weight" || param == "wpe.weight" || param.rfind("ln_f.", 0) == 0) return {gpt2_body + param};
  if (param.rfind("blocks.", 0) != 0) return {};
  const size_t dot = param.find('.', 7);
  if (dot == std::string::npos) return {};
  const std::string layer = gpt2_body + "h." + param.substr(7, dot - 7) + ".", part = param.substr(dot + 1);
  const size_t last = part.rfind('.');
  if (last == std::string::npos) return {};
  const std::string module = part.substr(0, last), kind = part.substr(last);  // kind: ".weight" / ".bias"
  const bool matrix = kind == ".weight";
  if (kind != ".weight" && kind != ".bias") return {};
  if (module == "ln1") return {layer + "ln_1" + kind};
  if (module == "ln2") return {layer + "ln_2" + kind};
  static const std::pair<const char*, const char*> kConv1D[] = {
      {"attn.proj", "attn.c_proj"}, {"mlp.fc", "mlp.c_fc"}, {"mlp.proj", "mlp.c_proj"}};
  for (const auto& [ours, theirs] : kConv1D)
    if (module == ours) return {layer + theirs + kind, matrix};
  static const char* kQkv[] = {"attn.q", "attn.k", "attn.v"};
  for (int64_t i = 0; i < 3; ++i)
    if (module == kQkv[i]) return {layer + "attn.c_attn" + kind, matrix, i, 3};
  return {};
}

const char* notOwnModuleTensor(const HuggingFacePlace& place) {
  if (place.per_expert) return "one of a stack of experts, each its own module there";
  if (place.transposed) return "GPT-2's Conv1D layers, stored transposed, c_attn holding q, k and v in one";
  if (place.parts != 1)
    return "a part of a fused layer (Phi-3's qkv_proj holds q, k and v, its gate_up_proj gate and up, as GLM-4's; "
           "Granite 4.0's input_linear gate and up; GraniteMoE's input_linear its experts' gate and up)";
  if (huggingFaceModuleOf(place.name).empty()) return "no module of its own";
  return nullptr;
}

std::string peftParameterKeyStem(const std::string& module, const std::string& parameter,
                                 const std::function<bool(const std::string&)>& adapted) {
  static const char* const kRegistered[] = {"gate_up_proj", "down_proj"};  // the experts modules' order
  std::string stem = kPeftKeyPrefix + module;
  bool later = false;
  for (const char* name : kRegistered) {
    if (later && adapted(name)) stem += ".base_layer";
    later = later || parameter == name;
  }
  return stem;
}

namespace {
int64_t peftExpertBIndex(int64_t e, int64_t o, int64_t k, int64_t experts, int64_t rank) {
  return o * rank * experts + k * experts + e;
}
}  // namespace

void peftExpertBFromStack(const float* stack, int64_t experts, int64_t out, int64_t rank, float* peft) {
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < rank; ++k) peft[peftExpertBIndex(e, o, k, experts, rank)] = stack[(e * out + o) * rank + k];
}

void stackExpertBFromPeft(const float* peft, int64_t experts, int64_t out, int64_t rank, float* stack) {
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < rank; ++k) stack[(e * out + o) * rank + k] = peft[peftExpertBIndex(e, o, k, experts, rank)];
}

std::string huggingFaceModuleOf(const std::string& tensor) {
  const size_t dot = tensor.rfind('.');
  return dot == std::string::npos ? "" : tensor.substr(0, dot);
}

std::string underModulePrefix(const std::string& name, const std::string& prefix) {
  constexpr std::string_view body = "model.";
  if (prefix.empty() || !name.starts_with(body)) return name;
  return prefix + name.substr(body.size());
}

}  // namespace mt
