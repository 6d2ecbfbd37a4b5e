// Hugging Face config.json files (mtc FOLDER): the input as the config.json of a folder beside
// a small weights file (a one-layer Llama of width 8 under Hugging Face's names), read by
// readHuggingFaceFolder — every key checked, then each tensor placed — and, where it reads, the
// config it would write back and its reward model's. compiler/HuggingFace*.cpp need no MLIR: they are compiled into
// the harness with the instrumentation.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

#include "compiler/HuggingFace.h"
#include "runtime/io/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// The folder, made once per process: its weights match the seeds' small Llama config; a
// classifier's (a reward model's: ...ForSequenceClassification) has its score head too.
std::string makeFolder(bool classifier) {
  const std::string d = mt::fuzz::scratchDir() + "/mt_fuzz_" + std::to_string(getpid()) + (classifier ? "_rm" : "_hf");
  std::filesystem::create_directories(d);
  static std::vector<std::vector<float>> storage;
  std::vector<mt::SafetensorsTensor> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    storage.emplace_back(static_cast<size_t>(n), 0.01f);
    tensors.push_back({name, "F32", shape, storage.back().data(), 4 * n});
  };
  add("model.embed_tokens.weight", {16, 8});
  add("model.norm.weight", {8});
  for (const char* part : {"q_proj", "o_proj"}) add(std::string("model.layers.0.self_attn.") + part + ".weight", {8, 8});
  for (const char* part : {"k_proj", "v_proj"}) add(std::string("model.layers.0.self_attn.") + part + ".weight", {4, 8});
  for (const char* part : {"gate_proj", "up_proj"}) add(std::string("model.layers.0.mlp.") + part + ".weight", {16, 8});
  add("model.layers.0.mlp.down_proj.weight", {8, 16});
  add("model.layers.0.input_layernorm.weight", {8});
  add("model.layers.0.post_attention_layernorm.weight", {8});
  if (classifier) add("score.weight", {1, 8});
  mt::writeSafetensors(d + "/model.safetensors", tensors);
  return d;
}

const std::string& folder(bool classifier) {
  static const std::string causal = makeFolder(false), reward = makeFolder(true);
  return classifier ? reward : causal;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir =
      folder(std::string_view(reinterpret_cast<const char*>(data), size).find("ForSequenceClassification") !=
             std::string_view::npos);
  std::ofstream(dir + "/config.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  mt::fuzz::refusalIsFine([&] {
    const mt::HuggingFaceModel model = mt::readHuggingFaceFolder(dir);
    mt::huggingFaceConfig(model.config);
    mt::sequenceClassifierConfig(model.config_json);
  });
  return 0;
}
