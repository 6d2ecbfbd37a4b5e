// The emitter's host side: a plan host tensor for every function argument (parameters, their
// row pieces and bf16 staging copies, inputs, constants, the tokens' rows of a host embedding)
// and every value copied to the host (the loss, gradients, offloaded activations, forward-only
// outputs), with each parameter's gradient and AdamW moments and the gradient landing buffer.
#pragma once
#include <cstdint>
#include <map>

#include "compiler/EmitHazards.h"
#include "compiler/Emitter.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "runtime/plan/plan_format.h"

namespace mt {

// Where each host value lives in the plan.
struct HostTensors {
  llvm::DenseMap<mlir::Value, int> tensor;      // function arguments and d2h results -> host tensor
  llvm::DenseMap<mlir::Value, int64_t> offset;  // row slices among them -> byte offset in the host tensor
  std::map<int, int> gradOfParam;               // trained param host tensor -> grad host tensor
  std::map<int, int> stagingOfParam;            // param host tensor -> its bf16 staging host tensor
  llvm::DenseMap<mlir::Value, int> gradOfRows;  // tokens' rows of a gradient (host) -> that gradient's host tensor
  int landing = -1;                             // the gradient landing host tensor, if the plan has one
  bool gradients_apart = false;                 // gradients land there, kept apart (gradientsKeptApart)

  // The gradient host tensor of parameter host tensor `param`, or -1 (a frozen parameter has none).
  int gradOf(int param) const;
  // The bytes of host tensor `t` (its own allocation, or its place in the landing buffer), or
  // `bytes` of them from byte `offset` (a row slice).
  ByteRange range(const plan::Plan& plan, int t, int64_t offset = 0, int64_t bytes = -1) const;
};

// Adds `func`'s host tensors to `plan` and says where each value lives in `hosts`; counts the
// parameters in `stats`. Fails with a diagnostic on the function for an argument or result it
// cannot place.
mlir::LogicalResult addHostTensors(mlir::func::FuncOp func, plan::Plan& plan, PlanStats& stats, HostTensors& hosts);

// A tensor type's plan dtype and shape.
plan::DType dtypeOf(mlir::Type type);
void setShape(google::protobuf::RepeatedField<int64_t>* out, mlir::Type type);

}  // namespace mt
