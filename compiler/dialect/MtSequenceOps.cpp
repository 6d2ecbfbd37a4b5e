// Shape inference of the `mt` sequence ops: rotary embeddings (mt.rope, mt.rope_at) and attention
// (mt.attention, its gradients, mt.cached_attention). Every rule mirrors the runtime kernel's check
// (kernels/rope/*_cpu.cc, kernels/attention/*_cpu.cc), as in MtOps.cpp.
#include <cmath>
#include <limits>

#include "compiler/dialect/MtDialect.h"
#include "compiler/dialect/MtOpShapes.h"
#include "kernels/rope/rope.h"

using namespace mlir;

namespace mt {

using namespace op_shapes;

namespace {

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

}  // namespace mt
