#include <algorithm>
#include <cstdint>
#include <optional>
#include <regex>
#include <string_view>
#include <vector>

#include "compiler/PeftAdapterParts.h"

// How PEFT names and matches the folder's modules: which it adapts (target_modules, exclude_modules,
// layers_to_transform), saves (modules_to_save) and at which rank and alpha (rank_pattern,
// alpha_pattern); the names transformers gives the folder's tensors once loaded.
namespace mt {
namespace peft {
namespace {

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

}  // namespace

std::string savingEntry(const PeftAdapter& adapter, const std::string& module) {
  for (std::string m = module; !m.empty(); m = huggingFaceModuleOf(m))
    for (const std::string& entry : adapter.saved)
      if (m.ends_with(entry)) return entry;
  return "";
}

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

bool isTargetParameter(const PeftAdapter& adapter, const std::string& tensor) {
  return namedIn(adapter.target_parameters, tensor);
}

std::string loadedName(const HuggingFaceModel& model, const std::string& tensor) {
  constexpr std::string_view google = "language_model.model.";
  if (model.multimodal.empty()) return tensor;
  if (tensor.starts_with(google)) return kMultimodalLanguageModel + tensor.substr(google.size());
  return tensor == "language_model.lm_head.weight" ? "lm_head.weight" : tensor;
}

std::string ownTensor(const HuggingFaceModel& model, const std::string& ours) {
  auto source = model.weights.find(ours);
  if (source == model.weights.end()) return "";
  return notOwnModuleTensor(source->second.place) ? "" : loadedName(model, source->second.place.name);
}

std::string fusedLinearModule(const HuggingFaceModel& model, const std::string& ours) {
  auto source = model.weights.find(ours);
  if (!holdsFusedLinearLayers(checkpointLayoutOf(model.architecture)) || source == model.weights.end() ||
      source->second.place.parts == 1 || !ours.ends_with(".weight"))
    return "";
  return huggingFaceModuleOf(loadedName(model, source->second.place.name));
}

}  // namespace peft

int64_t adapterRank(const PeftAdapter& adapter, const std::string& module) {
  return static_cast<int64_t>(peft::patternValue(adapter.rank_pattern, module, static_cast<double>(adapter.rank)));
}

double adapterAlpha(const PeftAdapter& adapter, const std::string& module) {
  return peft::patternValue(adapter.alpha_pattern, module, adapter.alpha);
}

}  // namespace mt
