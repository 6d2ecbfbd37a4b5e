#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/PeftAdapterParts.h"
#include "runtime/io/error.h"
#include "runtime/plan/plan_queries.h"

// The adapters of a mixture's experts, in each form PEFT writes them: gpt-oss's stacks and
// transformers 5's fused Qwen3-MoE and Mixtral ones adapted in place (target_parameters),
// transformers 4's experts' layers one by one (target_modules), and DeepSeek-V2's router adapters
// that never train.
namespace mt::peft {
namespace {

// Whether the plan's parameter `ours` of `model` is a stack of gpt-oss's experts, the parameters
// target_parameters can adapt here.
bool isGptOssStack(const HuggingFaceModel& model, const std::string& ours) {
  return model.config.expert_form == ModelConfig::ExpertForm::kGptOss &&
         (ours.ends_with(".moe.gate_up.weight") || ours.ends_with(".moe.down.weight"));
}

// Whether the adapter is transformers 5's for Qwen3-MoE or Mixtral: target_parameters adapt a
// fused stack of experts or a router there. Transformers 5 has no expert's layer, so its
// target_modules adapt none (a name such as down_proj finds the dense layers' alone).
bool fusedForm(const PeftAdapter& adapter, const HuggingFaceModel& model) {
  return std::any_of(model.weights.begin(), model.weights.end(), [&](const auto& w) {
    return fusedTarget(adapter, model, w.first) || !routerTarget(adapter, model, w.first).empty();
  });
}

// Refuses in a transformers 5 adapter (fusedForm) the target_modules that PEFT 0.19 and later move
// to the fused parameters before matching (their conversion of transformers 4's adapters, run on
// every Qwen3-MoE and Mixtral config): a name that is, or ends with, an expert's or the router's
// layer there, and all-linear or an expression, which PEFT resolves to such names first. mtc would
// read them as the dense layers' (transformers 5 has no expert's layer), PEFT as the experts'.
void checkFusedTargets(const PeftAdapter& adapter, const HuggingFaceModel& model, const std::string& config) {
  const std::string fix = "name the experts' and routers' fused parameters in target_parameters (gate_up_proj, "
                          "down_proj, gate.weight) and the other modules in target_modules";
  if (adapter.all_linear || adapter.target_expression)
    throw Error(config + ": target_modules " + (adapter.all_linear ? "all-linear" : "as an expression") +
                " beside transformers 5's fused experts (target_parameters): PEFT 0.19 and later resolve it and " +
                "move the experts' and routers' names among it to the fused parameters; " + fix);
  for (const std::string& target : adapter.targets)
    if (peftMovesToFused(target, checkpointLayoutOf(model.architecture)))
      throw Error(config + ": target_modules lists '" + target + "' beside transformers 5's fused experts " +
                    "(target_parameters): PEFT 0.19 and later take that name for the experts' or routers' fused " +
                    "parameters, mtc would take it for a dense layer's; " + fix);
}

// Refuses a transformers 5 adapter (fusedForm) whose file holds an adapter of one of the
// per-expert stack's experts' layers (transformers 4's form): what it adapts is ambiguous.
void checkNoExpertLayers(const PeftAdapter& adapter, const PerExpertStack& stack) {
  const std::string key = kPeftKeyPrefix + expertTensorName(stack.module, 0) + ".lora_A.weight";
  if (adapter.weights->entries().count(key))
    throw Error(adapter.weights->path() + " holds '" + key + "', transformers 4's adapter of one expert's layer, " +
                "but target_parameters adapt transformers 5's fused experts or routers, where no such layer exists: " +
                "one form adapts a model's experts; drop those tensors, or the target_parameters");
}

// Refuses `stack` where its in and out are equal and the adapter's PEFT (peft_version) may have
// written its adapters with them the other way round, which their shapes then cannot tell: 0.19.0
// (it swapped a 3-D parameter's in and out by the wrong rule), and before it on transformers 5's
// fused stacks (which no earlier PEFT swapped). Other shapes: AdapterTensors::use's hint.
void checkStackLayoutKnown(const PeftAdapter& adapter, const InPlaceStack& stack) {
  if (stack.in != stack.out || !adapter.peft_version) return;
  const std::array<int64_t, 3> swapped_release{0, 19, 0}, fixed{0, 19, 1};
  const std::array<int64_t, 3>& version = *adapter.peft_version;
  if (version == swapped_release || (!stack.gpt_oss && version < fixed))
    throw Error(fmt::format("{}/{}: PEFT {} wrote it, which may hold the adapters of {} (as many inputs as outputs, "
                            "{}) with in and out the other way round: train it again with PEFT 0.19.1 or later, or "
                            "merge it with the PEFT that wrote it (merge_and_unload); where its layout is known to be "
                            "0.19.1's, set its peft_version so",
                            adapter.dir, kPeftConfigFile, fmt::join(version, "."), stack.parameter, stack.in));
}

// The key stem of the adapters on the stack's parameter `stack` adapted in place, nested as PEFT
// nests the adapted parameters of one module (peftParameterKeyStem): gpt-oss's experts module holds
// those the folder has, transformers 5's fused one both in every mixture layer.
std::string inPlaceKeyStem(const PeftAdapter& adapter, const HuggingFaceModel& model, const InPlaceStack& stack) {
  const std::string module = huggingFaceModuleOf(stack.parameter);
  return peftParameterKeyStem(module, stack.parameter.substr(module.size() + 1), [&](const std::string& other) {
    return isTargetParameter(adapter, module + "." + other) &&
           (!stack.gpt_oss || std::any_of(model.weights.begin(), model.weights.end(), [&](const auto& w) {
             return w.second.place.name == module + "." + other;
           }));
  });
}

}  // namespace

std::optional<PerExpertStack> perExpertStack(const HuggingFaceModel& model, const std::string& ours) {
  auto source = model.weights.find(ours);
  if (source == model.weights.end() || !source->second.place.per_expert) return std::nullopt;
  return PerExpertStack{huggingFaceModuleOf(source->second.place.name),
                        static_cast<int64_t>(source->second.expert_files.size())};
}

std::optional<FusedExpertsPlace> fusedTarget(const PeftAdapter& adapter, const HuggingFaceModel& model,
                                             const std::string& ours) {
  if (!perExpertStack(model, ours)) return std::nullopt;
  std::optional<FusedExpertsPlace> place = fusedExpertsPlace(ours, checkpointLayoutOf(model.architecture));
  if (!place || !isTargetParameter(adapter, place->parameter)) return std::nullopt;
  return place;
}

std::string routerTarget(const PeftAdapter& adapter, const HuggingFaceModel& model, const std::string& ours) {
  const std::string name = fusedRouterName(ours, checkpointLayoutOf(model.architecture));
  return !name.empty() && isTargetParameter(adapter, name) ? name : "";
}

bool isTransformers5Adapter(const PeftAdapter& adapter, const HuggingFaceModel& model) {
  if (!fusedForm(adapter, model)) return false;
  checkFusedTargets(adapter, model, adapter.dir + "/" + kPeftConfigFile);
  for (const auto& [ours, source] : model.weights)
    if (const std::optional<PerExpertStack> stack = perExpertStack(model, ours)) checkNoExpertLayers(adapter, *stack);
  return true;
}

std::string gptOssStackTarget(const PeftAdapter& adapter, const HuggingFaceModel& model, const std::string& ours) {
  const std::string tensor = ownTensor(model, ours);
  return !tensor.empty() && isGptOssStack(model, ours) && isTargetParameter(adapter, tensor) ? tensor : "";
}

std::optional<InPlaceStack> inPlaceStack(const PeftAdapter& adapter, const HuggingFaceModel& model,
                                         const std::string& ours, const std::vector<int64_t>& shape) {
  std::optional<InPlaceStack> stack;
  if (const std::string tensor = gptOssStackTarget(adapter, model, ours); !tensor.empty())
    stack = InPlaceStack{tensor, {0, shape[2]}, shape[1], shape[2], true};
  else if (const std::optional<FusedExpertsPlace> fused = fusedTarget(adapter, model, ours))
    stack = InPlaceStack{fused->parameter, {fused->part * shape[1], fused->parts * shape[1]}, shape[2],
                         fused->parts * shape[1], false};
  if (stack) checkStackLayoutKnown(adapter, *stack);
  return stack;
}

std::optional<ExpertsAdapted> expertsAdapted(const PeftAdapter& adapter, const PerExpertStack& stack,
                                             const std::string& ours, const std::string& config) {
  const std::string merge_fix = "merge the adapter into the model with PEFT's merge_and_unload and read that folder";
  std::optional<std::string> first;    // the first adapted expert's layer
  std::optional<ExpertsAdapted> found;  // its rank and alpha
  std::optional<std::string> missing;  // the first expert's layer not adapted
  for (int64_t e = 0; e < stack.experts; ++e) {
    const std::string module = expertTensorName(stack.module, e);
    if (const std::string entry = savingEntry(adapter, module); !entry.empty())
      throw Error(config + ": modules_to_save's '" + entry + "' saves " + module + ", one expert's layer of a stack " +
                  "mtc holds whole, which it does not read saved; " + merge_fix);
    if (!isTarget(adapter, module, ours)) {
      if (!missing) missing = module;
      continue;
    }
    const ExpertsAdapted own{adapterRank(adapter, module), adapterAlpha(adapter, module)};
    if (!first) {
      first = module;
      found = own;
    } else if (own.rank != found->rank || own.alpha != found->alpha) {
      throw Error(config + ": rank_pattern or alpha_pattern gives " + module + " another rank or alpha than " +
                  *first + ": mtc's adapters on a stack of experts have one rank and one alpha; " + merge_fix);
    }
  }
  if (!first) return std::nullopt;
  if (missing)
    throw Error(config + ": target_modules adapt " + *first + " but not " + *missing + ": mtc's adapters on a stack " +
                "of experts are on every expert of it; " + merge_fix);
  if (adapter.dora)
    throw Error(config + ": use_dora on the experts' layers (" + *first + ", ...): mtc's adapters on a stack of " +
                "experts have no DoRA; " + merge_fix);
  return found;
}

void usePerExpertAdapter(AdapterTensors& tensors, const PerExpertStack& stack, const plan::HostTensor& t,
                         const std::string& suffix, WeightOverrides& overrides) {
  const std::string key = kPeftKeyPrefix + stack.module + suffix;
  for (int64_t e = 0; e < stack.experts; ++e) tensors.use(expertTensorName(key, e), {t.shape(1), t.shape(2)}, t.name());
  overrides.names[t.name()] = key;
  overrides.per_expert.insert(t.name());
}

void mergePerExpertAdapters(AdapterTensors& tensors, const PerExpertStack& stack, const ExpertsAdapted& adapted,
                            bool rslora, const plan::HostTensor& t, WeightOverrides& overrides) {
  const std::string key = kPeftKeyPrefix + stack.module;
  for (int64_t e = 0; e < stack.experts; ++e) {
    tensors.use(expertTensorName(key, e) + ".lora_A.weight", {adapted.rank, t.shape(2)}, t.name() + "'s A");
    tensors.use(expertTensorName(key, e) + ".lora_B.weight", {t.shape(1), adapted.rank}, t.name() + "'s B");
  }
  overrides.merged[t.name()] = {key + ".lora_A.weight", key + ".lora_B.weight",
                                loraScale(planAlpha(adapted.alpha), adapted.rank, rslora), "",
                                LoraMergeSource::Form::kPerExpert};
}

void useInPlaceAdapter(AdapterTensors& tensors, const PeftAdapter& adapter, const HuggingFaceModel& model,
                       const InPlaceStack& stack, const plan::HostTensor& t, const std::string& suffix,
                       WeightOverrides& overrides) {
  const std::string key = inPlaceKeyStem(adapter, model, stack) + suffix;
  const int64_t experts = t.shape(0);
  if (suffix == ".lora_B.weight") {
    const int64_t rank = t.shape(2);
    overrides.names[t.name()] = tensors.use(key, {stack.out, rank * experts}, t.name(), {stack.in, rank * experts});
    overrides.b_rows[t.name()] = stack.rows;
  } else {
    const int64_t rank = t.shape(1);
    overrides.names[t.name()] = tensors.use(key, {experts * rank, stack.in}, t.name(), {experts * rank, stack.out});
  }
}

void mergeInPlaceAdapters(AdapterTensors& tensors, const PeftAdapter& adapter, const HuggingFaceModel& model,
                          const InPlaceStack& stack, const plan::HostTensor& t, WeightOverrides& overrides) {
  const std::string key = inPlaceKeyStem(adapter, model, stack);
  const int64_t rank = adapterRank(adapter, stack.parameter), experts = t.shape(0);
  overrides.merged[t.name()] = {
      tensors.use(key + ".lora_A.weight", {experts * rank, stack.in}, t.name() + "'s A", {experts * rank, stack.out}),
      tensors.use(key + ".lora_B.weight", {stack.out, rank * experts}, t.name() + "'s B", {stack.in, rank * experts}),
      loraScale(planAlpha(adapterAlpha(adapter, stack.parameter)), rank, adapter.rslora),
      "",
      stack.gpt_oss ? LoraMergeSource::Form::kGptOssStack : LoraMergeSource::Form::kFusedStack,
      stack.rows};
}

bool isDeepseekV2Router(const HuggingFaceModel& model, const std::string& ours) {
  return model.architecture.starts_with("DeepseekV2For") && ours.ends_with(".moe.router.weight");
}

void useUnusedRouterAdapters(AdapterTensors& tensors, const PeftAdapter& adapter, const std::string& module,
                             const plan::HostTensor& t, const std::vector<int64_t>& shape) {
  const SafetensorsFile& file = *adapter.weights;
  const std::string key = kPeftKeyPrefix + module;
  const int64_t rank = adapterRank(adapter, module);
  tensors.use(key + ".lora_A.weight", {rank, shape[1]}, t.name() + "'s A");
  const std::string b_key = tensors.use(key + ".lora_B.weight", {shape[0], rank}, t.name() + "'s B");
  file.verify(b_key);
  const SafetensorsEntry& b = file.entries().at(b_key);
  const size_t width = b.dtype == "F32" ? 4 : 2;  // F32, BF16 or F16 (checked by use): zero is +-0's bits
  const uint32_t magnitude = width == 4 ? 0x7fffffffu : 0x7fffu;
  for (int64_t i = 0; i < shape[0] * rank; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, b.data + static_cast<size_t>(i) * width, width);
    if ((bits & magnitude) != 0)
      throw Error(file.path() + ": '" + b_key + "' is not all zeros (element " + std::to_string(i) +
                  "): transformers' DeepSeek-V2 reads its router's weight without the adapter, so PEFT never trains "
                  "it, and merging it would add what the model it trained never computed; drop '" + module +
                  "' from the adapter");
  }
}

}  // namespace mt::peft
