#include "compiler/PeftAdapter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <regex>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "runtime/io/error.h"
#include "runtime/plan/huggingface_names.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

// The modules_to_save entry that saves `module` whole, or "": it, or a module holding it, has a
// name that ends with the entry (_set_trainable's endswith; the saved module's state holds
// everything under it). isSaved: whether one does.
std::string savingEntry(const PeftAdapter& adapter, const std::string& module) {
  for (std::string m = module; !m.empty(); m = huggingFaceModuleOf(m))
    for (const std::string& entry : adapter.saved)
      if (m.ends_with(entry)) return entry;
  return "";
}
bool isSaved(const PeftAdapter& adapter, const std::string& module) { return !savingEntry(adapter, module).empty(); }

// Whether `module` is one of `names` or ends with "." + one (target_modules' and exclude_modules' lists).
bool namedIn(const std::vector<std::string>& names, const std::string& module) {
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return module == n || module.ends_with("." + n); });
}

// The layer index in `module`'s name as PEFT finds it: the number after the first of
// `layers_pattern` it finds (each the first such component), or without one the first number
// after a component at least one component in ("model.layers.3.mlp" -> 3); none at the end.
std::optional<int64_t> layerIndex(const std::vector<std::string>& layers_pattern, const std::string& module) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t dot = module.find('.', start);
    parts.push_back(module.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  auto number = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const std::vector<std::string> any{""};  // "" stands for any component
  for (const std::string& name : layers_pattern.empty() ? any : layers_pattern)
    for (size_t j = 1; j + 2 < parts.size(); ++j)
      if ((name.empty() || parts[j] == name) && number(parts[j + 1]))  // past 9 digits: no layer a config lists
        return parts[j + 1].size() > 9 ? INT64_MAX : std::stoll(parts[j + 1]);
  return std::nullopt;
}

// The adapter file's key of a whole folder tensor saved beside the adapters (a module to save,
// PEFT's save_embedding_layers), and of an adapted module's own weight (PEFT's base_layer.weight):
// where the file replaces the folder's tensor (applyPeftAdapter) and where it is placed (peftWeights).
std::string peftWholeKey(const std::string& tensor) { return kPeftKeyPrefix + tensor; }
std::string peftBaseLayerKey(const std::string& module) { return kPeftKeyPrefix + module + ".base_layer.weight"; }

// Whether PEFT adapts `module` (the plan's `ours`; its check_target_module_exists): never an
// excluded module, a module to save nor one inside it; else as target_modules says, a name of the
// list found by its end only in the layers layers_to_transform chooses.
bool isTarget(const PeftAdapter& adapter, const std::string& module, const std::string& ours) {
  if (adapter.exclude_expression ? adapter.exclude_expression->fullMatch(module) : namedIn(adapter.excluded, module))
    return false;
  for (const std::string& m : adapter.saved)
    if (module == m || module.starts_with(m + ".") || module.ends_with("." + m) ||
        module.find("." + m + ".") != std::string::npos)
      return false;
  if (adapter.all_linear) {  // the layers' linear layers, by the plan's name (`ours`) or the folder's, as mtc's flag
    static const std::regex linear(kAllLinearLoraTargets, std::regex::ECMAScript);
    // With transformers 4's mixtures (all_linear_experts) the routers and each expert's layers too.
    static const std::regex moe(R"(^layers\.[0-9]+\.moe\.(router|gate|up|down)\.weight$)", std::regex::ECMAScript);
    return std::regex_search(ours, linear) || std::regex_search(module + ".weight", linear) ||
           (adapter.all_linear_experts && std::regex_search(ours, moe));
  }
  if (adapter.target_expression) return adapter.target_expression->fullMatch(module);
  if (std::find(adapter.targets.begin(), adapter.targets.end(), module) != adapter.targets.end()) return true;
  if (!namedIn(adapter.targets, module)) return false;
  if (!adapter.layers) return true;
  const std::optional<int64_t> layer = layerIndex(adapter.layers_pattern, module);
  return layer && adapter.layers->count(*layer);
}

// An alpha as a training plan holds it (an f32 attribute): a merge here scales as --export-hf's.
double planAlpha(double alpha) { return static_cast<double>(static_cast<float>(alpha)); }

// Whether PEFT adapts parameter `tensor` (the folder's name): one of target_parameters, or ending
// with "." + one (its _inject_parameters).
bool isTargetParameter(const PeftAdapter& adapter, const std::string& tensor) {
  return namedIn(adapter.target_parameters, tensor);
}

// Whether the plan's parameter `ours` of `model` is a stack of gpt-oss's experts, the parameters
// target_parameters can adapt here.
bool isGptOssStack(const HuggingFaceModel& model, const std::string& ours) {
  return model.config.expert_form == ModelConfig::ExpertForm::kGptOss &&
         (ours.ends_with(".moe.gate_up.weight") || ours.ends_with(".moe.down.weight"));
}

// A stack of Qwen3-MoE's or Mixtral's experts, each expert's layer a module of its own in the
// folder (transformers 4's nn.Linear, which PEFT's target_modules adapt one by one): the module's
// name with a '*' for the expert ("model.layers.0.mlp.experts.*.gate_proj"), and how many there are.
struct PerExpertStack {
  std::string module;
  int64_t experts;
};
std::optional<PerExpertStack> perExpertStack(const HuggingFaceModel& model, const std::string& ours) {
  auto source = model.weights.find(ours);
  if (source == model.weights.end() || !source->second.place.per_expert) return std::nullopt;
  return PerExpertStack{huggingFaceModuleOf(source->second.place.name),
                        static_cast<int64_t>(source->second.expert_files.size())};
}

// The folder's tensor `tensor` as transformers names it once loaded, the name PEFT's adapters
// give it: a multimodal folder's language model under model.language_model. (transformers 4.52 on)
// whatever its file's layout (Google's and Mistral's language_model.model., its head
// language_model.lm_head); any other folder's as its file has it.
std::string loadedName(const HuggingFaceModel& model, const std::string& tensor) {
  constexpr std::string_view google = "language_model.model.";
  if (model.multimodal.empty()) return tensor;
  if (tensor.starts_with(google)) return kMultimodalLanguageModel + tensor.substr(google.size());
  return tensor == "language_model.lm_head.weight" ? "lm_head.weight" : tensor;
}

// The folder's tensor of the plan's parameter `ours` (loadedName), where it is a tensor of a module
// of its own there (notOwnModuleTensor); "" where it is none.
std::string ownTensor(const HuggingFaceModel& model, const std::string& ours) {
  auto source = model.weights.find(ours);
  if (source == model.weights.end()) return "";
  return notOwnModuleTensor(source->second.place) ? "" : loadedName(model, source->second.place.name);
}

// The per-expert stack `ours` of Qwen3-MoE or Mixtral where target_parameters adapt it in place, on
// transformers 5's fused parameter (fusedExpertsPlace): where it lies there; none otherwise.
std::optional<FusedExpertsPlace> fusedTarget(const PeftAdapter& adapter, const HuggingFaceModel& model,
                                             const std::string& ours) {
  if (!perExpertStack(model, ours)) return std::nullopt;
  std::optional<FusedExpertsPlace> place = fusedExpertsPlace(ours, checkpointLayoutOf(model.architecture));
  if (!place || !isTargetParameter(adapter, place->parameter)) return std::nullopt;
  return place;
}

// The router `ours` of Qwen3-MoE or Mixtral where target_parameters adapt it (transformers 5's
// parameter of its router module, fusedRouterName): that parameter's name; "" otherwise.
std::string routerTarget(const PeftAdapter& adapter, const HuggingFaceModel& model, const std::string& ours) {
  const std::string name = fusedRouterName(ours, checkpointLayoutOf(model.architecture));
  return !name.empty() && isTargetParameter(adapter, name) ? name : "";
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

// Whether the adapter is transformers 5's (fusedForm), checked as such: its target_modules
// (checkFusedTargets), no expert's layer's adapter in its file (checkNoExpertLayers).
bool isTransformers5Adapter(const PeftAdapter& adapter, const HuggingFaceModel& model) {
  if (!fusedForm(adapter, model)) return false;
  checkFusedTargets(adapter, model, adapter.dir + "/" + kPeftConfigFile);
  for (const auto& [ours, source] : model.weights)
    if (const std::optional<PerExpertStack> stack = perExpertStack(model, ours)) checkNoExpertLayers(adapter, *stack);
  return true;
}

// The folder's tensor of the plan's parameter `ours` where it is a stack of gpt-oss's experts that
// target_parameters adapt in place; "" otherwise.
std::string gptOssStackTarget(const PeftAdapter& adapter, const HuggingFaceModel& model, const std::string& ours) {
  const std::string tensor = ownTensor(model, ours);
  return !tensor.empty() && isGptOssStack(model, ours) && isTargetParameter(adapter, tensor) ? tensor : "";
}

// The plan's weight `ours` where it is a part of a linear layer that holds several of the model's
// (Phi-3's qkv_proj: q, k and v; gate_up_proj: gate and up; Granite 4.0's shared_mlp.input_linear:
// gate and up): that layer's module as PEFT names it
// (loadedName); "" otherwise. PEFT adapts the layer whole: one A, its B's rows each part's in
// turn. Each part takes that A and its rows of B (the same products); trained on, each part's A
// adapts on its own, and --export-peft writes them back as one adapter at the parts' ranks summed.
std::string fusedLinearModule(const HuggingFaceModel& model, const std::string& ours) {
  auto source = model.weights.find(ours);
  if (!holdsFusedLinearLayers(checkpointLayoutOf(model.architecture)) || source == model.weights.end() ||
      source->second.place.parts == 1 || !ours.ends_with(".weight"))
    return "";
  return huggingFaceModuleOf(loadedName(model, source->second.place.name));
}

// A stack of experts adapted in place (target_parameters): gpt-oss's, or transformers 5's fused
// Qwen3-MoE or Mixtral parameter holding it. The parameter (the folder's tensor, or transformers 5's
// name), the stack's part of its rows, the parameter's inputs and outputs (all its parts' rows).
struct InPlaceStack {
  std::string parameter;  // "model.layers.0.mlp.experts.gate_up_proj"
  PartRows rows;
  int64_t in, out;
  bool gpt_oss;
};

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

// The stack `ours` (of `shape`: gpt-oss's (E, in, out), Qwen3-MoE's or Mixtral's (E, out, in)) where
// target_parameters adapt it in place; none otherwise. Checked by checkStackLayoutKnown.
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

// The rank and alpha PEFT's target_modules give every expert's layer of the per-expert stack
// `ours`, or none where they adapt no expert of it. Refused by name (`config` the adapter's
// config): some experts of a stack only, ranks or alphas that differ among them, DoRA, an expert's
// layer in modules_to_save: mtc's adapters on a stack are on every expert, at one rank and alpha.
struct ExpertsAdapted {
  int64_t rank;
  double alpha;
};
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

// Whether `module` ends with `tail` (a pattern's plain key), after a '.' or as a whole.
bool endsWithTail(const std::string& module, const std::string& tail) {
  if (module.size() < tail.size()) return false;
  const size_t start = module.size() - tail.size();
  if (start != 0 && module[start - 1] != '.') return false;
  for (size_t i = 0; i < tail.size(); ++i)
    if (tail[i] != PeftAdapter::Pattern::kAnyCharacter && tail[i] != module[start + i]) return false;
  return true;
}

// The value of the first of `patterns` matching `module`, else `fallback`.
double patternValue(const std::vector<PeftAdapter::Pattern>& patterns, const std::string& module, double fallback) {
  for (const PeftAdapter::Pattern& p : patterns)
    if (p.tail ? endsWithTail(module, *p.tail) : p.expression.fullMatch(module)) return p.value;
  return fallback;
}

// Where the adapter's file lacks or holds an expert's adapter `key` unplaced under
// layers_to_transform, the likely cause: PEFT before 0.20 took the last number of such a name (the
// expert's index) for its layer, mtc PEFT 0.20's first (the layer's). "" otherwise.
std::string expertLayersHint(const PeftAdapter& adapter, const std::string& key) {
  if (!adapter.layers || key.find(".experts.") == std::string::npos) return "";
  return "; with layers_to_transform, PEFT before 0.20 chose the experts' layers by the expert's index, mtc by the "
         "layer's as PEFT 0.20 does: merge the adapter with the PEFT that wrote it (merge_and_unload)";
}

// Where an adapter on a stack of experts adapted in place has the shape it would have with the
// stack's in and out the other way round, the likely cause (checkStackLayoutKnown).
constexpr char kSwappedStackHint[] =
    ": its stack's in and out the other way round, as PEFT 0.19.0 wrote such adapters (and earlier PEFT on "
    "transformers 5's fused experts); train it again with PEFT 0.19.1 or later, or merge it with the PEFT that "
    "wrote it (merge_and_unload)";

// Why a tensor of the adapter's file has no place, as far as its name tells.
std::string unplacedReason(const std::string& key, bool tied, const PeftAdapter& config) {
  const bool adapter = key.find("lora_") != std::string::npos;
  if (key.find("lora_embedding_") != std::string::npos) return "LoRA on an embedding is not implemented";
  if (!config.dora && isDoraMagnitude(key)) return "a DoRA magnitude, but the config's use_dora is off";
  if (adapter && key.find(".experts.") != std::string::npos)
    return "adapters on a mixture's experts the config does not target: mtc reads target_parameters on the "
           "stacks (gpt-oss's, and Qwen3-MoE's and Mixtral's fused as in transformers 5: mlp.experts.gate_up_proj, "
           "down_proj), target_modules on each expert's layer (Qwen3-MoE's and Mixtral's in transformers 4)" +
           expertLayersHint(config, key);
  if (tied && key.starts_with(std::string(kPeftKeyPrefix) + "lm_head."))
    return "the model's LM head is tied to its embedding, and the adapter treats it apart";
  if (key.find("vision_tower.") != std::string::npos || key.find("multi_modal_projector.") != std::string::npos)
    return "the vision tower's or its projector's, which mtc does not read (it trains the language model): merge "
           "the adapter into the model (merge_and_unload), or train it without adapters there";
  return "its config's target_modules (with exclude_modules and layers_to_transform) and modules_to_save do not "
         "account for it";
}

// Refuses, for a multimodal folder's language model, an adapter whose file names its modules
// otherwise than transformers 4.52 on does (model.language_model.): as transformers before 4.52
// named them (language_model.model., language_model.lm_head), or as its causal LM's (model.layers.:
// Gemma3ForCausalLM's), an adapter of the text model alone. Where its config's targets are kind names
// (q_proj), mtc would otherwise look for keys the file lacks and say only that.
void checkLanguageModelNames(const PeftAdapter& adapter, const HuggingFaceModel& model) {
  if (model.multimodal.empty()) return;
  const std::string older = std::string(kPeftKeyPrefix) + "language_model.",
                    text = std::string(kPeftKeyPrefix) + "model.layers.";
  for (const auto& [key, entry] : adapter.weights->entries()) {
    if (key.starts_with(older))
      throw Error(adapter.weights->path() + " holds '" + key + "': " + model.dir + "'s " + model.multimodal +
                  " modules as transformers before 4.52 named them (language_model.model.); mtc reads them as 4.52 and later " +
                  "do (model.language_model.), as PEFT there loads them: load the adapter with PEFT on transformers " +
                  "4.52 or later and save it again, or merge it (merge_and_unload)");
    if (key.starts_with(text))
      throw Error(adapter.weights->path() + " holds '" + key + "', an adapter of a " + model.architecture +
                  " (model.layers.), but " + model.dir + " is a " + model.multimodal + " folder, whose language model's modules " +
                  "PEFT names model.language_model.layers.: give --lora-from the folder it was trained on");
  }
}

// A tied model's head in the file: PEFT writes it beside a saved or whole embedding
// (ensure_weight_tying, save_embedding_layers) as the embedding's copy, which is placed with the
// embedding; a head of other values is a model of two tables, refused.
void placeTiedHead(const SafetensorsFile& file, const plan::Plan& plan, const HuggingFaceModel& model,
                   std::set<std::string>& placed) {
  auto head = file.entries().find(std::string(kPeftKeyPrefix) + "lm_head.weight");
  if (head == file.entries().end()) return;
  for (const auto& t : plan.host_tensors()) {
    if (t.role() != plan::ROLE_PARAM || !isEmbeddingParam(t.name())) continue;
    auto embedding = file.entries().find(kPeftKeyPrefix + ownTensor(model, t.name()));
    if (embedding == file.entries().end()) return;  // unplaced, named so
    const SafetensorsEntry &h = head->second, &e = embedding->second;
    if (h.dtype != e.dtype || h.shape != e.shape || h.bytes != e.bytes || std::memcmp(h.data, e.data, h.bytes) != 0)
      throw Error(file.path() + " holds an LM head other than the embedding, but " + model.dir + "'s head is " +
                  "tied to it: the adapter trained a model of two tables");
    placed.insert(head->first);
  }
}

// The adapter file's tensors the plan takes: each checked to be F32, BF16 or F16 of the shape it is
// used at, and counted as placed.
class AdapterTensors {
 public:
  explicit AdapterTensors(const PeftAdapter& adapter) : adapter_(adapter), file_(*adapter.weights) {}

  // The file's tensor `key`, checked to be of `shape` (for the plan's `ours`); `swapped`: the shape
  // it would have with its stack's in and out the other way round (kSwappedStackHint).
  std::string use(const std::string& key, const std::vector<int64_t>& shape, const std::string& ours,
                  const std::vector<int64_t>& swapped = {}) {
    auto entry = file_.entries().find(key);
    if (entry == file_.entries().end())
      throw Error(file_.path() + " has no '" + key + "' (for the plan's " + ours + "): the adapter's config and " +
                  "weights disagree" + expertLayersHint(adapter_, key));
    const SafetensorsEntry& e = entry->second;
    if (!widensTo(e, shape))
      throw Error(fmt::format("{}: '{}' is {} [{}] but the plan's {} needs [{}] in F32, BF16 or F16{}", file_.path(),
                              key, e.dtype, fmt::join(e.shape, ", "), ours, fmt::join(shape, ", "),
                              !swapped.empty() && e.shape == swapped ? kSwappedStackHint : ""));
    placed_.insert(key);
    return key;
  }
  std::set<std::string>& placed() { return placed_; }

 private:
  const PeftAdapter& adapter_;
  const SafetensorsFile& file_;
  std::set<std::string> placed_;
};

// The plan's adapter `t` of a per-expert stack, A (E, r, in) or B (E, out, r) (`suffix`
// ".lora_A.weight" or ".lora_B.weight"): expert e's (r, in) or (out, r), keys of their own.
void usePerExpertAdapter(AdapterTensors& tensors, const PerExpertStack& stack, const plan::HostTensor& t,
                         const std::string& suffix, WeightOverrides& overrides) {
  const std::string key = kPeftKeyPrefix + stack.module + suffix;
  for (int64_t e = 0; e < stack.experts; ++e) tensors.use(expertTensorName(key, e), {t.shape(1), t.shape(2)}, t.name());
  overrides.names[t.name()] = key;
  overrides.per_expert.insert(t.name());
}

// The per-expert stack `t` (E, out, in) of a forward-only plan with its experts' adapters merged
// in, as --export-hf merges a stack.
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

// The plan's adapter `t` of a stack adapted in place, A (E, r, in) or B (E, out, r) (`suffix`
// ".lora_A.weight" or ".lora_B.weight"): PEFT's lora_A (E*r, in) (which gate_up_proj's gate and up
// stacks both take) and the stack's rows of its lora_B (out, r*E).
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

// The stack `t` of a forward-only plan with its adapters, adapted in place, merged in as --export-hf
// merges a stack.
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

}  // namespace

int64_t adapterRank(const PeftAdapter& adapter, const std::string& module) {
  return static_cast<int64_t>(patternValue(adapter.rank_pattern, module, static_cast<double>(adapter.rank)));
}

double adapterAlpha(const PeftAdapter& adapter, const std::string& module) {
  return patternValue(adapter.alpha_pattern, module, adapter.alpha);
}

void applyPeftAdapter(const PeftAdapter& adapter, const HuggingFaceModel& model, CompileOptions& o) {
  o.lora_rank = adapter.rank;
  o.lora_alpha = adapter.alpha;
  o.lora_rslora = adapter.rslora;
  o.lora_dropout = adapter.dropout;
  o.lora_dora = adapter.dora;
  std::set<std::string> targets, saved;
  int64_t in_place = 0;  // parameters target_parameters adapt
  const std::string config = adapter.dir + "/" + kPeftConfigFile;
  checkLanguageModelNames(adapter, model);
  const bool transformers5 = isTransformers5Adapter(adapter, model);
  for (const auto& [ours, source] : model.weights) {
    // A stack of Qwen3-MoE's or Mixtral's experts, adapted in place (transformers 5's fused
    // parameters, target_parameters) or expert by expert (transformers 4's layers, target_modules).
    if (const std::optional<PerExpertStack> stack = perExpertStack(model, ours)) {
      std::optional<ExpertsAdapted> adapted;
      if (const std::optional<FusedExpertsPlace> fused = fusedTarget(adapter, model, ours)) {
        adapted = ExpertsAdapted{adapterRank(adapter, fused->parameter), adapterAlpha(adapter, fused->parameter)};
        ++in_place;
      } else if (!transformers5) {
        adapted = expertsAdapted(adapter, *stack, ours, config);
      }
      if (!adapted) continue;
      targets.insert(ours);
      if (adapted->rank != adapter.rank) o.lora_from_ranks[ours] = adapted->rank;
      if (adapted->alpha != adapter.alpha) o.lora_from_alphas[ours] = adapted->alpha;
      continue;
    }
    if (const std::string fused = fusedLinearModule(model, ours); !fused.empty()) {
      if (isSaved(adapter, fused))
        throw Error(config + ": modules_to_save saves " + fused + " whole, a layer that holds several of the " +
                    "model's (" + model.architecture + " fuses them), which mtc --lora-from does not read yet: merge " +
                    "the adapter into the model with PEFT (merge_and_unload) and compile that");
      if (!isTarget(adapter, fused, ours)) continue;
      if (adapter.dora)
        throw Error(config + ": DoRA on " + fused + ", a layer that holds several of the model's (" +
                    model.architecture + " fuses them), which mtc --lora-from does not read yet: merge the adapter " +
                    "into the model with PEFT (merge_and_unload) and compile that");
      targets.insert(ours);
      if (const int64_t r = adapterRank(adapter, fused); r != adapter.rank) o.lora_from_ranks[ours] = r;
      if (const double a = adapterAlpha(adapter, fused); a != adapter.alpha) o.lora_from_alphas[ours] = a;
      continue;
    }
    const std::string tensor = ownTensor(model, ours);
    if (tensor.empty()) continue;
    const std::string module = huggingFaceModuleOf(tensor);
    // A tensor of the file that replaces the folder's: a whole one saved beside the adapters, or
    // an adapted module's own (PEFT's base_layer.weight).
    if (adapter.weights->entries().count(peftWholeKey(tensor)) ||
        adapter.weights->entries().count(peftBaseLayerKey(module)))
      o.lora_from_replaced.insert(ours);
    // A stack of gpt-oss's experts or transformers 5's router of Qwen3-MoE or Mixtral adapted in
    // place (target_parameters): patterns match the parameter's name.
    const bool stack = !gptOssStackTarget(adapter, model, ours).empty();
    const std::string router = routerTarget(adapter, model, ours);
    if (isSaved(adapter, module)) {
      saved.insert(ours);
    } else if (stack || !router.empty() || (tensor.ends_with(".weight") && isTarget(adapter, module, ours))) {
      targets.insert(ours);
      in_place += stack || !router.empty();
      const std::string named = stack ? tensor : !router.empty() ? router : module;
      if (const int64_t r = adapterRank(adapter, named); r != adapter.rank) o.lora_from_ranks[ours] = r;
      if (const double a = adapterAlpha(adapter, named); a != adapter.alpha) o.lora_from_alphas[ours] = a;
    }
  }
  // PEFT only warns where target_modules found something: an adapter whose parameters mtc cannot
  // place is not the adapter that was trained, so mtc refuses.
  if (!adapter.target_parameters.empty() && in_place == 0)
    throw Error(config + ": target_parameters find no parameter of " + model.dir +
                " that mtc reads: the stacks of experts (mlp.experts.gate_up_proj and down_proj: gpt-oss's, and "
                "Qwen3-MoE's and Mixtral's as transformers 5 fuses them) and those two's routers there (mlp.gate.weight)");
  if (targets.empty())
    throw Error(config + ": target_modules find no layer of " + model.dir);
  for (const std::string& ours : targets)
    if (isEmbeddingParam(ours))
      throw Error(config + ": target_modules adapt the embedding (" +
                  ownTensor(model, ours) + "): LoRA on an embedding is not implemented");
  o.lora_from_targets = std::move(targets);
  if (!saved.empty()) o.lora_from_saved = std::move(saved);
}

// Whether `ours` is the router of a DeepSeek-V2 (transformers' DeepseekV2Moe.gate).
bool isDeepseekV2Router(const HuggingFaceModel& model, const std::string& ours) {
  return model.architecture.starts_with("DeepseekV2For") && ours.ends_with(".moe.router.weight");
}

// transformers' DeepSeek-V2 router is an nn.Linear, so PEFT's all-linear wraps it, but the layer's
// forward reads gate.weight (the base layer's) and never calls the adapter: the adapter gets no
// gradient and its B keeps PEFT's zeros. The router `t`'s adapters (module `module`) are read as the
// no-op they are, checked to shape; a B with anything but zeros (merge_and_unload would add what the
// model PEFT trained never computed) is refused by name.
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

WeightOverrides peftWeights(const PeftAdapter& adapter, const plan::Plan& plan, const HuggingFaceModel& model,
                            bool forward_only) {
  WeightOverrides overrides;
  overrides.file = adapter.weights;
  const SafetensorsFile& file = *adapter.weights;
  AdapterTensors tensors(adapter);
  const std::string config = adapter.dir + "/" + kPeftConfigFile;
  checkLanguageModelNames(adapter, model);
  const bool tied = headIsEmbedding(plan), transformers5 = isTransformers5Adapter(adapter, model);
  std::map<std::string, std::vector<int64_t>> param_shapes;
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_PARAM) param_shapes[t.name()] = {t.shape().begin(), t.shape().end()};
  const std::map<std::string, PartRows> part_rows = fusedPartRows(model, plan);  // Phi-3's fused layers' parts
  for (const auto& t : plan.host_tensors()) {
    if (t.role() != plan::ROLE_PARAM) continue;
    const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    if (isLoraAdapter(t.name())) {  // "X.lora_A.weight": X.weight's module + ".lora_A.weight" (a magnitude alike)
      const std::string stem = t.name().substr(0, t.name().rfind(".lora_")), suffix = t.name().substr(stem.size());
      if (shape.size() == 3) {  // a stack's (E, r, in) or (E, out, r)
        auto weight_shape = param_shapes.find(stem + ".weight");
        if (weight_shape == param_shapes.end())
          throw Error(file.path() + ": the plan's stack adapter " + t.name() + " has no weight " + stem + ".weight");
        if (const auto in_place = inPlaceStack(adapter, model, stem + ".weight", weight_shape->second))
          useInPlaceAdapter(tensors, adapter, model, *in_place, t, suffix, overrides);
        else if (const std::optional<PerExpertStack> stack = perExpertStack(model, stem + ".weight"))
          usePerExpertAdapter(tensors, *stack, t, suffix, overrides);
        else
          throw Error(file.path() + ": the plan's stack adapter " + t.name() + " has no PEFT form");
        continue;
      }
      if (const std::string fused = fusedLinearModule(model, stem + ".weight"); !fused.empty()) {
        // A part of a fused linear layer: the layer's A, its rows of the layer's B.
        const std::string key = kPeftKeyPrefix + fused + suffix;
        if (suffix != ".lora_B.weight") {
          overrides.names[t.name()] = tensors.use(key, shape, t.name());
          continue;
        }
        const PartRows rows = part_rows.at(stem + ".weight");
        overrides.names[t.name()] = tensors.use(key, {rows.all, shape[1]}, t.name());
        overrides.b_rows[t.name()] = rows;
        continue;
      }
      const std::string weight = ownTensor(model, stem + ".weight"), router = routerTarget(adapter, model, stem + ".weight");
      const std::string module = huggingFaceModuleOf(router.empty() ? weight : router);
      overrides.names[t.name()] = tensors.use(kPeftKeyPrefix + module + t.name().substr(stem.size()), shape, t.name());
      continue;
    }
    // A reward model's score head (new to a causal LM's folder, or the folder's classifier's): PEFT's
    // sequence classifier always saves it.
    if (t.name() == kScoreHeadParam && adapter.sequence_classifier) {
      overrides.names[t.name()] = tensors.use(kPeftKeyPrefix + std::string(kScoreHeadParam), shape, t.name());
      continue;
    }
    const std::string tensor = ownTensor(model, t.name());
    const std::string module = huggingFaceModuleOf(tensor), whole = peftWholeKey(tensor);
    const bool saved = !tensor.empty() && isSaved(adapter, module);
    // A router of Qwen3-MoE or Mixtral adapted in place (transformers 5's target_parameters): its
    // adapters' keys and patterns by that parameter's name.
    const std::string router = tensor.empty() || saved ? "" : routerTarget(adapter, model, t.name());
    const bool target = !router.empty() || (!tensor.empty() && !saved && tensor.ends_with(".weight") &&
                                            shape.size() == 2 && isTarget(adapter, module, t.name()));
    if (target && file.entries().count(whole))
      throw Error(file.path() + " holds '" + whole + "', the whole weight of an adapted module, which PEFT does " +
                  "not load (it names that weight '" + module + ".base_layer.weight')");
    if (target && isEmbeddingParam(t.name()))
      throw Error(file.path() + ": target_modules adapt the embedding (" + tensor + "): LoRA on an embedding is " +
                  "not implemented");
    // An adapted module's own weight saved beside its adapters (PEFT's save_embedding_layers on an
    // adapted head): it replaces the folder's, under the adapters.
    if (const std::string base = peftBaseLayerKey(module); target && file.entries().count(base))
      overrides.names[t.name()] = tensors.use(base, shape, t.name());
    // A stack of experts adapted in place (target_parameters: gpt-oss's, transformers 5's fused
    // Qwen3-MoE and Mixtral ones), or expert by expert (target_modules: transformers 4's layers).
    const std::optional<InPlaceStack> in_place =
        forward_only && !saved && shape.size() == 3 ? inPlaceStack(adapter, model, t.name(), shape) : std::nullopt;
    const std::optional<PerExpertStack> per_expert =
        forward_only && !in_place && !transformers5 ? perExpertStack(model, t.name()) : std::nullopt;
    const std::string fused = forward_only ? fusedLinearModule(model, t.name()) : "";
    if (!fused.empty() && isTarget(adapter, fused, t.name())) {  // its rows of the fused layer's B
      const std::string key = kPeftKeyPrefix + fused;
      const int64_t rank = adapterRank(adapter, fused);
      const PartRows rows = part_rows.at(t.name());
      overrides.merged[t.name()] = {tensors.use(key + ".lora_A.weight", {rank, shape[1]}, t.name() + "'s A"),
                                    tensors.use(key + ".lora_B.weight", {rows.all, rank}, t.name() + "'s B"),
                                    loraScale(planAlpha(adapterAlpha(adapter, fused)), rank, adapter.rslora),
                                    "",
                                    LoraMergeSource::Form::kWeight,
                                    rows};
    } else if (in_place) {
      mergeInPlaceAdapters(tensors, adapter, model, *in_place, t, overrides);
    } else if (const auto adapted = per_expert ? expertsAdapted(adapter, *per_expert, t.name(), config) : std::nullopt) {
      mergePerExpertAdapters(tensors, *per_expert, *adapted, adapter.rslora, t, overrides);
    } else if (forward_only && target) {
      const std::string named = router.empty() ? module : router;
      const std::string key = kPeftKeyPrefix + (router.empty() ? module : huggingFaceModuleOf(router));
      const int64_t rank = adapterRank(adapter, named);
      overrides.merged[t.name()] = {
          tensors.use(key + ".lora_A.weight", {rank, shape[1]}, t.name() + "'s A"),
          tensors.use(key + ".lora_B.weight", {shape[0], rank}, t.name() + "'s B"),
          loraScale(planAlpha(adapterAlpha(adapter, named)), rank, adapter.rslora),
          adapter.dora ? tensors.use(key + ".lora_magnitude_vector", {shape[0]}, t.name() + "'s DoRA magnitude") : ""};
    } else if (!saved && isDeepseekV2Router(model, t.name()) &&
               file.entries().count(kPeftKeyPrefix + module + ".lora_B.weight")) {
      useUnusedRouterAdapters(tensors, adapter, module, t, shape);
    } else if (saved || (!tensor.empty() && file.entries().count(whole))) {
      // A saved module's tensor, or a whole one saved beside the adapters (PEFT's
      // save_embedding_layers): it replaces the folder's.
      if (saved && tied && isEmbeddingParam(t.name()) && !adapter.ensure_weight_tying)
        throw Error(file.path() + " saves the embedding, which " + model.dir + "'s LM head is tied to, without " +
                    "ensure_weight_tying: PEFT trained a copy apart from the head, a model of two tables");
      overrides.names[t.name()] = tensors.use(whole, shape, t.name());
    } else if (!forward_only && !t.frozen()) {
      throw Error(file.path() + ": the plan trains '" + t.name() + "', which has no tensor of its own in " +
                  model.dir + " for the adapter to hold");
    }
  }
  if (tied) placeTiedHead(file, plan, model, tensors.placed());
  for (const auto& [key, entry] : file.entries())
    if (!tensors.placed().count(key))
      throw Error(file.path() + " holds '" + key + "', which has no place in the plan (" +
                  unplacedReason(key, tied, adapter) + ")");
  return overrides;
}

}  // namespace mt
