// Shape helpers the `mt` ops' inference and verifiers share (MtOps.cpp, MtSequenceOps.cpp,
// MtGenericOps.cpp, MtMoeOps.cpp, MtPreferenceOps.cpp).
#pragma once
#include <optional>
#include <string>

#include "compiler/dialect/MtDialect.h"

namespace mt::op_shapes {

mlir::RankedTensorType tensorOf(mlir::Value v);
mlir::Type f32(mlir::MLIRContext* ctx);
mlir::RankedTensorType f32Tensor(mlir::MLIRContext* ctx, llvm::ArrayRef<int64_t> shape);

// The element type shared by an op's activations (f32, or bf16 in a bf16 plan: mt-mixed-precision);
// fails naming the op's mix of types otherwise. Statistics (norms' mean and rstd, log-sum-exps,
// the loss and its seed) are f32 whatever the activations are.
mlir::FailureOr<mlir::Type> activationType(std::optional<mlir::Location> loc, mlir::ValueRange activations);

std::string shapeStr(llvm::ArrayRef<int64_t> shape);

// Fails unless every operand has a static shape.
mlir::LogicalResult requireStatic(std::optional<mlir::Location> loc, mlir::ValueRange operands);

// Fails, naming `what` and both shapes, unless `v` has `shape`.
mlir::LogicalResult requireShape(std::optional<mlir::Location> loc, mlir::Value v, llvm::ArrayRef<int64_t> shape,
                                 llvm::StringRef what);

bool isSuffix(llvm::ArrayRef<int64_t> suffix, llvm::ArrayRef<int64_t> shape);

// Whether `in` broadcasts (numpy rules) to exactly `out`.
bool broadcastsTo(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out);

llvm::SmallVector<int64_t> dropLast(llvm::ArrayRef<int64_t> shape);

// The running state (..., 2) of a loss over vocabulary chunks (mt.xent_chunk's), for targets of
// `rows`.
llvm::SmallVector<int64_t> runningShape(llvm::ArrayRef<int64_t> rows);

// Pointwise ops: every operand has the shape of the first; results likewise.
mlir::LogicalResult inferPointwise(mlir::MLIRContext* ctx, std::optional<mlir::Location> loc,
                                   mlir::ValueRange operands, unsigned numResults,
                                   llvm::SmallVectorImpl<mlir::Type>& types);

}  // namespace mt::op_shapes
