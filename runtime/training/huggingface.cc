#include "runtime/training/huggingface.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/elementwise/elementwise.h"
#include "runtime/data/hf_tokenizer.h"
#include "runtime/io/atomic_folder.h"
#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/io/mapped_file.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/lora_merge.h"

namespace mt {
namespace {

// Shards of at most this many bytes, as transformers' save_pretrained writes by default.
constexpr int64_t kShardBytes = int64_t{5} << 30;

// The architecture a Hugging Face config names first, or "".
std::string architectureOf(const nlohmann::ordered_json& config) {
  const bool named = config.is_object() && config.contains("architectures") && config["architectures"].is_array() &&
                     !config["architectures"].empty() && config["architectures"][0].is_string();
  return named ? config["architectures"][0].get<std::string>() : "";
}

// The pad token the tokenizer of `folder` names in its tokenizer_config.json ("pad_token": the
// token's text, or an object with its "content"), as an id of `tokenizer`; none where it names
// none, or one the tokenizer lacks.
std::optional<uint32_t> namedPadToken(const std::string& folder, const HfTokenizer& tokenizer) {
  const std::string path = folder + "/tokenizer_config.json";
  if (access(path.c_str(), R_OK) != 0) return std::nullopt;
  const nlohmann::json config = parseJsonInput(readWholeFile(path, "tokenizer config", ""), path);
  if (!config.is_object() || !config.contains("pad_token")) return std::nullopt;
  const nlohmann::json& pad = config["pad_token"];
  const nlohmann::json& content = pad.is_object() && pad.contains("content") ? pad["content"] : pad;
  return content.is_string() ? tokenizer.tokenId(content.get<std::string>()) : std::nullopt;
}

// A reward model's pad_token_id, and what it means (HuggingFaceExport::padding). transformers
// reads each sequence's score at its last token that is not pad_token_id; mtrun read it at the
// token before the end-of-text token mttok ends each example with (the tokenizer's, unless mttok
// --eot named another). The tokenizer's own pad token comes first, so that its padding and the
// config agree; where it names none, the end-of-text token. Without the model's tokenizer (a
// built-in model, its folder gone) the config's own stands. Read before a run as well as at its
// end, so that a tokenizer it cannot read is said before any step.
struct RewardPadding {
  std::optional<int64_t> id;  // to set; none: the config's stands
  std::string said;
};
RewardPadding rewardPadding(const plan::Plan& plan, const nlohmann::ordered_json& config) {
  const std::string& source = plan.model().hf_source();
  const std::string path = source + "/tokenizer.json";
  if (!source.empty() && access(path.c_str(), R_OK) == 0) {
    const HfTokenizer tokenizer(path);
    const std::optional<uint32_t> end = tokenizer.endOfText(), pad = namedPadToken(source, tokenizer);
    const std::string end_text = end ? fmt::format("the end-of-text token {}", *end) : "the end-of-text token";
    if (pad && pad == end)
      return {*pad, fmt::format("pad_token_id {}, the tokenizer's pad token and {} mttok ends examples with: "
                                "transformers reads each sequence's reward at its last token before the padding, "
                                "as mtrun does (after mttok --eot, set it to that token)", *pad, end_text)};
    if (pad)
      return {*pad, fmt::format("pad_token_id {}, the tokenizer's pad token: transformers reads each sequence's reward "
                                "at its last token before the padding; mtrun read it at the token before {} that "
                                "mttok ends examples with, so score texts without that token", *pad, end_text)};
    if (end)
      return {*end, fmt::format("pad_token_id {}, {} mttok ends examples with (the tokenizer names no pad token: pad "
                                "with this one): transformers reads each sequence's reward at its last token before "
                                "it, as mtrun does (after mttok --eot, set it to that token)", *end, end_text)};
  }
  if (config.contains("pad_token_id") && config["pad_token_id"].is_number_integer())
    return {std::nullopt, fmt::format("pad_token_id {}, the config's: transformers reads each sequence's reward at its "
                                      "last token that is not it; mtrun at the token before the end-of-text token",
                                      config["pad_token_id"].get<int64_t>())};
  return {std::nullopt, "no pad_token_id: transformers reads each sequence's reward at its last token, and only one "
                        "sequence at a time; set pad_token_id in config.json to the token that ends your examples"};
}

// The plan's Hugging Face config, checked to be one its parameters can be exported under: every
// parameter a place, every fused tensor all its parts, a score head where (and only where) the
// config is a classifier's.
nlohmann::ordered_json exportableConfig(const plan::Plan& plan, const std::string& flag = "--export-hf") {
  if (plan.model().hf_config().empty())
    throw Error(flag + ": the plan's model has no Hugging Face form (the llama and gpt2 families have one, "
                "imported from a folder or built in; this plan's is " + plan.model().name() +
                ", from another source): use --export for safetensors under the plan's names");
  nlohmann::ordered_json config = parseOrderedJsonInput(plan.model().hf_config(), "the plan's Hugging Face config");
  if (!config.is_object()) throw Error("the plan's Hugging Face config is not a JSON object (recompile it with mtc)");
  const std::string architecture = architectureOf(config);
  // A reward model's config is its ...ForSequenceClassification's (mtc writes it so; an older
  // reward plan's is still its causal LM's).
  const bool score_head = hasScoreHead(plan);
  const bool classifier = architecture.ends_with("ForSequenceClassification");
  if (score_head != classifier)
    throw Error(flag + ": the plan's model has " + (score_head ? "a score head" : "an LM head") +
                " but its Hugging Face config names " + (classifier ? "a sequence classifier" : "a causal LM") +
                " (a plan compiled before mtc wrote reward models' configs): compile it again with mtc");
  const CheckpointLayout layout = checkpointLayoutOf(architecture);
  std::map<std::string, std::vector<bool>> parts;  // each fused tensor's parts present
  loraAdapters(plan);  // whole pairs that fit their weights, merged in as they are written
  for (const auto& t : plan.host_tensors()) {
    if (t.role() != plan::ROLE_PARAM || isLoraAdapter(t.name())) continue;
    const HuggingFacePlace place = huggingFacePlace(t.name(), "transformer.", layout);
    if (place.name.empty()) throw Error(flag + ": the plan's parameter '" + t.name() + "' has no Hugging Face name");
    auto& present = parts[place.name];
    present.resize(static_cast<size_t>(place.parts));
    present[static_cast<size_t>(place.part)] = true;
  }
  for (const auto& [name, present] : parts)
    for (bool p : present)
      if (!p)
        throw Error(flag + ": the plan lacks a part of Hugging Face's fused '" + name + "' (q, k and v together; "
                    "gate and up together: Phi-3's, Granite 4.0's, GraniteMoE's experts')");
  return config;
}

}  // namespace

void checkHuggingFaceExport(const plan::Plan& plan) {
  const nlohmann::ordered_json config = exportableConfig(plan);
  if (hasScoreHead(plan)) rewardPadding(plan, config);  // its tokenizer read now
}

namespace {

namespace fs = std::filesystem;

// The weights file of an exported folder: model.safetensors, or the first file its index names.
std::string weightsFileOf(const std::string& dir) {
  if (fs::exists(dir + "/model.safetensors")) return dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  const nlohmann::json index = parseJsonInput(readWholeFile(index_path, "weight index", ""), index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object() ||
      index["weight_map"].empty() || !index["weight_map"].begin()->is_string())
    throw Error(index_path + " names no weights file");
  const std::string file = index["weight_map"].begin()->get<std::string>();
  if (file.empty() || file.find('/') != std::string::npos) throw Error(index_path + " names a file outside the folder");
  return dir + "/" + file;
}

// Whether `dir` is a folder an earlier export of its kind wrote (--export-hf, or --export-peft:
// `peft`): plain files only, weights whose metadata carries MegaTrain's provenance.
bool isEarlierExport(const std::string& dir, bool peft) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error))
    if (!entry.is_regular_file() || entry.is_symlink()) return false;
  if (error) return false;
  try {
    const SafetensorsFile weights(peft ? dir + "/" + kPeftWeightsFile : weightsFileOf(dir));
    return weights.metadata().count(std::string(kProvenancePrefix) + "code") > 0;
  } catch (const Error&) {
    return false;
  }
}

// The folder's tensors under Hugging Face's names, in the order of their first parameter, each
// produced from its parts (GPT-2's c_attn from q, k and v; Conv1D's transposed), cut into shards
// of at most kShardBytes. `members` holds the parts the tensors' producers read.
using Members = std::map<std::string, std::vector<std::pair<HuggingFacePlace, SafetensorsTensor>>>;

// `total` f32 values into `buffer` as f32 (width 4) or rounded to bf16 (width 2).
void storeValues(const float* values, int64_t total, int width, void* buffer) {
  if (width == 4) {
    std::memcpy(buffer, values, 4 * static_cast<size_t>(total));
    return;
  }
  auto* bits = static_cast<uint16_t*>(buffer);
  for (int64_t i = 0; i < total; ++i) bits[i] = bf16Bits(values[i]);
}

// A stacked expert weight (experts, out, in) as one tensor per expert. Where the store produces
// the parameter's values (they are not in memory as f32), they are produced once, for expert 0,
// and kept until the last expert's tensor is written (the shards are written in order).
std::vector<SafetensorsTensor> expertTensors(const HuggingFacePlace& place, SafetensorsTensor f32, int width) {
  const int64_t experts = f32.shape.empty() ? 0 : f32.shape[0];
  const std::vector<int64_t> shape(f32.shape.begin() + (experts ? 1 : 0), f32.shape.end());
  const int64_t n = experts ? f32.bytes / 4 / experts : 0;
  auto whole = std::make_shared<std::vector<float>>();
  auto source = std::make_shared<SafetensorsTensor>(std::move(f32));
  std::vector<SafetensorsTensor> out;
  for (int64_t e = 0; e < experts; ++e)
    out.push_back({expertTensorName(place, e), width == 2 ? "BF16" : "F32", shape, nullptr, n * width,
                   [source, whole, e, n, experts, width](void* buffer) {
                     const float* values = static_cast<const float*>(source->data);
                     if (!values) {
                       if (whole->empty()) {
                         whole->resize(static_cast<size_t>(n * experts));
                         source->produce(whole->data());
                       }
                       values = whole->data();
                     }
                     storeValues(values + e * n, n, width, buffer);
                     if (e == experts - 1) std::vector<float>().swap(*whole);
                   }});
  return out;
}

std::vector<std::vector<SafetensorsTensor>> shardedTensors(const plan::Plan& plan, const HostStore& store,
                                                           ExportDtype dtype, CheckpointLayout layout, Members& members) {
  std::map<int, LoraAdapter> adapted;  // a weight with LoRA adapters: merged in (PEFT's merge_and_unload)
  for (const LoraAdapter& adapter : loraAdapters(plan)) adapted[adapter.weight] = adapter;
  const int width = dtype == ExportDtype::kBf16 ? 2 : 4;
  std::vector<std::vector<SafetensorsTensor>> shards(1);
  int64_t shard_bytes = 0;
  auto add = [&](SafetensorsTensor out) {
    if (shard_bytes > 0 && shard_bytes + out.bytes > kShardBytes) shards.emplace_back(), shard_bytes = 0;
    shard_bytes += out.bytes;
    shards.back().push_back(std::move(out));
  };
  std::vector<std::string> order;
  for (int p : store.params()) {
    if (isLoraAdapter(plan.host_tensors(p).name())) continue;
    auto adapter = adapted.find(p);
    SafetensorsTensor f32 = adapter == adapted.end() ? store.savedTensor(p)
                                                     : mergedWeight(plan, store, adapter->second,
                                                                    layout == CheckpointLayout::kGptOss);
    HuggingFacePlace place = huggingFacePlace(f32.name, "transformer.", layout);
    if (!members.count(place.name)) order.push_back(place.name);
    members[place.name].emplace_back(std::move(place), std::move(f32));
  }
  for (const std::string& name : order) {
    auto& parts = members[name];
    if (parts[0].first.per_expert) {
      for (SafetensorsTensor& t : expertTensors(parts[0].first, std::move(parts[0].second), width)) add(std::move(t));
      continue;
    }
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first.part < b.first.part; });
    // Each part's shape: [out, in], [out] or a stack of experts' [experts, out, in]; stored
    // [in, total] (transposed: GPT-2's Conv1D) or with total on the output axis (fusedPartAxis),
    // total the parts' outputs together, each part's after the one before (in each expert).
    const std::vector<int64_t>& shape = parts[0].second.shape;
    const bool transposed = parts[0].first.transposed && shape.size() == 2;
    const size_t axis = fusedPartAxis(shape.size());
    const int64_t blocks = axis == 1 ? shape[0] : 1;  // the experts of a stack, each its parts in turn
    std::vector<int64_t> offsets;  // each part's first output in the whole
    int64_t total_rows = 0, cols = 1;  // the rest of each row as columns (gpt-oss's experts are 3-D)
    for (const auto& member : parts) {
      offsets.push_back(total_rows);
      total_rows += member.second.shape.empty() ? 1 : member.second.shape[axis];
    }
    for (size_t d = axis + 1; d < shape.size(); ++d) cols *= shape[d];
    std::vector<int64_t> theirs = shape;
    if (transposed) std::swap(theirs[0], theirs[1]);
    if (!theirs.empty()) theirs[transposed ? 1 : axis] = total_rows;
    if (parts[0].first.unit_first_axis) theirs.insert(theirs.begin(), 1);
    const int64_t total = blocks * total_rows * cols;
    const int tensor_width = parts[0].first.keep_f32 ? 4 : width;  // (a router's bias: F32 always)
    SafetensorsTensor out{name, tensor_width == 2 ? "BF16" : "F32", theirs, nullptr, total * tensor_width};
    out.produce = [&parts, offsets, transposed, axis, blocks, total_rows, cols, total, tensor_width](void* buffer) {
      std::vector<float> staged;  // a part's values where it produces them (one part at a time)
      // The tensor in Hugging Face's layout: a whole parameter as it is; else its parts placed.
      const float* values;
      std::vector<float> assembled;
      if (parts.size() == 1 && !transposed) {
        values = f32Values(parts[0].second, staged);
      } else {
        assembled.resize(static_cast<size_t>(total));
        for (size_t p = 0; p < parts.size(); ++p) {
          const float* part = f32Values(parts[p].second, staged);
          const int64_t rows = parts[p].second.shape.empty() ? 1 : parts[p].second.shape[axis];
          if (!transposed) {  // each block's rows offset.. of the whole [blocks, total_rows, cols]
            for (int64_t b = 0; b < blocks; ++b)
              std::memcpy(assembled.data() + (b * total_rows + offsets[p]) * cols, part + b * rows * cols,
                          4 * static_cast<size_t>(rows * cols));
            continue;
          }
          for (int64_t o = 0; o < rows; ++o)  // theirs[i][offset + o] = ours[o][i]
            for (int64_t i = 0; i < cols; ++i) assembled[i * total_rows + offsets[p] + o] = part[o * cols + i];
        }
        values = assembled.data();
      }
      storeValues(values, total, tensor_width, buffer);
    };
    add(std::move(out));
  }
  return shards;
}

// The shards into `dir`: model.safetensors, or model-0000N-of-0000M.safetensors and their index.
void writeShards(const std::string& dir, const std::vector<std::vector<SafetensorsTensor>>& shards,
                 const std::map<std::string, std::string>& meta) {
  if (shards.size() == 1) {
    writeSafetensors(dir + "/model.safetensors", shards[0], meta);
    return;
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::ordered_json::object()}};
  int64_t total = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, shards.size());
    writeSafetensors(dir + "/" + file, shards[s], meta);
    for (const auto& t : shards[s]) {
      index["weight_map"][t.name] = file;
      total += t.bytes;
    }
  }
  index["metadata"]["total_size"] = total;
  writeFileAtomically(dir + "/model.safetensors.index.json", index.dump(2) + "\n");
}

// The files of a model folder beside its weights that an export carries over: the tokenizer (its
// several forms), its special tokens, the chat template, the generation config.
constexpr const char* kCarriedFiles[] = {"tokenizer.json",     "tokenizer_config.json", "special_tokens_map.json",
                                         "added_tokens.json",  "vocab.json",            "merges.txt",
                                         "tokenizer.model",    "chat_template.jinja",   "chat_template.json",
                                         "generation_config.json"};

// Copies the carried files of the folder the plan's model came from into `dir` (plain files
// only, each at most 256 MiB); says what it did in `report`.
void carryFiles(const plan::Plan& plan, const std::string& dir, HuggingFaceExport& report) {
  const std::string& source = plan.model().hf_source();
  if (source.empty()) return;
  report.source = source;
  struct stat st {};
  if (stat(source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    report.note = "the tokenizer files were not copied: " + source + ", the folder the model came from, is gone";
    return;
  }
  for (const char* name : kCarriedFiles) {
    const std::string from = source + "/" + name;
    if (lstat(from.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (st.st_size > (int64_t{256} << 20))
      throw Error(from + " is over 256 MiB: not a tokenizer file an export carries; remove it or export elsewhere");
    writeFileAtomically(dir + "/" + name, readWholeFile(from, "model file", ""));
    report.carried.push_back(name);
  }
}

}  // namespace

CheckpointLayout exportLayout(const plan::Plan& plan, const std::string& flag) {
  return checkpointLayoutOf(architectureOf(exportableConfig(plan, flag)));
}

void checkHuggingFaceExportFolder(const std::string& dir, bool peft) {
  const std::string target = withoutTrailingSlashes(dir);
  const std::string flag = peft ? "--export-peft" : "--export-hf";
  struct stat st {};
  if (lstat(target.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      throw Error(flag + " " + dir + " is a symbolic link: give the folder's own path");
    if (!S_ISDIR(st.st_mode)) throw Error(flag + " " + dir + " is a file, not a folder: give a folder's path");
    std::error_code error;
    const bool empty = fs::is_empty(target, error);
    if (!empty && !isEarlierExport(target, peft))
      throw Error(flag + " " + dir + " holds files that no earlier " + flag + " wrote (a downloaded model?): "
                  "the export replaces the whole folder, so give a new or empty folder");
  }
  // Killed exports' staging folders (TARGET.tmp.<pid>.<random>, their writer gone) go now.
  const std::string parent = fs::path(target).parent_path().empty() ? "." : fs::path(target).parent_path().string();
  const std::string name = fs::path(target).filename().string();
  const int removed = removeStaleTemporaries(parent, [&](const std::string& stem) { return stem == name; });
  if (removed) std::printf("removed %d unfinished %s folder(s) beside %s\n", removed, flag.c_str(), target.c_str());
  AtomicFolderWriter probe(target);  // the parent is writable: the staging folder can be made (and goes again)
}

HuggingFaceExport exportHuggingFace(const plan::Plan& plan, const HostStore& store, const std::string& dir,
                                    ExportDtype dtype, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json config = exportableConfig(plan);
  // The weights' dtype under the keys the config has (transformers 4.56 on write "dtype", earlier
  // versions read "torch_dtype"; torch_dtype where it has neither).
  const char* dtype_name = dtype == ExportDtype::kBf16 ? "bfloat16" : "float32";
  if (config.contains("dtype")) config["dtype"] = dtype_name;
  if (config.contains("torch_dtype") || !config.contains("dtype")) config["torch_dtype"] = dtype_name;
  config.erase("quantization_config");  // a quantized source's (MXFP4, FP8): the export's weights are dequantized
  // The source's custom code (Phi-3's configuration_phi3.py, modeling_phi3.py), which the export does
  // not carry: transformers has the architecture built in, and trust_remote_code would look for it.
  config.erase("auto_map");
  HuggingFaceExport report;
  if (hasScoreHead(plan)) {
    const RewardPadding padding = rewardPadding(plan, config);
    if (padding.id) config["pad_token_id"] = *padding.id;
    report.padding = padding.said;
  }
  // transformers' GptOssExperts clamps at a fixed 7.0 whatever swiglu_limit says (5.17, measured on
  // the lent H200 in session 46: the tiny model's 0.1 folder within 0 of a twin clamping at 7.0).
  const auto limit = config.find("swiglu_limit");
  if (architectureOf(config) == "GptOssForCausalLM" && limit != config.end() && limit->is_number() &&
      limit->get<double>() != 7.0)
    report.elsewhere = fmt::format("swiglu_limit {:g}: transformers' GptOss clamps the experts' SwiGLU at 7.0 "
                                   "whatever the config says, so it computes another model than this one there",
                                   limit->get<double>());
  checkHuggingFaceExportFolder(dir);  // still new, empty or ours
  AtomicFolderWriter folder(dir);
  Members members;
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "pt";
  writeShards(folder.staging(), shardedTensors(plan, store, dtype, checkpointLayoutOf(architectureOf(config)), members), meta);
  writeFileAtomically(folder.staging() + "/config.json", config.dump(2) + "\n");
  carryFiles(plan, folder.staging(), report);
  folder.commit();
  return report;
}

}  // namespace mt
