#include "compiler/PeftAdapter.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/io/mapped_file.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

using nlohmann::json;

// The prefix of every key of PEFT's adapter weights: the PeftModel's base model's model.
constexpr char kPeftKeyPrefix[] = "base_model.model.";

// Settings PEFT records that change nothing mtc computes: bookkeeping, inference switches and
// initialisation (the file's values replace it).
const std::set<std::string> kInertKeys = {
    "auto_mapping", "base_model_name_or_path", "revision", "inference_mode", "init_lora_weights",
    "peft_version", "loftq_config", "eva_config", "corda_config", "megatron_config", "megatron_core",
    "runtime_config", "qalora_group_size", "ensure_weight_tying", "task_type", "peft_type", "r",
    "lora_alpha", "lora_dropout", "use_rslora", "target_modules", "modules_to_save"};

// Whether `value` is PEFT's "off" for a feature: absent, false, empty, zero.
bool isOff(const json& value) {
  return value.is_null() || (value.is_boolean() && !value.get<bool>()) || (value.is_string() && value.empty()) ||
         (value.is_structured() && value.empty()) || (value.is_number() && value.get<double>() == 0.0);
}

// Why mtc cannot take a setting the config turns on: the features it names and does not implement.
std::string unsupported(const std::string& key) {
  if (key == "use_dora") return "DoRA (weight-decomposed LoRA) is not implemented";
  if (key == "bias" || key == "lora_bias") return "trained biases beside the adapters are not implemented";
  if (key == "fan_in_fan_out") return "it adapts GPT-2's Conv1D layers, which mtc adapts only for --export-hf";
  if (key == "rank_pattern" || key == "alpha_pattern") return "per-module ranks and alphas are not implemented";
  if (key == "layers_to_transform" || key == "layers_pattern" || key == "exclude_modules")
    return "mtc chooses targets by target_modules alone";
  return "mtc does not know this setting";
}

// A regular expression matching the text `literal` exactly.
std::string escaped(const std::string& literal) {
  static const std::string special = R"(\^$.|?*+()[]{}/)";
  std::string out;
  for (char c : literal) {
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

// A list of module names as PEFT's config writes it, checked; `what` names it in errors.
std::vector<std::string> moduleNames(const json& value, const std::string& what) {
  if (!value.is_array() || value.empty() || value.size() > 4096)
    throw Error(what + " must be a list of 1 to 4096 module names, not " + jsonBrief(value));
  std::vector<std::string> names;
  for (const json& name : value) {
    if (!name.is_string() || name.get<std::string>().empty() || name.get<std::string>().size() > 256)
      throw Error(what + " holds " + jsonBrief(name) + ": each entry must be a module name (1 to 256 characters)");
    names.push_back(name.get<std::string>());
  }
  return names;
}

// target_modules as an expression over tensor names (the adapted module's ".weight"): a list
// matches a module whose name is an entry or ends with "." + an entry; a string is a regular
// expression the whole module name must match; "all-linear" is every linear layer of the layers.
std::string targetPattern(const json& value, const std::string& path) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text == "all-linear") return R"(^model\.layers\.[0-9]+\..+\.weight$)";
    if (text.empty() || text.size() > 512)
      throw Error(path + ": target_modules is an empty expression or one over 512 characters");
    return "^(?:" + text + ")\\.weight$";
  }
  std::string alternatives;
  for (const std::string& name : moduleNames(value, path + ": target_modules"))
    alternatives += (alternatives.empty() ? "" : "|") + escaped(name);
  return "^(?:.*\\.)?(?:" + alternatives + ")\\.weight$";
}

// modules_to_save as an expression over tensor names: PEFT saves a module whose name ends with
// an entry (the text's end, as PEFT's endswith), with all its tensors.
std::string savedPattern(const json& value, const std::string& path) {
  if (value.is_null() || (value.is_array() && value.empty())) return "";
  std::string alternatives;
  for (const std::string& name : moduleNames(value, path + ": modules_to_save"))
    alternatives += (alternatives.empty() ? "" : "|") + escaped(name);
  return "^.*(?:" + alternatives + ")\\.[^.]+$";
}

// The number `key` of the config (`fallback` where absent), checked to lie within [low, high].
double numberIn(const json& config, const char* key, double fallback, double low, double high,
                const std::string& path) {
  if (!config.contains(key)) return fallback;
  const json& value = config[key];
  if (!value.is_number() || !(value.get<double>() >= low && value.get<double>() <= high))
    throw Error(fmt::format("{}: {} must be a number in [{:g}, {:g}], not {}", path, key, low, high, jsonBrief(value)));
  return value.get<double>();
}

// Every key is one mtc reads, one it knows to be inert, or a feature left off.
void checkKeys(const json& config, const std::string& path) {
  for (const auto& [key, value] : config.items()) {
    if (kInertKeys.count(key) || isOff(value)) continue;
    if (key == "bias" && value == "none") continue;
    throw Error(path + ": " + key + " is " + jsonBrief(value) + ", but " + unsupported(key) +
                " (--lora-from takes plain LoRA adapters)");
  }
}

}  // namespace

PeftAdapter readPeftAdapter(const std::string& dir) {
  const std::string path = dir + "/" + kPeftConfigFile;
  const json config = parseJsonInput(
      readWholeFile(path, "PEFT adapter config", "--lora-from takes the folder PEFT's save_pretrained writes"), path);
  if (!config.is_object()) throw Error(path + " is not a JSON object");
  checkKeys(config, path);
  if (config.value("peft_type", json()) != "LORA")
    throw Error(path + ": peft_type is " + jsonBrief(config.value("peft_type", json())) + ", not LORA");
  const json task = config.value("task_type", json());
  if (!task.is_null() && task != "CAUSAL_LM")
    throw Error(path + ": task_type is " + jsonBrief(task) + "; mtc trains causal LMs' adapters (CAUSAL_LM)");
  PeftAdapter adapter;
  adapter.dir = dir;
  const json r = config.value("r", json());
  if (!r.is_number_integer() || r.get<int64_t>() < 1 || r.get<int64_t>() > 65536)
    throw Error(path + ": r must be an integer in [1, 65536], not " + jsonBrief(r));
  adapter.rank = r.get<int64_t>();
  adapter.alpha = numberIn(config, "lora_alpha", 8.0, 1e-6, 1e6, path);
  adapter.dropout = numberIn(config, "lora_dropout", 0.0, 0.0, 0.95, path);
  const json rslora = config.value("use_rslora", json(false));
  if (!rslora.is_boolean()) throw Error(path + ": use_rslora must be true or false, not " + jsonBrief(rslora));
  adapter.rslora = rslora.get<bool>();
  if (!config.contains("target_modules") || config["target_modules"].is_null())
    throw Error(path + ": no target_modules (which modules the adapters are on)");
  adapter.targets = targetPattern(config["target_modules"], path);
  adapter.saved = savedPattern(config.value("modules_to_save", json()), path);
  const json base = config.value("base_model_name_or_path", json());
  if (base.is_string()) adapter.base = base.get<std::string>();
  return adapter;
}

void applyPeftAdapter(const PeftAdapter& adapter, CompileOptions& o) {
  o.lora_rank = adapter.rank;
  o.lora_alpha = adapter.alpha;
  o.lora_rslora = adapter.rslora;
  o.lora_dropout = adapter.dropout;
  try {
    o.lora_targets = std::regex(adapter.targets, std::regex::ECMAScript);
    if (!adapter.saved.empty()) o.trainable = std::regex(adapter.saved, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw Error(adapter.dir + "/" + kPeftConfigFile + ": target_modules is not a regular expression mtc reads (" +
                e.what() + ")");
  }
}

WeightOverrides peftWeights(const PeftAdapter& adapter, const plan::Plan& plan, const HuggingFaceModel& model) {
  WeightOverrides overrides;
  overrides.file = adapter.dir + "/" + kPeftAdapterWeights;
  const SafetensorsFile file(overrides.file);
  std::set<std::string> placed;
  // The file's tensor `key`, checked to be F32, BF16 or F16 of `shape` (for the plan's `ours`).
  auto use = [&](const std::string& key, const std::vector<int64_t>& shape, const std::string& ours) {
    auto entry = file.entries().find(key);
    if (entry == file.entries().end())
      throw Error(overrides.file + " has no '" + key + "' (for the plan's " + ours + "): the adapter's config and " +
                  "weights disagree");
    const SafetensorsEntry& e = entry->second;
    if (e.shape != shape || (e.dtype != "F32" && e.dtype != "BF16" && e.dtype != "F16"))
      throw Error(fmt::format("{}: '{}' is {} [{}] but the plan's {} needs [{}] in F32, BF16 or F16", overrides.file,
                              key, e.dtype, fmt::join(e.shape, ", "), ours, fmt::join(shape, ", ")));
    placed.insert(key);
    return key;
  };
  // The folder's name of the plan's `ours`, a tensor of a module of its own there.
  auto folderName = [&](const std::string& ours) {
    auto source = model.weights.find(ours);
    if (source == model.weights.end() || source->second.place.parts != 1 || source->second.place.transposed ||
        source->second.place.per_expert)
      throw Error(overrides.file + ": the plan's '" + ours + "' has no module of its own in " + model.dir +
                  ", where PEFT could hold it");
    return source->second.place.name;
  };
  auto moduleOf = [](const std::string& tensor) { return tensor.substr(0, tensor.rfind('.')); };
  // A plan with the adapters (training) starts them from the file; one without (forward-only)
  // has them merged into their weights.
  const bool merging = std::none_of(plan.host_tensors().begin(), plan.host_tensors().end(),
                                    [](const plan::HostTensor& t) { return isLoraAdapter(t.name()); });
  const std::regex targets(adapter.targets, std::regex::ECMAScript);
  const std::optional<std::regex> saved =
      adapter.saved.empty() ? std::nullopt : std::optional(std::regex(adapter.saved, std::regex::ECMAScript));
  for (const auto& t : plan.host_tensors()) {
    if (t.role() != plan::ROLE_PARAM) continue;
    const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    auto source = model.weights.find(t.name());
    const std::string folder = source == model.weights.end() ? "" : source->second.place.name;
    if (isLoraAdapter(t.name())) {  // "X.lora_A.weight": X.weight's module + ".lora_A.weight"
      const std::string stem = t.name().substr(0, t.name().rfind(".lora_"));
      const std::string key = kPeftKeyPrefix + moduleOf(folderName(stem + ".weight")) + t.name().substr(stem.size());
      overrides.names[t.name()] = use(key, shape, t.name());
    } else if (merging && shape.size() == 2 && std::regex_search(folder, targets)) {
      const std::string module = kPeftKeyPrefix + moduleOf(folderName(t.name()));
      overrides.merged[t.name()] = {use(module + ".lora_A.weight", {adapter.rank, shape[1]}, t.name() + "'s A"),
                                    use(module + ".lora_B.weight", {shape[0], adapter.rank}, t.name() + "'s B"),
                                    loraScale(adapter.alpha, adapter.rank, adapter.rslora)};
    } else if (saved && (merging || !t.frozen()) && std::regex_search(folder, *saved)) {  // a module saved whole
      overrides.names[t.name()] = use(kPeftKeyPrefix + folderName(t.name()), shape, t.name());
    } else if (!merging && !t.frozen()) {
      throw Error(overrides.file + ": the plan trains '" + t.name() + "' (" + folder + "), but the adapter's " +
                  "modules_to_save does not name its module there");
    }
  }
  for (const auto& [key, entry] : file.entries())
    if (!placed.count(key))
      throw Error(overrides.file + " holds '" + key + "', which has no place in the plan (its config's " +
                  "target_modules and modules_to_save do not account for it)");
  return overrides;
}

}  // namespace mt
