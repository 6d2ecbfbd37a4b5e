// The preference-training ops (MtPreferenceOps.td): shape inference mirroring their kernels'
// checks (kernels/loss/loss_cpu.cc), costs, kernel attributes and gradient rules.
#include <cmath>

#include "compiler/dialect/MtDialect.h"
#include "compiler/dialect/MtOpShapes.h"
#include "kernels/loss/loss.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace mt {

using namespace op_shapes;

namespace {

// logits (B, T, V) with targets (B, T): the batch's rows B.
FailureOr<int64_t> sequenceRows(std::optional<Location> loc, Value logits, Value targets) {
  auto shape = tensorOf(logits).getShape();
  if (shape.size() != 3) return emitOptionalError(loc, "logits must be (B, T, V), not ", shapeStr(shape));
  if (failed(requireShape(loc, targets, dropLast(shape), "targets"))) return failure();
  return shape[0];
}

// A positive beta and a label smoothing in [0, 1/2] (below it for the robust loss), as the kernels
// check; gamma finite, the simpo kind's only; tau positive for the discopop kind, 0 for the others.
// Read from the attributes themselves: while an op is parsed, those left to their defaults (kind,
// label_smoothing, gamma, tau) are absent (beta, required, the adaptor has checked:
// Mt_InferTypeOpAdaptor).
template <typename Adaptor>
LogicalResult requireLossAttrs(std::optional<Location> loc, Adaptor adaptor) {
  const FloatAttr beta = adaptor.getBetaAttr(), smoothing = adaptor.getLabelSmoothingAttr();
  const FloatAttr gamma = adaptor.getGammaAttr(), tau = adaptor.getTauAttr();
  const PreferenceLossAttr kind_attr = adaptor.getKindAttr();
  const float b = beta.getValue().convertToFloat(), e = smoothing ? smoothing.getValue().convertToFloat() : 0.0f;
  const float g = gamma ? gamma.getValue().convertToFloat() : 0.0f, t = tau ? tau.getValue().convertToFloat() : 0.0f;
  const PreferenceLoss kind = kind_attr ? kind_attr.getValue() : PreferenceLoss::Sigmoid;
  if (!std::isfinite(g) || (g != 0.0f && kind != PreferenceLoss::Simpo))
    return emitOptionalError(loc, "gamma (SimPO's target margin) must be finite, and 0 but for kind simpo");
  if (kind == PreferenceLoss::Discopop ? !(t > 0.0f && std::isfinite(t)) : t != 0.0f)
    return emitOptionalError(loc, "tau (DiscoPOP's temperature) must be positive for kind discopop, and 0 for the "
                                  "others");
  if (!(b > 0.0f) || !(e >= 0.0f && e <= 0.5f) || (kind == PreferenceLoss::Robust && e == 0.5f))
    return emitOptionalError(loc, "beta must be positive and label_smoothing in [0, 1/2] (robust: below 1/2)");
  return success();
}

// logp and reference (B) of an even B: the pairs' rows.
// `value` (B) of an even B > 0: rows in pairs, `name` in the message.
LogicalResult requirePairRows(std::optional<Location> loc, Value value, const char* name) {
  auto rows = tensorOf(value).getShape();
  if (rows.size() != 1 || rows[0] == 0 || rows[0] % 2 != 0)
    return emitOptionalError(loc, name, " must be (B) of an even B > 0 (pairs of rows), not ", shapeStr(rows));
  return success();
}

LogicalResult requirePairs(std::optional<Location> loc, Value logp, Value reference) {
  if (failed(requirePairRows(loc, logp, "logp"))) return failure();
  return requireShape(loc, reference, tensorOf(logp).getShape(), "reference");
}

}  // namespace

LogicalResult SequenceLogprobOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                  SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  FailureOr<int64_t> rows = sequenceRows(loc, adaptor.getLogits(), adaptor.getTargets());
  if (failed(rows)) return failure();
  types.push_back(f32Tensor(ctx, {*rows}));
  types.push_back(f32Tensor(ctx, tensorOf(adaptor.getTargets()).getShape()));
  return success();
}

LogicalResult SequenceLogprobGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                      SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  FailureOr<int64_t> rows = sequenceRows(loc, adaptor.getLogits(), adaptor.getTargets());
  if (failed(rows) || failed(requireShape(loc, adaptor.getDlogp(), {*rows}, "dlogp")) ||
      failed(requireShape(loc, adaptor.getLse(), tensorOf(adaptor.getTargets()).getShape(), "lse")))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult SequenceLogprobFinishOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                        Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto targets = tensorOf(adaptor.getTargets()).getShape();
  if (targets.size() != 2) return emitOptionalError(loc, "targets must be (B, T), not ", shapeStr(targets));
  if (static_cast<int64_t>(adaptor.getVocab()) <= 0) return emitOptionalError(loc, "vocab must be positive");
  if (failed(requireShape(loc, adaptor.getRunning(), runningShape(targets), "running"))) return failure();
  types.push_back(f32Tensor(ctx, {targets[0]}));
  types.push_back(f32Tensor(ctx, targets));
  return success();
}

LogicalResult SequenceLogprobChunkGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                           Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (static_cast<int64_t>(adaptor.getFirst()) < 0 || static_cast<int64_t>(adaptor.getVocab()) <= 0)
    return emitOptionalError(loc, "first must not be negative and vocab must be positive");
  SequenceLogprobGradOp::Adaptor whole(adaptor.getOperands());
  return SequenceLogprobGradOp::inferReturnTypes(ctx, loc, whole, types);
}

// logp (B) of an even B and targets (B, T), a positive vocabulary and a finite alpha (mt.pair_nll's).
static LogicalResult requirePairNll(std::optional<Location> loc, Value logp, Value targets, int64_t vocab,
                                    llvm::APFloat alpha) {
  if (failed(requirePairs(loc, logp, logp))) return failure();
  auto rows = tensorOf(targets).getShape();
  if (rows.size() != 2 || rows[0] != tensorOf(logp).getDimSize(0))
    return emitOptionalError(loc, "targets must be (B, T) beside logp (B), not ", shapeStr(rows));
  if (vocab <= 0 || !std::isfinite(alpha.convertToFloat()))
    return emitOptionalError(loc, "vocab must be positive and alpha finite");
  return success();
}

LogicalResult PairNllOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                          SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requirePairNll(loc, adaptor.getLogp(), adaptor.getTargets(), adaptor.getVocab(), adaptor.getAlpha())))
    return failure();
  types.push_back(f32Tensor(ctx, {}));
  return success();
}

LogicalResult PairNllGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                              SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireShape(loc, adaptor.getDloss(), {}, "dloss")) ||
      failed(requirePairNll(loc, adaptor.getLogp(), adaptor.getTargets(), adaptor.getVocab(), adaptor.getAlpha())))
    return failure();
  types.push_back(adaptor.getLogp().getType());
  return success();
}

LogicalResult DpoLossOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                          SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requirePairs(loc, adaptor.getLogp(), adaptor.getReference())) ||
      failed(requireLossAttrs(loc, adaptor)))
    return failure();
  types.push_back(f32Tensor(ctx, {}));
  return success();
}

LogicalResult DpoLossGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                              SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireShape(loc, adaptor.getDloss(), {}, "dloss")) ||
      failed(requirePairs(loc, adaptor.getLogp(), adaptor.getReference())) ||
      failed(requireLossAttrs(loc, adaptor)))
    return failure();
  types.push_back(adaptor.getLogp().getType());
  return success();
}

// logp and reference (B) of an even B, labels (B/2); beta positive, the weights not negative, all
// finite (read from the attributes themselves, as requireLossAttrs).
template <typename Adaptor>
static LogicalResult requireKto(std::optional<Location> loc, Adaptor adaptor) {
  if (failed(requirePairs(loc, adaptor.getLogp(), adaptor.getReference())) ||
      failed(requireShape(loc, adaptor.getLabels(), {tensorOf(adaptor.getLogp()).getDimSize(0) / 2}, "labels")))
    return failure();
  const FloatAttr desirable = adaptor.getDesirableWeightAttr(), undesirable = adaptor.getUndesirableWeightAttr();
  const float b = adaptor.getBetaAttr().getValue().convertToFloat();
  const float d = desirable ? desirable.getValue().convertToFloat() : 1.0f;
  const float u = undesirable ? undesirable.getValue().convertToFloat() : 1.0f;
  if (!(b > 0.0f) || !std::isfinite(b) || !(d >= 0.0f) || !std::isfinite(d) || !(u >= 0.0f) || !std::isfinite(u))
    return emitOptionalError(loc, "beta must be positive and desirable_weight and undesirable_weight not negative, "
                                  "all finite");
  return success();
}

LogicalResult KtoLossOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                          SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) || failed(requireKto(loc, adaptor))) return failure();
  types.push_back(f32Tensor(ctx, {}));
  return success();
}

LogicalResult KtoLossGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                              SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireShape(loc, adaptor.getDloss(), {}, "dloss")) || failed(requireKto(loc, adaptor)))
    return failure();
  types.push_back(adaptor.getLogp().getType());
  return success();
}

// scores (B, T, 1) beside positions (B).
static LogicalResult requireRowScores(std::optional<Location> loc, Value scores, Value positions) {
  auto shape = tensorOf(scores).getShape();
  if (shape.size() != 3 || shape[2] != 1 || shape[0] == 0)
    return emitOptionalError(loc, "scores must be (B, T, 1), one per token (a score head), not ", shapeStr(shape));
  return requireShape(loc, positions, {shape[0]}, "positions");
}

// rewards (B) of an even B, margins (B/2) where given, a center not negative and finite.
template <typename Adaptor>
static LogicalResult requireRewards(std::optional<Location> loc, Adaptor adaptor) {
  if (failed(requirePairRows(loc, adaptor.getRewards(), "rewards"))) return failure();
  if (Value margins = adaptor.getMargins();
      margins && failed(requireShape(loc, margins, {tensorOf(adaptor.getRewards()).getDimSize(0) / 2}, "margins")))
    return failure();
  const FloatAttr center = adaptor.getCenterAttr();
  const float c = center ? center.getValue().convertToFloat() : 0.0f;
  if (!(c >= 0.0f) || !std::isfinite(c)) return emitOptionalError(loc, "center must not be negative, and finite");
  return success();
}

LogicalResult RowScoreOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                           SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireRowScores(loc, adaptor.getScores(), adaptor.getPositions())))
    return failure();
  types.push_back(f32Tensor(ctx, {tensorOf(adaptor.getScores()).getDimSize(0)}));
  return success();
}

LogicalResult RowScoreGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                               SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireRowScores(loc, adaptor.getScores(), adaptor.getPositions())) ||
      failed(requireShape(loc, adaptor.getDrewards(), {tensorOf(adaptor.getScores()).getDimSize(0)}, "drewards")))
    return failure();
  types.push_back(adaptor.getScores().getType());
  return success();
}

LogicalResult RewardLossOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                             SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) || failed(requireRewards(loc, adaptor))) return failure();
  types.push_back(f32Tensor(ctx, {}));
  return success();
}

LogicalResult RewardLossGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                 SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireShape(loc, adaptor.getDloss(), {}, "dloss")) || failed(requireRewards(loc, adaptor)))
    return failure();
  types.push_back(adaptor.getRewards().getType());
  return success();
}

// Costs: a log-sum-exp and a pick per token as mt.softmax_xent's; the pairs' few flops.
int64_t SequenceLogprobOp::getFlops() { return 4 * tensorOf(getLogits()).getNumElements(); }
int64_t SequenceLogprobGradOp::getFlops() { return 3 * tensorOf(getLogits()).getNumElements(); }
int64_t SequenceLogprobFinishOp::getFlops() { return tensorOf(getTargets()).getNumElements(); }
int64_t SequenceLogprobChunkGradOp::getFlops() { return 3 * tensorOf(getLogits()).getNumElements(); }
int64_t PairNllOp::getFlops() { return tensorOf(getTargets()).getNumElements(); }
int64_t PairNllGradOp::getFlops() { return tensorOf(getTargets()).getNumElements(); }
int64_t DpoLossOp::getFlops() { return 8 * tensorOf(getLogp()).getNumElements(); }
int64_t DpoLossGradOp::getFlops() { return 8 * tensorOf(getLogp()).getNumElements(); }
int64_t RowScoreOp::getFlops() { return tensorOf(getRewards()).getNumElements(); }
int64_t RowScoreGradOp::getFlops() { return tensorOf(getResult()).getNumElements(); }
int64_t RewardLossOp::getFlops() { return 8 * tensorOf(getRewards()).getNumElements(); }
int64_t RewardLossGradOp::getFlops() { return 8 * tensorOf(getRewards()).getNumElements(); }
int64_t KtoLossOp::getFlops() { return 8 * tensorOf(getLogp()).getNumElements(); }
int64_t KtoLossGradOp::getFlops() { return 8 * tensorOf(getLogp()).getNumElements(); }

// Kernel attributes in the op table's order (runtime/plan/op_table.def): the sums' int[(average)],
// left out for sums (plan 1.23's calls); the chunks' int[vocab, average] and int[first, vocab,
// average]; the NLL term's int[vocab, average] float[alpha]; the losses' int[kind] float[beta,
// label_smoothing(, gamma or tau)], the kind as the kernels number it.
static void sumsKernelAttrs(bool average, SmallVectorImpl<int64_t>& ints) {
  if (average) ints.push_back(1);
}
void SequenceLogprobOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  sumsKernelAttrs(getAverage(), ints);
}
void SequenceLogprobGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  sumsKernelAttrs(getAverage(), ints);
}
void SequenceLogprobFinishOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.append({static_cast<int64_t>(getVocab()), getAverage() ? 1 : 0});
}
void SequenceLogprobChunkGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.append({static_cast<int64_t>(getFirst()), static_cast<int64_t>(getVocab()), getAverage() ? 1 : 0});
}
static_assert(static_cast<int64_t>(PreferenceLoss::Sigmoid) == static_cast<int64_t>(DpoLossKind::kSigmoid) &&
              static_cast<int64_t>(PreferenceLoss::Hinge) == static_cast<int64_t>(DpoLossKind::kHinge) &&
              static_cast<int64_t>(PreferenceLoss::Robust) == static_cast<int64_t>(DpoLossKind::kRobust) &&
              static_cast<int64_t>(PreferenceLoss::Ipo) == static_cast<int64_t>(DpoLossKind::kIpo) &&
              static_cast<int64_t>(PreferenceLoss::Simpo) == static_cast<int64_t>(DpoLossKind::kSimpo) &&
              static_cast<int64_t>(PreferenceLoss::Orpo) == static_cast<int64_t>(DpoLossKind::kOrpo) &&
              static_cast<int64_t>(PreferenceLoss::ExoPair) == static_cast<int64_t>(DpoLossKind::kExoPair) &&
              static_cast<int64_t>(PreferenceLoss::SppoHard) == static_cast<int64_t>(DpoLossKind::kSppoHard) &&
              static_cast<int64_t>(PreferenceLoss::NcaPair) == static_cast<int64_t>(DpoLossKind::kNcaPair) &&
              static_cast<int64_t>(PreferenceLoss::ApoZero) == static_cast<int64_t>(DpoLossKind::kApoZero) &&
              static_cast<int64_t>(PreferenceLoss::ApoDown) == static_cast<int64_t>(DpoLossKind::kApoDown) &&
              static_cast<int64_t>(PreferenceLoss::Discopop) == static_cast<int64_t>(DpoLossKind::kDiscopop) &&
              static_cast<int64_t>(PreferenceLoss::Aot) == static_cast<int64_t>(DpoLossKind::kAot) &&
              static_cast<int64_t>(PreferenceLoss::AotPair) == static_cast<int64_t>(DpoLossKind::kAotPair));
template <typename LossOp>
static void lossKernelAttrs(LossOp op, SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  ints.push_back(static_cast<int64_t>(op.getKind()));
  floats.append({op.getBeta().convertToFloat(), op.getLabelSmoothing().convertToFloat()});
  if (op.getKind() == PreferenceLoss::Simpo) floats.push_back(op.getGamma().convertToFloat());  // plan 1.24's third
  if (op.getKind() == PreferenceLoss::Discopop) floats.push_back(op.getTau().convertToFloat());  // plan 1.25's
}
template <typename NllOp>
static void nllKernelAttrs(NllOp op, SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  ints.append({static_cast<int64_t>(op.getVocab()), op.getAverage() ? 1 : 0});
  floats.push_back(op.getAlpha().convertToFloat());
}
void PairNllOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  nllKernelAttrs(*this, ints, floats);
}
void PairNllGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  nllKernelAttrs(*this, ints, floats);
}
void DpoLossOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  lossKernelAttrs(*this, ints, floats);
}
void DpoLossGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  lossKernelAttrs(*this, ints, floats);
}

void RowScoreOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>&) {}
void RowScoreGradOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>&) {}
void RewardLossOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.push_back(getCenter().convertToFloat());
}
StringRef RewardLossOp::getKernelName() { return getMargins() ? "mt.reward_margin_loss" : "mt.reward_loss"; }
StringRef RewardLossGradOp::getKernelName() {
  return getMargins() ? "mt.reward_margin_loss_grad" : "mt.reward_loss_grad";
}
void RewardLossGradOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.push_back(getCenter().convertToFloat());
}

template <typename KtoOp>
static void ktoKernelAttrs(KtoOp op, SmallVectorImpl<float>& floats) {
  floats.append({op.getBeta().convertToFloat(), op.getDesirableWeight().convertToFloat(),
                 op.getUndesirableWeight().convertToFloat()});
}
void KtoLossOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  ktoKernelAttrs(*this, floats);
}
void KtoLossGradOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  ktoKernelAttrs(*this, floats);
}

// Gradient rules. The targets are integers and the reference and labels inputs: no gradient.
SmallVector<Value> SequenceLogprobOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  if (!grads[0]) return {Value(), Value()};  // only the log-sum-exp is read: nothing to differentiate
  return {b.create<SequenceLogprobGradOp>(getLoc(), grads[0], getLogits(), getTargets(), getLse(), getAverage()),
          Value()};
}

SmallVector<Value> PairNllOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<PairNllGradOp>(getLoc(), grads[0], getLogp(), getTargets(), getAlphaAttr(), getVocabAttr(),
                                  getAverageAttr()),
          Value()};
}

SmallVector<Value> DpoLossOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<DpoLossGradOp>(getLoc(), grads[0], getLogp(), getReference(), getBetaAttr(), getKindAttr(),
                                  getLabelSmoothingAttr(), getGammaAttr(), getTauAttr()),
          Value()};
}

SmallVector<Value> RowScoreOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<RowScoreGradOp>(getLoc(), grads[0], getScores(), getPositions()), Value()};
}

SmallVector<Value> RewardLossOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  SmallVector<Value> operands = {b.create<RewardLossGradOp>(getLoc(), grads[0], getRewards(), getMargins(),
                                                            getCenterAttr())};
  if (getMargins()) operands.push_back(Value());  // the margins are an input: no gradient
  return operands;
}

SmallVector<Value> KtoLossOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<KtoLossGradOp>(getLoc(), grads[0], getLogp(), getReference(), getLabels(), getBetaAttr(),
                                  getDesirableWeightAttr(), getUndesirableWeightAttr()),
          Value(), Value()};
}

}  // namespace mt
