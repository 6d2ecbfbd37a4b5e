#include "runtime/training/peft_export.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/io/atomic_folder.h"
#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/io/mapped_file.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/huggingface_names.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/training/huggingface.h"
#include "runtime/training/lora_merge.h"

namespace mt {
namespace {

// Each parameter's place in the Hugging Face model (adapters left out), computed once.
struct PlacedParam {
  int index;
  HuggingFacePlace place;
  std::string module;  // the place's name without its last component
};
// Where transformers holds the model's modules in the model its folder loads as: the plan's
// hf_module_prefix. A plan from before it (1.33 and older) has none: where its source folder's
// config.json names Gemma3ForConditionalGeneration, that model's language model's (a folder gone
// since, or unreadable, says nothing).
std::string modulePrefix(const plan::Plan& plan) {
  if (!plan.model().hf_module_prefix().empty() || plan.model().hf_source().empty())
    return plan.model().hf_module_prefix();
  try {
    const std::string path = plan.model().hf_source() + "/config.json";
    const nlohmann::json config = parseJsonInput(readWholeFile(path, "Hugging Face config", ""), path);
    const bool multimodal = config.is_object() && config.contains("architectures") &&
                            config["architectures"] == nlohmann::json::array({"Gemma3ForConditionalGeneration"});
    return multimodal ? kMultimodalLanguageModel : "";
  } catch (const Error&) {
    return "";
  }
}

// Parameter `param`'s place in the Hugging Face model its folder loads as: huggingFacePlace's,
// under the module prefix (modulePrefix: a multimodal Gemma 3's language model's model.language_model.).
HuggingFacePlace peftPlace(const std::string& param, CheckpointLayout layout, const std::string& prefix) {
  HuggingFacePlace place = huggingFacePlace(param, "transformer.", layout);
  place.name = underModulePrefix(place.name, prefix);
  return place;
}

std::vector<PlacedParam> placedParams(const plan::Plan& plan, CheckpointLayout layout, const std::string& prefix) {
  std::vector<PlacedParam> params;
  for (int i = 0; i < plan.host_tensors_size(); ++i) {
    const plan::HostTensor& t = plan.host_tensors(i);
    if (t.role() != plan::ROLE_PARAM || isLoraAdapter(t.name())) continue;
    HuggingFacePlace place = peftPlace(t.name(), layout, prefix);
    const std::string module = huggingFaceModuleOf(place.name);
    params.push_back({i, std::move(place), module});
  }
  return params;
}

// What the folder holds: the adapted modules with their adapters, and the modules trained whole
// (modules_to_save) with every tensor of theirs (Hugging Face's name, host tensor): the adapted
// ones by plan name (loraAdapters' order), the saved ones in the plan's order. An adapted stack of
// gpt-oss's experts is a parameter of its module (PEFT's target_parameters): `parameter` its
// name ("gate_up_proj"), "" for a linear layer (target_modules). An adapted stack of Qwen3-MoE's
// or Mixtral's experts is one linear layer an expert (target_modules, each expert's adapters its
// own): `module` has a '*' for the expert ("model.layers.0.mlp.experts.*.gate_proj"), `experts`
// says how many (0 for any other).
struct AdaptedModule {
  std::string module;
  LoraAdapter adapter;
  std::string parameter;
  int64_t experts = 0;
  // PeftExpertsForm::kFused: a router's parameter is "weight" (its module's A and B as a linear
  // layer's); a fused stack's holds stacks, `fused` the adapted ones by part (gate_up_proj: gate's 0
  // and up's 1 of 2; down_proj: 0 of 1), `adapter` the first's. Phi-3's fused linear layers likewise
  // (qkv_proj: q's 0, k's 1, v's 2 of 3; gate_up_proj), `parameter` "". `part_rows`: a fused
  // module's parts' output rows in order, adapted or not (Phi-3's k and v shorter than q).
  std::vector<std::pair<int64_t, LoraAdapter>> fused = {};
  std::vector<int64_t> part_rows = {};
  // What PEFT's target lists and rank and alpha patterns name: the module, or the parameter.
  std::string target() const { return parameter.empty() ? module : module + "." + parameter; }
};
struct SavedModule {
  std::string module;
  std::vector<std::pair<std::string, int>> tensors;
};
struct PeftContents {
  std::string prefix;  // modulePrefix
  CheckpointLayout layout;
  PeftExpertsForm form;
  std::vector<PlacedParam> params;
  std::vector<AdaptedModule> adapted;
  std::vector<SavedModule> saved;
};

// A's rows: the adapter's rank (a stack's A is (E, r, in)).
int64_t rankOf(const plan::Plan& plan, const LoraAdapter& adapter) {
  const plan::HostTensor& a = plan.host_tensors(adapter.a);
  return a.shape(a.shape_size() - 2);
}

// With PeftExpertsForm::kFused: `adapter` on Qwen3-MoE's or Mixtral's stack or router `weight`
// into `modules` as transformers 5 holds them (fusedExpertsPlace, fusedRouterName), a fused stack's
// parts joined in one module; false for another weight.
bool addFusedModule(std::vector<AdaptedModule>& modules, const plan::Plan& plan, const LoraAdapter& adapter,
                    CheckpointLayout layout) {
  const plan::HostTensor& stack = plan.host_tensors(adapter.weight);  // (E, out, in)
  if (const std::optional<FusedExpertsPlace> place = fusedExpertsPlace(stack.name(), layout)) {
    const std::string module = huggingFaceModuleOf(place->parameter);
    const std::string parameter = place->parameter.substr(module.size() + 1);
    auto same = std::find_if(modules.begin(), modules.end(),
                             [&](const AdaptedModule& m) { return m.module == module && m.parameter == parameter; });
    if (same == modules.end()) same = modules.insert(modules.end(), AdaptedModule{module, adapter, parameter});
    same->fused.push_back({place->part, adapter});
    same->part_rows.assign(static_cast<size_t>(place->parts), stack.shape(1));  // gate's and up's alike
    return true;
  }
  if (const std::string router = fusedRouterName(stack.name(), layout); !router.empty()) {
    const std::string module = huggingFaceModuleOf(router);
    modules.push_back({module, adapter, router.substr(module.size() + 1)});
    return true;
  }
  return false;
}

// A fused stack's parts in order, checked to share one scale: PEFT's one adapter on the fused
// parameter has one (alpha / r, or alpha / sqrt(r) rank-stabilised; equal to rounding, 1e-6).
void orderFusedParts(const plan::Plan& plan, AdaptedModule& m) {
  std::sort(m.fused.begin(), m.fused.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  m.adapter = m.fused.front().second;
  const bool rslora = plan.model().lora_rslora();
  auto scale = [&](const LoraAdapter& a) { return loraScale(a.alpha, rankOf(plan, a), rslora); };
  for (const auto& [part, adapter] : m.fused)
    if (std::abs(scale(adapter) - scale(m.adapter)) > 1e-6 * std::abs(scale(m.adapter)))
      throw Error(std::string(m.parameter.empty() ? "--export-peft: '" : "--export-peft --peft-experts fused: '") +
                  plan.host_tensors(m.adapter.weight).name() + "' and '" + plan.host_tensors(adapter.weight).name() +
                  "' have adapters of other scales (alpha / r), but " +
                  (m.parameter.empty() ? "the checkpoint holds them in one layer, " : "transformers 5 fuses them into ") +
                  m.target() + ", whose one adapter has one scale: give them one rank and alpha (mtc " +
                  "--lora-rank-pattern, --lora-alpha-pattern)" +
                  (m.parameter.empty() ? ", or use --export-hf, which merges the adapters" : ", or --peft-experts layers"));
}

// With PeftExpertsForm::kFused: each fused stack's parts in order (orderFusedParts), and refused
// what transformers 5's PEFT cannot load so: no fused stack or router at all; dropout or DoRA, which
// PEFT's adapters on parameters refuse; a dense MLP layer of Qwen3-MoE or Qwen2-MoE's shared expert
// adapted by its name (gate_proj, up_proj, down_proj), which PEFT 0.19 and later on transformers 5
// take for the experts' fused parameters (peftMovesToFused: its conversion of transformers 4's adapters).
void checkFusedForm(const plan::Plan& plan, CheckpointLayout layout, std::vector<AdaptedModule>& modules) {
  const std::string flag = "--export-peft --peft-experts fused: ";
  bool fused = false;
  for (AdaptedModule& m : modules) {
    // (Phi-3's fused linear layers, parameter "", are no experts.)
    const bool in_place = !m.parameter.empty() && (!m.fused.empty() || m.parameter == "weight");
    fused = fused || in_place;
    if (in_place && !m.fused.empty()) orderFusedParts(plan, m);
    if (in_place && (plan.model().lora_dropout() > 0 || m.adapter.magnitude >= 0))
      throw Error(flag + "PEFT's adapters on transformers 5's fused experts and routers take no " +
                  (m.adapter.magnitude >= 0 ? "DoRA" : "dropout") + " (" + m.target() +
                  "): use --peft-experts layers, or --export-hf, which merges the adapters");
    if (m.parameter.empty() && peftMovesToFused(m.module, layout))
      throw Error(flag + (m.module.find(".shared_expert.") != std::string::npos ? "the shared expert's layer "
                                                                                 : "the dense MLP layer ") +
                  m.module + " is adapted, but PEFT 0.19 and later on transformers 5 " +
                  "take the names gate_proj, up_proj and down_proj for the experts' fused parameters: use " +
                  "--peft-experts layers (for transformers 4), or --export-hf, which merges the adapters");
  }
  if (!fused)
    throw Error(flag + "the plan adapts no stack of experts or router of Qwen3-MoE or Mixtral, the ones " +
                "transformers 5 fuses; drop --peft-experts");
}

// `adapter` on the part of a fused linear layer at `place` (Phi-3's q of qkv_proj) into that layer's
// module in `modules`, with the output rows of all its parts, adapted or not (`params`: the plan's
// placed parameters). One adapter there holds its parts' (fusedAdapterTensors): not DoRA's, whose
// magnitude a part without adapters lacks.
void addFusedLinear(std::vector<AdaptedModule>& modules, const plan::Plan& plan, const std::vector<PlacedParam>& params,
                    const HuggingFacePlace& place, const LoraAdapter& adapter) {
  const std::string module = huggingFaceModuleOf(place.name);
  if (adapter.magnitude >= 0)
    throw Error("--export-peft: the adapted '" + plan.host_tensors(adapter.weight).name() + "' is a part of " + module +
                ", which the checkpoint holds fused, and DoRA's magnitudes there are not written yet: use --export-hf, "
                "which merges the adapters");
  auto same = std::find_if(modules.begin(), modules.end(), [&](const AdaptedModule& m) { return m.module == module; });
  if (same == modules.end()) {
    same = modules.insert(modules.end(), AdaptedModule{module, adapter, ""});
    same->part_rows.assign(static_cast<size_t>(place.parts), 0);
    for (const PlacedParam& p : params)
      if (p.place.name == place.name) same->part_rows[static_cast<size_t>(p.place.part)] = plan.host_tensors(p.index).shape(0);
  }
  same->fused.push_back({place.part, adapter});
}

// The adapted modules (`params`: the plan's placed parameters); checks what checkPeftExport promises
// of them.
std::vector<AdaptedModule> adaptedModules(const plan::Plan& plan, const std::vector<PlacedParam>& params,
                                          CheckpointLayout layout, PeftExpertsForm form, const std::string& prefix) {
  const std::vector<LoraAdapter> adapters = loraAdapters(plan);
  if (adapters.empty())
    throw Error("--export-peft: the plan has no LoRA adapters (compile it with mtc --lora); --export-hf writes a "
                "whole model");
  std::vector<AdaptedModule> modules;
  for (const LoraAdapter& adapter : adapters) {
    const std::string& weight = plan.host_tensors(adapter.weight).name();
    const HuggingFacePlace place = peftPlace(weight, layout, prefix);
    const bool stack = plan.host_tensors(adapter.weight).shape_size() == 3;
    if (form == PeftExpertsForm::kFused && addFusedModule(modules, plan, adapter, layout)) continue;
    // gpt-oss's stacks are parameters of its experts module, which PEFT adapts in place
    // (target_parameters); Qwen3-MoE's and Mixtral's are one linear layer an expert in the
    // folders --export-hf writes (transformers 4's layers; transformers 5 fuses them on loading).
    if (stack && layout == CheckpointLayout::kGptOss) {
      modules.push_back({huggingFaceModuleOf(place.name), adapter, place.name.substr(place.name.rfind('.') + 1)});
      continue;
    }
    if (stack && layout == CheckpointLayout::kGraniteMoe)
      throw Error("--export-peft: the adapted '" + weight + "' is a stack of GraniteMoE's experts, which transformers "
                  "holds in one parameter of a GraniteMoeParallelExperts (input_linear every expert's gate and up, "
                  "output_linear every down), no linear layer PEFT adapts by name: use --export-hf, which merges the "
                  "adapters");
    if (stack && place.per_expert) {
      modules.push_back({huggingFaceModuleOf(place.name), adapter, "", plan.host_tensors(adapter.weight).shape(0)});
      continue;
    }
    if (place.parts != 1 && !place.transposed) {  // Phi-3's qkv_proj, gate_up_proj; Granite 4.0's input_linear
      addFusedLinear(modules, plan, params, place, adapter);
      continue;
    }
    // PEFT adapts nn.Linear modules here: not GPT-2's Conv1D, nor gpt-oss's router (a module of
    // its own kind in transformers).
    const char* why = layout == CheckpointLayout::kGptOss && weight.ends_with("moe.router.weight")
                          ? "gpt-oss's router, not a linear layer in transformers"
                          : notOwnModuleTensor(place);
    if (!why && !place.name.ends_with(".weight")) why = "no linear layer of its own";
    if (why)
      throw Error("--export-peft: the adapted '" + weight + "' has no PEFT form (" + why +
                  "): use --export-hf, which merges the adapters into the weights");
    modules.push_back({huggingFaceModuleOf(place.name), adapter, ""});
  }
  if (form == PeftExpertsForm::kFused) checkFusedForm(plan, layout, modules);
  for (AdaptedModule& m : modules)
    if (m.parameter.empty() && !m.fused.empty()) orderFusedParts(plan, m);
  return modules;
}

// The refusal of saving `module` whole for the trained `tensor`, `why`.
[[noreturn]] void refuseSaved(const std::string& tensor, const std::string& why) {
  throw Error("--export-peft: the trained '" + tensor + "' " + why + ": use --export-hf, which writes the whole model");
}

// The modules holding a trained tensor beside the adapters (mtc --trainable), each with all of
// its tensors, as PEFT's ModulesToSaveWrapper saves a module: whole.
std::vector<SavedModule> savedModules(const plan::Plan& plan, const std::vector<PlacedParam>& params,
                                      const std::vector<AdaptedModule>& adapted) {
  std::set<std::string> adapted_names, all_modules;
  for (const AdaptedModule& m : adapted) adapted_names.insert(m.module);
  for (const PlacedParam& p : params) all_modules.insert(p.module);
  const bool tied = headIsEmbedding(plan);
  std::vector<SavedModule> saved;
  std::map<std::string, size_t> saved_index;
  for (const PlacedParam& p : params) {
    const std::string& name = plan.host_tensors(p.index).name();
    // A reward model's score head is saved trained or not: PEFT's sequence classifier always wraps it.
    if ((plan.host_tensors(p.index).frozen() && name != kScoreHeadParam) || saved_index.count(p.module)) continue;
    if (isEmbeddingParam(name) && tied)
      refuseSaved(name, "is the embedding the LM head is tied to, and PEFT ties a saved copy to the head only with "
                        "its ensure_weight_tying, which this export does not write");
    if (adapted_names.count(p.module))
      refuseSaved(name, "is in " + p.module + ", which also has adapters; PEFT holds a module either adapted or saved "
                        "whole");
    // PEFT saves a module with everything under it: a tensor on a module that holds others
    // (gpt-oss's sinks on its self_attn) would take those along.
    auto inner = all_modules.lower_bound(p.module + ".");
    if (inner != all_modules.end() && inner->starts_with(p.module + "."))
      refuseSaved(name, "belongs to " + p.module + " itself, which holds other modules (" + *inner + "); PEFT would "
                        "save all of them whole");
    saved_index[p.module] = saved.size();
    saved.push_back({p.module, {}});
  }
  // Every tensor of a saved module, trained or not, in the plan's order.
  for (const PlacedParam& p : params) {
    auto found = saved_index.find(p.module);
    if (found == saved_index.end()) continue;
    if (const char* why = notOwnModuleTensor(p.place))
      refuseSaved(plan.host_tensors(p.index).name(), std::string("has no module PEFT can save whole (") + why + ")");
    saved[found->second].tensors.push_back({p.place.name, p.index});
  }
  return saved;
}

PeftContents peftContents(const plan::Plan& plan, PeftExpertsForm form) {
  const CheckpointLayout layout = exportLayout(plan, "--export-peft");
  const std::string prefix = modulePrefix(plan);
  PeftContents contents{prefix, layout, form, placedParams(plan, layout, prefix), {}, {}};
  contents.adapted = adaptedModules(plan, contents.params, layout, form, prefix);
  contents.saved = savedModules(plan, contents.params, contents.adapted);
  // Transformers 5 moved Mixtral's router from block_sparse_moe to mlp: a module saved whole under
  // its transformers 4 name has no place there.
  for (const SavedModule& m : contents.saved)
    if (form == PeftExpertsForm::kFused && m.module.find(".block_sparse_moe.") != std::string::npos)
      refuseSaved(m.tensors.front().first, "is in " + m.module + ", which transformers 5 names otherwise (mlp); " +
                                               "with --peft-experts fused it has no module to save there");
  return contents;
}

// `name` as a regular expression that matches it alone (every character but letters, digits and
// '_' escaped), its '*' (a per-expert stack's expert) as `expert` where given.
std::string regexLiteral(const std::string& name, const std::string& expert = "\\*") {
  std::string text;
  for (char c : name)
    text += c == '*' ? expert
                     : std::string(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? "" : "\\") + c;
  return text;
}

// The most names PEFT's target lists may hold here: mtc --lora-from reads no more.
constexpr size_t kMostPeftTargets = 4096;

// The name PEFT's lists and patterns give every target of a kind: its last component ("q_proj",
// "gate_up_proj"), or its last two where that is "weight" (a router's "gate.weight": "weight"
// alone would name every weight).
std::string kindOf(const std::string& target) {
  size_t dot = target.rfind('.');
  if (dot != std::string::npos && target.substr(dot + 1) == "weight" && dot > 0) dot = target.rfind('.', dot - 1);
  return dot == std::string::npos ? target : target.substr(dot + 1);
}

// The parameter PEFT's target_parameters would name for the plan's parameter `p` in `contents`'
// form: a stack of gpt-oss's experts itself; with PeftExpertsForm::kFused, the transformers 5
// parameter that holds a Qwen3-MoE or Mixtral stack or router; else "".
std::string parameterTarget(const plan::Plan& plan, const PlacedParam& p, const PeftContents& contents) {
  const std::string& name = plan.host_tensors(p.index).name();
  if (contents.layout == CheckpointLayout::kGptOss)
    return plan.host_tensors(p.index).shape_size() == 3 ? p.place.name : "";
  if (contents.form != PeftExpertsForm::kFused) return "";
  if (const std::optional<FusedExpertsPlace> place = fusedExpertsPlace(name, contents.layout)) return place->parameter;
  return fusedRouterName(name, contents.layout);
}

// PEFT's target_modules (`parameters` false) or target_parameters (true), a list: a kind's name
// (kindOf: "q_proj", "gate_up_proj", "gate.weight") where the adapted targets are every target of it, else each
// adapted target's full name (which PEFT finds by equality, and no other name ends with): a stack
// of experts' one an expert. At most kMostPeftTargets names, else refused. Under a module prefix,
// an expression where it can be one (below).
nlohmann::ordered_json peftTargets(const plan::Plan& plan, const PeftContents& contents, bool parameters) {
  std::map<std::string, std::set<std::string>> all, chosen;  // by kind; a per-expert stack's with its '*'
  for (const PlacedParam& p : contents.params) {
    const std::string target = parameters                            ? parameterTarget(plan, p, contents)
                               : p.place.name.ends_with(".weight") ? p.module
                                                                   : "";
    if (!target.empty()) all[kindOf(target)].insert(target);
  }
  std::map<std::string, int64_t> experts;  // of a per-expert stack's target
  for (const AdaptedModule& m : contents.adapted)
    if (m.parameter.empty() != parameters) {
      chosen[kindOf(m.target())].insert(m.target());
      experts[m.target()] = m.experts;
    }
  // Under a module prefix (a multimodal Gemma 3's language model), a kind's name would also find the
  // vision tower's layers (q_proj, k_proj, v_proj): every kind adapted whole is then one expression
  // that starts at the prefix (PEFT's re.fullmatch of a string), else each module by its full name.
  const std::string& prefix = contents.prefix;
  if (!prefix.empty() && !parameters && std::all_of(chosen.begin(), chosen.end(), [&](const auto& kind) {
        return all[kind.first] == kind.second && std::all_of(kind.second.begin(), kind.second.end(), [&](const auto& m) {
                 return m.starts_with(prefix);
               });
      })) {
    std::string kinds;
    for (const auto& [leaf, modules] : chosen) kinds += (kinds.empty() ? "" : "|") + regexLiteral(leaf);
    return regexLiteral(prefix) + ".*\\.(" + kinds + ")";
  }
  nlohmann::ordered_json targets = nlohmann::ordered_json::array();
  for (const auto& [leaf, modules] : chosen) {
    if (all[leaf] == modules && prefix.empty()) {
      targets.push_back(leaf);
      continue;
    }
    for (const std::string& module : modules) {
      for (int64_t e = 0; e < experts[module]; ++e) targets.push_back(expertTensorName(module, e));
      if (experts[module] == 0) targets.push_back(module);
    }
  }
  if (targets.size() > kMostPeftTargets)
    throw Error("--export-peft: PEFT's " + std::string(parameters ? "target_parameters" : "target_modules") +
                " would name " + std::to_string(targets.size()) + " modules one by one (more than the " +
                std::to_string(kMostPeftTargets) + " mtc --lora-from reads): adapt every module of a kind (every " +
                "stack of experts of it, and a Qwen3-MoE's dense MLP layers of the same names) or none, so that one " +
                "name covers them, or use --export-hf, which merges the adapters");
  return targets;
}

// `value` as the shortest decimal that reads back to it (an alpha 0.1 is 0.1 in the file, not the
// float's 0.10000000149011612, which a bound of 1e-6 would also see below it).
nlohmann::ordered_json shortestDecimal(float value) {
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(value));
    if (std::strtof(text, nullptr) == value) break;
  }
  return std::strtod(text, nullptr);
}

// The value most adapted modules have (the first by plan name where several tie), PEFT's
// r or lora_alpha, and the others as PEFT's rank_pattern or alpha_pattern: a module's leaf
// name where every adapted module of that leaf has one value other than it (PEFT matches a key
// against the end of a name), else its full name, escaped.
struct PeftSetting {
  nlohmann::ordered_json value;
  nlohmann::ordered_json pattern = nlohmann::ordered_json::object();
};
PeftSetting peftSetting(const std::vector<AdaptedModule>& adapted,
                        const std::function<nlohmann::ordered_json(const AdaptedModule&)>& of) {
  std::vector<nlohmann::ordered_json> values;  // each adapted module's, computed once
  for (const AdaptedModule& m : adapted) values.push_back(of(m));
  std::vector<std::pair<nlohmann::ordered_json, int>> counts;  // by plan name
  for (const nlohmann::ordered_json& v : values) {
    auto found = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == v; });
    if (found == counts.end()) counts.push_back({v, 1});
    else ++found->second;
  }
  PeftSetting setting;
  setting.value = std::max_element(counts.begin(), counts.end(), [](const auto& x, const auto& y) {
                    return x.second < y.second;
                  })->first;
  std::map<std::string, std::set<std::string>> values_by_leaf;  // each value's dump
  for (size_t i = 0; i < adapted.size(); ++i) values_by_leaf[kindOf(adapted[i].target())].insert(values[i].dump());
  for (size_t i = 0; i < adapted.size(); ++i) {
    if (values[i] == setting.value) continue;
    const std::string module = adapted[i].target();
    const std::string leaf = kindOf(module);
    if (values_by_leaf[leaf].size() == 1) {
      setting.pattern[leaf] = values[i];
      continue;
    }
    // A per-expert stack's '*': any expert (the key matches all of them, one rank and alpha). The
    // name's first component left out where three or more remain ("layers\.0\.mlp..."): PEFT
    // before 0.15 matches a key only after a '.' (".*\.KEY$"), and such a rest ends no other
    // module's name.
    const size_t first = module.find('.');
    const bool deep = first != std::string::npos && std::count(module.begin() + first + 1, module.end(), '.') >= 2;
    setting.pattern[regexLiteral(deep ? module.substr(first + 1) : module, "[0-9]+")] = values[i];
  }
  return setting;
}

nlohmann::ordered_json peftConfig(const plan::Plan& plan, const PeftContents& contents) {
  const plan::ModelInfo& model = plan.model();
  nlohmann::ordered_json config;
  config["peft_type"] = "LORA";
  // A reward model's: PEFT's sequence classifier, its score head among the modules to save.
  config["task_type"] = hasScoreHead(plan) ? "SEQ_CLS" : "CAUSAL_LM";
  config["base_model_name_or_path"] =
      model.hf_source().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(model.hf_source());
  // Each adapter's rank is its A's rows (each expert's, of a stack's (E, r, in)), its alpha its
  // own or the plan's (mtc --lora-rank-pattern, --lora-alpha-pattern); a fused stack's rank its
  // parts' summed, its alpha the one that keeps their one scale (x 2 for gate and up at one rank).
  const bool rslora = model.lora_rslora();
  auto rankOfModule = [&](const AdaptedModule& m) {
    int64_t rank = m.fused.empty() ? rankOf(plan, m.adapter) : 0;
    for (const auto& [part, adapter] : m.fused) rank += rankOf(plan, adapter);
    return rank;
  };
  const PeftSetting rank = peftSetting(contents.adapted, [&](const AdaptedModule& m) {
    return nlohmann::ordered_json(rankOfModule(m));
  });
  const PeftSetting alpha = peftSetting(contents.adapted, [&](const AdaptedModule& m) {
    const double widened = static_cast<double>(rankOfModule(m)) / static_cast<double>(rankOf(plan, m.adapter));
    return shortestDecimal(static_cast<float>(m.adapter.alpha * (rslora ? std::sqrt(widened) : widened)));
  });
  config["r"] = rank.value;
  config["lora_alpha"] = alpha.value;
  config["rank_pattern"] = rank.pattern;
  config["alpha_pattern"] = alpha.pattern;
  config["lora_dropout"] = model.lora_dropout();
  config["bias"] = "none";
  config["fan_in_fan_out"] = false;
  config["init_lora_weights"] = true;
  config["inference_mode"] = true;
  // Full names: PEFT finds a module to save by the end of its name, and a leaf ("norm") would
  // also find others ("input_layernorm").
  nlohmann::ordered_json saved = nlohmann::ordered_json::array();
  for (const SavedModule& m : contents.saved) saved.push_back(m.module);
  config["modules_to_save"] = contents.saved.empty() ? nlohmann::ordered_json() : saved;
  config["target_modules"] = peftTargets(plan, contents, /*parameters=*/false);
  if (std::any_of(contents.adapted.begin(), contents.adapted.end(), [](const AdaptedModule& m) {
        return !m.parameter.empty();
      }))
    config["target_parameters"] = peftTargets(plan, contents, /*parameters=*/true);
  config["use_rslora"] = model.lora_rslora();
  config["use_dora"] = contents.adapted.front().adapter.magnitude >= 0;  // all or none (loraAdapters)
  return config;
}

// The key stem of the adapters on parameter `m` adapted in place, nested as PEFT nests the adapted
// parameters of one module (peftParameterKeyStem).
std::string parameterKeyStem(const std::vector<AdaptedModule>& adapted, const AdaptedModule& m) {
  return peftParameterKeyStem(m.module, m.parameter, [&](const std::string& parameter) {
    return std::any_of(adapted.begin(), adapted.end(), [&](const AdaptedModule& other) {
      return other.module == m.module && other.parameter == parameter;
    });
  });
}

// A stack of gpt-oss's experts' adapters in PEFT's form (its ParamWrapper): lora_A (E*r, in), each
// expert's r rows in turn, which is our A (E, r, in) as it lies; lora_B (out, r*E), expert e's rank
// k in column k*E + e, our B (E, out, r) permuted; under the key stem of PEFT's nesting.
std::vector<SafetensorsTensor> expertAdapterTensors(const HostStore& store, const std::vector<AdaptedModule>& adapted,
                                                    const AdaptedModule& m) {
  const std::string key = parameterKeyStem(adapted, m);
  SafetensorsTensor a = store.savedTensor(m.adapter.a);
  const std::vector<int64_t> a_shape = a.shape;  // (E, r, in)
  a.name = key + ".lora_A.weight";
  a.shape = {a_shape[0] * a_shape[1], a_shape[2]};
  SafetensorsTensor b = store.savedTensor(m.adapter.b);
  const int64_t experts = b.shape[0], out = b.shape[1], r = b.shape[2];  // (E, out, r)
  SafetensorsTensor source = b;
  b = {key + ".lora_B.weight", "F32", {out, r * experts}, nullptr, b.bytes,
       [source, experts, out, r](void* buffer) {
         std::vector<float> staged;
         peftExpertBFromStack(f32Values(source, staged), experts, out, r, static_cast<float*>(buffer));
       }};
  return {std::move(a), std::move(b)};
}

// The adapters on transformers 5's fused parameter `m` (PeftExpertsForm::kFused), or on Phi-3's fused
// linear layer (E = 1, a part's A (r, in) and B (out, r)), in PEFT's form, as PEFT converts the
// per-expert form on loading (its PeftConcatenate): lora_A (E*R, in), expert e's rows its parts' A
// at e in turn (R their ranks summed); lora_B (rows, R*E), expert e's the block-diagonal of its
// parts' B at e (part p's rows after the parts before it, its rank's columns), zeros for a part
// without adapters, in PEFT's column order k*E + e. The same products as the parts' own.
std::vector<SafetensorsTensor> fusedAdapterTensors(const HostStore& store, const std::vector<AdaptedModule>& adapted,
                                                   const AdaptedModule& m) {
  struct Part {
    int64_t row, rows, rank, column;  // its first output row and rows, its rank, its first column of the rank
    SafetensorsTensor a, b;           // (E, r, in) and (E, out, r), or (r, in) and (out, r)
  };
  auto firstRow = [&](int64_t part) {
    return std::accumulate(m.part_rows.begin(), m.part_rows.begin() + part, int64_t{0});
  };
  const int64_t rows = std::accumulate(m.part_rows.begin(), m.part_rows.end(), int64_t{0});
  std::vector<Part> parts;
  int64_t rank = 0;
  for (const auto& [part, adapter] : m.fused) {
    SafetensorsTensor a = store.savedTensor(adapter.a), b = store.savedTensor(adapter.b);
    const int64_t r = a.shape.rbegin()[1], out = b.shape.rbegin()[1];
    parts.push_back({firstRow(part), out, r, rank, std::move(a), std::move(b)});
    rank += r;
  }
  const int64_t experts = parts[0].a.shape.size() == 3 ? parts[0].a.shape[0] : 1, in = parts[0].a.shape.back();
  const std::string key = m.parameter.empty() ? kPeftKeyPrefix + m.module : parameterKeyStem(adapted, m);
  SafetensorsTensor a{key + ".lora_A.weight", "F32", {experts * rank, in}, nullptr, 4 * experts * rank * in,
                      [parts, experts, rank, in](void* buffer) {
                        float* fused = static_cast<float*>(buffer);
                        for (const Part& p : parts) {
                          std::vector<float> staged;
                          const float* values = f32Values(p.a, staged);
                          for (int64_t e = 0; e < experts; ++e)
                            std::copy_n(values + e * p.rank * in, p.rank * in, fused + (e * rank + p.column) * in);
                        }
                      }};
  SafetensorsTensor b{key + ".lora_B.weight", "F32", {rows, rank * experts}, nullptr, 4 * rows * rank * experts,
                      [parts, experts, rank, rows](void* buffer) {
                        std::vector<float> stack(static_cast<size_t>(experts * rows * rank), 0.0f);  // (E, rows, R)
                        for (const Part& p : parts) {
                          std::vector<float> staged;
                          const float* values = f32Values(p.b, staged);
                          for (int64_t e = 0; e < experts; ++e)
                            for (int64_t o = 0; o < p.rows; ++o)
                              std::copy_n(values + (e * p.rows + o) * p.rank, p.rank,
                                          stack.data() + (e * rows + p.row + o) * rank + p.column);
                        }
                        peftExpertBFromStack(stack.data(), experts, rows, rank, static_cast<float*>(buffer));
                      }};
  return {std::move(a), std::move(b)};
}

// A stack of Qwen3-MoE's or Mixtral's experts' adapters in PEFT's form: each expert's layer its own
// module (target_modules), expert e's lora_A (r, in) and lora_B (out, r) our A (E, r, in) and
// B (E, out, r) at e. A stack the store produces (a split master) is produced once for all its
// experts, and let go after the last one's copy (the file takes one tensor after another).
std::vector<SafetensorsTensor> perExpertAdapterTensors(const HostStore& store, const AdaptedModule& m) {
  struct Produced {
    std::vector<float> values;
    int64_t copies_left;
  };
  struct Stack {
    SafetensorsTensor tensor;  // (E, r, in) or (E, out, r), F32
    std::shared_ptr<Produced> produced;  // where the store produces it
    const char* key;
  };
  const Stack stacks[] = {
      {store.savedTensor(m.adapter.a), std::make_shared<Produced>(Produced{{}, m.experts}), ".lora_A.weight"},
      {store.savedTensor(m.adapter.b), std::make_shared<Produced>(Produced{{}, m.experts}), ".lora_B.weight"}};
  std::vector<SafetensorsTensor> tensors;
  for (int64_t e = 0; e < m.experts; ++e)
    for (const Stack& stack : stacks) {
      const int64_t each = stack.tensor.bytes / m.experts;  // expert e's bytes
      SafetensorsTensor t{kPeftKeyPrefix + expertTensorName(m.module, e) + stack.key, "F32",
                          {stack.tensor.shape[1], stack.tensor.shape[2]}, nullptr, each};
      if (stack.tensor.data)
        t.data = static_cast<const char*>(stack.tensor.data) + e * each;
      else
        t.produce = [stack, e, each](void* buffer) {
          std::vector<float>& values = stack.produced->values;
          if (values.empty()) f32Values(stack.tensor, values);  // the producer writes there
          std::memcpy(buffer, reinterpret_cast<const char*>(values.data()) + e * each, static_cast<size_t>(each));
          if (--stack.produced->copies_left == 0) std::vector<float>().swap(values);
        };
      tensors.push_back(std::move(t));
    }
  return tensors;
}

}  // namespace

void checkPeftExport(const plan::Plan& plan, PeftExpertsForm experts) { peftContents(plan, experts); }

void exportPeft(const plan::Plan& plan, const HostStore& store, const std::string& dir,
                const std::map<std::string, std::string>& metadata, PeftExpertsForm experts) {
  const PeftContents contents = peftContents(plan, experts);
  std::vector<SafetensorsTensor> tensors;
  for (const AdaptedModule& m : contents.adapted) {
    if (!m.fused.empty()) {
      for (SafetensorsTensor& t : fusedAdapterTensors(store, contents.adapted, m)) tensors.push_back(std::move(t));
      continue;
    }
    if (!m.parameter.empty() && m.parameter != "weight") {  // a router's "weight": its module's, below
      for (SafetensorsTensor& t : expertAdapterTensors(store, contents.adapted, m)) tensors.push_back(std::move(t));
      continue;
    }
    if (m.experts > 0) {
      for (SafetensorsTensor& t : perExpertAdapterTensors(store, m)) tensors.push_back(std::move(t));
      continue;
    }
    for (auto [index, which] : {std::pair{m.adapter.a, "lora_A.weight"}, {m.adapter.b, "lora_B.weight"},
                                {m.adapter.magnitude, "lora_magnitude_vector"}}) {  // PEFT's DoRA key: no ".weight"
      if (index < 0) continue;
      SafetensorsTensor t = store.savedTensor(index);
      t.name = kPeftKeyPrefix + m.module + "." + which;
      tensors.push_back(std::move(t));
    }
  }
  for (const SavedModule& m : contents.saved)
    for (const auto& [name, index] : m.tensors) {
      SafetensorsTensor t = store.savedTensor(index);
      t.name = kPeftKeyPrefix + name;
      tensors.push_back(std::move(t));
    }
  checkHuggingFaceExportFolder(dir, /*peft=*/true);
  AtomicFolderWriter folder(dir);
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "pt";
  writeSafetensors(folder.staging() + "/" + kPeftWeightsFile, tensors, meta);
  writeFileAtomically(folder.staging() + "/" + kPeftConfigFile, peftConfig(plan, contents).dump(2) + "\n");
  folder.commit();
}

}  // namespace mt
