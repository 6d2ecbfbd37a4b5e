// mtc --lora-from DIR: a PEFT LoRA adapter folder (what PEFT's save_pretrained writes, and
// mtrun --export-peft) on the Hugging Face folder it was trained from. adapter_config.json sets
// what --lora, --lora-alpha, --lora-rslora, --lora-dropout, --lora-targets and --trainable would
// (target_modules and modules_to_save matched as PEFT matches module names), and
// adapter_model.safetensors gives the adapters' and the saved modules' starting values.
// Both files are hostile until checked: a setting mtc does not implement (DoRA, trained biases,
// per-layer ranks, ...), or a key it does not know holding anything but an empty value, is an
// error naming it; every tensor of the file must have a place in the plan and fit it, and every
// adapter of the plan must find its tensors there.
#pragma once
#include <string>

#include "compiler/CompileOptions.h"
#include "compiler/HuggingFace.h"
#include "runtime/plan.pb.h"

namespace mt {

inline constexpr char kPeftConfigFile[] = "adapter_config.json";
inline constexpr char kPeftAdapterWeights[] = "adapter_model.safetensors";

struct PeftAdapter {
  std::string dir;
  int64_t rank = 0;
  double alpha = 8.0;
  bool rslora = false;
  double dropout = 0.0;
  // Regular expressions over the folder's tensor names: the adapted weights (target_modules),
  // and the tensors of the modules trained whole (modules_to_save; "" for none).
  std::string targets, saved;
  std::string base;  // base_model_name_or_path ("" where the config has none)
};

// Reads DIR/adapter_config.json; throws mt::Error naming what it cannot take.
PeftAdapter readPeftAdapter(const std::string& dir);

// Sets what the adapter says in `o` (the lora_* options, the targets, trainable). Throws
// mt::Error for a target_modules expression std::regex cannot read.
void applyPeftAdapter(const PeftAdapter& adapter, CompileOptions& o);

// The plan's parameters whose starting values DIR/adapter_model.safetensors holds: its adapters
// and the tensors of the modules it trains whole. Throws mt::Error for a tensor of the file
// without a place in the plan, an adapter of the plan without its tensor, or one that does not fit.
WeightOverrides peftWeights(const PeftAdapter& adapter, const plan::Plan& plan, const HuggingFaceModel& model);

}  // namespace mt
