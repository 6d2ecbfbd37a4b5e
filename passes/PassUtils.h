// What the passes share (passes/PassUtils.cpp) and the emitter and stages use too: the model
// function, blocks and tiles, parameters and gradients, the schedules' host tasks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/dialect/MtDialect.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/io/format_bytes.h"
#include "runtime/plan/arena.h"

namespace mt {

// The module's model function: the only func.func. Emits an error and returns null otherwise.
mlir::func::FuncOp getModelFunction(mlir::ModuleOp module);

// The layer block of an op (mt.block), or std::nullopt before mt-partition ran.
std::optional<int64_t> blockOf(mlir::Operation* op);

// The layer block named in an op's module path ("blocks.3", "layers.3" in the first name of its
// location), or std::nullopt: what mt-partition numbers blocks by.
std::optional<int64_t> layerBlockInPath(mlir::Operation* op);

// The module path of an op: the first name in its location (or the whole location printed).
std::string modulePath(mlir::Operation* op);

// `loc` marked as token tile `tile` (mt-tile-tokens): the ops a gradient rule builds from an op
// share its location, so the backward of a tile carries its tile too (mt-partition reads it into
// mt.tile).
mlir::Location withTile(mlir::Location loc, int64_t tile);
std::optional<int64_t> tileInLocation(mlir::Location loc);

// The token tile of an op (mt.tile), or std::nullopt for an op of the whole block.
std::optional<int64_t> tileOf(mlir::Operation* op);

// The region of each op of `body`, numbered in program order: maximal runs of consecutive ops
// of one layer block (a block's forward is one region, its recompute + backward another).
llvm::DenseMap<mlir::Operation*, size_t> blockRegions(mlir::Block& body);

// Where a copy for op `ops[i]` is issued, a block ahead: the start of the block region that runs
// before the one op i is in (the first op if there is none). `ops`: the body's ops in order.
mlir::Operation* prefetchPoint(llvm::ArrayRef<mlir::Operation*> ops, size_t i);

// Fails, with a diagnostic naming `pass`, unless `func` is differentiated (returns the loss,
// then the gradients; or, if allowed, is forward-only) and not scheduled yet.
mlir::LogicalResult checkReadyToSchedule(mlir::func::FuncOp func, llvm::StringRef pass,
                                         bool allowForwardOnly = false);

// Whether `func` is a forward-only model: every result is a named output (mt.output) and
// none is a loss. Such a function is scheduled for evaluation: no autodiff, no optimizer.
bool isForwardOnly(mlir::func::FuncOp func);
// The first result of `func` from `first` on that is not a named output (mt.output), or the
// number of results if none: a training function's results after its logits or its loss must
// all be named outputs (a mixture of experts' router statistics).
unsigned firstUnnamedResult(mlir::func::FuncOp func, unsigned first);

// The parameter arguments (mt.param) of `func`, in order.
llvm::SmallVector<mlir::Value> parameterArguments(mlir::func::FuncOp func);

// The parameters used by ops of more than one layer block (a tied embedding and LM head),
// in argument order. Host tasks and the return do not count; ops carry their block (mt-partition).
llvm::SmallVector<mlir::Value> sharedParameters(mlir::func::FuncOp func);

// AdamW one step late, overlapped with the forward: an "adamw_previous" host task for every
// parameter just before its first copy to the device or host token lookup in it (at the start
// if it has neither). The
// host updates parameter k with the previous step's gradients while the parameters before it
// already stream in and compute; global-norm clipping stays exact (that norm is complete).
void insertDeferredUpdates(mlir::func::FuncOp func);

// The parameter whose gradient result `index` of `func` is or adds to: its mt.grad, or its
// mt.grad_tokens (rows scatter-added by the tokens on the host); "" for neither.
llvm::StringRef gradientOf(mlir::func::FuncOp func, unsigned index);

// Per result of `func`: whether it is a gradient result that completes its parameter's gradient:
// the one result naming the parameter, or, for a parameter in row pieces (mt-split-vocab) or
// with rows by token (mt-host-embedding), the contribution computed last. Host tasks on the
// whole gradient follow that one. (One pass: a 100-layer model returns ~1,000 results.)
std::vector<bool> completedGradients(mlir::func::FuncOp func);

// The function's token ids input (mt.input = "tokens"), or null.
mlir::BlockArgument tokensArgument(mlir::func::FuncOp func);

// The logits a loss reads as the LM head made them: through Gemma 2's final mt.softcap, where
// there is one, else `logits` itself.
mlir::Value uncappedLogits(mlir::Value logits);

// The first argument that is parameter `name` or one of its row pieces (which stands for the
// whole host tensor in host tasks), or null.
mlir::BlockArgument parameterNamed(mlir::func::FuncOp func, llvm::StringRef name);

// The host side of mt-host-embedding, for the schedules: before the first copy in of each
// argument with mt.embedded_tokens, the "embedding_lookup" host task that fills it; after the
// copy out of each mt.grad_tokens result (`hostResults[i]`) and of the table's other gradient
// results, the "embedding_grad" task that scatter-adds it into the table's gradient (onto
// those, mt.accumulate, where there are any). Each task takes the block of the copy it follows;
// it comes before the tasks on the whole gradient (inserted right after the same copy).
// Fails, with a diagnostic, where a table named is not a parameter or there is no tokens input.
mlir::LogicalResult insertHostEmbeddingTasks(mlir::func::FuncOp func, llvm::ArrayRef<mlir::Value> hostResults);

// The bytes of one row (the first dimension's step) of `type`: where row r of a row piece starts.
int64_t rowBytes(mlir::RankedTensorType type);

// Whether argument `index` is a row piece of a parameter (mt.param with rows: mt-split-vocab,
// mt-split-experts).
bool isRowPiece(mlir::func::FuncOp func, unsigned index);

// The param name of argument `index`, or "" if it is not a parameter.
llvm::StringRef paramName(mlir::func::FuncOp func, unsigned index);
// Whether argument `index` is a parameter kept out of training (mt.param's "frozen": mtc --frozen,
// --trainable): read like any other, but it takes no gradient and no update.
bool isFrozenParam(mlir::func::FuncOp func, unsigned index);
// The frozen parameters of `func` (a parameter in row pieces counted once).
int64_t countFrozenParameters(mlir::func::FuncOp func);
// Those whose copies a scheduled `func` keeps between steps (mt.kept; a pinned one too).
int64_t countKeptFrozenParameters(mlir::func::FuncOp func);
// A host value that does not change between runs: in a forward-only function a parameter, its
// bf16 staging copy, a constant; in a training one a frozen parameter (which no update writes),
// its staging copy, a constant.
bool isPersistentSource(mlir::func::FuncOp func, mlir::Value v);
// A schedule's keep-frozen: `copy` marked kept (mt.kept: mt-plan-memory keeps its bytes to the
// end, a backend copies it in the first step only) where `func` trains and what it copies is
// persistent (a frozen weight, its staging copy, a constant).
void markKeptIfPersistent(mlir::func::FuncOp func, H2DOp copy);
// Whether argument `index` is a weight marked for LoRA adapters (mt.param's "lora": mtc --lora).
bool isLoraTarget(mlir::func::FuncOp func, unsigned index);

}  // namespace mt
