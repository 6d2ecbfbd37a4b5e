// The pipeline's stages as a library: mtc runs them, and so do tests that compile IR in-process.
#pragma once
#include <string>

#include "mlir/IR/BuiltinOps.h"

namespace mt {

// Runs the stages after "input" (attach-loss, autodiff, schedule, memory) in order on
// `module`, stopping after `last` ("" = all). Returns the name of the stage that failed
// (its diagnostics already emitted), or "".
std::string runStages(mlir::ModuleOp module, const std::string& last, int64_t device_mem);

// Batch, sequence and vocabulary of a module that has its loss attached.
void modelShape(mlir::ModuleOp module, int64_t& batch, int64_t& seq, int64_t& vocab);

}  // namespace mt
