// The mixture-of-experts ops (MtMoeOps.td): shape inference mirroring their kernels' checks
// (kernels/moe/moe_cpu.cc), costs, kernel attributes and gradient rules.
#include <cmath>

#include "compiler/dialect/MtDialect.h"
#include "compiler/dialect/MtOpShapes.h"
#include "kernels/moe/routing.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace mt {

using namespace op_shapes;

namespace {

int64_t numel(Value v) { return tensorOf(v).getNumElements(); }

// The rows of a (..., C) tensor: the product of its leading dimensions.
int64_t leadingRows(ArrayRef<int64_t> shape) {
  int64_t rows = 1;
  for (int64_t d : shape.drop_back()) rows *= d;
  return rows;
}

// `choices` (..., k) i32 or f32 beside `tokens` (..., C): the same leading dimensions.
LogicalResult requireChoicesOf(std::optional<Location> loc, Value choices, Value tokens, StringRef what) {
  auto c = tensorOf(choices).getShape(), t = tensorOf(tokens).getShape();
  if (c.empty() || t.empty() || c.drop_back() != t.drop_back())
    return emitOptionalError(loc, what, " ", shapeStr(c), " must be (..., k) beside the tokens' ", shapeStr(t));
  return success();
}

// Routed rows (N*k, C) for `choices` (..., k).
LogicalResult requireRoutedFor(std::optional<Location> loc, Value routed, Value choices, StringRef what) {
  auto r = tensorOf(routed).getShape();
  if (r.size() != 2 || r[0] != numel(choices))
    return emitOptionalError(loc, what, " ", shapeStr(r), " must be (", numel(choices), ", C): a row per routed choice");
  return success();
}

bool transposeB(BoolAttr attr) { return attr && attr.getValue(); }

}  // namespace

LogicalResult MoeRouteOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                           SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto logits = tensorOf(adaptor.getLogits()).getShape();
  const int64_t k = static_cast<int64_t>(adaptor.getTopK());
  if (logits.empty()) return emitOptionalError(loc, "moe_route logits must be (..., experts)");
  if (k <= 0 || k > logits.back())
    return emitOptionalError(loc, "moe_route top_k ", k, " must lie in [1, ", logits.back(), " experts]");
  SmallVector<int64_t> shape(logits);
  shape.back() = k;
  types.push_back(f32Tensor(ctx, shape));
  types.push_back(RankedTensorType::get(shape, IntegerType::get(ctx, 32)));
  return success();
}

// The kernel's checks (kernels/moe/moe_cpu.cc checkRouting), so that a plan mtc writes runs.
LogicalResult MoeRouteOp::verify() {
  const int64_t experts = tensorOf(getLogits()).getShape().back();
  if (getScoreBias()) {
    if (getRouting() == MoeRouting::TopKSoftmax)
      return emitOpError("a score bias needs a routing by scores, not topk_softmax (which chooses by the logits)");
    if (tensorOf(getScoreBias()).getShape() != ArrayRef<int64_t>{experts})
      return emitOpError("score bias must be (") << experts << "), one per expert";
  }
  if (!std::isfinite(getScale().convertToFloat())) return emitOpError("scale is not finite");
  const int64_t groups = static_cast<int64_t>(getGroups()), chosen = static_cast<int64_t>(getGroupsChosen());
  if (groups == 1 && chosen == 1) return success();
  if (!routing::choosesWithinGroups(static_cast<MoeRoutingKind>(getRouting())))
    return emitOpError("groups of experts need a routing by scores, not topk_softmax");
  if (!routing::splitsIntoGroups(experts, groups))
    return emitOpError("groups ") << groups << " must lie in [2, " << routing::kMaxGroups << "] and split the "
                                  << experts << " experts into equal groups of two or more";
  if (chosen < 1 || chosen > groups) return emitOpError("groups_chosen ") << chosen << " must lie in [1, " << groups << "]";
  return success();
}

LogicalResult MoeRouteGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                               SmallVectorImpl<Type>& types) {
  SmallVector<Type> forward;
  if (failed(MoeRouteOp::inferReturnTypes(ctx, loc, MoeRouteOp::Adaptor({adaptor.getLogits()}, adaptor.getAttributes()),
                                          forward)) ||
      failed(requireShape(loc, adaptor.getDweights(), cast<RankedTensorType>(forward[0]).getShape(), "dweights")) ||
      failed(requireShape(loc, adaptor.getExperts(), cast<RankedTensorType>(forward[1]).getShape(), "experts")))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult MoeDispatchOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                              SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireChoicesOf(loc, adaptor.getExperts(), adaptor.getInput(), "moe_dispatch experts")))
    return failure();
  const int64_t experts = static_cast<int64_t>(adaptor.getNumExperts());
  if (experts <= 0) return emitOptionalError(loc, "moe_dispatch num_experts must be positive");
  auto input = tensorOf(adaptor.getInput());
  types.push_back(RankedTensorType::get({numel(adaptor.getExperts()), input.getShape().back()}, input.getElementType()));
  types.push_back(adaptor.getExperts().getType());
  types.push_back(RankedTensorType::get({experts}, IntegerType::get(ctx, 32)));
  return success();
}

LogicalResult MoeDispatchGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                  SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireRoutedFor(loc, adaptor.getDrouted(), adaptor.getPositions(), "moe_dispatch_grad drouted")))
    return failure();
  auto drouted = tensorOf(adaptor.getDrouted());
  SmallVector<int64_t> shape(tensorOf(adaptor.getPositions()).getShape());
  shape.back() = drouted.getShape()[1];
  types.push_back(RankedTensorType::get(shape, drouted.getElementType()));
  return success();
}

// input (R, K), weight (E, N, K) or (E, K, N), counts (E): the result's (R, N).
// A product's (R, N) result; `first` and `into`: a group's, its weight the experts from `first` on.
static FailureOr<SmallVector<int64_t, 2>> groupedProductShape(std::optional<Location> loc, Value input, Value weight,
                                                              Value counts, Value into, int64_t first,
                                                              bool transposed) {
  auto x = tensorOf(input).getShape(), w = tensorOf(weight).getShape();
  if (x.size() != 2 || w.size() != 3)
    return emitOptionalError(loc, "grouped_matmul takes (rows, K) rows and (experts, ., .) weights, got ", shapeStr(x),
                             " and ", shapeStr(w));
  const int64_t k = transposed ? w[2] : w[1];
  if (k != x[1])
    return emitOptionalError(loc, "grouped_matmul contraction sizes differ: ", shapeStr(x), " and ", shapeStr(w));
  SmallVector<int64_t, 2> shape{x[0], transposed ? w[1] : w[2]};
  if (!into) {
    if (first != 0) return emitOptionalError(loc, "grouped_matmul: a first_expert needs the products so far (into)");
    if (failed(requireShape(loc, counts, {w[0]}, "counts"))) return failure();
    return shape;
  }
  auto n = tensorOf(counts).getShape();
  if (n.size() != 1 || first < 0 || first > n[0] - w[0])
    return emitOptionalError(loc, "grouped_matmul: experts [", first, ", ", first + w[0], ") are not within counts ",
                             shapeStr(n));
  if (failed(requireShape(loc, into, shape, "into"))) return failure();
  return shape;
}

LogicalResult GroupedMatmulOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  const int64_t first = adaptor.getFirstExpertAttr() ? adaptor.getFirstExpertAttr().getInt() : 0;
  auto shape = groupedProductShape(loc, adaptor.getInput(), adaptor.getWeight(), adaptor.getCounts(),
                                   adaptor.getInto(), first, transposeB(adaptor.getTransposeBAttr()));
  SmallVector<Value, 3> activations{adaptor.getInput(), adaptor.getWeight()};
  if (adaptor.getInto()) activations.push_back(adaptor.getInto());
  FailureOr<Type> act = activationType(loc, activations);
  if (failed(shape) || failed(act)) return failure();
  types.push_back(RankedTensorType::get(*shape, *act));
  return success();
}

LogicalResult GroupedMatmulWeightGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                          Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto x = tensorOf(adaptor.getInput()).getShape(), dy = tensorOf(adaptor.getDout()).getShape();
  auto counts = tensorOf(adaptor.getCounts()).getShape();
  if (x.size() != 2 || dy.size() != 2 || x[0] != dy[0] || counts.size() != 1)
    return emitOptionalError(loc, "grouped_matmul_weight_grad takes (R, K) rows, (R, N) gradients and (E) counts, got ",
                             shapeStr(x), ", ", shapeStr(dy), ", ", shapeStr(counts));
  const int64_t first = adaptor.getFirstExpertAttr() ? adaptor.getFirstExpertAttr().getInt() : 0;
  const int64_t group = adaptor.getExpertsAttr() ? adaptor.getExpertsAttr().getInt() : 0;
  const int64_t experts = group > 0 ? group : counts[0];
  if (group < 0 || first < 0 || first > counts[0] - experts || (group == 0 && first != 0))
    return emitOptionalError(loc, "grouped_matmul_weight_grad: experts [", first, ", ", first + experts,
                             ") are not within counts ", shapeStr(counts), " (a first_expert needs experts > 0)");
  if (failed(activationType(loc, {adaptor.getInput(), adaptor.getDout()}))) return failure();
  types.push_back(transposeB(adaptor.getTransposeBAttr()) ? f32Tensor(ctx, {experts, dy[1], x[1]})
                                                          : f32Tensor(ctx, {experts, x[1], dy[1]}));
  return success();
}

LogicalResult MoeCombineOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                             SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireRoutedFor(loc, adaptor.getRouted(), adaptor.getPositions(), "moe_combine routed")) ||
      failed(requireShape(loc, adaptor.getWeights(), tensorOf(adaptor.getPositions()).getShape(), "weights")))
    return failure();
  auto routed = tensorOf(adaptor.getRouted());
  SmallVector<int64_t> shape(tensorOf(adaptor.getPositions()).getShape());
  shape.back() = routed.getShape()[1];
  types.push_back(RankedTensorType::get(shape, routed.getElementType()));
  return success();
}

LogicalResult MoeCombineGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                 SmallVectorImpl<Type>& types) {
  SmallVector<Type> forward;
  if (failed(MoeCombineOp::inferReturnTypes(
          ctx, loc, MoeCombineOp::Adaptor(adaptor.getOperands().drop_front(), adaptor.getAttributes()), forward)) ||
      failed(requireShape(loc, adaptor.getDout(), cast<RankedTensorType>(forward[0]).getShape(), "dout")) ||
      failed(activationType(loc, {adaptor.getDout(), adaptor.getRouted()})))
    return failure();
  types.push_back(adaptor.getRouted().getType());
  types.push_back(adaptor.getWeights().getType());
  return success();
}

// (2, E) statistics for (..., E) logits.
static LogicalResult requireStatsOf(std::optional<Location> loc, Value stats, Value logits, StringRef what) {
  auto l = tensorOf(logits).getShape();
  if (l.empty() || l.back() < 1) return emitOptionalError(loc, what, ": the logits must be (..., experts), experts >= 1");
  return requireShape(loc, stats, {2, l.back()}, what);
}

// A mask of the tokens the statistics count: absent, or one value per token of the logits.
static LogicalResult requireTokenMask(std::optional<Location> loc, Value mask, Value logits, const char* what) {
  if (!mask) return success();
  auto l = tensorOf(logits).getShape();
  return requireShape(loc, mask, l.drop_back(), what);
}

LogicalResult MoeBalanceStatsOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                  SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireChoicesOf(loc, adaptor.getExperts(), adaptor.getLogits(), "moe_balance_stats experts")) ||
      failed(requireStatsOf(loc, adaptor.getTotal(), adaptor.getLogits(), "moe_balance_stats total")) ||
      failed(requireTokenMask(loc, adaptor.getMask(), adaptor.getLogits(), "moe_balance_stats mask")))
    return failure();
  types.push_back(adaptor.getTotal().getType());
  return success();
}

LogicalResult MoeBalanceStatsGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                      SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireStatsOf(loc, adaptor.getDtotal(), adaptor.getLogits(), "moe_balance_stats_grad dtotal")) ||
      failed(requireTokenMask(loc, adaptor.getMask(), adaptor.getLogits(), "moe_balance_stats_grad mask")))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

static LogicalResult requireBalanceStats(std::optional<Location> loc, Value stats, int64_t rows, IntegerAttr topK) {
  auto s = tensorOf(stats).getShape();
  if (s.size() != 2 || s[0] != 2 || s[1] <= 0)
    return emitOptionalError(loc, "moe_balance_loss stats ", shapeStr(s), " must be (2, experts)");
  if (rows <= 0) return emitOptionalError(loc, "moe_balance_loss rows must be positive");
  if (topK && topK.getInt() < 0) return emitOptionalError(loc, "moe_balance_loss top_k must not be negative");
  return success();
}

LogicalResult MoeBalanceLossOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                 SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireBalanceStats(loc, adaptor.getStats(), static_cast<int64_t>(adaptor.getRows()),
                                 adaptor.getTopKAttr())))
    return failure();
  types.push_back(f32Tensor(ctx, {}));
  return success();
}

LogicalResult MoeBalanceLossGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                     SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands())) ||
      failed(requireShape(loc, adaptor.getDloss(), {}, "moe_balance_loss_grad dloss")) ||
      failed(requireBalanceStats(loc, adaptor.getStats(), static_cast<int64_t>(adaptor.getRows()),
                                 adaptor.getTopKAttr())))
    return failure();
  types.push_back(adaptor.getStats().getType());
  return success();
}

LogicalResult GroupedAddBiasOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                 SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto x = tensorOf(adaptor.getInput()).getShape(), bias = tensorOf(adaptor.getBias()).getShape();
  if (x.size() != 2 || bias.size() != 2 || bias[1] != x[1])
    return emitOptionalError(loc, "grouped_add_bias takes (rows, C) and (experts, C), got ", shapeStr(x), " and ",
                             shapeStr(bias));
  if (failed(requireShape(loc, adaptor.getCounts(), {bias[0]}, "counts"))) return failure();
  FailureOr<Type> act = activationType(loc, {adaptor.getInput(), adaptor.getBias()});
  if (failed(act)) return failure();
  types.push_back(RankedTensorType::get(x, *act));
  return success();
}

LogicalResult GroupedBiasGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                                  SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto dy = tensorOf(adaptor.getDout()).getShape(), counts = tensorOf(adaptor.getCounts()).getShape();
  if (dy.size() != 2 || counts.size() != 1)
    return emitOptionalError(loc, "grouped_bias_grad takes (rows, C) gradients and (E) counts, got ", shapeStr(dy),
                             " and ", shapeStr(counts));
  types.push_back(f32Tensor(ctx, {counts[0], dy[1]}));
  return success();
}

// Costs: the products count the routed rows only (the active parameters' FLOPs); bytes are the
// default (every operand, so all experts' weights).
int64_t MoeRouteOp::getFlops() { return 5 * numel(getLogits()); }
int64_t MoeRouteGradOp::getFlops() { return 8 * numel(getLogits()); }
int64_t MoeDispatchOp::getFlops() { return 0; }
int64_t MoeDispatchGradOp::getFlops() { return numel(getDrouted()); }
// A group's products count its experts' share of the rows (G/E of them, as an even router gives)
// in their FLOPs and in the bytes of the rows they read and write; a group's weights are its own.
static int64_t groupShare(int64_t amount, int64_t group, Value counts) {
  return amount * group / tensorOf(counts).getShape()[0];
}
static int64_t bytesOf(Value v) { return tensorBytes(v.getType()); }
int64_t GroupedMatmulOp::getFlops() {
  return groupShare(2 * numel(getResult()) * tensorOf(getInput()).getShape()[1],
                    tensorOf(getWeight()).getShape()[0], getCounts());
}
int64_t GroupedMatmulOp::getBytesAccessed() {
  if (!getInto()) return defaultBytesAccessed(getOperation());
  const int64_t group = tensorOf(getWeight()).getShape()[0];
  return groupShare(bytesOf(getInput()) + bytesOf(getResult()), group, getCounts()) + bytesOf(getWeight()) +
         bytesOf(getCounts());
}
int64_t GroupedMatmulWeightGradOp::getFlops() {
  return groupShare(2 * numel(getInput()) * tensorOf(getDout()).getShape()[1], tensorOf(getDweight()).getShape()[0],
                    getCounts());
}
int64_t GroupedMatmulWeightGradOp::getBytesAccessed() {
  if (getExperts() == 0) return defaultBytesAccessed(getOperation());
  return groupShare(bytesOf(getInput()) + bytesOf(getDout()), getExperts(), getCounts()) + bytesOf(getDweight()) +
         bytesOf(getCounts());
}
int64_t GroupedAddBiasOp::getFlops() { return numel(getInput()); }
int64_t GroupedBiasGradOp::getFlops() { return numel(getDout()); }
int64_t MoeCombineOp::getFlops() { return 2 * numel(getRouted()); }
int64_t MoeCombineGradOp::getFlops() { return 4 * numel(getRouted()); }
int64_t MoeBalanceStatsOp::getFlops() { return 5 * numel(getLogits()); }
int64_t MoeBalanceStatsGradOp::getFlops() { return 8 * numel(getLogits()); }
int64_t MoeBalanceLossOp::getFlops() { return 2 * numel(getStats()); }
int64_t MoeBalanceLossGradOp::getFlops() { return numel(getStats()); }

// Kernel attributes in the op table's order (runtime/plan/op_table.def).
// The groups and the scale only where they choose or weigh otherwise (plans before 1.38 had none).
void MoeRouteOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  ints.push_back(static_cast<int64_t>(getTopK()));
  ints.push_back(static_cast<int64_t>(getRouting()));
  if (getGroups() != 1 || getGroupsChosen() != 1) {
    ints.push_back(static_cast<int64_t>(getGroups()));
    ints.push_back(static_cast<int64_t>(getGroupsChosen()));
  }
  if (getScale().convertToFloat() != 1.0f) floats.push_back(getScale().convertToFloat());
}
StringRef MoeRouteOp::getKernelName() { return getScoreBias() ? "mt.moe_route_biased" : "mt.moe_route"; }
void MoeRouteGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  ints.push_back(static_cast<int64_t>(getTopK()));
  ints.push_back(static_cast<int64_t>(getRouting()));
  if (getScale().convertToFloat() != 1.0f) floats.push_back(getScale().convertToFloat());
}
void GroupedMatmulOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getTransposeB());
  if (getInto()) ints.push_back(static_cast<int64_t>(getFirstExpert()));
}
StringRef GroupedMatmulOp::getKernelName() { return getInto() ? "mt.grouped_matmul_into" : "mt.grouped_matmul"; }
void GroupedMatmulWeightGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getTransposeB());
  if (getExperts() > 0) ints.push_back(static_cast<int64_t>(getFirstExpert()));
}
void MoeBalanceLossOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(static_cast<int64_t>(getRows()));
  if (getTopK() > 0) ints.push_back(static_cast<int64_t>(getTopK()));
}
void MoeBalanceLossGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(static_cast<int64_t>(getRows()));
  if (getTopK() > 0) ints.push_back(static_cast<int64_t>(getTopK()));
}
StringRef MoeBalanceStatsOp::getKernelName() {
  return getMask() ? "mt.moe_balance_stats_masked" : "mt.moe_balance_stats";
}
StringRef MoeBalanceStatsGradOp::getKernelName() {
  return getMask() ? "mt.moe_balance_stats_grad_masked" : "mt.moe_balance_stats_grad";
}

// Gradient rules. The expert indices, positions and counts are integers: no gradient.
// The bias only chooses: no gradient.
SmallVector<Value> MoeRouteOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  SmallVector<Value> none(getOperation()->getNumOperands(), Value());
  if (!grads[0]) return none;
  none[0] = b.create<MoeRouteGradOp>(getLoc(), grads[0], getLogits(), getExperts(), getRouting(), getTopK(), getScale());
  return none;
}

SmallVector<Value> MoeDispatchOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  if (!grads[0]) return {Value(), Value()};
  return {b.create<MoeDispatchGradOp>(getLoc(), grads[0], getPositions()), Value()};
}

// Y_e = X_e op(W_e): dX_e = dY_e op(W_e)^T (the same product with transpose_b flipped),
// dW_e from the expert's rows alone.
SmallVector<Value> GroupedMatmulOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  const Location loc = getLoc();
  if (getInto()) {  // a group's product: made after mt-autodiff, never differentiated
    emitError("a group's product (into) has no gradient rule: mt-split-experts runs after mt-autodiff");
    return {Value(), Value(), Value(), Value()};
  }
  Value dx = b.create<GroupedMatmulOp>(loc, grads[0], getWeight(), getCounts(), Value(), !getTransposeB(), 0);
  Value dw = b.create<GroupedMatmulWeightGradOp>(loc, getInput(), grads[0], getCounts(), getTransposeB(), 0, 0);
  return {dx, dw, Value()};  // one per operand: no into here
}

SmallVector<Value> GroupedAddBiasOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {grads[0], b.create<GroupedBiasGradOp>(getLoc(), grads[0], getCounts()), Value()};
}

SmallVector<Value> MoeCombineOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  auto g = b.create<MoeCombineGradOp>(getLoc(), grads[0], getRouted(), getPositions(), getWeights());
  return {g.getDrouted(), Value(), g.getDweights()};
}

// The running statistics pass their gradient through unchanged; the counts take none, so the
// logits' comes from row 1 alone.
SmallVector<Value> MoeBalanceStatsOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  SmallVector<Value> none(getNumOperands(), Value());
  if (!grads[0]) return none;
  none[0] = b.create<MoeBalanceStatsGradOp>(getLoc(), grads[0], getLogits(), getMask());
  none[2] = grads[0];
  return none;  // the experts and the mask take none
}

SmallVector<Value> MoeBalanceLossOp::buildGradient(OpBuilder& b, ArrayRef<Value> grads) {
  return {b.create<MoeBalanceLossGradOp>(getLoc(), grads[0], getStats(), getRows(), getTopK())};
}

}  // namespace mt
