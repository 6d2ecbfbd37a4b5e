// The parts of mtc --lora-from (compiler/PeftAdapter.cpp) shared by its files: how PEFT names and
// matches the folder's modules (compiler/PeftNames.cpp), and the adapters of a mixture's experts in
// their forms (compiler/PeftExperts.cpp). Internal to the compiler.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/HuggingFace.h"
#include "compiler/PeftAdapter.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/huggingface_names.h"
#include "runtime/plan.pb.h"

namespace mt::peft {

// ---- names (compiler/PeftNames.cpp)

// The modules_to_save entry that saves `module` whole, or "": it, or a module holding it, has a
// name that ends with the entry (_set_trainable's endswith; the saved module's state holds
// everything under it). isSaved: whether one does.
std::string savingEntry(const PeftAdapter& adapter, const std::string& module);
inline bool isSaved(const PeftAdapter& adapter, const std::string& module) {
  return !savingEntry(adapter, module).empty();
}

// The adapter file's key of a whole folder tensor saved beside the adapters (a module to save,
// PEFT's save_embedding_layers), and of an adapted module's own weight (PEFT's base_layer.weight):
// where the file replaces the folder's tensor (applyPeftAdapter) and where it is placed (peftWeights).
inline std::string peftWholeKey(const std::string& tensor) { return kPeftKeyPrefix + tensor; }
inline std::string peftBaseLayerKey(const std::string& module) {
  return kPeftKeyPrefix + module + ".base_layer.weight";
}

// Whether PEFT adapts `module` (the plan's `ours`; its check_target_module_exists): never an
// excluded module, a module to save nor one inside it; else as target_modules says, a name of the
// list found by its end only in the layers layers_to_transform chooses.
bool isTarget(const PeftAdapter& adapter, const std::string& module, const std::string& ours);

// An alpha as a training plan holds it (an f32 attribute): a merge here scales as --export-hf's.
inline double planAlpha(double alpha) { return static_cast<double>(static_cast<float>(alpha)); }

// Whether PEFT adapts parameter `tensor` (the folder's name): one of target_parameters, or ending
// with "." + one (its _inject_parameters).
bool isTargetParameter(const PeftAdapter& adapter, const std::string& tensor);

// The folder's tensor `tensor` as transformers names it once loaded, the name PEFT's adapters
// give it: a multimodal folder's language model under model.language_model. (transformers 4.52 on)
// whatever its file's layout (Google's and Mistral's language_model.model., its head
// language_model.lm_head); any other folder's as its file has it.
std::string loadedName(const HuggingFaceModel& model, const std::string& tensor);

// The folder's tensor of the plan's parameter `ours` (loadedName), where it is a tensor of a module
// of its own there (notOwnModuleTensor); "" where it is none.
std::string ownTensor(const HuggingFaceModel& model, const std::string& ours);

// The plan's weight `ours` where it is a part of a linear layer that holds several of the model's
// (Phi-3's qkv_proj: q, k and v; gate_up_proj: gate and up; Granite 4.0's shared_mlp.input_linear:
// gate and up): that layer's module as PEFT names it
// (loadedName); "" otherwise. PEFT adapts the layer whole: one A, its B's rows each part's in
// turn. Each part takes that A and its rows of B (the same products); trained on, each part's A
// adapts on its own, and --export-peft writes them back as one adapter at the parts' ranks summed.
std::string fusedLinearModule(const HuggingFaceModel& model, const std::string& ours);

// ---- the file's tensors (compiler/PeftAdapter.cpp)

// The adapter file's tensors the plan takes: each checked to be F32, BF16 or F16 of the shape it is
// used at, and counted as placed.
class AdapterTensors {
 public:
  explicit AdapterTensors(const PeftAdapter& adapter) : adapter_(adapter), file_(*adapter.weights) {}

  // The file's tensor `key`, checked to be of `shape` (for the plan's `ours`); `swapped`: the shape
  // it would have with its stack's in and out the other way round (kSwappedStackHint).
  std::string use(const std::string& key, const std::vector<int64_t>& shape, const std::string& ours,
                  const std::vector<int64_t>& swapped = {});
  std::set<std::string>& placed() { return placed_; }

 private:
  const PeftAdapter& adapter_;
  const SafetensorsFile& file_;
  std::set<std::string> placed_;
};

// ---- a mixture's experts (compiler/PeftExperts.cpp)

// A stack of Qwen3-MoE's or Mixtral's experts, each expert's layer a module of its own in the
// folder (transformers 4's nn.Linear, which PEFT's target_modules adapt one by one): the module's
// name with a '*' for the expert ("model.layers.0.mlp.experts.*.gate_proj"), and how many there are.
struct PerExpertStack {
  std::string module;
  int64_t experts;
};
std::optional<PerExpertStack> perExpertStack(const HuggingFaceModel& model, const std::string& ours);

// The per-expert stack `ours` of Qwen3-MoE or Mixtral where target_parameters adapt it in place, on
// transformers 5's fused parameter (fusedExpertsPlace): where it lies there; none otherwise.
std::optional<FusedExpertsPlace> fusedTarget(const PeftAdapter& adapter, const HuggingFaceModel& model,
                                             const std::string& ours);

// The router `ours` of Qwen3-MoE or Mixtral where target_parameters adapt it (transformers 5's
// parameter of its router module, fusedRouterName): that parameter's name; "" otherwise.
std::string routerTarget(const PeftAdapter& adapter, const HuggingFaceModel& model, const std::string& ours);

// Whether the adapter is transformers 5's (fusedForm), checked as such: its target_modules
// (checkFusedTargets), no expert's layer's adapter in its file (checkNoExpertLayers).
bool isTransformers5Adapter(const PeftAdapter& adapter, const HuggingFaceModel& model);

// The folder's tensor of the plan's parameter `ours` where it is a stack of gpt-oss's experts that
// target_parameters adapt in place; "" otherwise.
std::string gptOssStackTarget(const PeftAdapter& adapter, const HuggingFaceModel& model, const std::string& ours);

// A stack of experts adapted in place (target_parameters): gpt-oss's, or transformers 5's fused
// Qwen3-MoE or Mixtral parameter holding it. The parameter (the folder's tensor, or transformers 5's
// name), the stack's part of its rows, the parameter's inputs and outputs (all its parts' rows).
struct InPlaceStack {
  std::string parameter;  // "model.layers.0.mlp.experts.gate_up_proj"
  PartRows rows;
  int64_t in, out;
  bool gpt_oss;
};

// The stack `ours` (of `shape`: gpt-oss's (E, in, out), Qwen3-MoE's or Mixtral's (E, out, in)) where
// target_parameters adapt it in place; none otherwise. Checked by checkStackLayoutKnown.
std::optional<InPlaceStack> inPlaceStack(const PeftAdapter& adapter, const HuggingFaceModel& model,
                                         const std::string& ours, const std::vector<int64_t>& shape);

// The rank and alpha PEFT's target_modules give every expert's layer of the per-expert stack
// `ours`, or none where they adapt no expert of it. Refused by name (`config` the adapter's
// config): some experts of a stack only, ranks or alphas that differ among them, DoRA, an expert's
// layer in modules_to_save: mtc's adapters on a stack are on every expert, at one rank and alpha.
struct ExpertsAdapted {
  int64_t rank;
  double alpha;
};
std::optional<ExpertsAdapted> expertsAdapted(const PeftAdapter& adapter, const PerExpertStack& stack,
                                             const std::string& ours, const std::string& config);

// The plan's adapter `t` of a per-expert stack, A (E, r, in) or B (E, out, r) (`suffix`
// ".lora_A.weight" or ".lora_B.weight"): expert e's (r, in) or (out, r), keys of their own.
void usePerExpertAdapter(AdapterTensors& tensors, const PerExpertStack& stack, const plan::HostTensor& t,
                         const std::string& suffix, WeightOverrides& overrides);

// The per-expert stack `t` (E, out, in) of a forward-only plan with its experts' adapters merged
// in, as --export-hf merges a stack.
void mergePerExpertAdapters(AdapterTensors& tensors, const PerExpertStack& stack, const ExpertsAdapted& adapted,
                            bool rslora, const plan::HostTensor& t, WeightOverrides& overrides);

// The plan's adapter `t` of a stack adapted in place, A (E, r, in) or B (E, out, r) (`suffix`
// ".lora_A.weight" or ".lora_B.weight"): PEFT's lora_A (E*r, in) (which gate_up_proj's gate and up
// stacks both take) and the stack's rows of its lora_B (out, r*E).
void useInPlaceAdapter(AdapterTensors& tensors, const PeftAdapter& adapter, const HuggingFaceModel& model,
                       const InPlaceStack& stack, const plan::HostTensor& t, const std::string& suffix,
                       WeightOverrides& overrides);

// The stack `t` of a forward-only plan with its adapters, adapted in place, merged in as --export-hf
// merges a stack.
void mergeInPlaceAdapters(AdapterTensors& tensors, const PeftAdapter& adapter, const HuggingFaceModel& model,
                          const InPlaceStack& stack, const plan::HostTensor& t, WeightOverrides& overrides);

// Whether `ours` is the router of a DeepSeek-V2 (transformers' DeepseekV2Moe.gate).
bool isDeepseekV2Router(const HuggingFaceModel& model, const std::string& ours);

// transformers' DeepSeek-V2 router is an nn.Linear, so PEFT's all-linear wraps it, but the layer's
// forward reads gate.weight (the base layer's) and never calls the adapter: the adapter gets no
// gradient and its B keeps PEFT's zeros. The router `t`'s adapters (module `module`) are read as the
// no-op they are, checked to shape; a B with anything but zeros (merge_and_unload would add what the
// model PEFT trained never computed) is refused by name.
void useUnusedRouterAdapters(AdapterTensors& tensors, const PeftAdapter& adapter, const std::string& module,
                             const plan::HostTensor& t, const std::vector<int64_t>& shape);

}  // namespace mt::peft
