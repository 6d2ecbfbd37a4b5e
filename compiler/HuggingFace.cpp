// A Hugging Face folder read (mtc FOLDER): its config.json (compiler/HuggingFaceConfig.cpp) and
// where its checkpoint holds each of the model's parameters; the weights themselves are produced
// when mtc writes them (compiler/HuggingFaceWeights.cpp).
#include "compiler/HuggingFace.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/io/mapped_file.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/huggingface_names.h"

namespace mt {
namespace {

using nlohmann::json;

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
                "checkpoints are not read: convert them to safetensors; mtc --no-weights reads config.json alone, "
                "to size a plan)");
  const SafetensorsFile file(dir + "/" + single);
  for (const auto& entry : file.entries()) files[entry.first] = single;
  return files;
}

// Whether `name` is a tensor of one of the checkpoint's `count` multi-token prediction layers after
// the model's `layers` (GLM-4.5's "model.layers.46."), which transformers leaves unread.
bool inPredictionLayer(const std::string& name, const std::string& body, int64_t layers, int64_t count) {
  const std::string prefix = body + "layers.";
  if (count == 0 || !name.starts_with(prefix)) return false;
  const size_t dot = name.find('.', prefix.size());
  int64_t layer = -1;
  const char *first = name.data() + prefix.size(), *last = name.data() + (dot == std::string::npos ? name.size() : dot);
  const auto [end, ec] = std::from_chars(first, last, layer);
  return ec == std::errc() && end == last && layer >= layers && layer - layers < count;
}

// Each layer's parameters under "<layers>.N." beside its MLP's (layerMlpParameters): GPT-2's whole
// block; the llama family's attention and norms as the config has them.
std::vector<std::string> layerParameters(const ModelConfig& c) {
  std::vector<std::string> parts;
  if (c.family == ModelFamily::kGpt2) {
    for (const char* module : {"ln1", "ln2", "attn.q", "attn.k", "attn.v", "attn.proj", "mlp.fc", "mlp.proj"})
      for (const char* kind : {".weight", ".bias"}) parts.push_back(std::string(module) + kind);
    return parts;
  }
  parts = !c.latentAttention() ? std::vector<std::string>{"attn.q.weight", "attn.k.weight", "attn.v.weight"}
          : c.q_lora_rank      ? std::vector<std::string>{"attn.q_a.weight", "attn.q_a_norm.weight", "attn.q_b.weight"}
                               : std::vector<std::string>{"attn.q.weight"};
  if (c.latentAttention())  // DeepSeek's: keys and values from one latent
    for (const char* part : {"attn.kv_a.weight", "attn.kv_a_norm.weight", "attn.kv_b.weight"}) parts.push_back(part);
  parts.push_back("attn.o.weight");
  if (c.input_norms) parts.push_back("attn_norm.weight");
  if (c.sandwich_norms) {
    for (const char* part : {"attn_post_norm.weight", "mlp_post_norm.weight"}) parts.push_back(part);
    if (c.input_norms) parts.push_back("mlp_pre_norm.weight");
  } else {
    parts.push_back("mlp_norm.weight");
  }
  if (c.qkv_bias)
    for (const char* part : {"attn.q.bias", "attn.k.bias", "attn.v.bias"}) parts.push_back(part);
  if (c.o_bias) parts.push_back("attn.o.bias");
  if (c.qk_norm)
    for (const char* part : {"attn.q_norm.weight", "attn.k_norm.weight"}) parts.push_back(part);
  if (c.attention_sinks) parts.push_back("attn.sinks");
  return parts;
}

// Layer l's MLP parameters (the llama family's): its dense MLP, or its mixture's router and experts,
// the router's choice bias and the shared expert where the config has them.
std::vector<std::string> layerMlpParameters(const ModelConfig& c, int64_t l) {
  if (!c.isMoeLayer(l)) return {"mlp.gate.weight", "mlp.up.weight", "mlp.down.weight"};
  if (c.expert_form == ModelConfig::ExpertForm::kGptOss)
    return {"moe.router.weight", "moe.router.bias", "moe.gate_up.weight", "moe.gate_up.bias", "moe.down.weight",
            "moe.down.bias"};
  std::vector<std::string> parts{"moe.router.weight", "moe.gate.weight", "moe.up.weight", "moe.down.weight"};
  if (c.routerScoreBias()) parts.push_back("moe.router.score_bias");  // GLM-4.5's, Ernie 4.5's
  if (c.shared_expert_ffn) {  // Qwen2-MoE's, gated; GLM-4.5's
    for (const char* part : {"moe.shared.gate.weight", "moe.shared.up.weight", "moe.shared.down.weight"})
      parts.push_back(part);
    if (c.shared_expert_gated) parts.push_back("moe.shared_gate.weight");
  }
  return parts;
}

// Where the folder holds each of the model's parameters (HuggingFaceModel::weights): its tensor in
// the checkpoint's layout and the shard file(s) holding it; then what no parameter took.
class WeightPlacer {
 public:
  // `files`: the folder's tensors (weightFiles; none for --no-weights on config.json alone). `body`:
  // where the checkpoint keeps the llama family's "model." (a multimodal folder's language model
  // elsewhere), `gpt2_body` GPT-2's.
  WeightPlacer(HuggingFaceModel& model, const std::map<std::string, std::string>& files, std::string body,
               std::string gpt2_body, bool language_model)
      : model_(model), files_(files), body_(std::move(body)), gpt2_body_(std::move(gpt2_body)),
        language_model_(language_model), layout_(checkpointLayoutOf(model.architecture)) {}

  // Our parameter `ours` placed (its tensor, one per expert, or MXFP4 blocks and scales).
  void place(const std::string& ours) {
    HuggingFacePlace where = huggingFacePlace(ours, gpt2_body_, layout_);
    if (where.name.starts_with("model.")) where.name = body_ + where.name.substr(6);
    if (language_model_ && where.name == "lm_head.weight" && files_.count("language_model.lm_head.weight"))
      where.name = "language_model.lm_head.weight";  // an untied head in Google's layout
    HuggingFaceSource& source = model_.weights[ours];
    source.place = where;
    // gpt-oss's official checkpoints (quantization_config): an expert weight as MXFP4 blocks and
    // scales (compiler/Mxfp4.h); any other folder's `_blocks` are tensors without a place.
    if (model_.quantization.kind == WeightQuantization::Kind::kMxfp4Experts && !where.per_expert &&
        !files_.count(where.name) && files_.count(where.name + "_blocks")) {
      source.file = fileOf(where.name + "_blocks", ours);
      source.mxfp4_scales_file = fileOf(where.name + "_scales", ours);
      return;
    }
    if (!where.per_expert) {
      source.file = fileOf(where.name, ours);
      placeFp8Scales(where.name, ours);
      return;
    }
    for (int64_t e = 0; e < model_.config.experts; ++e) {
      source.expert_files.push_back(fileOf(expertTensorName(where, e), ours));
      placeFp8Scales(expertTensorName(where, e), ours);
    }
  }

  // Each tensor no parameter took refused by name, but those transformers leaves unread too: the
  // rotary frequencies, GPT-2's causal-mask buffers, a tied head's copy of the embedding, a
  // multimodal folder's vision tower and projector, the checkpoint's `prediction_layers`
  // multi-token prediction layers (Ernie 4.5's model.mtp_* weights).
  void refuseUnplaced(int64_t prediction_layers) const {
    const ModelConfig& c = model_.config;
    const bool gpt2 = c.family == ModelFamily::kGpt2, ernie_moe = layout_ == CheckpointLayout::kErnie45Moe;
    for (const auto& [name, file] : files_) {
      if (placed_.count(name)) continue;
      const bool derived = name.ends_with("rotary_emb.inv_freq") ||  // from rope_theta, not a weight
                           (gpt2 && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")));  // masks
      const bool tied_copy =
          c.tied && (name == "lm_head.weight" || (language_model_ && name == "language_model.lm_head.weight"));
      const bool vision = language_model_ && (name.starts_with("vision_tower.") ||
                                              name.starts_with("multi_modal_projector.") ||
                                              name.starts_with("model.vision_tower.") ||
                                              name.starts_with("model.multi_modal_projector."));
      const bool prediction = ernie_moe ? name.starts_with("model.mtp_")
                                        : inPredictionLayer(name, body_, c.layers, prediction_layers);
      if (!derived && !tied_copy && !vision && !prediction)
        throw Error(model_.dir + ": the weights hold '" + name + "', which the " + model_.architecture +
                    " layout mtc reads has no place for" + unplacedScalesHint(name));
    }
  }

 private:
  // The file holding tensor `name` (our `ours`), which the folder must have.
  std::string fileOf(const std::string& name, const std::string& ours) {
    if (model_.weightless && files_.empty()) return "";  // placed by name alone
    auto it = files_.find(name);
    if (it == files_.end()) throw Error(model_.dir + ": the weights have no '" + name + "' (the model's " + ours + ")");
    placed_.insert(name);
    return it->second;
  }

  // FP8: a weight's scales beside it where it is stored so (its `_scale_inv` or `_scale`).
  void placeFp8Scales(const std::string& name, const std::string& ours) {
    const std::string scales = name + model_.quantization.fp8ScaleSuffix();
    if (model_.quantization.fp8() && files_.count(scales)) model_.fp8_scale_files[name] = fileOf(scales, ours);
  }

  // Why an unplaced tensor named as FP8 scales has no place: the config names no such quantization.
  std::string unplacedScalesHint(const std::string& name) const {
    if (name.ends_with("_scale_inv") && model_.quantization.kind != WeightQuantization::Kind::kFp8Blocks)
      return " (an FP8 weight's scales: the config names no fine-grained FP8 quantization_config, quant_method "
             "\"fp8\")";
    if (name.ends_with("weight_scale") && model_.quantization.kind != WeightQuantization::Kind::kFp8Compressed)
      return " (an FP8 weight's scales: the config names no compressed-tensors quantization_config, quant_method "
             "\"compressed-tensors\")";
    return "";
  }

  HuggingFaceModel& model_;
  const std::map<std::string, std::string>& files_;
  const std::string body_, gpt2_body_;
  const bool language_model_;
  const CheckpointLayout layout_;
  std::set<std::string> placed_;  // the tensors a parameter took
};

// Every parameter of the model placed: the embedding and final norm, the score or LM head, then
// each layer's.
void placeParameters(const ModelConfig& c, WeightPlacer& placer) {
  const bool gpt2 = c.family == ModelFamily::kGpt2;
  for (const char* name : gpt2 ? std::vector<const char*>{"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"}
                               : std::vector<const char*>{"embed.weight", "norm.weight"})
    placer.place(name);
  // A reward model's score head, or the LM head where it is not the embedding.
  if (c.score_head == ModelConfig::ScoreHead::kPretrained)
    placer.place("score.weight");
  else if (!c.tied)
    placer.place("lm_head.weight");
  const std::vector<std::string> layer_parts = layerParameters(c);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string layer = (gpt2 ? "blocks." : "layers.") + std::to_string(l) + ".";
    for (const std::string& part : layer_parts) placer.place(layer + part);
    if (gpt2) continue;
    for (const std::string& part : layerMlpParameters(c, l)) placer.place(layer + part);
  }
}

// The folder's tensors (weightFiles), or none where --no-weights reads a folder without its weights
// (config.json, and the index where a download of the JSON files fetched it too): each tensor's
// place from the config then, its name checked against the index where there is one; no shard
// opened. `weightless` says which.
std::map<std::string, std::string> folderTensors(const std::string& dir, bool config_alone, bool* weightless) {
  struct stat st {};
  const bool indexed = stat((dir + "/model.safetensors.index.json").c_str(), &st) == 0;
  const bool single = !indexed && stat((dir + "/model.safetensors").c_str(), &st) == 0;
  std::map<std::string, std::string> files =
      config_alone && !indexed && !single ? std::map<std::string, std::string>{} : weightFiles(dir);
  *weightless = config_alone && !single && std::any_of(files.begin(), files.end(), [&](const auto& entry) {
                  return stat((dir + "/" + entry.second).c_str(), &st) != 0;
                });
  *weightless |= config_alone && files.empty();
  return files;
}

}  // namespace

bool isHuggingFaceFolder(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && stat((path + "/config.json").c_str(), &st) == 0;
}

HuggingFaceModel readHuggingFaceFolder(const std::string& dir, bool config_alone) {
  HuggingFaceModel model;
  model.dir = dir;
  const std::string path = dir + "/config.json";
  model.config_json = readWholeFile(path, "Hugging Face config", "");
  HuggingFaceConfig config = readHuggingFaceConfig(model.config_json, path);
  model.architecture = config.architecture;
  model.config = config.config;
  model.notes = config.notes;
  model.quantization = config.quantization;
  const bool language_model = !config.multimodal.empty();  // a multimodal folder's, read alone
  if (!config.config_to_keep.empty()) model.config_json = config.config_to_keep;
  model.multimodal = config.multimodal;
  const std::map<std::string, std::string> files = folderTensors(dir, config_alone, &model.weightless);
  // A multimodal folder's language model: "model." of its causal LM's names is
  // "language_model.model." in the checkpoints Google and Mistral published, "model.language_model."
  // where transformers 4.52 and 5 saved the in-memory names.
  const std::string body = !language_model                                      ? "model."
                           : files.count("model.language_model.embed_tokens.weight") ? "model.language_model."
                                                                                  : "language_model.model.";
  // transformers saves GPT2LMHeadModel's body under "transformer."; the original checkpoints
  // (GPT2Model's) have no prefix.
  const std::string gpt2_body = files.count("transformer.wte.weight") ? "transformer." : "";
  WeightPlacer placer(model, files, body, gpt2_body, language_model);
  placeParameters(model.config, placer);
  placer.refuseUnplaced(config.prediction_layers);
  return model;
}

}  // namespace mt
