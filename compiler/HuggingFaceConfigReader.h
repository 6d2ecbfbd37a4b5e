// The strict reader of a Hugging Face config.json shared by the architectures' readers
// (compiler/HuggingFaceConfig.cpp, compiler/HuggingFaceGemma.cpp, ...): every key taken or known inert,
// else an error naming it. Internal to the compiler.
#pragma once
#include <cmath>
#include <iterator>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/HuggingFaceConfig.h"
#include "models/ModelConfig.h"
#include "runtime/io/error.h"
#include "runtime/io/json_input.h"

namespace mt::hf {

using nlohmann::json;

// Keys of config.json that do not change the model's arithmetic (token ids, bookkeeping).
inline const std::set<std::string> kInertKeys = {
    "architectures", "model_type", "_name_or_path", "transformers_version", "torch_dtype", "use_cache",
    "initializer_range", "bos_token_id", "eos_token_id", "pad_token_id",
    // transformers 4.56 on write torch_dtype as dtype; some 4.4x-4.5x saves leak the attention
    // implementation's bookkeeping, or the implementation itself (Gemma 2 fine-tunes' "eager"): which
    // kernels compute the attention, not what they compute.
    "dtype", "_attn_implementation_autoset", "_attn_implementation"};

// config.json, read key by key: every key must be taken or known inert.
class ConfigReader {
 public:
  ConfigReader(const json& config, const std::string& path) : config_(config), path_(path) {}

  Error error(const std::string& why) const { return Error(path_ + ": " + why); }

  bool has(const std::string& key) const { return config_.contains(key) && !config_[key].is_null(); }
  // Written as null (has() is false for it too).
  bool isNull(const std::string& key) const { return config_.contains(key) && config_[key].is_null(); }

  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
    taken_.insert(key);
    if (!has(key)) {
      if (fallback) return *fallback;
      throw error("no '" + key + "'");
    }
    if (!config_[key].is_number_integer() || config_[key].get<int64_t>() <= 0)
      throw error("'" + key + "' is not a positive whole number");
    return config_[key].get<int64_t>();
  }
  double number(const std::string& key, double fallback) {
    taken_.insert(key);
    if (!has(key)) return fallback;
    if (!config_[key].is_number() || !std::isfinite(config_[key].get<double>()) || config_[key].get<double>() <= 0)
      throw error("'" + key + "' is not a positive number");
    return config_[key].get<double>();
  }
  // A finite number >= 0 (a loss's coefficient).
  double fraction(const std::string& key, double fallback) {
    taken_.insert(key);
    if (!has(key)) return fallback;
    if (!config_[key].is_number() || !(config_[key].get<double>() >= 0.0) || !std::isfinite(config_[key].get<double>()))
      throw error("'" + key + "' is not a finite number of at least 0");
    return config_[key].get<double>();
  }
  // A probability such as a dropout rate: in [0, 1]; `fallback` where absent.
  double probability(const std::string& key, double fallback = 0.0) {
    taken_.insert(key);
    if (!has(key)) return fallback;
    if (!config_[key].is_number() || !(config_[key].get<double>() >= 0.0 && config_[key].get<double>() <= 1.0))
      throw error("'" + key + "' is not a number between 0 and 1");
    return config_[key].get<double>();
  }
  // A list of at most `most` positive finite numbers (LongRoPE's factors of each pair).
  std::vector<double> positiveNumbers(const std::string& key, size_t most) {
    taken_.insert(key);
    if (!has(key)) throw error("no '" + key + "'");
    const json& list = config_[key];
    if (!list.is_array() || list.size() > most)
      throw error("'" + key + "' is not a list of at most " + std::to_string(most) + " numbers");
    std::vector<double> out;
    for (const json& v : list) {
      if (!v.is_number() || !(v.get<double>() >= 1e-30 && v.get<double>() <= 1e30))
        throw error("'" + key + "' holds " + jsonBrief(v) + ", not a positive number in f32's range (1e-30 to 1e30)");
      out.push_back(v.get<double>());
    }
    return out;
  }
  bool boolean(const std::string& key, bool fallback) {
    taken_.insert(key);
    if (!has(key)) return fallback;
    if (!config_[key].is_boolean()) throw error("'" + key + "' is not true or false");
    return config_[key].get<bool>();
  }
  std::string text(const std::string& key, const std::string& fallback) {
    taken_.insert(key);
    if (!has(key)) return fallback;
    if (!config_[key].is_string()) throw error("'" + key + "' is not a string");
    return config_[key].get<std::string>();
  }
  // A key whose only supported value is `supported` (or absent / null).
  void require(const std::string& key, const json& supported, const std::string& why) {
    taken_.insert(key);
    if (has(key) && config_[key] != supported)
      throw error("'" + key + "' is " + jsonBrief(config_[key]) + ": " + why);
  }
  void take(const std::string& key) { taken_.insert(key); }
  // The layer count under `key`, bounded by kMaxLayers as it is read: the readers' per-layer rules
  // (windows, NoPE layers) loop over it, and a hostile count would take all memory.
  int64_t layerCount(const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
    const int64_t layers = integer(key, fallback);
    if (layers > kMaxLayers)
      throw error("'" + key + "' is " + std::to_string(layers) + ": at most " + std::to_string(kMaxLayers) +
                  " layers are supported");
    return layers;
  }
  // ModelConfig::head_dim from `head_dim` (`fallback` where absent; without one, hidden / heads):
  // 0 where the heads are hidden / heads wide, else the key's, bounded by kMaxWidth before anything
  // multiplies it (compared without forming heads x head_dim, which a hostile file may overflow).
  int64_t headDim(int64_t width, int64_t heads, std::optional<int64_t> fallback) {
    taken_.insert("head_dim");
    if (!has("head_dim") && !fallback) return 0;
    const int64_t head_dim = integer("head_dim", fallback);
    if (head_dim > kMaxWidth)
      throw error("'head_dim' " + std::to_string(head_dim) + " is more than " + std::to_string(kMaxWidth));
    return width % heads == 0 && head_dim == width / heads ? 0 : head_dim;
  }
  // pad_token_id as transformers' nn.Embedding(vocab, width, padding_idx) takes it: the token
  // whose embedding row gets no gradient from the lookup, a negative one counted from the end;
  // `fallback` where the key is absent (the config class's default), -1 (none) where it is null.
  int64_t paddingId(int64_t vocab, int64_t fallback) {
    taken_.insert("pad_token_id");
    const bool named = has("pad_token_id");
    if (isNull("pad_token_id") || (!named && fallback < 0)) return -1;
    const json& value = named ? config_["pad_token_id"] : json(fallback);
    if (!value.is_number_integer()) throw error("'pad_token_id' is not a whole number (a token id) or null");
    const bool inside = value.is_number_unsigned() ? value.get<uint64_t>() < static_cast<uint64_t>(vocab)
                                                   : value.get<int64_t>() >= -vocab && value.get<int64_t>() < vocab;
    if (!inside)
      throw error(std::string(named ? "'pad_token_id' " : "the architecture's default 'pad_token_id' ") +
                  jsonBrief(value) + " is not a token of the " + std::to_string(vocab) +
                  "-token vocabulary (transformers refuses it as its embedding's padding_idx too): set "
                  "'pad_token_id' to the tokenizer's pad token, or null");
    const int64_t id = value.get<int64_t>();
    return id < 0 ? id + vocab : id;
  }
  // A reader of the object under `key` (taken), its errors naming it.
  ConfigReader nested(const std::string& key) {
    taken_.insert(key);
    return ConfigReader(config_[key], path_ + " '" + key + "'");
  }
  // The value of `key` as it is (taken), for a setting read whole; null when absent.
  const json& value(const std::string& key) {
    static const json null_value;
    taken_.insert(key);
    return has(key) ? config_[key] : null_value;
  }

  // Every key taken or inert, else an error naming the rest.
  void finish() const {
    std::string unknown;
    for (const auto& item : config_.items())
      if (!taken_.count(item.key()) && !kInertKeys.count(item.key()))
        unknown += (unknown.empty() ? "'" : ", '") + item.key() + "'";
    if (!unknown.empty())
      throw error("mtc does not know " + unknown +
                  ": such a setting may change the model, so it is not ignored (models/ and "
                  "compiler/HuggingFaceConfig.cpp say what is read)");
  }

 private:
  const json& config_;
  std::string path_;
  std::set<std::string> taken_;
};

// The causal LM architectures mtc reads (a ...ForSequenceClassification's body is its causal LM's),
// parsed once from the config's name (findArchitecture): the readers test this, not the name.
enum class Architecture {
  kLlama, kQwen2, kQwen3, kQwen3Moe, kMistral, kMixtral, kGptOss, kGemma, kGemma2, kGemma3, kPhi3, kGranite,
  kSmolLM3, kOlmo2, kQwen2Moe, kOlmoe, kGraniteMoe, kGraniteHybrid, kGlm4Moe, kDeepseekV2, kDeepseekV3, kErnie45,
  kErnie45Moe, kOlmo3, kGlm4, kSeedOss, kExaone4,
  kGpt2,  // kGpt2 last: kArchitectureNames has a row for each, in this order
};
struct ArchitectureName {
  Architecture id;
  const char* causal;      // its causal LM's class, as config.json names it
  const char* model_type;  // the config's model_type, which must agree
  // Its sequence classifier's class (a reward model's folder), nullptr where transformers has none
  // (OLMo 2's, OLMo 3's, OLMoE's, GLM-4.5's and Ernie 4.5's, dense or not, modeling code): such a folder is
  // refused, and so is a reward model of it.
  const char* classifier;
};
// In the order `mtc` lists them when it refuses another.
inline constexpr ArchitectureName kArchitectureNames[] = {
    {Architecture::kLlama, "LlamaForCausalLM", "llama", "LlamaForSequenceClassification"},
    {Architecture::kQwen2, "Qwen2ForCausalLM", "qwen2", "Qwen2ForSequenceClassification"},
    {Architecture::kQwen3, "Qwen3ForCausalLM", "qwen3", "Qwen3ForSequenceClassification"},
    {Architecture::kQwen3Moe, "Qwen3MoeForCausalLM", "qwen3_moe", "Qwen3MoeForSequenceClassification"},
    {Architecture::kMistral, "MistralForCausalLM", "mistral", "MistralForSequenceClassification"},
    {Architecture::kMixtral, "MixtralForCausalLM", "mixtral", "MixtralForSequenceClassification"},
    {Architecture::kGptOss, "GptOssForCausalLM", "gpt_oss", "GptOssForSequenceClassification"},
    {Architecture::kGemma, "GemmaForCausalLM", "gemma", "GemmaForSequenceClassification"},
    {Architecture::kGemma2, "Gemma2ForCausalLM", "gemma2", "Gemma2ForSequenceClassification"},
    // (Gemma3ForSequenceClassification is the multimodal model's.)
    {Architecture::kGemma3, "Gemma3ForCausalLM", "gemma3_text", "Gemma3TextForSequenceClassification"},
    {Architecture::kPhi3, "Phi3ForCausalLM", "phi3", "Phi3ForSequenceClassification"},
    {Architecture::kGranite, "GraniteForCausalLM", "granite", "GraniteForSequenceClassification"},
    {Architecture::kSmolLM3, "SmolLM3ForCausalLM", "smollm3", "SmolLM3ForSequenceClassification"},
    {Architecture::kOlmo2, "Olmo2ForCausalLM", "olmo2", nullptr},
    {Architecture::kQwen2Moe, "Qwen2MoeForCausalLM", "qwen2_moe", "Qwen2MoeForSequenceClassification"},
    {Architecture::kOlmoe, "OlmoeForCausalLM", "olmoe", nullptr},
    {Architecture::kGraniteMoe, "GraniteMoeForCausalLM", "granitemoe", "GraniteMoeForSequenceClassification"},
    {Architecture::kGraniteHybrid, "GraniteMoeHybridForCausalLM", "granitemoehybrid",
     "GraniteMoeHybridForSequenceClassification"},
    {Architecture::kGlm4Moe, "Glm4MoeForCausalLM", "glm4_moe", nullptr},
    {Architecture::kDeepseekV2, "DeepseekV2ForCausalLM", "deepseek_v2", "DeepseekV2ForSequenceClassification"},
    {Architecture::kDeepseekV3, "DeepseekV3ForCausalLM", "deepseek_v3", "DeepseekV3ForSequenceClassification"},
    {Architecture::kErnie45, "Ernie4_5ForCausalLM", "ernie4_5", nullptr},
    {Architecture::kErnie45Moe, "Ernie4_5_MoeForCausalLM", "ernie4_5_moe", nullptr},
    {Architecture::kOlmo3, "Olmo3ForCausalLM", "olmo3", nullptr},
    {Architecture::kGlm4, "Glm4ForCausalLM", "glm4", "Glm4ForSequenceClassification"},
    {Architecture::kSeedOss, "SeedOssForCausalLM", "seed_oss", "SeedOssForSequenceClassification"},
    {Architecture::kExaone4, "Exaone4ForCausalLM", "exaone4", "Exaone4ForSequenceClassification"},
    {Architecture::kGpt2, "GPT2LMHeadModel", "gpt2", "GPT2ForSequenceClassification"},
};
static_assert(
    [] {
      for (size_t i = 0; i < std::size(kArchitectureNames); ++i)
        if (static_cast<size_t>(kArchitectureNames[i].id) != i) return false;
      return std::size(kArchitectureNames) == static_cast<size_t>(Architecture::kGpt2) + 1;
    }(),
    "kArchitectureNames has one row for each Architecture, in the enum's order");
// The entry of a causal LM's class name, or null where mtc reads no such architecture.
inline const ArchitectureName* findArchitecture(const std::string& causal) {
  for (const ArchitectureName& a : kArchitectureNames)
    if (causal == a.causal) return &a;
  return nullptr;
}
// The entry of a sequence classifier's class name, or null where mtc reads no such classifier.
inline const ArchitectureName* findClassifier(const std::string& classifier) {
  for (const ArchitectureName& a : kArchitectureNames)
    if (a.classifier && classifier == a.classifier) return &a;
  return nullptr;
}

// The dropout rates under `keys` (`fallback`, the config class's default, where absent) said in
// `notes` where any is above 0: mtc trains without dropout (GPT-2's, Granite's, Seed-OSS's)
// (compiler/HuggingFaceConfig.cpp).
void noteUnappliedDropout(ConfigReader& r, std::initializer_list<const char*> keys, double fallback,
                          std::vector<std::string>& notes);

// The rotary embedding's settings (compiler/HuggingFaceRotary.cpp). transformers 5's rotary
// settings, `rope_parameters` (an object), read: its reader, with transformers 4's rope_scaling
// refused beside it.
ConfigReader rotaryParameters(ConfigReader& r);

// The scaling an object of rotary settings names into `c`.
void readRopeScaling(ConfigReader& s, ModelConfig& c, bool phi3 = false);

// The rotary embedding's base (the architecture's default where none is given) and scaling, as
// transformers 4 (rope_theta, rope_scaling) or 5 (rope_parameters) writes them.
void readRotary(ConfigReader& r, Architecture architecture, ModelConfig& c);
// LongRoPE's original context and factor as transformers reads them for the architecture (after
// readRotary; the llama family's architectures).
void settleLongRope(ConfigReader& r, Architecture architecture, ModelConfig& c);
// A rotary base a layer type's settings fall back on: the config's top-level key's value (0: not
// given), that key's name, and the config class's default (0: none, the base must be given).
struct RotaryBase {
  double given;
  const char* key;
  double fallback;
};
// Rotary settings per layer type (`p`: transformers 5's rope_parameters with a full_attention and a
// sliding_attention object, as it writes Gemma 3's and OLMo 3's): the full-attention layers' base and
// scaling into `c`, the sliding layers' base into c.rope_local_theta, their embedding unscaled (a
// scaled one refused). Each entry's rope_theta, else its RotaryBase's; two given that differ refused.
// `model` names the architecture in messages. The caller finishes `p`.
void readRotaryPerLayerType(ConfigReader& p, ModelConfig& c, RotaryBase full, RotaryBase sliding, const char* model);
// OLMo 3's two rotary embeddings (Olmo3ForCausalLM): the full-attention layers' of rope_theta and
// rope_scaling, the sliding layers' of the same base unscaled; or per layer type.
void readOlmo3Rotary(ConfigReader& r, ModelConfig& c);
// The layers that slide where no layer_types names them: all but each pattern-th (Gemma 3's
// sliding_window_pattern, Gemma 2's 2, OLMo 3's 4); layer_types over it where the config has one, as
// transformers reads it; and the window, `sliding_window` (4096 where absent; null refused where a
// layer slides) (compiler/HuggingFaceConfig.cpp).
void readPatternSlidingWindows(ConfigReader& r, ModelConfig& c, int64_t pattern);

// Granite's multipliers (GraniteForCausalLM, GraniteMoeForCausalLM, GraniteMoeHybridForCausalLM)
// into `c`, its attention dropout said in `notes` as not applied; Granite 4.0's own keys
// (GraniteMoeHybridForCausalLM with attention in every layer: its MLP's width, its positions, its
// Mamba-2 layers and experts refused) (compiler/HuggingFaceGranite.cpp).
void readGraniteKeys(ConfigReader& r, ModelConfig& c, std::vector<std::string>& notes);
void readGraniteHybridKeys(ConfigReader& r, ModelConfig& c);

// DeepSeek's mixtures (compiler/HuggingFaceDeepseekMoe.cpp): GLM-4.5's experts (Glm4MoeForCausalLM:
// DeepSeek-V3's sigmoid router, ungated shared experts, first dense layers) into `c`; DeepSeek-V3's
// keys (DeepseekV3ForCausalLM: its latent attention and experts as GLM-4.5's); DeepSeek-V2's
// (DeepseekV2ForCausalLM: the latent attention, experts routed by a softmax); the count of the
// GLM-4.5, DeepSeek-V3 and Ernie 4.5 checkpoints' multi-token prediction layers, which transformers leaves unread.
void readGlm4MoeExperts(ConfigReader& r, ModelConfig& c);
void readDeepseekV3Keys(ConfigReader& r, ModelConfig& c);
void readDeepseekV2Keys(ConfigReader& r, ModelConfig& c);
// Ernie 4.5's mixture (Ernie4_5_MoeForCausalLM: ERNIE-4.5-21B-A3B, -300B-A47B): a softmax router
// choosing by probability + a frozen bias, ungated shared experts, MoE layers from
// moe_layer_start_index to moe_layer_end_index every moe_layer_interval-th; the original code's
// keys transformers leaves unread.
void readErnie45MoeExperts(ConfigReader& r, ModelConfig& c);
int64_t readPredictionLayers(ConfigReader& r);
// Such a config.json (`config_json`) as the plan keeps it and --export-hf writes it beside weights
// without the prediction layers: num_nextn_predict_layers 0.
std::string configWithoutPredictionLayers(const std::string& config_json);

// The config's quantization_config (compiler/HuggingFaceQuantization.cpp): none where absent;
// gpt-oss's MXFP4 experts; fine-grained FP8 on any architecture, said in `notes`. Another method
// is refused by name.
WeightQuantization readQuantization(ConfigReader& r, Architecture architecture, std::vector<std::string>& notes);

// Gemma3ForCausalLM's, Gemma2ForCausalLM's and GemmaForCausalLM's configs into the llama family's
// with Gemma's differences (compiler/HuggingFaceGemma.cpp); Gemma 1's legacy activation name said
// in `notes`.
ModelConfig readGemma3Config(ConfigReader& r);
ModelConfig readGemma2Config(ConfigReader& r);
ModelConfig readGemmaConfig(ConfigReader& r, std::vector<std::string>& notes);

// A GemmaForCausalLM config.json (`config_json`) as the plan keeps it and --export-hf writes it:
// its legacy hidden_act "gelu" renamed gelu_pytorch_tanh, the activation mtc computes, which every
// transformers version then computes too; "" where the config names it so already
// (compiler/HuggingFaceGemma.cpp).
std::string gemmaConfigToKeep(const std::string& config_json);

// Refuses a config whose model_type names another family than its architecture's `model_type`
// (transformers picks the config class by it, the model class by the architecture: a folder where
// they disagree loads as neither says); an absent one is the architecture's.
inline void requireModelType(ConfigReader& r, const json& config, const std::string& architecture,
                             const std::string& model_type) {
  if (config.contains("model_type") && (!config["model_type"].is_string() || config["model_type"] != model_type))
    throw r.error("'model_type' is " + jsonBrief(config["model_type"]) + " but the architecture " + architecture +
                  " is of model_type \"" + model_type + "\": the folder contradicts itself");
}

// A multimodal folder's class whose language model mtc reads and trains alone, as that model's
// causal LM (compiler/HuggingFaceMultimodal.cpp): the vision tower and its projector not read.
struct MultimodalArchitecture {
  const char* name;        // the folder's class, as config.json names it: "Gemma3ForConditionalGeneration"
  const char* model_type;  // its config's model_type, which must agree: "gemma3"
  Architecture language;   // its language model's (text_config's): kGemma3
  bool language_tied_default;  // the language model's config class's tie_word_embeddings where absent
  std::span<const char* const> vision_keys;  // the top-level keys of the vision tower and image tokens
};

// The entry of a multimodal class name, or null where mtc reads no such folder.
const MultimodalArchitecture* findMultimodal(const std::string& architecture);

// A multimodal config (`m`'s) as its language model's causal LM config.json: text_config with that
// architecture and the top level's token ids and dtype. Throws mt::Error naming a key it does not
// know, a language model of another kind, or a head tied at one level and not at the other.
std::string languageModelConfig(const MultimodalArchitecture& m, const json& config, const std::string& path);

}  // namespace mt::hf
