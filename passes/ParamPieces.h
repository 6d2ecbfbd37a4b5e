// Parameters split into row pieces (mt-split-vocab's vocabulary chunks, mt-split-experts' groups
// of experts): each piece an argument of its own, `mt.param` with rows = [first row, all rows],
// the same host tensor; its gradient a result of its own with `mt.grad_row`.
#pragma once

#include <cstdint>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mt {

// Piece c of `rows` rows in `pieces` pieces holds rows [first[c], first[c + 1]): sizes as even
// as they come (first has pieces + 1 entries).
llvm::SmallVector<int64_t> pieceStarts(int64_t rows, int64_t pieces);

// One argument per piece of parameter `weight`, inserted right after it: the same mt.param with
// rows = [first row, all rows] and weight's type with its first dimension the piece's rows.
llvm::SmallVector<mlir::BlockArgument> insertPieces(mlir::func::FuncOp func, mlir::BlockArgument weight,
                                                    llvm::ArrayRef<int64_t> first);

// The gradient result of parameter `name` replaced by one result per piece, in row order.
void splitGradResult(mlir::func::FuncOp func, llvm::StringRef name, llvm::ArrayRef<mlir::Value> pieceGrads,
                     llvm::ArrayRef<int64_t> first);

// `name` added to the function's list attribute `listAttr` (the parameters a pass split, for the
// summary).
void noteSplit(mlir::func::FuncOp func, llvm::StringRef listAttr, llvm::StringRef name);

}  // namespace mt
