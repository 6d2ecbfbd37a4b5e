// mtc --frozen / --trainable / --lora for a model built from a config (a preset, a Hugging Face
// folder) or written in mt IR: which parameters train. A frozen parameter stays a parameter (read
// from the weights file, copied in like any other, written back by every export) that takes no
// gradient, no moments and no update (mt.param's "frozen"); the backward stops below the first
// layer that trains. With --lora, low-rank adapters (mt-lora) train beside the weights
// --lora-targets finds, and the rest is frozen. An ONNX import applies --frozen / --trainable
// when it reads the initializers (they stay constants of the plan).
#pragma once
#include <string>

#include "compiler/CompileOptions.h"
#include "mlir/IR/BuiltinOps.h"

namespace mt {

// Marks frozen each parameter of `module`'s model function that `o.frozen` matches, or, with
// `o.trainable` or `o.lora_rank`, that `o.trainable` does not match (std::regex_search over the
// parameter's name in the plan, or its tensor's name in the folder it came from:
// `o.param_source_names`); with `o.lora_rank`, adds the adapters of the weights
// `o.lora_targets` finds and of the stacks of experts `o.lora_experts` finds (mt-lora). Returns
// "" or the problem: a pattern that matches no parameter (a typo would otherwise train
// everything), a selection that leaves nothing to train, a LoRA target that is not a weight, or
// a forward-only model (nothing trains).
std::string selectTrainable(mlir::ModuleOp module, const CompileOptions& o);

// A model's parameters (elements), and how many of them are frozen.
struct ParamCount {
  double all = 0, frozen = 0;
};
ParamCount countParams(mlir::ModuleOp module);

}  // namespace mt
