// Gradient rules (vector-Jacobian products) of the forward `mt` ops. Each builds `mt` ops at
// the builder's insertion point; a null result gradient means nothing depends on that result.
#include "compiler/dialect/MtDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace mt {
namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

// dy summed down to the shape of `operand` where `operand` was broadcast.
Value reduceToShapeOf(OpBuilder& b, Location loc, Value dy, Value operand) {
  if (tensorOf(dy).getShape() == tensorOf(operand).getShape()) return dy;
  return b.create<SumToOp>(loc, operand.getType(), dy);
}

// Folds every leading dimension into the rows: (..., R, C) -> (prod(...) * R, C).
Value flattenRows(OpBuilder& b, Location loc, Value x) {
  auto type = tensorOf(x);
  if (type.getRank() == 2) return x;
  const int64_t cols = type.getShape().back();
  auto flat = RankedTensorType::get({type.getNumElements() / cols, cols}, type.getElementType());
  return b.create<ReshapeOp>(loc, flat, x);
}

}  // namespace

SmallVector<Value> EmbeddingOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  const int64_t vocab = getTable().getType().getShape()[0];
  Value dtable = b.create<EmbeddingGradOp>(getLoc(), getIds(), grads[0], vocab, getPaddingIdAttr());
  return {Value(), dtable};
}

SmallVector<Value> MatmulOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  const Location loc = getLoc();
  const Value dy = grads[0], a = getLhs(), w = getRhs();
  const bool ta = getTransposeA(), tb = getTransposeB();
  const bool broadcastRhs = tensorOf(w).getRank() == 2 && tensorOf(a).getRank() > 2;
  if (ta && broadcastRhs) {
    emitOpError("has no gradient rule for a transposed batched lhs with a shared rhs");
    return {};
  }
  // Y = op(A) op(B):  d op(A) = dY op(B)^T,  d op(B) = op(A)^T dY.
  Value da = ta ? b.create<MatmulOp>(loc, w, dy, tb, true).getResult()
                : b.create<MatmulOp>(loc, dy, w, false, !tb).getResult();
  Value dw;
  if (broadcastRhs) {
    // The shared rhs sums its gradient over every batch: fold the batch into the rows.
    Value a2 = flattenRows(b, loc, a), dy2 = flattenRows(b, loc, dy);
    dw = tb ? b.create<MatmulOp>(loc, dy2, a2, true, false).getResult()
            : b.create<MatmulOp>(loc, a2, dy2, true, false).getResult();
  } else {
    dw = tb ? b.create<MatmulOp>(loc, dy, a, true, ta).getResult()
            : b.create<MatmulOp>(loc, a, dy, !ta, false).getResult();
  }
  return {da, dw};
}

SmallVector<Value> AddOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {grads[0], reduceToShapeOf(b, getLoc(), grads[0], getRhs())};
}

SmallVector<Value> MulOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  const Location loc = getLoc();
  Value da = b.create<MulOp>(loc, grads[0], getRhs());
  Value db = b.create<MulOp>(loc, grads[0], getLhs());
  return {da, reduceToShapeOf(b, loc, db, getRhs())};
}

SmallVector<Value> ScaleOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<ScaleOp>(getLoc(), grads[0], getFactor())};
}

// The same mask (same site, same step) scales the gradient: d(x * keep * s)/dx = keep * s.
SmallVector<Value> DropoutOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<DropoutOp>(getLoc(), grads[0], getSite(), getRatio())};
}

SmallVector<Value> SumToOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<BroadcastOp>(getLoc(), getInput().getType(), grads[0])};
}

SmallVector<Value> TransposeOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return {b.create<TransposeOp>(getLoc(), grads[0], inverse)};
}

SmallVector<Value> ReshapeOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<ReshapeOp>(getLoc(), getInput().getType(), grads[0])};
}

SmallVector<Value> LayerNormOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  auto g = b.create<LayerNormGradOp>(getLoc(), grads[0], getInput(), getGamma(), getMean(), getRstd());
  return {g.getDinput(), g.getDgamma(), g.getDbeta()};
}

SmallVector<Value> RmsNormOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  auto g = b.create<RmsNormGradOp>(getLoc(), grads[0], getInput(), getGamma(), getRstd(), getOffset().isZero() ? FloatAttr() : getOffsetAttr());
  return {g.getDinput(), g.getDgamma()};
}

SmallVector<Value> GeluOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<GeluGradOp>(getLoc(), grads[0], getInput(), getTanh())};
}

SmallVector<Value> SoftcapOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<SoftcapGradOp>(getLoc(), grads[0], getResult(), getCapAttr())};
}

SmallVector<Value> SiluOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<SiluGradOp>(getLoc(), grads[0], getInput())};
}

SmallVector<Value> SwigluOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  auto g = b.create<SwigluGradOp>(getLoc(), grads[0], getGate(), getUp());
  return {g.getDgate(), g.getDup()};
}

SmallVector<Value> RopeOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  // The same frequencies (and scaling), turned back.
  return {b.create<RopeOp>(getLoc(), grads[0], getHeadDimAttr(), getThetaAttr(), b.getBoolAttr(!getInverse()),
                           getPositionOffsetAttr(), getScalingKindAttr(), getScalingAttr(), getRotaryDimAttr())};
}

SmallVector<Value> RopeAtOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  // The same positions and frequencies, turned back; the positions are an input.
  return {b.create<RopeAtOp>(getLoc(), grads[0], getPositions(), getHeadDimAttr(), getThetaAttr(),
                             getScalingKindAttr(), getScalingAttr(), b.getBoolAttr(!getInverse()), getRotaryDimAttr()),
          Value()};
}

// The tiles' gradients make the whole's; a tile nothing depends on contributes zeros.
SmallVector<Value> TokenSplitOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  SmallVector<Value> tiles;
  for (auto [tile, g] : llvm::zip(getTiles(), grads))
    tiles.push_back(g ? g : b.create<FillOp>(getLoc(), tile.getType(), b.getF32FloatAttr(0.0f)).getResult());
  return {b.create<TokenConcatOp>(getLoc(), getInput().getType(), tiles)};
}

SmallVector<Value> TokenConcatOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  auto split = b.create<TokenSplitOp>(getLoc(), getTiles().getTypes(), grads[0]);
  return SmallVector<Value>(split.getResults());
}

SmallVector<Value> ClampedSwigluOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<ClampedSwigluGradOp>(getLoc(), grads[0], getGateUp(), getAlphaAttr(), getLimitAttr())};
}

SmallVector<Value> AttentionOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  auto g = b.create<AttentionGradOp>(getLoc(), grads[0], getQ(), getK(), getV(), getResult(), getLse(),
                                     getPositions(), getNumHeads(), getNumKvHeads(), getWindow(), getSoftcap());
  SmallVector<Value> operand_grads = {g.getDq(), g.getDk(), g.getDv()};
  // The sinks' own gradient; q, k and v's are the same given the lse, which counts the sinks.
  if (getSinks())
    operand_grads.push_back(b.create<AttentionSinksGradOp>(getLoc(), grads[0], getResult(), getLse(), getSinks()));
  if (getPositions()) operand_grads.push_back(Value());  // an input, not differentiated
  return operand_grads;
}

SmallVector<Value> SoftmaxXentOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  Value dlogits = b.create<SoftmaxXentGradOp>(getLoc(), grads[0], getLogits(), getTargets(), getLse());
  return {dlogits, Value()};
}

SmallVector<Value> XentTileOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  if (!grads[0]) return {Value(), Value(), Value()};  // only the log-sum-exp is read: nothing to differentiate
  Value dlogits = b.create<XentTileGradOp>(getLoc(), grads[0], getLogits(), getTargets(), getLse(), getCount());
  return {dlogits, Value(), Value()};
}

SmallVector<Value> UnaryOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<UnaryGradOp>(getLoc(), grads[0], getInput(), getFnAttr())};
}

SmallVector<Value> ClampOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<ClampGradOp>(getLoc(), grads[0], getInput(), getMinAttr(), getMaxAttr())};
}

SmallVector<Value> BinaryOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  auto g = b.create<BinaryGradOp>(getLoc(), grads[0], getLhs(), getRhs(), getFnAttr());
  return {reduceToShapeOf(b, getLoc(), g.getDlhs(), getLhs()), reduceToShapeOf(b, getLoc(), g.getDrhs(), getRhs())};
}

SmallVector<Value> WhereOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  if (!getLhs().getType().getElementType().isF32()) return {Value(), Value(), Value()};
  const Location loc = getLoc();
  Value zero = b.create<FillOp>(loc, RankedTensorType::get({}, b.getF32Type()), b.getF32FloatAttr(0.0f));
  Value dlhs = b.create<WhereOp>(loc, getCond(), grads[0], zero);
  Value drhs = b.create<WhereOp>(loc, getCond(), zero, grads[0]);
  return {Value(), reduceToShapeOf(b, loc, dlhs, getLhs()), reduceToShapeOf(b, loc, drhs, getRhs())};
}

SmallVector<Value> BroadcastOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  if (!getType().getElementType().isF32()) return {Value()};
  return {reduceToShapeOf(b, getLoc(), grads[0], getInput())};
}

SmallVector<Value> SoftmaxOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<SoftmaxGradOp>(getLoc(), grads[0], getResult(), getAxisAttr(), getLogAttr())};
}

SmallVector<Value> GatherOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  if (!getType().getElementType().isF32()) return {Value(), Value()};
  return {b.create<GatherGradOp>(getLoc(), getData().getType(), getIndices(), grads[0], getAxisAttr()), Value()};
}

SmallVector<Value> ConcatOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  if (!getType().getElementType().isF32()) return {Value(), Value()};
  const int64_t rank = getType().getRank(), axis = getAxis();
  SmallVector<int64_t> starts(rank, 0), steps(rank, 1);
  Value dlhs = b.create<SliceOp>(getLoc(), getLhs().getType(), grads[0], starts, steps);
  starts[axis] = getLhs().getType().getDimSize(axis);
  Value drhs = b.create<SliceOp>(getLoc(), getRhs().getType(), grads[0], starts, steps);
  return {dlhs, drhs};
}

SmallVector<Value> SliceOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  if (!getType().getElementType().isF32()) return {Value()};
  return {b.create<SliceGradOp>(getLoc(), getInput().getType(), grads[0], getStartsAttr(), getStepsAttr())};
}

SmallVector<Value> TriluOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  if (!getType().getElementType().isF32()) return {Value()};
  return {b.create<TriluOp>(getLoc(), grads[0], getUpperAttr(), getKAttr())};
}

}  // namespace mt
