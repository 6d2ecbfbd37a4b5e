// Built-in models built directly as mt IR. No weights are materialised: parameters are
// function arguments with initializers, so even a 120B preset builds in milliseconds.
#pragma once
#include "models/ModelConfig.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mt {

// Where the parameters' first values come from: the plan's seeded initializers, or a weights
// file (a pretrained model: every parameter's init is "weights").
enum class ParamInit { kSeeded, kWeightsFile };

// The forward function (tokens, params...) -> logits (batch, seq, vocab).
mlir::OwningOpRef<mlir::ModuleOp> buildModel(mlir::MLIRContext& context, const ModelConfig& config,
                                             int64_t batch, int64_t seq, ParamInit init = ParamInit::kSeeded);

}  // namespace mt
