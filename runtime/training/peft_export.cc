#include "runtime/training/peft_export.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/io/atomic_folder.h"
#include "runtime/io/error.h"
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
std::vector<PlacedParam> placedParams(const plan::Plan& plan, ExpertLayout layout) {
  std::vector<PlacedParam> params;
  for (int i = 0; i < plan.host_tensors_size(); ++i) {
    const plan::HostTensor& t = plan.host_tensors(i);
    if (t.role() != plan::ROLE_PARAM || isLoraAdapter(t.name())) continue;
    HuggingFacePlace place = huggingFacePlace(t.name(), "transformer.", layout);
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
  // What PEFT's target lists and rank and alpha patterns name: the module, or the parameter.
  std::string target() const { return parameter.empty() ? module : module + "." + parameter; }
};
struct SavedModule {
  std::string module;
  std::vector<std::pair<std::string, int>> tensors;
};
struct PeftContents {
  std::vector<PlacedParam> params;
  std::vector<AdaptedModule> adapted;
  std::vector<SavedModule> saved;
};

// The adapted modules; checks what checkPeftExport promises of them.
std::vector<AdaptedModule> adaptedModules(const plan::Plan& plan, ExpertLayout layout) {
  const std::vector<LoraAdapter> adapters = loraAdapters(plan);
  if (adapters.empty())
    throw Error("--export-peft: the plan has no LoRA adapters (compile it with mtc --lora); --export-hf writes a "
                "whole model");
  std::vector<AdaptedModule> modules;
  for (const LoraAdapter& adapter : adapters) {
    const std::string& weight = plan.host_tensors(adapter.weight).name();
    const HuggingFacePlace place = huggingFacePlace(weight, "transformer.", layout);
    const bool stack = plan.host_tensors(adapter.weight).shape_size() == 3;
    // gpt-oss's stacks are parameters of its experts module, which PEFT adapts in place
    // (target_parameters); Qwen3-MoE's and Mixtral's are one linear layer an expert in the
    // folders --export-hf writes (transformers 4's layers; transformers 5 fuses them on loading).
    if (stack && layout == ExpertLayout::kGptOss) {
      modules.push_back({huggingFaceModuleOf(place.name), adapter, place.name.substr(place.name.rfind('.') + 1)});
      continue;
    }
    if (stack && place.per_expert) {
      modules.push_back({huggingFaceModuleOf(place.name), adapter, "", plan.host_tensors(adapter.weight).shape(0)});
      continue;
    }
    // PEFT adapts nn.Linear modules here: not GPT-2's Conv1D, nor gpt-oss's router (a module of
    // its own kind in transformers).
    const char* why = layout == ExpertLayout::kGptOss && weight.ends_with("moe.router.weight")
                          ? "gpt-oss's router, not a linear layer in transformers"
                          : notOwnModuleTensor(place);
    if (!why && !place.name.ends_with(".weight")) why = "no linear layer of its own";
    if (why)
      throw Error("--export-peft: the adapted '" + weight + "' has no PEFT form (" + why +
                  "): use --export-hf, which merges the adapters into the weights");
    modules.push_back({huggingFaceModuleOf(place.name), adapter, ""});
  }
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

PeftContents peftContents(const plan::Plan& plan) {
  const ExpertLayout layout = exportLayout(plan, "--export-peft");
  PeftContents contents{placedParams(plan, layout), adaptedModules(plan, layout), {}};
  contents.saved = savedModules(plan, contents.params, contents.adapted);
  return contents;
}

// The most names PEFT's target lists may hold here: mtc --lora-from reads no more.
constexpr size_t kMostPeftTargets = 4096;

// PEFT's target_modules (`parameters` false) or target_parameters (true), a list: a leaf name
// ("q_proj", "gate_up_proj") where the adapted targets are every target of that name, else each
// adapted target's full name (which PEFT finds by equality, and no other name ends with): a stack
// of experts' one an expert. At most kMostPeftTargets names, else refused.
nlohmann::ordered_json peftTargets(const plan::Plan& plan, const std::vector<PlacedParam>& params,
                                   const std::vector<AdaptedModule>& adapted, bool parameters) {
  auto leafOf = [](const std::string& name) { return name.substr(name.rfind('.') + 1); };
  std::map<std::string, std::set<std::string>> all, chosen;  // by leaf; a per-expert stack's with its '*'
  for (const PlacedParam& p : params) {
    const bool stack = plan.host_tensors(p.index).shape_size() == 3;
    if (parameters ? stack : p.place.name.ends_with(".weight")) {
      const std::string target = parameters ? p.place.name : p.module;
      all[leafOf(target)].insert(target);
    }
  }
  std::map<std::string, int64_t> experts;  // of a per-expert stack's target
  for (const AdaptedModule& m : adapted)
    if (m.parameter.empty() != parameters) {
      chosen[leafOf(m.target())].insert(m.target());
      experts[m.target()] = m.experts;
    }
  nlohmann::ordered_json targets = nlohmann::ordered_json::array();
  for (const auto& [leaf, modules] : chosen) {
    if (all[leaf] == modules) {
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
  auto leafOf = [](const std::string& module) { return module.substr(module.rfind('.') + 1); };
  std::map<std::string, std::set<std::string>> values_by_leaf;  // each value's dump
  for (size_t i = 0; i < adapted.size(); ++i) values_by_leaf[leafOf(adapted[i].target())].insert(values[i].dump());
  for (size_t i = 0; i < adapted.size(); ++i) {
    if (values[i] == setting.value) continue;
    const std::string module = adapted[i].target();
    const std::string leaf = leafOf(module);
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
    std::string escaped;
    for (char c : deep ? module.substr(first + 1) : module)
      escaped += c == '*' ? std::string("[0-9]+")
                          : std::string(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? "" : "\\") + c;
    setting.pattern[escaped] = values[i];
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
  // own or the plan's (mtc --lora-rank-pattern, --lora-alpha-pattern).
  const PeftSetting rank = peftSetting(contents.adapted, [&](const AdaptedModule& m) {
    const plan::HostTensor& a = plan.host_tensors(m.adapter.a);
    return nlohmann::ordered_json(a.shape(a.shape_size() - 2));
  });
  const PeftSetting alpha = peftSetting(contents.adapted, [](const AdaptedModule& m) {
    return shortestDecimal(static_cast<float>(m.adapter.alpha));
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
  config["target_modules"] = peftTargets(plan, contents.params, contents.adapted, /*parameters=*/false);
  if (std::any_of(contents.adapted.begin(), contents.adapted.end(), [](const AdaptedModule& m) {
        return !m.parameter.empty();
      }))
    config["target_parameters"] = peftTargets(plan, contents.params, contents.adapted, /*parameters=*/true);
  config["use_rslora"] = model.lora_rslora();
  config["use_dora"] = contents.adapted.front().adapter.magnitude >= 0;  // all or none (loraAdapters)
  return config;
}

// A stack of gpt-oss's experts' adapters in PEFT's form (its ParamWrapper): lora_A (E*r, in), each
// expert's r rows in turn, which is our A (E, r, in) as it lies; lora_B (out, r*E), expert e's rank
// k in column k*E + e, our B (E, out, r) permuted; under the key stem of PEFT's nesting
// (peftParameterKeyStem).
std::vector<SafetensorsTensor> expertAdapterTensors(const HostStore& store, const std::vector<AdaptedModule>& adapted,
                                                    const AdaptedModule& m) {
  const std::string key = peftParameterKeyStem(m.module, m.parameter, [&](const std::string& parameter) {
    return std::any_of(adapted.begin(), adapted.end(), [&](const AdaptedModule& other) {
      return other.module == m.module && other.parameter == parameter;
    });
  });
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

void checkPeftExport(const plan::Plan& plan) { peftContents(plan); }

void exportPeft(const plan::Plan& plan, const HostStore& store, const std::string& dir,
                const std::map<std::string, std::string>& metadata) {
  const PeftContents contents = peftContents(plan);
  std::vector<SafetensorsTensor> tensors;
  for (const AdaptedModule& m : contents.adapted) {
    if (!m.parameter.empty()) {
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
