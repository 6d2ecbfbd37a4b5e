// The `mt` dialect: ops, interfaces and helpers shared by the passes.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "compiler/dialect/MtAttrNames.h"

namespace mt {
// Bytes of all operands and results of `op` (the default memory traffic of an op).
int64_t defaultBytesAccessed(mlir::Operation* op);
// Bytes of a statically shaped tensor value.
int64_t tensorBytes(mlir::Type type);
// One of `tiles` equal tiles of consecutive tokens of `whole` (B, T, ...), read as B*T token rows
// (mt.token_split): (1, R/..., ...) inside a sequence or (R/T, T, ...) of whole sequences, R =
// B*T / tiles; null where the rows do not divide so (or `whole` has no (B, T) leading dims).
mlir::RankedTensorType tokenTileType(mlir::RankedTensorType whole, int64_t tiles);
}  // namespace mt

#include "compiler/dialect/MtDialect.h.inc"
#include "compiler/dialect/MtEnums.h.inc"
#include "compiler/dialect/MtInterfaces.h.inc"

#define GET_OP_CLASSES
#include "compiler/dialect/MtOps.h.inc"
