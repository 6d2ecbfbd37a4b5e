#include "compiler/PeftAdapter.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "compiler/PeftAdapterParts.h"
#include "runtime/io/error.h"
#include "runtime/plan/huggingface_names.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
using namespace peft;
namespace {

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
                  " modules as transformers before 4.52 named them (language_model.model.); mtc reads them as 4.52 " +
                  "and later do (model.language_model.), as PEFT there loads them: load the adapter with PEFT on " +
                  "transformers 4.52 or later and save it again, or merge it (merge_and_unload)");
    if (key.starts_with(text))
      throw Error(adapter.weights->path() + " holds '" + key + "', an adapter of a " + model.architecture +
                  " (model.layers.), but " + model.dir + " is a " + model.multimodal +
                  " folder, whose language model's modules PEFT names model.language_model.layers.: give --lora-from " +
                  "the folder it was trained on");
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

}  // namespace

std::string peft::AdapterTensors::use(const std::string& key, const std::vector<int64_t>& shape,
                                     const std::string& ours, const std::vector<int64_t>& swapped) {
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

namespace {

// Our weight `ours` adapted with `rank` and `alpha`: recorded where they differ from the adapter's
// own (PEFT's rank_pattern and alpha_pattern).
void recordRankAndAlpha(const PeftAdapter& adapter, const std::string& ours, int64_t rank, double alpha,
                        CompileOptions& o) {
  if (rank != adapter.rank) o.lora_from_ranks[ours] = rank;
  if (alpha != adapter.alpha) o.lora_from_alphas[ours] = alpha;
}

}  // namespace

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
      recordRankAndAlpha(adapter, ours, adapted->rank, adapted->alpha, o);
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
      recordRankAndAlpha(adapter, ours, adapterRank(adapter, fused), adapterAlpha(adapter, fused), o);
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
      recordRankAndAlpha(adapter, ours, adapterRank(adapter, named), adapterAlpha(adapter, named), o);
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

namespace {

// What placing a plan's parameters in an adapter's file reads and writes (peftWeights' helpers).
struct Placement {
  const PeftAdapter& adapter;
  const HuggingFaceModel& model;
  AdapterTensors& tensors;
  const std::map<std::string, std::vector<int64_t>>& param_shapes;  // the plan's parameters' shapes, by name
  const std::map<std::string, PartRows>& part_rows;  // fused layers' parts (Phi-3's), by our weight's name
  WeightOverrides& overrides;
  bool transformers5;  // isTransformers5Adapter
  std::string config;  // the adapter's config file, for messages
};

// The plan's adapter `t` (of `shape`: "X.lora_A.weight", X.weight's module's adapter; a DoRA
// magnitude alike) from the file's: a stack's (adapted in place or expert by expert), a part of a
// fused linear layer's (the layer's A, its rows of the layer's B), or its own module's.
void useAdapter(Placement& p, const plan::HostTensor& t, const std::vector<int64_t>& shape) {
  const std::string stem = t.name().substr(0, t.name().rfind(".lora_")), suffix = t.name().substr(stem.size());
  if (shape.size() == 3) {  // a stack's (E, r, in) or (E, out, r)
    auto weight_shape = p.param_shapes.find(stem + ".weight");
    if (weight_shape == p.param_shapes.end())
      throw Error(p.adapter.weights->path() + ": the plan's stack adapter " + t.name() + " has no weight " + stem +
                  ".weight");
    if (const auto in_place = inPlaceStack(p.adapter, p.model, stem + ".weight", weight_shape->second))
      useInPlaceAdapter(p.tensors, p.adapter, p.model, *in_place, t, suffix, p.overrides);
    else if (const std::optional<PerExpertStack> stack = perExpertStack(p.model, stem + ".weight"))
      usePerExpertAdapter(p.tensors, *stack, t, suffix, p.overrides);
    else
      throw Error(p.adapter.weights->path() + ": the plan's stack adapter " + t.name() + " has no PEFT form");
    return;
  }
  if (const std::string fused = fusedLinearModule(p.model, stem + ".weight"); !fused.empty()) {
    // A part of a fused linear layer: the layer's A, its rows of the layer's B.
    const std::string key = kPeftKeyPrefix + fused + suffix;
    if (suffix != ".lora_B.weight") {
      p.overrides.names[t.name()] = p.tensors.use(key, shape, t.name());
      return;
    }
    const PartRows rows = p.part_rows.at(stem + ".weight");
    p.overrides.names[t.name()] = p.tensors.use(key, {rows.all, shape[1]}, t.name());
    p.overrides.b_rows[t.name()] = rows;
    return;
  }
  const std::string weight = ownTensor(p.model, stem + ".weight");
  const std::string router = routerTarget(p.adapter, p.model, stem + ".weight");
  const std::string module = huggingFaceModuleOf(router.empty() ? weight : router);
  p.overrides.names[t.name()] =
      p.tensors.use(kPeftKeyPrefix + module + t.name().substr(stem.size()), shape, t.name());
}

// How a plan's weight stands to the adapter: its tensor and module in the folder ("" where it has
// none of its own), whether the adapter saves that module whole (modules_to_save) or adapts it
// (target_modules; `router`: a router of Qwen3-MoE or Mixtral adapted in place by transformers 5's
// target_parameters, its adapters' keys and patterns by that parameter's name).
struct WeightRole {
  std::string tensor, module, router;
  bool saved = false, target = false;
};
WeightRole weightRole(const Placement& p, const plan::HostTensor& t, const std::vector<int64_t>& shape) {
  WeightRole role;
  role.tensor = ownTensor(p.model, t.name());
  role.module = huggingFaceModuleOf(role.tensor);
  role.saved = !role.tensor.empty() && isSaved(p.adapter, role.module);
  role.router = role.tensor.empty() || role.saved ? "" : routerTarget(p.adapter, p.model, t.name());
  role.target = !role.router.empty() || (!role.tensor.empty() && !role.saved && role.tensor.ends_with(".weight") &&
                                         shape.size() == 2 && isTarget(p.adapter, role.module, t.name()));
  return role;
}

// A forward-only plan's weight `t` with its adapters merged in: a part of a fused linear layer (its
// rows of the layer's B), a stack of experts adapted in place (target_parameters: gpt-oss's,
// transformers 5's fused Qwen3-MoE and Mixtral ones) or expert by expert (target_modules:
// transformers 4's layers), a module of its own. False where nothing adapts it.
bool mergeAdapters(Placement& p, const plan::HostTensor& t, const std::vector<int64_t>& shape, const WeightRole& role) {
  const PeftAdapter& adapter = p.adapter;
  const std::optional<InPlaceStack> in_place =
      !role.saved && shape.size() == 3 ? inPlaceStack(adapter, p.model, t.name(), shape) : std::nullopt;
  const std::optional<PerExpertStack> per_expert =
      !in_place && !p.transformers5 ? perExpertStack(p.model, t.name()) : std::nullopt;
  const std::string fused = fusedLinearModule(p.model, t.name());
  if (!fused.empty() && isTarget(adapter, fused, t.name())) {
    const std::string key = kPeftKeyPrefix + fused;
    const int64_t rank = adapterRank(adapter, fused);
    const PartRows rows = p.part_rows.at(t.name());
    p.overrides.merged[t.name()] = {p.tensors.use(key + ".lora_A.weight", {rank, shape[1]}, t.name() + "'s A"),
                                    p.tensors.use(key + ".lora_B.weight", {rows.all, rank}, t.name() + "'s B"),
                                    loraScale(planAlpha(adapterAlpha(adapter, fused)), rank, adapter.rslora),
                                    "",
                                    LoraMergeSource::Form::kWeight,
                                    rows};
    return true;
  }
  if (in_place) {
    mergeInPlaceAdapters(p.tensors, adapter, p.model, *in_place, t, p.overrides);
    return true;
  }
  if (const auto adapted = per_expert ? expertsAdapted(adapter, *per_expert, t.name(), p.config) : std::nullopt) {
    mergePerExpertAdapters(p.tensors, *per_expert, *adapted, adapter.rslora, t, p.overrides);
    return true;
  }
  if (!role.target) return false;
  const std::string named = role.router.empty() ? role.module : role.router;
  const std::string key = kPeftKeyPrefix + (role.router.empty() ? role.module : huggingFaceModuleOf(role.router));
  const int64_t rank = adapterRank(adapter, named);
  p.overrides.merged[t.name()] = {
      p.tensors.use(key + ".lora_A.weight", {rank, shape[1]}, t.name() + "'s A"),
      p.tensors.use(key + ".lora_B.weight", {shape[0], rank}, t.name() + "'s B"),
      loraScale(planAlpha(adapterAlpha(adapter, named)), rank, adapter.rslora),
      adapter.dora ? p.tensors.use(key + ".lora_magnitude_vector", {shape[0]}, t.name() + "'s DoRA magnitude") : ""};
  return true;
}

// The plan's parameter `t` from the adapter's file: an adapter, a reward model's score head, an
// adapted module's own weight saved beside its adapters, a forward-only plan's weight with its
// adapters merged in, a saved module's or whole tensor; refused where the plan trains a tensor the
// file has no place for. `tied`: the LM head is the embedding.
void placeParameter(Placement& p, const plan::HostTensor& t, bool forward_only, bool tied) {
  const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  if (isLoraAdapter(t.name())) return useAdapter(p, t, shape);
  const SafetensorsFile& file = *p.adapter.weights;
  // A reward model's score head (new to a causal LM's folder, or the folder's classifier's): PEFT's
  // sequence classifier always saves it.
  if (t.name() == kScoreHeadParam && p.adapter.sequence_classifier) {
    p.overrides.names[t.name()] = p.tensors.use(kPeftKeyPrefix + std::string(kScoreHeadParam), shape, t.name());
    return;
  }
  const WeightRole role = weightRole(p, t, shape);
  const std::string whole = peftWholeKey(role.tensor);
  if (role.target && file.entries().count(whole))
    throw Error(file.path() + " holds '" + whole + "', the whole weight of an adapted module, which PEFT does " +
                "not load (it names that weight '" + role.module + ".base_layer.weight')");
  if (role.target && isEmbeddingParam(t.name()))
    throw Error(file.path() + ": target_modules adapt the embedding (" + role.tensor + "): LoRA on an embedding is " +
                "not implemented");
  // An adapted module's own weight saved beside its adapters (PEFT's save_embedding_layers on an
  // adapted head): it replaces the folder's, under the adapters.
  if (const std::string base = peftBaseLayerKey(role.module); role.target && file.entries().count(base))
    p.overrides.names[t.name()] = p.tensors.use(base, shape, t.name());
  if (forward_only && mergeAdapters(p, t, shape, role)) return;
  if (!role.saved && isDeepseekV2Router(p.model, t.name()) &&
      file.entries().count(kPeftKeyPrefix + role.module + ".lora_B.weight"))
    return useUnusedRouterAdapters(p.tensors, p.adapter, role.module, t, shape);
  if (role.saved || (!role.tensor.empty() && file.entries().count(whole))) {
    // A saved module's tensor, or a whole one saved beside the adapters (PEFT's
    // save_embedding_layers): it replaces the folder's.
    if (role.saved && tied && isEmbeddingParam(t.name()) && !p.adapter.ensure_weight_tying)
      throw Error(file.path() + " saves the embedding, which " + p.model.dir + "'s LM head is tied to, without " +
                  "ensure_weight_tying: PEFT trained a copy apart from the head, a model of two tables");
    p.overrides.names[t.name()] = p.tensors.use(whole, shape, t.name());
    return;
  }
  if (!forward_only && !t.frozen())
    throw Error(file.path() + ": the plan trains '" + t.name() + "', which has no tensor of its own in " +
                p.model.dir + " for the adapter to hold");
}

}  // namespace

WeightOverrides peftWeights(const PeftAdapter& adapter, const plan::Plan& plan, const HuggingFaceModel& model,
                            bool forward_only) {
  WeightOverrides overrides;
  overrides.file = adapter.weights;
  AdapterTensors tensors(adapter);
  checkLanguageModelNames(adapter, model);
  std::map<std::string, std::vector<int64_t>> param_shapes;
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_PARAM) param_shapes[t.name()] = {t.shape().begin(), t.shape().end()};
  const std::map<std::string, PartRows> part_rows = fusedPartRows(model, plan);
  Placement p{adapter,   model,     tensors,
              param_shapes, part_rows, overrides,
              isTransformers5Adapter(adapter, model), adapter.dir + "/" + kPeftConfigFile};
  const bool tied = headIsEmbedding(plan);
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_PARAM) placeParameter(p, t, forward_only, tied);
  const SafetensorsFile& file = *adapter.weights;
  if (tied) placeTiedHead(file, plan, model, tensors.placed());
  for (const auto& [key, entry] : file.entries())
    if (!tensors.placed().count(key))
      throw Error(file.path() + " holds '" + key + "', which has no place in the plan (" +
                  unplacedReason(key, tied, adapter) + ")");
  return overrides;
}

}  // namespace mt
