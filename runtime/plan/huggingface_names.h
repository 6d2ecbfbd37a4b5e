// Where the built-in families' parameters live in Hugging Face checkpoints: one table for mtc's
// import (compiler/HuggingFace.cpp) and mtrun's export (runtime/training/huggingface.cc), in the
// plan library so that the compiler needs no runtime.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace mt {

// How a checkpoint of the llama family names and lays out its tensors, parsed once from the
// architecture's name (a causal LM's or its ...ForSequenceClassification's): Llama's (and every
// family's like it: Qwen, Mistral, Gemma 3), with Qwen3-MoE's mixtures of experts ("mlp.gate" the
// router, "mlp.experts.E.gate_proj/up_proj/down_proj"); Mixtral's ("block_sparse_moe.gate",
// "block_sparse_moe.experts.E.w1/w3/w2"); gpt-oss's ("mlp.router", and every expert in one tensor:
// "mlp.experts.gate_up_proj", "mlp.experts.down_proj" and their "_bias", laid out as the family's
// kGptOss parameters are); or Phi-3's (Phi3ForCausalLM, Phi-4's too): q, k and v in one
// "self_attn.qkv_proj", the MLP's gate and up in one "mlp.gate_up_proj", each part's rows after
// the one before; or GraniteMoE's (GraniteMoeForCausalLM): "block_sparse_moe.router.layer" the
// router, every expert's gate and up in one "block_sparse_moe.input_linear.weight" (E, 2I, H),
// each expert's gate rows before its up rows, and their down in "block_sparse_moe.output_linear.weight"
// (E, H, I); or Granite 4.0's (GraniteMoeHybridForCausalLM): its MLP "shared_mlp", gate's rows
// then up's in one "shared_mlp.input_linear", down "shared_mlp.output_linear"; or GLM-4.5's
// (Glm4MoeForCausalLM, and DeepSeek-V3's, DeepseekV3ForCausalLM, alike): Qwen3-MoE's experts and
// router, the router's choice bias
// "mlp.gate.e_score_correction_bias", its shared experts "mlp.shared_experts.gate_proj/up_proj/down_proj";
// or Ernie 4.5's mixtures' (Ernie4_5_MoeForCausalLM): GLM-4.5's, the choice bias
// "mlp.moe_statics.e_score_correction_bias" (1, E); or GLM-4's (Glm4ForCausalLM): Phi-3's
// "mlp.gate_up_proj", its norms "post_self_attn_layernorm" after the attention,
// "post_attention_layernorm" before the MLP and "post_mlp_layernorm" after it.
enum class CheckpointLayout {
  kLlama, kMixtral, kGptOss, kPhi3, kGraniteMoe, kGraniteHybrid, kGlm4Moe, kErnie45Moe, kGlm4
};
CheckpointLayout checkpointLayoutOf(const std::string& architecture);
// Whether the layout holds several of the model's linear layers in one nn.Linear, which PEFT adapts
// whole (Phi-3's qkv_proj and gate_up_proj, GLM-4's gate_up_proj, Granite 4.0's shared_mlp.input_linear).
bool holdsFusedLinearLayers(CheckpointLayout layout);

// Where a parameter of either family lives in a Hugging Face checkpoint: the tensor (GPT-2's
// body under `gpt2_body`: "transformer." as transformers saves GPT2LMHeadModel, "" in the
// original checkpoints), whether it is stored transposed (GPT-2's Conv1D: [in, out]), and which
// part of how many along the tensor's output axis (GPT-2's c_attn holds q, k and v side by side,
// Phi-3's qkv_proj and gate_up_proj theirs one after another, Granite 4.0's input_linear gate and
// up, GraniteMoE's input_linear each expert's gate and up): the parts lie in order along that axis
// (fusedPartAxis), each as long as its own parameter's output axis (Phi-3's k and v shorter than q
// where heads share them). `name` is empty where the parameter has no place. One table for mtc's
// import and mtrun's export.
// A stacked expert weight (experts, out, in) is one tensor per expert: `name` has a '*' for the
// index (expertTensorName).
struct HuggingFacePlace {
  std::string name;
  bool transposed = false;
  int64_t part = 0, parts = 1;
  bool per_expert = false;  // the parameter's first axis indexes experts, each its own tensor
  bool unit_first_axis = false;  // stored with a first axis of 1 before ours (Ernie 4.5's (1, E) choice bias)
  // Written F32 whatever --export-dtype says, as the published checkpoints hold it and transformers
  // keeps it (_keep_in_fp32_modules_strict): a router's choice bias (frozen: written as read),
  // Ernie 4.5's router.
  bool keep_f32 = false;
};
HuggingFacePlace huggingFacePlace(const std::string& param, const std::string& gpt2_body = "transformer.",
                                  CheckpointLayout layout = CheckpointLayout::kLlama);

// The output axis of a parameter of `rank` axes, along which a fused tensor's parts lie: a stack of
// experts' (experts, out, in) axis 1, another parameter's first.
inline size_t fusedPartAxis(size_t rank) { return rank == 3 ? 1 : 0; }

// A tensor's module ("model.norm.weight" -> "model.norm"; "" for a name without a '.').
std::string huggingFaceModuleOf(const std::string& tensor);

// A multimodal folder's language model (Gemma3ForConditionalGeneration's, Mistral3ForConditionalGeneration's):
// transformers (4.52 on) holds its modules under this where its causal LM (Gemma3ForCausalLM,
// MistralForCausalLM) holds them under "model." (ModelInfo.hf_module_prefix).
inline constexpr char kMultimodalLanguageModel[] = "model.language_model.";
// `name` (a module or tensor as huggingFacePlace names it: "model.layers.0.mlp.up_proj") under the
// plan's hf_module_prefix: its "model." replaced by the prefix; the head ("lm_head.weight") and every
// name where the prefix is "" unchanged.
std::string underModulePrefix(const std::string& name, const std::string& prefix);

// Why a tensor at `place` is no tensor of a module of its own in the checkpoint, as PEFT wraps
// modules (nullptr where it is one): one of a stack of experts, a part of a fused tensor or a
// transposed one (GPT-2's Conv1D), a name without a module.
const char* notOwnModuleTensor(const HuggingFacePlace& place);

// Transformers 5 fuses each layer's experts of Qwen3-MoE, Mixtral and GLM-4.5 into two parameters of one
// module, "model.layers.N.mlp.experts" (Mixtral's moved from block_sparse_moe to mlp): gate_up_proj
// (E, 2I, H), each expert's gate rows before its up rows, and down_proj (E, H, I). PEFT adapts them
// as parameters (target_parameters). Where the per-expert stack `param` ("layers.3.moe.up.weight")
// lies there: the fused parameter's name and the stack's part of its rows (up's the second half);
// none for another parameter or another layout.
struct FusedExpertsPlace {
  std::string parameter;  // "model.layers.3.mlp.experts.gate_up_proj"
  int64_t part = 0, parts = 1;  // gate 0 of 2, up 1 of 2, down 0 of 1
};
std::optional<FusedExpertsPlace> fusedExpertsPlace(const std::string& param, CheckpointLayout experts);
// ... and the router `param` ("layers.3.moe.router.weight") there: a parameter of its router module
// ("model.layers.3.mlp.gate.weight", no nn.Linear), which PEFT adapts in place too; "" otherwise.
std::string fusedRouterName(const std::string& param, CheckpointLayout experts);
// Whether PEFT 0.19 and later, loading a Qwen3-MoE, Mixtral (or, by the same names, GLM-4.5 and Ernie 4.5) adapter
// into transformers 5, move the
// target_modules entry `target` to the fused parameters before matching: it is, or ends with "." +,
// the name of an expert's or the router's layer in transformers 4 (gate_proj, up_proj, down_proj;
// w1, w2, w3; gate).
bool peftMovesToFused(const std::string& target, CheckpointLayout experts);

// PEFT's adapter folder (mtrun --export-peft writes it, mtc --lora-from reads it): its files, and
// the prefix of every key of its weights (the PeftModel's base model's model).
inline constexpr char kPeftConfigFile[] = "adapter_config.json";
inline constexpr char kPeftWeightsFile[] = "adapter_model.safetensors";
inline constexpr char kPeftKeyPrefix[] = "base_model.model.";

// The key stem (kPeftKeyPrefix + module + ...) of PEFT's adapters on `parameter` of `module`, a
// stack of experts adapted in place (target_parameters: "gate_up_proj", "down_proj", which
// gpt-oss's experts and transformers 5's fused Qwen3-MoE and Mixtral experts register in that
// order). PEFT wraps the adapted parameters of one module in the order the module registers them,
// each wrapper around the last, so each adapter's keys pass through one ".base_layer" for every
// later wrapper: `adapted` says which of the module's parameters have adapters
// (bench/gpu/peft_layout.py printed PEFT's keys).
std::string peftParameterKeyStem(const std::string& module, const std::string& parameter,
                                 const std::function<bool(const std::string&)>& adapted);

// A stack's B (E, out, r) and PEFT's lora_B (out, r*E) of it, where expert e's rank k is column
// k*E + e, each into the other.
void peftExpertBFromStack(const float* stack, int64_t experts, int64_t out, int64_t rank, float* peft);
void stackExpertBFromPeft(const float* peft, int64_t experts, int64_t out, int64_t rank, float* stack);

// Expert `e`'s tensor of a per-expert place; `name` with its '*' (a place's name, a module's, a
// PEFT key of one: "….experts.*.gate_proj.lora_A.weight") made expert `e`'s.
std::string expertTensorName(const HuggingFacePlace& place, int64_t e);
std::string expertTensorName(std::string name, int64_t e);

}  // namespace mt
