#include "runtime/huggingface.h"

#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "kernels/elementwise/elementwise.h"
#include "runtime/error.h"
#include "runtime/safetensors.h"

namespace mt {
namespace {

// Shards of at most this many bytes, as transformers' save_pretrained writes by default.
constexpr int64_t kShardBytes = int64_t{5} << 30;

}  // namespace

std::string huggingFaceName(const std::string& name) {
  static const std::pair<const char*, const char*> kLayerParts[] = {
      {"attn_norm.weight", "input_layernorm.weight"}, {"mlp_norm.weight", "post_attention_layernorm.weight"},
      {"attn.q.", "self_attn.q_proj."},             {"attn.k.", "self_attn.k_proj."},
      {"attn.v.", "self_attn.v_proj."},             {"attn.o.", "self_attn.o_proj."},
      {"mlp.gate.", "mlp.gate_proj."},              {"mlp.up.", "mlp.up_proj."},
      {"mlp.down.", "mlp.down_proj."}};
  if (name == "embed.weight") return "model.embed_tokens.weight";
  if (name == "norm.weight") return "model.norm.weight";
  if (name == "lm_head.weight") return "lm_head.weight";
  if (name.rfind("layers.", 0) == 0) {
    const size_t dot = name.find('.', 7);
    if (dot == std::string::npos) return "";
    const std::string layer = name.substr(0, dot + 1), part = name.substr(dot + 1);
    for (const auto& [ours, theirs] : kLayerParts)
      if (part.rfind(ours, 0) == 0) return "model." + layer + theirs + part.substr(std::strlen(ours));
  }
  return "";
}

void checkHuggingFaceExport(const plan::Plan& plan) {
  if (plan.model().hf_config().empty())
    throw Error("--export-hf: the plan's model has no Hugging Face form (only the llama family — Llama, Qwen2, "
                "Mistral, imported from a folder or built in — has one; this plan's is " + plan.model().name() +
                "): use --export for safetensors under the plan's names");
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_PARAM && huggingFaceName(t.name()).empty())
      throw Error("--export-hf: the plan's parameter '" + t.name() + "' has no Hugging Face name (--export-hf "
                  "writes the llama family's folders; GPT-2's, with its fused c_attn, not yet): use --export");
}

void exportHuggingFace(const plan::Plan& plan, const HostStore& store, const std::string& dir, ExportDtype dtype,
                       const std::map<std::string, std::string>& metadata) {
  checkHuggingFaceExport(plan);
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(plan.model().hf_config(), nullptr, false);
  if (!config.is_object()) throw Error("the plan's Hugging Face config is not a JSON object (recompile it with mtc)");
  config["torch_dtype"] = dtype == ExportDtype::kBf16 ? "bfloat16" : "float32";
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw Error("--export-hf: cannot create " + dir + ": " + error.message());

  // The tensors in plan order, cut into shards of at most kShardBytes.
  const int width = dtype == ExportDtype::kBf16 ? 2 : 4;
  std::vector<std::vector<SafetensorsTensor>> shards(1);
  int64_t shard_bytes = 0;
  for (int p : store.params()) {
    SafetensorsTensor f32 = store.savedTensor(p);
    const int64_t n = f32.bytes / 4;
    SafetensorsTensor out{huggingFaceName(f32.name), width == 2 ? "BF16" : "F32", f32.shape, nullptr, n * width};
    out.produce = [f32, n, width](void* buffer) {
      std::unique_ptr<float[]> staged;
      const float* values = static_cast<const float*>(f32.data);
      if (!values) {
        staged.reset(new float[static_cast<size_t>(std::max<int64_t>(n, 1))]);
        f32.produce(staged.get());
        values = staged.get();
      }
      if (width == 4) {
        std::memcpy(buffer, values, 4 * static_cast<size_t>(n));
        return;
      }
      auto* bits = static_cast<uint16_t*>(buffer);
      for (int64_t i = 0; i < n; ++i) bits[i] = bf16Bits(values[i]);
    };
    if (shard_bytes > 0 && shard_bytes + out.bytes > kShardBytes) shards.emplace_back(), shard_bytes = 0;
    shards.back().push_back(std::move(out));
    shard_bytes += shards.back().back().bytes;
  }
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "pt";
  if (shards.size() == 1) {
    writeSafetensors(dir + "/model.safetensors", shards[0], meta);
  } else {
    nlohmann::ordered_json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::ordered_json::object()}};
    int64_t total = 0;
    for (size_t s = 0; s < shards.size(); ++s) {
      char file[64];
      std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
      writeSafetensors(dir + "/" + file, shards[s], meta);
      for (const auto& t : shards[s]) {
        index["weight_map"][t.name] = file;
        total += t.bytes;
      }
    }
    index["metadata"]["total_size"] = total;
    writeFileAtomically(dir + "/model.safetensors.index.json", index.dump(2) + "\n");
  }
  writeFileAtomically(dir + "/config.json", config.dump(2) + "\n");  // last: a folder with it is whole
}

}  // namespace mt
