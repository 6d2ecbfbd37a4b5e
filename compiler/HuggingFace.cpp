#include "compiler/HuggingFace.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/elementwise/elementwise.h"
#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/plan/huggingface_names.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/io/mapped_file.h"
#include "runtime/io/safetensors.h"

namespace mt {
namespace {

using nlohmann::json;

// Keys of config.json that do not change the model's arithmetic (token ids, bookkeeping).
const std::set<std::string> kInertKeys = {
    "architectures", "model_type", "_name_or_path", "transformers_version", "torch_dtype", "use_cache",
    "initializer_range", "bos_token_id", "eos_token_id", "pad_token_id"};

// config.json, read key by key: every key must be taken or known inert.
class ConfigReader {
 public:
  ConfigReader(const json& config, const std::string& path) : config_(config), path_(path) {}

  Error error(const std::string& why) const { return Error(path_ + ": " + why); }

  bool has(const std::string& key) const { return config_.contains(key) && !config_[key].is_null(); }

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
  // A probability such as a dropout rate: in [0, 1].
  double probability(const std::string& key) {
    taken_.insert(key);
    if (!has(key)) return 0.0;
    if (!config_[key].is_number() || !(config_[key].get<double>() >= 0.0 && config_[key].get<double>() <= 1.0))
      throw error("'" + key + "' is not a number between 0 and 1");
    return config_[key].get<double>();
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
                  ": such a setting may change the model, so it is not ignored (models/ and compiler/HuggingFace.cpp "
                  "say what is read)");
  }

 private:
  const json& config_;
  std::string path_;
  std::set<std::string> taken_;
};

// rope_scaling into `c` (transformers' rope types linear, llama3 — Llama 3.1 and 3.2 — and yarn;
// default or absent: none). Another type is refused by name: it would turn other angles.
void readRopeScaling(ConfigReader& r, ModelConfig& c) {
  if (!r.has("rope_scaling")) return r.take("rope_scaling");
  if (!r.value("rope_scaling").is_object()) throw r.error("'rope_scaling' is not an object");
  ConfigReader s = r.nested("rope_scaling");
  // transformers names it rope_type (older configs: type; some carry both).
  const std::string type = s.has("rope_type") ? s.text("rope_type", "") : s.text("type", "default");
  s.take("type");
  RopeScaling& out = c.rope_scaling;
  const auto factor = [&] {
    if (!s.has("factor")) throw s.error("no 'factor'");
    return s.number("factor", 1.0);
  };
  if (type == "default") {
  } else if (type == "linear") {
    out.kind = RopeScaling::Kind::kLinear, out.factor = factor();
  } else if (type == "llama3") {
    out.kind = RopeScaling::Kind::kLlama3, out.factor = factor();
    for (const char* key : {"low_freq_factor", "high_freq_factor"})  // transformers needs them too
      if (!s.has(key)) throw s.error(std::string("no '") + key + "'");
    out.low_freq_factor = s.number("low_freq_factor", 0.0);
    out.high_freq_factor = s.number("high_freq_factor", 0.0);
    out.original_context = s.integer("original_max_position_embeddings");
    if (!(out.high_freq_factor > out.low_freq_factor))
      throw s.error("'high_freq_factor' must be above 'low_freq_factor'");
  } else if (type == "yarn") {
    out.kind = RopeScaling::Kind::kYarn, out.factor = factor(), out.context = c.context;
    out.original_context = s.integer("original_max_position_embeddings", 0);
    out.beta_fast = s.number("beta_fast", 32.0);
    out.beta_slow = s.number("beta_slow", 1.0);
    out.truncate = s.boolean("truncate", true);
    out.attention_factor = s.number("attention_factor", 0.0);
    out.mscale = s.fraction("mscale", 0.0);
    out.mscale_all_dim = s.fraction("mscale_all_dim", 0.0);
    if (out.original_context > c.context)
      throw s.error("'original_max_position_embeddings' is above the config's max_position_embeddings");
  } else {
    throw s.error("rope type '" + type + "' is not supported (linear, llama3 and yarn are): its angles differ");
  }
  s.finish();
}

// A mixture of experts' settings (Qwen3MoeForCausalLM, MixtralForCausalLM) into `c`.
void readExperts(ConfigReader& r, const std::string& architecture, ModelConfig& c) {
  if (architecture == "MixtralForCausalLM") {
    c.experts = r.integer("num_local_experts");
    c.expert_ffn = c.ffn;  // each expert is as wide as intermediate_size; no dense layers
    c.normalize_topk = true;
    if (const json& noise = r.value("router_jitter_noise"); !noise.is_null() && !(noise.is_number() && noise == 0))
      throw r.error("'router_jitter_noise' is not 0: random noise on the router's logits is not supported");
  } else if (architecture == "Qwen3MoeForCausalLM") {
    c.experts = r.integer("num_experts");
    c.expert_ffn = r.integer("moe_intermediate_size");
    c.normalize_topk = r.boolean("norm_topk_prob", false);
    c.moe_every = r.integer("decoder_sparse_step", 1);
    if (const json& dense = r.value("mlp_only_layers"); !dense.is_null()) {
      if (!dense.is_array()) throw r.error("'mlp_only_layers' is not a list of layer indices");
      for (const json& l : dense) {
        if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= c.layers)
          throw r.error("'mlp_only_layers' holds " + jsonBrief(l) + ", not a layer index below " +
                        std::to_string(c.layers));
        c.dense_layers.push_back(l.get<int64_t>());
      }
    }
  } else {
    return;
  }
  c.experts_per_token = r.integer("num_experts_per_tok");
  // Hugging Face adds the router's load-balancing loss (times its coefficient, 0.001 by default)
  // only where output_router_logits is true; the loss is logged either way.
  const double coef = r.fraction("router_aux_loss_coef", 0.001);
  if (r.boolean("output_router_logits", false)) c.router_aux_loss_coef = coef;
}

ModelConfig readConfig(ConfigReader& r, const std::string& architecture, int64_t& sliding_window) {
  ModelConfig c;
  c.family = ModelFamily::kLlama;
  c.width = r.integer("hidden_size");
  c.ffn = r.integer("intermediate_size");
  c.layers = r.integer("num_hidden_layers");
  c.heads = r.integer("num_attention_heads");
  c.kv_heads = r.integer("num_key_value_heads", c.heads);
  c.vocab = r.integer("vocab_size");
  c.context = r.integer("max_position_embeddings");
  c.norm_eps = r.number("rms_norm_eps", 1e-6);
  c.rope_theta = r.number("rope_theta", 10000.0);
  c.tied = r.boolean("tie_word_embeddings", false);
  c.qkv_bias = architecture == "Qwen2ForCausalLM";
  c.qk_norm = architecture == "Qwen3ForCausalLM" || architecture == "Qwen3MoeForCausalLM";
  // Heads of their own width (Qwen3's 128, Llama's head_dim): q and the output projection are
  // heads x head_dim wide, not hidden_size.
  if (r.has("head_dim") && r.integer("head_dim") * c.heads != c.width) c.head_dim = r.integer("head_dim");
  r.take("head_dim");
  if (r.text("hidden_act", "silu") != "silu")
    throw r.error("'hidden_act' is not silu: the llama family's MLP is SwiGLU");
  readRopeScaling(r, c);
  // Llama's and Qwen3's attention_bias: biases on q, k, v and the output projection. Qwen2 has the
  // first three whatever its config says (transformers' Qwen2Attention), so none there.
  if (architecture == "Qwen2ForCausalLM")
    r.require("attention_bias", false, "Qwen2's output projection has no bias in transformers");
  else if (r.boolean("attention_bias", false))
    c.qkv_bias = c.o_bias = true;
  r.require("mlp_bias", false, "MLP biases have no place in the llama family");
  r.require("attention_dropout", 0.0, "dropout is not supported; training is deterministic");
  r.require("pretraining_tp", 1, "tensor-parallel slicing of the projections is not supported");
  readExperts(r, architecture, c);
  sliding_window = 0;
  if (architecture == "Qwen2ForCausalLM" || architecture == "Qwen3ForCausalLM" || architecture == "Qwen3MoeForCausalLM") {
    // Qwen2 names a window it uses only with use_sliding_window.
    if (r.boolean("use_sliding_window", false))
      throw r.error("'use_sliding_window' is true: sliding-window attention is not supported");
    r.take("sliding_window");
    r.take("max_window_layers");
    // Newer transformers list each layer's attention: all full without a sliding window.
    if (const json& types = r.value("layer_types"); !types.is_null()) {
      if (!types.is_array() || !std::all_of(types.begin(), types.end(), [](const json& t) { return t == "full_attention"; }))
        throw r.error("'layer_types' names layers other than full_attention: sliding-window attention is not supported");
    }
  } else if (architecture == "MistralForCausalLM" || architecture == "MixtralForCausalLM") {
    sliding_window = r.has("sliding_window") ? r.integer("sliding_window") : 0;
    r.take("sliding_window");
  }
  return c;
}

// GPT2LMHeadModel's config.json into the gpt2 family's (pre-norm LayerNorm blocks, learned
// positions, GELU's tanh form, biases everywhere). Its dropout is not applied: `notes` says so.
ModelConfig readGpt2Config(ConfigReader& r, std::vector<std::string>& notes) {
  ModelConfig c;
  c.family = ModelFamily::kGpt2;
  c.width = r.integer("n_embd");
  c.layers = r.integer("n_layer");
  c.heads = c.kv_heads = r.integer("n_head");
  c.vocab = r.integer("vocab_size");
  c.context = r.integer("n_positions");
  if (r.has("n_ctx") && r.integer("n_ctx") != c.context) throw r.error("'n_ctx' is not 'n_positions'");
  r.take("n_ctx");
  c.ffn = r.integer("n_inner", 4 * c.width);
  c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
  c.tied = r.boolean("tie_word_embeddings", true);
  c.qkv_bias = false;  // a llama option: the gpt2 family always has its biases
  const std::string act = r.text("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    throw r.error("'activation_function' is " + act + ": the gpt2 family's MLP uses GELU's tanh form (gelu_new)");
  r.require("scale_attn_weights", true, "attention without the 1/sqrt(head size) scale is not supported");
  r.require("scale_attn_by_inverse_layer_idx", false, "attention scaled by the layer index is not supported");
  r.require("add_cross_attention", false, "cross-attention (an encoder-decoder) is not supported");
  r.take("reorder_and_upcast_attn");  // an fp16 safeguard: the scores are f32 here anyway
  // GPT2DoubleHeadsModel's multiple-choice head and generation settings: not this model's arithmetic.
  for (const char* key : {"summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
                          "summary_first_dropout", "task_specific_params", "n_special"})
    r.take(key);
  std::string dropout;
  for (const char* key : {"embd_pdrop", "attn_pdrop", "resid_pdrop"})
    if (const double p = r.probability(key); p > 0)
      dropout += fmt::format("{}{} {}", dropout.empty() ? "" : ", ", key, p);
  if (!dropout.empty())
    notes.push_back("config.json asks for dropout (" + dropout + "); mtc trains without dropout (not supported yet)");
  return c;
}

// The folder's tensors: name -> file, from the index of a sharded checkpoint or the one file.
std::map<std::string, std::string> weightFiles(const std::string& dir) {
  std::map<std::string, std::string> files;
  struct stat st;
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (stat(index_path.c_str(), &st) == 0) {
    const json index = parseJsonInput(readWholeFile(index_path, "weight index", ""), "weight index " + index_path);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw Error(index_path + " is not a weight index (no weight_map object)");
    for (const auto& item : index["weight_map"].items()) {
      if (!item.value().is_string()) throw Error(index_path + ": the file of '" + item.key() + "' is not a string");
      const std::string file = item.value().get<std::string>();
      if (file.empty() || file.find('/') != std::string::npos || file.find("..") != std::string::npos)
        throw Error(index_path + ": '" + file + "' is not a file name in the folder");
      files[item.key()] = file;
    }
    return files;
  }
  const std::string single = "model.safetensors";
  if (stat((dir + "/" + single).c_str(), &st) != 0)
    throw Error(dir + " holds neither model.safetensors nor model.safetensors.index.json (PyTorch .bin "
                "checkpoints are not read: convert them to safetensors)");
  const SafetensorsFile file(dir + "/" + single);
  for (const auto& entry : file.entries()) files[entry.first] = single;
  return files;
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    value = mantissa ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits |= sign;
  std::memcpy(&value, &bits, 4);
  return value;
}

// `n` values of `entry` (F32, BF16 or F16) as f32.
void widenValues(const SafetensorsEntry& entry, int64_t n, float* out) {
  if (entry.dtype == "F32") {
    std::memcpy(out, entry.data, 4 * static_cast<size_t>(n));
  } else if (entry.dtype == "BF16") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits;
      std::memcpy(&bits, entry.data + 2 * i, 2);
      out[i] = bf16Value(bits);
    }
  } else {  // F16, checked by the caller
    for (int64_t i = 0; i < n; ++i) {
      uint16_t half;
      std::memcpy(&half, entry.data + 2 * i, 2);
      out[i] = halfToFloat(half);
    }
  }
}

// `n` values of `entry` widened to f32; throws mt::Error naming `where` (the folder and tensor)
// and the first element that is NaN or infinite: such a checkpoint would train to NaN.
void widen(const SafetensorsEntry& entry, int64_t n, float* out, const std::string& where) {
  widenValues(entry, n, out);
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(out[i]))
      throw Error(where + " holds " + fmt::format("{}", out[i]) + " at element " + std::to_string(i) +
                  " (of its values in the file's order): weights that are not finite would train to NaN; use a "
                  "checkpoint without them");
}

}  // namespace

bool isHuggingFaceFolder(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && stat((path + "/config.json").c_str(), &st) == 0;
}

HuggingFaceModel readHuggingFaceFolder(const std::string& dir) {
  HuggingFaceModel model;
  model.dir = dir;
  const std::string path = dir + "/config.json";
  model.config_json = readWholeFile(path, "Hugging Face config", "");
  const json config = parseJsonInput(model.config_json, "Hugging Face config " + path);
  if (!config.is_object()) throw Error(path + " is not a JSON object");
  ConfigReader r(config, path);
  if (!config.contains("architectures") || !config["architectures"].is_array() || config["architectures"].size() != 1 ||
      !config["architectures"][0].is_string())
    throw r.error("'architectures' does not name one architecture");
  model.architecture = config["architectures"][0].get<std::string>();
  // model_type says the same family as the architecture (transformers picks the config class by
  // it, the model class by the architecture: a folder where they disagree loads as neither says).
  static const std::map<std::string, std::string> kModelType = {
      {"LlamaForCausalLM", "llama"},       {"Qwen2ForCausalLM", "qwen2"},     {"Qwen3ForCausalLM", "qwen3"},
      {"Qwen3MoeForCausalLM", "qwen3_moe"}, {"MistralForCausalLM", "mistral"}, {"MixtralForCausalLM", "mixtral"},
      {"GPT2LMHeadModel", "gpt2"}};
  if (!kModelType.count(model.architecture)) {
    std::string supported;
    for (const auto& [architecture, type] : kModelType) supported += (supported.empty() ? "" : ", ") + architecture;
    throw r.error("architecture " + model.architecture + " is not supported (supported: " + supported + ")");
  }
  if (config.contains("model_type") &&
      (!config["model_type"].is_string() || config["model_type"] != kModelType.at(model.architecture)))
    throw r.error("'model_type' is " + jsonBrief(config["model_type"]) + " but the architecture " + model.architecture +
                  " is of model_type \"" + kModelType.at(model.architecture) + "\": the folder contradicts itself");
  const bool gpt2 = model.architecture == "GPT2LMHeadModel";
  model.config = gpt2 ? readGpt2Config(r, model.notes) : readConfig(r, model.architecture, model.sliding_window);
  r.finish();

  const std::map<std::string, std::string> files = weightFiles(dir);
  // transformers saves GPT2LMHeadModel's body under "transformer."; the original checkpoints
  // (GPT2Model's) have no prefix.
  const std::string gpt2_body = files.count("transformer.wte.weight") ? "transformer." : "";
  std::set<std::string> placed;
  const ExpertLayout expert_layout = expertLayoutOf(model.architecture);
  auto fileOf = [&](const std::string& name, const std::string& ours) {
    auto it = files.find(name);
    if (it == files.end()) throw Error(dir + ": the weights have no '" + name + "' (the model's " + ours + ")");
    placed.insert(name);
    return it->second;
  };
  auto place = [&](const std::string& ours) {
    const HuggingFacePlace where = huggingFacePlace(ours, gpt2_body, expert_layout);
    HuggingFaceSource& source = model.weights[ours];
    source.place = where;
    if (!where.per_expert) {
      source.file = fileOf(where.name, ours);
      return;
    }
    for (int64_t e = 0; e < model.config.experts; ++e)
      source.expert_files.push_back(fileOf(expertTensorName(where, e), ours));
  };
  const ModelConfig& c = model.config;
  std::vector<std::string> layer_parts;  // each layer's parameters, under "<layers>.N."
  if (gpt2) {
    for (const char* name : {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"}) place(name);
    for (const char* module : {"ln1", "ln2", "attn.q", "attn.k", "attn.v", "attn.proj", "mlp.fc", "mlp.proj"})
      for (const char* kind : {".weight", ".bias"}) layer_parts.push_back(std::string(module) + kind);
  } else {
    for (const char* name : {"embed.weight", "norm.weight"}) place(name);
    layer_parts = {"attn_norm.weight", "mlp_norm.weight", "attn.q.weight", "attn.k.weight", "attn.v.weight",
                   "attn.o.weight"};
    if (c.qkv_bias)
      for (const char* part : {"attn.q.bias", "attn.k.bias", "attn.v.bias"}) layer_parts.push_back(part);
    if (c.o_bias) layer_parts.push_back("attn.o.bias");
    if (c.qk_norm)
      for (const char* part : {"attn.q_norm.weight", "attn.k_norm.weight"}) layer_parts.push_back(part);
  }
  if (!c.tied) place("lm_head.weight");
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string layer = (gpt2 ? "blocks." : "layers.") + std::to_string(l) + ".";
    for (const std::string& part : layer_parts) place(layer + part);
    if (gpt2) continue;
    const auto mlp = c.isMoeLayer(l) ? std::vector<std::string>{"moe.router.weight", "moe.gate.weight", "moe.up.weight",
                                                                "moe.down.weight"}
                                     : std::vector<std::string>{"mlp.gate.weight", "mlp.up.weight", "mlp.down.weight"};
    for (const std::string& part : mlp) place(layer + part);
  }
  for (const auto& [name, file] : files) {
    if (placed.count(name)) continue;
    const bool derived = name.ends_with("rotary_emb.inv_freq") ||  // from rope_theta, not a weight
                         (gpt2 && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")));  // masks
    const bool tied_copy = c.tied && name == "lm_head.weight";  // the embedding again
    if (!derived && !tied_copy)
      throw Error(dir + ": the weights hold '" + name + "', which the " + model.architecture +
                  " layout mtc reads has no place for");
  }
  return model;
}

namespace {

// The keys of a llama-family config.json every architecture has, in transformers' order.
nlohmann::ordered_json llamaConfig(const ModelConfig& c, const char* architecture, const char* model_type,
                                   int64_t intermediate) {
  return {{"architectures", {architecture}},
          {"model_type", model_type},
          {"hidden_size", c.width},
          {"intermediate_size", intermediate},
          {"num_hidden_layers", c.layers},
          {"num_attention_heads", c.heads},
          {"num_key_value_heads", c.kv_heads},
          {"vocab_size", c.vocab},
          {"max_position_embeddings", c.context},
          {"rms_norm_eps", c.norm_eps},
          {"rope_theta", c.rope_theta},
          {"tie_word_embeddings", c.tied},
          {"hidden_act", "silu"}};
}

// A mixture of experts' config.json: Qwen3MoeForCausalLM (with q/k norms), MixtralForCausalLM
// (without, every layer's experts as wide as intermediate_size); "" for a shape neither has.
std::string expertsConfig(const ModelConfig& c) {
  const bool qwen = c.qk_norm;
  if (c.qkv_bias || (!qwen && (c.moe_every != 1 || !c.dense_layers.empty() || !c.normalize_topk))) return "";
  nlohmann::ordered_json config = qwen ? llamaConfig(c, "Qwen3MoeForCausalLM", "qwen3_moe", c.ffn)
                                       : llamaConfig(c, "MixtralForCausalLM", "mixtral", c.expert_ffn);
  config["num_experts_per_tok"] = c.experts_per_token;
  config["output_router_logits"] = c.router_aux_loss_coef > 0;
  if (c.router_aux_loss_coef > 0) config["router_aux_loss_coef"] = c.router_aux_loss_coef;
  if (c.head_dim) config["head_dim"] = c.head_dim;
  if (qwen) {
    config["num_experts"] = c.experts;
    config["moe_intermediate_size"] = c.expert_ffn;
    config["norm_topk_prob"] = c.normalize_topk;
    config["decoder_sparse_step"] = c.moe_every;
    config["mlp_only_layers"] = c.dense_layers;
    config["use_sliding_window"] = false;
    config["attention_bias"] = false;
  } else {
    config["num_local_experts"] = c.experts;
  }
  return config.dump(2) + "\n";
}

}  // namespace

std::string huggingFaceConfig(const ModelConfig& c) {
  if (c.family == ModelFamily::kGpt2) {
    nlohmann::ordered_json config = {
        {"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"n_embd", c.width}, {"n_layer", c.layers},
        {"n_head", c.heads}, {"n_inner", c.ffn}, {"n_positions", c.context}, {"vocab_size", c.vocab},
        {"layer_norm_epsilon", c.norm_eps}, {"activation_function", "gelu_new"}, {"tie_word_embeddings", c.tied},
        // Trained without dropout: the config says so, and transformers then evaluates as trained.
        {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"resid_pdrop", 0.0}};
    return config.dump(2) + "\n";
  }
  if (c.family != ModelFamily::kLlama) return "";
  if (c.experts > 0) return expertsConfig(c);
  // Qwen2: q/k/v biases alone; Llama and Qwen3 bias all four projections or none (attention_bias).
  const bool qwen2 = !c.qk_norm && c.qkv_bias && !c.o_bias;
  if (!qwen2 && c.qkv_bias != c.o_bias) return "";
  nlohmann::ordered_json config =
      llamaConfig(c, c.qk_norm ? "Qwen3ForCausalLM" : qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM",
                  c.qk_norm ? "qwen3" : qwen2 ? "qwen2" : "llama", c.ffn);
  if (c.head_dim) config["head_dim"] = c.head_dim;
  if (qwen2 || c.qk_norm) config["use_sliding_window"] = false;
  if (!qwen2) config["attention_bias"] = c.o_bias;
  return config.dump(2) + "\n";
}

void writeHuggingFaceWeights(const HuggingFaceModel& model, const plan::Plan& plan, const std::string& path) {
  std::map<std::string, std::unique_ptr<SafetensorsFile>> open;  // shards, mapped as they are first needed
  auto entryOf = [&](const std::string& file, const std::string& name) -> const SafetensorsEntry& {
    auto& shard = open[file];
    if (!shard) shard = std::make_unique<SafetensorsFile>(model.dir + "/" + file);
    auto it = shard->entries().find(name);
    if (it == shard->entries().end())
      throw Error(model.dir + "/" + file + " has no '" + name + "', which its index places there");
    shard->verify(name);
    return it->second;
  };
  auto requireShape = [&](const SafetensorsEntry& entry, const std::string& name, const std::vector<int64_t>& expected,
                          const std::string& ours) {
    if (entry.shape != expected || (entry.dtype != "F32" && entry.dtype != "BF16" && entry.dtype != "F16"))
      throw Error(model.dir + ": '" + name + "' is " + entry.dtype + " [" + shapeText(entry.shape) +
                  "] but the model's " + ours + " needs [" + shapeText(expected) + "] in F32, BF16 or F16");
  };
  std::vector<SafetensorsTensor> tensors;
  for (const auto& t : plan.host_tensors()) {
    if (t.role() != plan::ROLE_PARAM) continue;
    const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    const int64_t n = checkedNumel(t.shape(), t.name());
    const HuggingFaceSource& source = model.weights.at(t.name());
    const HuggingFacePlace& place = source.place;
    if (place.per_expert) {
      // Stacked from one tensor per expert, each ours without its first axis.
      const std::vector<int64_t> expert_shape(shape.begin() + 1, shape.end());
      const int64_t expert_numel = n / std::max<int64_t>(shape[0], 1);
      std::vector<std::pair<const SafetensorsEntry*, std::string>> experts;
      for (int64_t e = 0; e < static_cast<int64_t>(source.expert_files.size()); ++e) {
        const std::string name = expertTensorName(place, e);
        const SafetensorsEntry& entry = entryOf(source.expert_files[e], name);
        requireShape(entry, name, expert_shape, t.name());
        experts.push_back({&entry, model.dir + "/" + source.expert_files[e] + ": '" + name + "'"});
      }
      tensors.push_back({t.name(), "F32", shape, nullptr, 4 * n, [experts, expert_numel](void* out) {
                           float* values = static_cast<float*>(out);
                           for (size_t e = 0; e < experts.size(); ++e)
                             widen(*experts[e].first, expert_numel, values + e * expert_numel, experts[e].second);
                         }});
      continue;
    }
    const SafetensorsEntry& entry = entryOf(source.file, place.name);
    // The source's shape: ours, transposed (a matrix in Conv1D's [in, out]), its output axis
    // `parts` times as long.
    std::vector<int64_t> expected = shape;
    if (place.transposed && expected.size() == 2) std::swap(expected[0], expected[1]);
    if (!expected.empty()) expected.back() *= place.parts;
    requireShape(entry, place.name, expected, t.name());
    const std::string where = model.dir + "/" + source.file + ": '" + place.name + "'";
    tensors.push_back({t.name(), "F32", shape, nullptr, 4 * n, [&entry, &place, shape, n, where](void* out) {
                         float* values = static_cast<float*>(out);
                         if (place.parts == 1 && !place.transposed) return widen(entry, n, values, where);
                         std::vector<float> whole(static_cast<size_t>(n * place.parts));
                         widen(entry, n * place.parts, whole.data(), where);
                         const int64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1;
                         const int64_t offset = place.part * rows, stride = rows * place.parts;
                         // ours[o][i] = theirs[i][part * rows + o] (a bias: ours[o] = theirs[part * rows + o])
                         for (int64_t o = 0; o < rows; ++o)
                           for (int64_t i = 0; i < cols; ++i) values[o * cols + i] = whole[i * stride + offset + o];
                       }});
  }
  writeSafetensors(path, tensors,
                   {{"format", "pt"},
                    {"producer", "megatrain mtc (Hugging Face " + model.architecture + ")"},
                    {"source", model.dir},
                    {kPlanFingerprintKey, planFingerprint(plan)}});
}

}  // namespace mt
