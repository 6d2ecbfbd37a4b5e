// Shape inference and verifiers of the `mt` ops. Every rule mirrors the runtime kernel's
// check (kernels/<family>/*_cpu.cc): what verifies here runs there.
#include <cmath>
#include <limits>

#include "compiler/dialect/MtAttrNames.h"
#include "compiler/dialect/MtDialect.h"
#include "compiler/dialect/MtOpShapes.h"
#include "kernels/rope/rope.h"
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

// `window` and `softcap` (null while the op is parsed with their defaults) and `sinks` (null: none)
// as mt.attention's.
LogicalResult checkAttentionOperands(std::optional<Location> loc, Value q, Value k, Value v, int64_t heads,
                                     int64_t kvHeads, IntegerAttr window, FloatAttr softcap, Value sinks = {},
                                     Value positions = {}) {
  if (window && window.getInt() < 0)
    return emitOptionalError(loc, "attention window ", window.getInt(), " must not be negative (0: none)");
  if (softcap && !(softcap.getValueAsDouble() >= 0.0 && std::isfinite(softcap.getValueAsDouble())))
    return emitOptionalError(loc, "attention softcap ", softcap.getValueAsDouble(),
                             " must be positive and finite (0: none)");
  if (sinks && (failed(requireStatic(loc, {sinks})) || failed(requireShape(loc, sinks, {heads}, "sinks"))))
    return failure();
  if (failed(requireStatic(loc, {q, k, v}))) return failure();
  auto qs = tensorOf(q).getShape();
  if (qs.size() != 3) return emitOptionalError(loc, "attention q must be (B, T, H*D)");
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    return emitOptionalError(loc, "num_heads ", heads, " must be a positive multiple of num_kv_heads ",
                             kvHeads);
  if (qs[2] % heads != 0)
    return emitOptionalError(loc, "q width ", qs[2], " is not divisible by ", heads, " heads");
  const int64_t kvWidth = qs[2] / heads * kvHeads;
  if (failed(requireShape(loc, k, {qs[0], qs[1], kvWidth}, "k")) ||
      failed(requireShape(loc, v, {qs[0], qs[1], kvWidth}, "v")))
    return failure();
  if (positions && (failed(requireStatic(loc, {positions})) ||
                    failed(requireShape(loc, positions, {qs[0], qs[1]}, "positions"))))
    return failure();
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

// The largest position mt.rope's offset may give (the kernel's check says the same).
constexpr int64_t kMaxPosition = std::numeric_limits<int32_t>::max();

// The input (B, T, H*D) and attributes of mt.rope and mt.rope_at (`op` names it).
template <typename Adaptor>
LogicalResult checkRope(std::optional<Location> loc, Adaptor adaptor, StringRef op) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto x = tensorOf(adaptor.getInput()).getShape();
  const int64_t headDim = adaptor.getHeadDim();
  if (x.size() != 3) return emitOptionalError(loc, op, " input must be (B, T, H*D)");
  if (headDim <= 0 || headDim % 2 != 0 || x[2] % headDim != 0)
    return emitOptionalError(loc, op, " head_dim ", headDim, " must be even and divide ", x[2]);
  if (adaptor.getThetaAttr() && !(adaptor.getThetaAttr().getValueAsDouble() > 0.0))
    return emitOptionalError(loc, op, " theta must be positive");
  const int64_t rotary = adaptor.getRotaryDimAttr() ? adaptor.getRotaryDimAttr().getInt() : 0;
  if (rotary < 0 || rotary > headDim || rotary % 2 != 0)
    return emitOptionalError(loc, op, " rotary_dim ", rotary, " must be even and at most head_dim ", headDim,
                             " (0: head_dim)");
  const int64_t kind = adaptor.getScalingKindAttr() ? adaptor.getScalingKindAttr().getInt() : 0;
  const auto scaling = adaptor.getScalingAttr();
  if (kind < 0 || kind >= kRopeScalingKinds)
    return emitOptionalError(loc, op, " scaling_kind ", kind,
                             " is not 0 (none), 1 (linear), 2 (llama3), 3 (yarn) or 4 (longrope)");
  if (kind == static_cast<int64_t>(RopeScalingKind::kLongRope) && (rotary ? rotary : headDim) / 2 > kMaxRopePairs)
    return emitOptionalError(loc, op, " longrope scaling covers at most ", kMaxRopePairs, " pairs");
  const size_t values = ropeScalingValues(kind, rotary ? rotary : headDim);
  if ((kind != 0) != static_cast<bool>(scaling) || (scaling && static_cast<size_t>(scaling.size()) != values))
    return emitOptionalError(loc, op, " takes `scaling` (5 values: factor, a, b, c, attention; with longrope each "
                             "pair's factor after them) exactly when its scaling_kind is not 0");
  // The kernels' own check of the values (theta checked above), so that no plan mtrun refuses is written.
  if (scaling)
    if (const std::string problem = ropeScalingProblem(
            ropeFrequencies(0.0f, kind, scaling.asArrayRef().data(), (rotary ? rotary : headDim) / 2));
        !problem.empty())
      return emitOptionalError(loc, op, " ", problem);
  return success();
}

LogicalResult RopeOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(checkRope(loc, adaptor, "rope"))) return failure();
  // (An attribute left at its default is absent while the op is parsed.)
  if (IntegerAttr offset = adaptor.getPositionOffsetAttr(); offset && (offset.getInt() < 0 || offset.getInt() > kMaxPosition))
    return emitOptionalError(loc, "rope position_offset ", offset.getInt(), " must lie in [0, ", kMaxPosition, "]");
  types.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(checkAttentionOperands(loc, adaptor.getQ(), adaptor.getK(), adaptor.getV(), adaptor.getNumHeads(),
                                    adaptor.getNumKvHeads(), adaptor.getWindowAttr(), adaptor.getSoftcapAttr(), adaptor.getSinks(),
                                    adaptor.getPositions())))
    return failure();
  auto q = tensorOf(adaptor.getQ()).getShape();
  FailureOr<Type> act = activationType(loc, {adaptor.getQ(), adaptor.getK(), adaptor.getV()});
  if (failed(act)) return failure();
  types.push_back(RankedTensorType::get(q, *act));
  types.push_back(f32Tensor(ctx, {q[0], static_cast<int64_t>(adaptor.getNumHeads()), q[1]}));
  return success();
}

LogicalResult RopeAtOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& types) {
  if (failed(checkRope(loc, adaptor, "rope_at"))) return failure();
  auto x = tensorOf(adaptor.getInput()).getShape();
  if (failed(requireShape(loc, adaptor.getPositions(), {x[0], x[1]}, "positions"))) return failure();
  types.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult CachedAttentionOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(checkAttentionOperands(loc, adaptor.getQ(), adaptor.getK(), adaptor.getV(), adaptor.getNumHeads(),
                                    adaptor.getNumKvHeads(), adaptor.getWindowAttr(), adaptor.getSoftcapAttr(),
                                    adaptor.getSinks())) ||
      failed(requireStatic(loc, {adaptor.getKCache(), adaptor.getVCache(), adaptor.getPositions()})))
    return failure();
  auto q = tensorOf(adaptor.getQ()).getShape();
  auto cache = tensorOf(adaptor.getKCache()).getShape();
  const int64_t kvWidth = tensorOf(adaptor.getK()).getShape()[2];
  if (cache.size() != 3 || cache[0] != q[0] || cache[2] != kvWidth || cache[1] < q[1])
    return emitOptionalError(loc, "k_cache must be (B, S, Hkv*D) = (", q[0], ", S >= ", q[1], ", ", kvWidth,
                             "), got ", shapeStr(cache));
  if (failed(requireShape(loc, adaptor.getVCache(), cache, "v_cache")) ||
      failed(requireShape(loc, adaptor.getPositions(), {q[0], q[1]}, "positions")))
    return failure();
  FailureOr<Type> act = activationType(
      loc, {adaptor.getQ(), adaptor.getK(), adaptor.getV(), adaptor.getKCache(), adaptor.getVCache()});
  if (failed(act)) return failure();
  types.push_back(RankedTensorType::get(q, *act));
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(checkAttentionOperands(loc, adaptor.getQ(), adaptor.getK(), adaptor.getV(), adaptor.getNumHeads(),
                                    adaptor.getNumKvHeads(), adaptor.getWindowAttr(), adaptor.getSoftcapAttr(), {},
                                    adaptor.getPositions())))
    return failure();
  auto q = tensorOf(adaptor.getQ()).getShape();
  const int64_t heads = adaptor.getNumHeads();
  if (failed(requireShape(loc, adaptor.getDout(), q, "dout")) ||
      failed(requireShape(loc, adaptor.getOut(), q, "out")) ||
      failed(requireShape(loc, adaptor.getLse(), {q[0], heads, q[1]}, "lse")))
    return failure();
  if (failed(activationType(loc, {adaptor.getDout(), adaptor.getQ(), adaptor.getK(), adaptor.getV(), adaptor.getOut()})))
    return failure();
  types.push_back(adaptor.getQ().getType());
  types.push_back(adaptor.getK().getType());
  types.push_back(adaptor.getV().getType());
  return success();
}

LogicalResult AttentionSinksGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                     Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto sinks = tensorOf(adaptor.getSinks()).getShape();
  auto dout = tensorOf(adaptor.getDout()).getShape();
  if (sinks.size() != 1 || sinks[0] <= 0) return emitOptionalError(loc, "sinks must be (H), got ", shapeStr(sinks));
  if (dout.size() != 3 || dout[2] % sinks[0] != 0)
    return emitOptionalError(loc, "dout must be (B, T, H*D) for ", sinks[0], " heads, got ", shapeStr(dout));
  if (failed(requireShape(loc, adaptor.getOut(), dout, "out")) ||
      failed(requireShape(loc, adaptor.getLse(), {dout[0], sinks[0], dout[1]}, "lse")) ||
      failed(activationType(loc, {adaptor.getDout(), adaptor.getOut()})))
    return failure();
  types.push_back(adaptor.getSinks().getType());
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
