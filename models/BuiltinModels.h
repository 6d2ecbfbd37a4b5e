// Built-in models built directly as mt IR. No weights are materialised: parameters are
// function arguments with initializers, so even a 120B preset builds in milliseconds.
#pragma once
#include "models/ModelConfig.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mt {

// The forward function (tokens, params...) -> logits (batch, seq, vocab).
mlir::OwningOpRef<mlir::ModuleOp> buildModel(mlir::MLIRContext& context, const ModelConfig& config,
                                             int64_t batch, int64_t seq);

}  // namespace mt
