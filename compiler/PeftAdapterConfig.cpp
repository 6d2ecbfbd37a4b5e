// adapter_config.json of mtc --lora-from (compiler/PeftAdapter.h), read strictly: a PEFT setting
// changes the computation, is inert, or is off; only LoRA's plain form (and DoRA) is taken.
// rank_pattern and alpha_pattern take their first matching key in the file's order (Python's
// dict), which a second, event-driven reading of the text records.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/ModuleExpression.h"
#include "compiler/PeftAdapter.h"
#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/io/mapped_file.h"
#include "runtime/plan/huggingface_names.h"

namespace mt {
namespace {

using nlohmann::json;

// Settings PEFT records that change nothing mtc computes (bookkeeping, inference switches, an
// initialisation the file's values replace), and those read below.
const std::set<std::string> kInertKeys = {
    "auto_mapping", "base_model_name_or_path", "revision", "inference_mode", "peft_version", "eva_config",
    "megatron_config", "megatron_core", "runtime_config", "qalora_group_size", "task_type", "peft_type", "r",
    "lora_alpha", "lora_dropout", "use_rslora", "use_dora", "target_modules", "target_parameters", "modules_to_save",
    "ensure_weight_tying", "init_lora_weights", "rank_pattern", "alpha_pattern", "exclude_modules",
    "layers_to_transform", "layers_pattern"};

// The values of init_lora_weights that leave the base weights as they are: PEFT's PiSSA, OLoRA,
// CorDA, LoftQ and LoRA-GA rewrite them when the adapter is made (the adapter then belongs to the
// rewritten model), and MiCA trains A alone.
const std::set<std::string> kPlainInitialisations = {"gaussian", "eva", "orthogonal"};

// Whether `value` is PEFT's "off" for a feature: null, false, an empty string, list or object
// (not 0: layers_to_transform 0 is layer 0).
bool isOff(const json& value) {
  return value.is_null() || (value.is_boolean() && !value.get<bool>()) || (value.is_string() && value.empty()) ||
         (value.is_structured() && value.empty());
}

// Why mtc cannot take a setting the config turns on: the features it names and does not implement.
std::string unsupported(const std::string& key) {
  if (key == "bias" || key == "lora_bias") return "trained biases beside the adapters are not implemented";
  if (key == "fan_in_fan_out") return "GPT-2's Conv1D layers are adapted only through mtc --lora";
  if (key == "trainable_token_indices") return "training single tokens' embeddings is not implemented";
  if (key == "loftq_config" || key == "corda_config") return "this initialisation rewrites the base weights";
  return "mtc does not know this setting";
}

// Every key is one mtc reads, one it knows to be inert, or a feature left off.
void checkKeys(const json& config, const std::string& path) {
  for (const auto& [key, value] : config.items()) {
    if (kInertKeys.count(key) || isOff(value)) continue;
    if (key == "bias" && value == "none") continue;
    throw Error(path + ": " + key + " is " + jsonBrief(value) + ", but " + unsupported(key) +
                " (--lora-from takes plain LoRA adapters)");
  }
  const json init = config.value("init_lora_weights", json(true));
  if (!init.is_null() && !init.is_boolean() && !(init.is_string() && kPlainInitialisations.count(init.get<std::string>())))
    throw Error(path + ": init_lora_weights is " + jsonBrief(init) + ": an initialisation that rewrites the base " +
                "weights (the adapter belongs to the rewritten model; PEFT's path_initial_model_for_weight_conversion " +
                "turns it into a plain one) or trains A alone; --lora-from takes plain LoRA adapters");
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

// The number `key` of the config (`fallback` where absent), checked to lie within [low, high].
double numberIn(const json& config, const char* key, double fallback, double low, double high,
                const std::string& path) {
  if (!config.contains(key)) return fallback;
  const json& value = config[key];
  if (!value.is_number() || !(value.get<double>() >= low && value.get<double>() <= high))
    throw Error(fmt::format("{}: {} must be a number in [{:g}, {:g}], not {}", path, key, low, high, jsonBrief(value)));
  return value.get<double>();
}

// A boolean of the config (`fallback` where absent or null).
bool flag(const json& config, const char* key, bool fallback, const std::string& path) {
  const json value = config.value(key, json());
  if (value.is_null()) return fallback;
  if (!value.is_boolean()) throw Error(path + ": " + key + " must be true or false, not " + jsonBrief(value));
  return value.get<bool>();
}

// The keys of the top-level members `members` (objects) in the order the text gives them, each
// once (Python keeps a repeated key's first place): nlohmann::json keeps an object's keys sorted,
// and its ordered form takes time quadratic in an object's size to parse. The text parsed already.
class KeyOrder : public nlohmann::json_sax<json> {
 public:
  explicit KeyOrder(std::set<std::string> members) : members_(std::move(members)) {}
  std::map<std::string, std::vector<std::string>> order;

  bool key(string_t& k) override {
    if (depth_ == 1) member_ = k;
    if (depth_ == 2 && members_.count(member_) && seen_[member_].insert(k).second) order[member_].push_back(k);
    return true;
  }
  bool start_object(std::size_t) override { return ++depth_, true; }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return ++depth_, true; }
  bool end_array() override { return --depth_, true; }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  std::set<std::string> members_;
  std::map<std::string, std::set<std::string>> seen_;
  std::string member_;
  int depth_ = 0;
};

// Whether `c` is a word character (Python's \w on ASCII: letters, digits, '_').
bool isWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A key of word characters, '.' (any character, as in Python) and '\.' (a dot) as the end of a
// name it must match character for character (kAnyCharacter for '.'); none for any other key.
std::optional<std::string> literalTail(const std::string& key) {
  std::string tail;
  for (size_t i = 0; i < key.size(); ++i) {
    const char c = key[i];
    if (c == '\\' && i + 1 < key.size() && key[i + 1] == '.') tail += key[++i];
    else if (c == '.') tail += PeftAdapter::Pattern::kAnyCharacter;
    else if (isWordChar(c)) tail += c;
    else return std::nullopt;
  }
  return tail;
}

// rank_pattern or alpha_pattern (`key`), its keys in `order`: at most 4096 keys of 1 to 256
// characters (expressions other than plain names 16 KiB in all), each an expression PEFT matches
// against the end of a module's name, with a value in [low, high] (an integer where `whole`).
std::vector<PeftAdapter::Pattern> readPattern(const json& config, const char* key, const std::vector<std::string>& order,
                                              double low, double high, bool whole, const std::string& path) {
  const json value = config.value(key, json());
  if (isOff(value)) return {};
  if (!value.is_object() || value.size() > 4096)
    throw Error(fmt::format("{}: {} must be an object of at most 4096 module names or expressions, not {}", path, key,
                            jsonBrief(value)));
  std::vector<PeftAdapter::Pattern> patterns;
  size_t expression_chars = 0;
  for (const std::string& name : order) {
    const json& v = value.at(name);
    if (name.empty() || name.size() > 256)
      throw Error(fmt::format("{}: {} has a key of {} characters (1 to 256)", path, key, name.size()));
    const bool fits = whole ? v.is_number_integer() : v.is_number();
    if (!fits || !(v.get<double>() >= low && v.get<double>() <= high))
      throw Error(fmt::format("{}: {}['{}'] must be {} in [{:g}, {:g}], not {}", path, key, name,
                              whole ? "an integer" : "a number", low, high, jsonBrief(v)));
    // PEFT's get_pattern_key: re.match(rf"(.*\.)?({key})$", module), a full match of this; the
    // key parsed alone first, so that it cannot close the group around it.
    const std::string what = fmt::format("{}: {}['{}']", path, key, name);
    ModuleExpression::parse(name, what);
    std::optional<std::string> tail = literalTail(name);
    if (!tail && (expression_chars += name.size()) > 16384)
      throw Error(fmt::format("{}: {}'s keys other than module names hold more than 16384 characters", path, key));
    patterns.push_back({name, ModuleExpression::parse("(.*\\.)?(" + name + ")", what), std::move(tail), v.get<double>()});
  }
  return patterns;
}

// exclude_modules into `adapter`: names, as target_modules' list, or an expression.
void readExcluded(const json& value, const std::string& path, PeftAdapter& adapter) {
  if (isOff(value)) return;
  const std::string what = path + ": exclude_modules";
  if (value.is_string()) adapter.exclude_expression = ModuleExpression::parse(value.get<std::string>(), what);
  else adapter.excluded = moduleNames(value, what);
}

// layers_to_transform and layers_pattern into `adapter`: a layer index or a list of them (PEFT's
// "[]" is none), and names of the layers' lists. PEFT reads layers_pattern as an expression; mtc
// takes names ("layers", "h"), which is what models' lists are called.
void readLayers(const json& config, const std::string& path, PeftAdapter& adapter) {
  const json layers = config.value("layers_to_transform", json());
  const json pattern = config.value("layers_pattern", json());
  if (layers.is_boolean())  // Python's False is 0, True 1: a layer index by accident
    throw Error(path + ": layers_to_transform is " + jsonBrief(layers) + ": give a layer index or a list of them");
  if (layers.is_null() && !isOff(pattern))
    throw Error(path + ": layers_pattern is " + jsonBrief(pattern) + " without layers_to_transform (PEFT refuses it too)");
  if (isOff(layers)) return;  // none, or [] (PEFT: every layer)
  if (adapter.targets.empty() && !adapter.all_linear && !adapter.target_expression)
    throw Error(path + ": layers_to_transform with target_parameters alone: mtc reads layers only beside a list of "
                "target_modules");
  if (adapter.targets.empty())
    throw Error(path + ": layers_to_transform with target_modules " +
                (adapter.all_linear ? "all-linear" : "an expression") +
                ": PEFT takes layers only beside a list of names");
  auto index = [&](const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1000000)
      throw Error(path + ": layers_to_transform holds " + jsonBrief(v) +
                  ": each must be a layer index in [0, 1000000]");
    return v.get<int64_t>();
  };
  adapter.layers.emplace();
  if (layers.is_array()) {
    if (layers.size() > 1000000) throw Error(path + ": layers_to_transform lists more than 1000000 layers");
    for (const json& v : layers) adapter.layers->insert(index(v));
  } else {
    adapter.layers->insert(index(layers));
  }
  if (isOff(pattern)) return;
  adapter.layers_pattern = pattern.is_string() ? std::vector<std::string>{pattern.get<std::string>()}
                                               : moduleNames(pattern, path + ": layers_pattern");
  for (const std::string& name : adapter.layers_pattern)
    if (!std::all_of(name.begin(), name.end(), isWordChar))
      throw Error(path + ": layers_pattern holds '" + name + "': mtc takes the name of the layers' list (letters, "
                  "digits, '_': \"layers\", \"h\"), not an expression");
}

// target_modules into `adapter`: a list of names, "all-linear" (in any case, as PEFT reads it),
// or an expression.
void readTargets(const json& value, const std::string& path, PeftAdapter& adapter) {
  if (value.is_null()) throw Error(path + ": no target_modules (which modules the adapters are on)");
  if (!value.is_string()) {
    adapter.targets = moduleNames(value, path + ": target_modules");
    return;
  }
  std::string text = value.get<std::string>();
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "all-linear") {
    adapter.all_linear = true;
    return;
  }
  adapter.target_expression = ModuleExpression::parse(text, path + ": target_modules");
}

// A version "0.19.1" (also "0.20.0.dev0", "0.19.1@abc") as its first three numbers; none for
// anything else.
std::optional<std::array<int64_t, 3>> versionNumbers(const json& value) {
  if (!value.is_string()) return std::nullopt;
  const std::string text = value.get<std::string>();
  std::array<int64_t, 3> numbers{};
  size_t at = 0;
  for (size_t i = 0; i < numbers.size(); ++i) {
    if (i > 0 && (at >= text.size() || text[at++] != '.')) return std::nullopt;
    const size_t start = at;
    while (at < text.size() && at - start < 6 && text[at] >= '0' && text[at] <= '9')
      numbers[i] = numbers[i] * 10 + (text[at++] - '0');
    if (at == start) return std::nullopt;
  }
  return numbers;
}

}  // namespace

PeftAdapter readPeftAdapter(const std::string& dir) {
  const std::string path = dir + "/" + kPeftConfigFile;
  const std::string text =
      readWholeFile(path, "PEFT adapter config", "--lora-from takes the folder PEFT's save_pretrained writes");
  const json config = parseJsonInput(text, path);
  if (!config.is_object()) throw Error(path + " is not a JSON object");
  KeyOrder order({"rank_pattern", "alpha_pattern"});
  json::sax_parse(text, &order);
  if (config.value("peft_type", json()) != "LORA")
    throw Error(path + ": peft_type is " + jsonBrief(config.value("peft_type", json())) + ", not LORA");
  const json task = config.value("task_type", json());
  if (!task.is_null() && task != "CAUSAL_LM" && task != "SEQ_CLS")
    throw Error(path + ": task_type is " + jsonBrief(task) + "; mtc trains causal LMs' adapters (CAUSAL_LM) and "
                "reward models' (SEQ_CLS)");
  checkKeys(config, path);
  PeftAdapter adapter;
  adapter.sequence_classifier = task == "SEQ_CLS";
  adapter.dir = dir;
  adapter.peft_version = versionNumbers(config.value("peft_version", json()));
  const json r = config.value("r", json());
  if (!r.is_number_integer() || r.get<int64_t>() < 1 || r.get<int64_t>() > 65536)
    throw Error(path + ": r must be an integer in [1, 65536], not " + jsonBrief(r));
  adapter.rank = r.get<int64_t>();
  adapter.alpha = numberIn(config, "lora_alpha", 8.0, 1e-6, 1e6, path);
  adapter.dropout = numberIn(config, "lora_dropout", 0.0, 0.0, 0.95, path);
  adapter.rslora = flag(config, "use_rslora", false, path);
  adapter.dora = flag(config, "use_dora", false, path);
  adapter.ensure_weight_tying = flag(config, "ensure_weight_tying", false, path);
  const json parameters = config.value("target_parameters", json());
  if (!isOff(parameters)) {
    adapter.target_parameters = moduleNames(parameters, path + ": target_parameters");
    // PEFT's adapters on parameters (its ParamWrapper) take neither.
    if (adapter.dropout > 0 || adapter.dora)
      throw Error(path + ": target_parameters with " + (adapter.dora ? "use_dora" : "lora_dropout above 0") +
                  ": PEFT's adapters on parameters have neither");
  }
  // Adapters on parameters alone: PEFT saves target_modules empty (or null).
  if (adapter.target_parameters.empty() || !isOff(config.value("target_modules", json())))
    readTargets(config.value("target_modules", json()), path, adapter);
  const json saved = config.value("modules_to_save", json());
  if (!isOff(saved)) adapter.saved = moduleNames(saved, path + ": modules_to_save");
  readExcluded(config.value("exclude_modules", json()), path, adapter);
  readLayers(config, path, adapter);
  adapter.rank_pattern = readPattern(config, "rank_pattern", order.order["rank_pattern"], 1, 65536, true, path);
  adapter.alpha_pattern = readPattern(config, "alpha_pattern", order.order["alpha_pattern"], 1e-6, 1e6, false, path);
  const std::string weights = dir + "/" + kPeftWeightsFile;
  struct stat st {};
  if (stat(weights.c_str(), &st) != 0 && stat((dir + "/adapter_model.bin").c_str(), &st) == 0)
    throw Error(dir + " holds adapter_model.bin (PyTorch's pickle, which mtc does not read): save the adapter with "
                "safe_serialization (PEFT's default), or convert it to adapter_model.safetensors");
  adapter.weights = std::make_shared<const SafetensorsFile>(weights);
  if (adapter.all_linear) {
    static const std::regex single_expert(R"(\.experts\.[0-9]+\.[^.]+\.lora_)", std::regex::ECMAScript);
    for (const auto& entry : adapter.weights->entries())
      if (std::regex_search(entry.first, single_expert)) {
        adapter.all_linear_experts = true;
        break;
      }
  }
  return adapter;
}

}  // namespace mt
