// Shape inference and verifiers of the `mt` ops. Every rule mirrors the runtime kernel's
// check (kernels/<family>/*_cpu.cc): what verifies here runs there.
#include <cmath>
#include <limits>

#include "compiler/dialect/MtAttrNames.h"
#include "compiler/dialect/MtDialect.h"
#include "compiler/dialect/MtOpShapes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;

namespace mt {

using namespace op_shapes;

namespace {

// Norms: x (..., C), gamma (C) (activations, with `others`) -> y (..., C) and `rowResults` f32
// statistics of shape (...).
LogicalResult inferNorm(MLIRContext* ctx, std::optional<Location> loc, Value x, Value gamma, ValueRange others,
                        unsigned rowResults, SmallVectorImpl<Type>& types) {
  auto shape = tensorOf(x).getShape();
  if (shape.empty()) return emitOptionalError(loc, "norm input must have rank >= 1");
  if (failed(requireShape(loc, gamma, {shape.back()}, "gamma"))) return failure();
  SmallVector<Value> activations = {x, gamma};
  activations.append(others.begin(), others.end());
  FailureOr<Type> act = activationType(loc, activations);
  if (failed(act)) return failure();
  types.push_back(RankedTensorType::get(shape, *act));
  for (unsigned i = 0; i < rowResults; ++i) types.push_back(f32Tensor(ctx, dropLast(shape)));
  return success();
}

}  // namespace

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto table = tensorOf(adaptor.getTable()).getShape();
  if (table.size() != 2) return emitOptionalError(loc, "embedding table must be (V, C)");
  SmallVector<int64_t> shape(tensorOf(adaptor.getIds()).getShape());
  shape.push_back(table[1]);
  types.push_back(RankedTensorType::get(shape, tensorOf(adaptor.getTable()).getElementType()));
  return success();
}

LogicalResult EmbeddingChunkOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                 SmallVectorImpl<Type>& types) {
  if (static_cast<int64_t>(adaptor.getFirst()) < 0) return emitOptionalError(loc, "first must not be negative");
  if (failed(EmbeddingOp::inferReturnTypes(ctx, loc, EmbeddingOp::Adaptor(adaptor.getOperands().take_front(2)), types)))
    return failure();
  if (failed(activationType(loc, {adaptor.getTable(), adaptor.getIn()}))) return failure();
  return requireShape(loc, adaptor.getIn(), cast<RankedTensorType>(types.front()).getShape(), "in");
}

// A table gradient (rows, C) from token ids and dout (ids.shape + [C]): mt.embedding_grad's
// (rows: the vocabulary) and mt.embedding_grad_chunk's (a chunk's rows).
// `padding_id` (where set) must be an id of the whole table: below `vocab` where that is known.
static LogicalResult inferTableGradient(MLIRContext* ctx, std::optional<Location> loc, ValueRange operands,
                                        Value ids, Value dout, int64_t rows, StringRef op, StringRef rowsName,
                                        std::optional<uint64_t> padding, std::optional<int64_t> vocab,
                                        SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, operands))) return failure();
  auto idsShape = tensorOf(ids).getShape();
  auto doutShape = tensorOf(dout).getShape();
  if (doutShape.size() != idsShape.size() + 1 || doutShape.drop_back() != idsShape)
    return emitOptionalError(loc, op, " dout must be ids.shape + [C]");
  if (rows <= 0) return emitOptionalError(loc, rowsName, " must be positive");
  if (padding && (static_cast<int64_t>(*padding) < 0 || (vocab && static_cast<int64_t>(*padding) >= *vocab)))
    return emitOptionalError(loc, op, " padding_id ", static_cast<int64_t>(*padding), " is not a row of the table");
  types.push_back(f32Tensor(ctx, {rows, doutShape.back()}));
  return success();
}

LogicalResult EmbeddingGradChunkOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                     SmallVectorImpl<Type>& types) {
  if (static_cast<int64_t>(adaptor.getFirst()) < 0) return emitOptionalError(loc, "first must not be negative");
  return inferTableGradient(ctx, loc, adaptor.getOperands(), adaptor.getIds(), adaptor.getDout(),
                            static_cast<int64_t>(adaptor.getRows()), "embedding_grad_chunk", "rows",
                            adaptor.getPaddingId(), std::nullopt, types);
}

LogicalResult EmbeddingGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type>& types) {
  const auto vocab = static_cast<int64_t>(adaptor.getVocab());
  return inferTableGradient(ctx, loc, adaptor.getOperands(), adaptor.getIds(), adaptor.getDout(), vocab,
                            "embedding_grad", "vocab", adaptor.getPaddingId(), vocab, types);
}

LogicalResult EmbeddingOp::verify() {
  const auto padding = getPaddingId();
  const int64_t rows = getTable().getType().getShape()[0];
  if (padding && (static_cast<int64_t>(*padding) < 0 || static_cast<int64_t>(*padding) >= rows))
    return emitOpError("padding_id ") << static_cast<int64_t>(*padding) << " is not a row of the (" << rows
                                      << ", C) table";
  return success();
}

LogicalResult PositionsOp::verify() {
  if (getType().getRank() != 2 || !getType().hasStaticShape())
    return emitOpError("result must be a static (B, T) tensor");
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto a = tensorOf(adaptor.getLhs()).getShape();
  auto b = tensorOf(adaptor.getRhs()).getShape();
  // Default-valued attributes are absent from the adaptor while the op is being parsed.
  const bool ta = adaptor.getTransposeAAttr() && adaptor.getTransposeAAttr().getValue();
  const bool tb = adaptor.getTransposeBAttr() && adaptor.getTransposeBAttr().getValue();
  if (a.size() < 2 || b.size() < 2) return emitOptionalError(loc, "matmul operands need rank >= 2");
  if (b.size() != 2 && b.size() != a.size())
    return emitOptionalError(loc, "matmul rhs must be rank 2 or have the lhs rank");
  if (b.size() == a.size() && a.drop_back(2) != b.drop_back(2))
    return emitOptionalError(loc, "matmul batch dims differ: ", shapeStr(a), " vs ", shapeStr(b));
  const int64_t m = ta ? a[a.size() - 1] : a[a.size() - 2];
  const int64_t ka = ta ? a[a.size() - 2] : a[a.size() - 1];
  const int64_t kb = tb ? b[b.size() - 1] : b[b.size() - 2];
  const int64_t n = tb ? b[b.size() - 2] : b[b.size() - 1];
  if (ka != kb)
    return emitOptionalError(loc, "matmul contraction sizes differ: ", shapeStr(a), " x ", shapeStr(b));
  SmallVector<int64_t> shape(a.drop_back(2));
  shape.push_back(m);
  shape.push_back(n);
  // The kernel's BLAS takes 32-bit dimensions (kernels/matmul/matmul_cpu.cc).
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (m > kMax || n > kMax || ka > kMax)
    return emitOptionalError(loc, "matmul dimensions exceed 2^31 - 1 (BLAS's limit): ", shapeStr(a), " x ", shapeStr(b));
  FailureOr<Type> act = activationType(loc, adaptor.getOperands());
  if (failed(act)) return failure();
  const bool f32Result = adaptor.getF32ResultAttr() && adaptor.getF32ResultAttr().getValue();
  types.push_back(RankedTensorType::get(shape, f32Result ? f32(ctx) : *act));
  return success();
}

static LogicalResult inferBroadcast(MLIRContext* ctx, std::optional<Location> loc, Value lhs,
                                    Value rhs, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, {lhs, rhs}))) return failure();
  if (!isSuffix(tensorOf(rhs).getShape(), tensorOf(lhs).getShape()))
    return emitOptionalError(loc, "rhs shape ", shapeStr(tensorOf(rhs).getShape()),
                             " must equal the lhs shape or a suffix of it ",
                             shapeStr(tensorOf(lhs).getShape()));
  FailureOr<Type> act = activationType(loc, {lhs, rhs});
  if (failed(act)) return failure();
  types.push_back(RankedTensorType::get(tensorOf(lhs).getShape(), *act));
  return success();
}

LogicalResult AddOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type>& types) {
  return inferBroadcast(ctx, loc, adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult MulOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type>& types) {
  return inferBroadcast(ctx, loc, adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult ScaleOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type>& types) {
  return inferPointwise(ctx, loc, adaptor.getOperands(), 1, types);
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type>& types) {
  return inferPointwise(ctx, loc, adaptor.getOperands(), 1, types);
}

LogicalResult DropoutOp::verify() {
  const double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0 && ratio < 1)) return emitOpError("ratio must lie in [0, 1), got ") << ratio;
  if (static_cast<int64_t>(getSite()) < 0) return emitOpError("site must be non-negative, got ") << static_cast<int64_t>(getSite());
  return success();
}

LogicalResult SumToOp::verify() {
  if (!broadcastsTo(getType().getShape(), getInput().getType().getShape()))
    return emitOpError("result shape must broadcast to the input shape");
  if (getType().getElementType() != getInput().getType().getElementType() && !getType().getElementType().isF32())
    return emitOpError("result must be f32 or of the input's type");
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto input = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (static_cast<int64_t>(perm.size()) != input.getRank())
    return emitOptionalError(loc, "perm has ", perm.size(), " entries for rank ", input.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank() || seen[p])
      return emitOptionalError(loc, "perm is not a permutation");
    seen[p] = true;
    shape.push_back(input.getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (!in.hasStaticShape() || !out.hasStaticShape() || in.getNumElements() != out.getNumElements() ||
      in.getElementType() != out.getElementType())
    return emitOpError("must keep the element type and count (") << in << " -> " << out << ")";
  return success();
}

RankedTensorType tokenTileType(RankedTensorType whole, int64_t tiles) {
  if (!whole || !whole.hasStaticShape() || whole.getRank() < 2 || tiles < 1) return nullptr;
  const int64_t batch = whole.getDimSize(0), seq = whole.getDimSize(1);
  if (batch < 1 || seq < 1 || (batch * seq) % tiles != 0) return nullptr;
  const int64_t rows = batch * seq / tiles;
  SmallVector<int64_t> shape(whole.getShape());
  if (seq % rows == 0) shape[0] = 1, shape[1] = rows;       // inside one sequence
  else if (rows % seq == 0) shape[0] = rows / seq;          // whole sequences
  else return nullptr;
  return RankedTensorType::get(shape, whole.getElementType());
}

// The whole tensor and its tiles of mt.token_split / mt.token_concat agree.
static LogicalResult verifyTokenTiles(Operation* op, Value whole, ValueRange tiles) {
  if (tiles.size() < 2) return op->emitOpError("needs at least two tiles, got ") << tiles.size();
  auto expected = tokenTileType(tensorOf(whole), static_cast<int64_t>(tiles.size()));
  if (!expected)
    return op->emitOpError("cannot cut ") << whole.getType() << " into " << tiles.size()
                                          << " equal tiles of consecutive tokens (each inside one sequence, or "
                                             "whole sequences)";
  for (Value tile : tiles)
    if (tile.getType() != expected)
      return op->emitOpError("tile ") << tile.getType() << " is not " << expected << ", one of " << tiles.size()
                                      << " tiles of " << whole.getType();
  return success();
}

LogicalResult TokenSplitOp::verify() { return verifyTokenTiles(*this, getInput(), getTiles()); }
LogicalResult TokenConcatOp::verify() { return verifyTokenTiles(*this, getResult(), getTiles()); }

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  if (failed(requireShape(loc, adaptor.getBeta(), tensorOf(adaptor.getGamma()).getShape(), "beta")))
    return failure();
  return inferNorm(ctx, loc, adaptor.getInput(), adaptor.getGamma(), adaptor.getBeta(), 2, types);
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto x = tensorOf(adaptor.getInput()).getShape();
  if (x.empty()) return emitOptionalError(loc, "layernorm_grad input must have rank >= 1");
  if (failed(requireShape(loc, adaptor.getDout(), x, "dout")) ||
      failed(requireShape(loc, adaptor.getGamma(), {x.back()}, "gamma")) ||
      failed(requireShape(loc, adaptor.getMean(), dropLast(x), "mean")) ||
      failed(requireShape(loc, adaptor.getRstd(), dropLast(x), "rstd")))
    return failure();
  FailureOr<Type> act = activationType(loc, {adaptor.getDout(), adaptor.getInput(), adaptor.getGamma()});
  if (failed(act)) return failure();
  types.push_back(RankedTensorType::get(x, *act));
  types.push_back(f32Tensor(ctx, {x.back()}));
  types.push_back(f32Tensor(ctx, {x.back()}));
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  return inferNorm(ctx, loc, adaptor.getInput(), adaptor.getGamma(), {}, 1, types);
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto x = tensorOf(adaptor.getInput()).getShape();
  if (x.empty()) return emitOptionalError(loc, "rmsnorm_grad input must have rank >= 1");
  if (failed(requireShape(loc, adaptor.getDout(), x, "dout")) ||
      failed(requireShape(loc, adaptor.getGamma(), {x.back()}, "gamma")) ||
      failed(requireShape(loc, adaptor.getRstd(), dropLast(x), "rstd")))
    return failure();
  FailureOr<Type> act = activationType(loc, {adaptor.getDout(), adaptor.getInput(), adaptor.getGamma()});
  if (failed(act)) return failure();
  types.push_back(RankedTensorType::get(x, *act));
  types.push_back(f32Tensor(ctx, {x.back()}));
  return success();
}

#define MT_POINTWISE_INFER(Op, results)                                                      \
  LogicalResult Op::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,        \
                                     Adaptor adaptor, SmallVectorImpl<Type>& types) {       \
    return inferPointwise(ctx, loc, adaptor.getOperands(), results, types);                 \
  }
MT_POINTWISE_INFER(GeluOp, 1)
MT_POINTWISE_INFER(GeluGradOp, 1)
MT_POINTWISE_INFER(SiluOp, 1)
MT_POINTWISE_INFER(SiluGradOp, 1)
MT_POINTWISE_INFER(SwigluOp, 1)
MT_POINTWISE_INFER(SwigluGradOp, 2)
#undef MT_POINTWISE_INFER

// The softcap's cap: positive and finite (the kernel's check too).
static LogicalResult inferSoftcap(MLIRContext* ctx, std::optional<Location> loc, ValueRange operands, FloatAttr cap,
                                  SmallVectorImpl<Type>& types) {
  if (!(cap.getValueAsDouble() > 0.0 && std::isfinite(cap.getValueAsDouble())))
    return emitOptionalError(loc, "softcap cap ", cap.getValueAsDouble(), " must be positive and finite");
  return inferPointwise(ctx, loc, operands, 1, types);
}
LogicalResult SoftcapOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                          SmallVectorImpl<Type>& types) {
  return inferSoftcap(ctx, loc, adaptor.getOperands(), adaptor.getCapAttr(), types);
}
LogicalResult SoftcapGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                              SmallVectorImpl<Type>& types) {
  return inferSoftcap(ctx, loc, adaptor.getOperands(), adaptor.getCapAttr(), types);
}

// gate_up (..., 2F) -> (..., F), the shape returned; alpha finite, limit finite and positive (the
// kernel's check too).
FailureOr<SmallVector<int64_t>> clampedSwigluShape(std::optional<Location> loc, Value gate_up, FloatAttr alpha,
                                                   FloatAttr limit) {
  if (failed(requireStatic(loc, {gate_up}))) return failure();
  auto x = tensorOf(gate_up).getShape();
  if (x.empty() || x.back() % 2 != 0)
    return emitOptionalError(loc, "clamped_swiglu's gate_up must end in an even dimension (gate and up "
                             "interleaved), got ", shapeStr(x));
  if (alpha && !std::isfinite(alpha.getValueAsDouble()))
    return emitOptionalError(loc, "clamped_swiglu alpha must be finite");
  if (limit && !(limit.getValueAsDouble() > 0.0 && std::isfinite(limit.getValueAsDouble())))
    return emitOptionalError(loc, "clamped_swiglu limit must be finite and positive");
  SmallVector<int64_t> half(x);
  half.back() /= 2;
  return half;
}

LogicalResult ClampedSwigluOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                SmallVectorImpl<Type>& types) {
  auto half = clampedSwigluShape(loc, adaptor.getGateUp(), adaptor.getAlphaAttr(), adaptor.getLimitAttr());
  if (failed(half)) return failure();
  types.push_back(RankedTensorType::get(*half, tensorOf(adaptor.getGateUp()).getElementType()));
  return success();
}

LogicalResult ClampedSwigluGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                    SmallVectorImpl<Type>& types) {
  auto half = clampedSwigluShape(loc, adaptor.getGateUp(), adaptor.getAlphaAttr(), adaptor.getLimitAttr());
  if (failed(half) || failed(requireStatic(loc, {adaptor.getDout()}))) return failure();
  if (failed(requireShape(loc, adaptor.getDout(), *half, "dout")) ||
      failed(activationType(loc, {adaptor.getDout(), adaptor.getGateUp()})))
    return failure();
  types.push_back(adaptor.getGateUp().getType());
  return success();
}

LogicalResult SoftmaxXentOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto logits = tensorOf(adaptor.getLogits()).getShape();
  if (logits.empty()) return emitOptionalError(loc, "logits must have rank >= 1");
  if (failed(requireShape(loc, adaptor.getTargets(), dropLast(logits), "targets")))
    return failure();
  types.push_back(f32Tensor(ctx, {}));
  types.push_back(f32Tensor(ctx, dropLast(logits)));
  return success();
}

LogicalResult SoftmaxXentGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto logits = tensorOf(adaptor.getLogits()).getShape();
  if (logits.empty()) return emitOptionalError(loc, "logits must have rank >= 1");
  if (failed(requireShape(loc, adaptor.getDloss(), {}, "dloss")) ||
      failed(requireShape(loc, adaptor.getTargets(), dropLast(logits), "targets")) ||
      failed(requireShape(loc, adaptor.getLse(), dropLast(logits), "lse")))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult XentChunkOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                            SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto logits = tensorOf(adaptor.getLogits()).getShape();
  if (logits.empty()) return emitOptionalError(loc, "logits must have rank >= 1");
  if (static_cast<int64_t>(adaptor.getFirst()) < 0) return emitOptionalError(loc, "first must not be negative");
  const SmallVector<int64_t> running = runningShape(dropLast(logits));
  if (failed(requireShape(loc, adaptor.getTargets(), dropLast(logits), "targets")) ||
      failed(requireShape(loc, adaptor.getRunning(), running, "running")))
    return failure();
  types.push_back(f32Tensor(ctx, running));
  return success();
}

LogicalResult XentFinishOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                             SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto targets = tensorOf(adaptor.getTargets()).getShape();
  if (static_cast<int64_t>(adaptor.getVocab()) <= 0) return emitOptionalError(loc, "vocab must be positive");
  if (failed(requireShape(loc, adaptor.getRunning(), runningShape(targets), "running"))) return failure();
  types.push_back(f32Tensor(ctx, {}));
  types.push_back(f32Tensor(ctx, targets));
  return success();
}

LogicalResult XentChunkGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                SmallVectorImpl<Type>& types) {
  if (static_cast<int64_t>(adaptor.getFirst()) < 0 || static_cast<int64_t>(adaptor.getVocab()) <= 0)
    return emitOptionalError(loc, "first must not be negative and vocab must be positive");
  SoftmaxXentGradOp::Adaptor plain(adaptor.getOperands());
  return SoftmaxXentGradOp::inferReturnTypes(ctx, loc, plain, types);
}

LogicalResult CountTargetsOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                               SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  if (static_cast<int64_t>(adaptor.getVocab()) <= 0) return emitOptionalError(loc, "vocab must be positive");
  types.push_back(f32Tensor(ctx, {}));
  return success();
}

LogicalResult XentTileOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                           SmallVectorImpl<Type>& types) {
  if (failed(requireShape(loc, adaptor.getCount(), {}, "count"))) return failure();
  SoftmaxXentOp::Adaptor plain(adaptor.getOperands().drop_back());
  return SoftmaxXentOp::inferReturnTypes(ctx, loc, plain, types);
}

LogicalResult XentTileGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                               SmallVectorImpl<Type>& types) {
  if (failed(requireShape(loc, adaptor.getCount(), {}, "count"))) return failure();
  SoftmaxXentGradOp::Adaptor plain(adaptor.getOperands().drop_back());
  return SoftmaxXentGradOp::inferReturnTypes(ctx, loc, plain, types);
}

LogicalResult HostTaskOp::verify() {
  const HostTaskKind kind = getKind();
  if (kind == HostTaskKind::EmbeddingLookup || kind == HostTaskKind::EmbeddingGrad) {
    const bool lookup = kind == HostTaskKind::EmbeddingLookup;
    if (getTensors().size() != 3)
      return emitOpError("\"") << stringifyHostTaskKind(kind) << "\" takes 3 tensors, got " << getTensors().size();
    auto ids = cast<RankedTensorType>(getTensors()[1].getType());
    auto rows = cast<RankedTensorType>(getTensors()[lookup ? 0 : 2].getType());
    auto table = cast<RankedTensorType>(getTensors()[lookup ? 2 : 0].getType());
    SmallVector<int64_t> expected(ids.getShape());
    expected.push_back(table.getRank() == 2 ? table.getDimSize(1) : -1);
    if (!ids.getElementType().isInteger(32) || rows.getShape() != ArrayRef<int64_t>(expected))
      return emitOpError("\"") << stringifyHostTaskKind(kind) << "\" needs i32 token ids and rows of shape ids.shape + [C] of a (V, C) "
                                << "table; got " << ids << ", " << rows << " and " << table;
  }
  // The table may be a row piece of the parameter: the emitter checks the id against the whole.
  if (Attribute attr = (*this)->getAttr(kPaddingIdAttr)) {
    auto padding = dyn_cast<IntegerAttr>(attr);
    if (!padding || !padding.getType().isInteger(64) || kind != HostTaskKind::EmbeddingGrad || padding.getInt() < 0)
      return emitOpError("mt.padding_id must be a token id (an i64, not negative) on an \"embedding_grad\" task");
  }
  return success();  // the other kinds take any tensors (the emitter checks what they must be)
}

}  // namespace mt

#define GET_OP_CLASSES
#include "compiler/dialect/MtOps.cpp.inc"
