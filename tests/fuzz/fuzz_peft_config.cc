// PEFT adapter configs (mtc --lora-from DIR's adapter_config.json): the input as the config of a
// folder beside a small adapter_model.safetensors, read by readPeftAdapter — every key checked,
// the numbers bounded, a target_modules expression parsed (compiler/ModuleExpression.h: its
// depth bounded, its matching polynomial) — and, where it reads, matched by applyPeftAdapter
// against a small Llama's module names as PEFT matches them. compiler/PeftAdapter*.cpp and
// ModuleExpression.cpp need no MLIR: they are compiled into the harness with the instrumentation.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/PeftAdapter.h"
#include "runtime/io/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// The folder, made once per process, with an adapter of layer 0's q_proj.
std::string makeFolder() {
  const std::string d = mt::fuzz::scratchDir() + "/mt_fuzz_" + std::to_string(getpid()) + "_peft";
  std::filesystem::create_directories(d);
  static std::vector<float> values(64, 0.01f);
  mt::writeSafetensors(d + "/" + mt::kPeftWeightsFile,
                       {{"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", "F32", {4, 8}, values.data(),
                         128},
                        {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", "F32", {8, 4}, values.data(),
                         128}});
  return d;
}

// A one-layer Llama's names, as a folder's reader places them.
mt::HuggingFaceModel smallModel() {
  mt::HuggingFaceModel model;
  model.dir = "fuzz";
  model.architecture = "LlamaForCausalLM";
  for (const char* part : {"q", "k", "v", "o"})
    model.weights[std::string("layers.0.attn.") + part + ".weight"].place.name =
        std::string("model.layers.0.self_attn.") + part + "_proj.weight";
  model.weights["layers.0.mlp.gate.weight"].place.name = "model.layers.0.mlp.gate_proj.weight";
  model.weights["layers.0.attn_norm.weight"].place.name = "model.layers.0.input_layernorm.weight";
  model.weights["norm.weight"].place.name = "model.norm.weight";
  model.weights["lm_head.weight"].place.name = "lm_head.weight";
  return model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = makeFolder();
  static const mt::HuggingFaceModel model = smallModel();
  std::ofstream(dir + "/" + mt::kPeftConfigFile, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  mt::fuzz::refusalIsFine([&] {
    const mt::PeftAdapter adapter = mt::readPeftAdapter(dir);
    mt::CompileOptions options;
    mt::applyPeftAdapter(adapter, model, options);
  });
  return 0;
}
