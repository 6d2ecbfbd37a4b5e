// Costs (FLOPs; bytes default to operands + results) and kernel attributes of the `mt` ops.
// Kernel attribute order is the op table's (runtime/plan/op_table.def).
#include "compiler/dialect/MtDialect.h"
#include "kernels/pointwise/pointwise.h"

using namespace mlir;

namespace mt {
namespace {

int64_t numel(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }

}  // namespace

int64_t EmbeddingOp::getFlops() { return 0; }
int64_t EmbeddingGradOp::getFlops() { return numel(getDout()); }
int64_t EmbeddingChunkOp::getFlops() { return 0; }
int64_t EmbeddingGradChunkOp::getFlops() { return numel(getDout()); }
int64_t PositionsOp::getFlops() { return 0; }
int64_t MatmulOp::getFlops() {
  auto a = getLhs().getType().getShape();
  const int64_t k = getTransposeA() ? a[a.size() - 2] : a.back();
  return 2 * numel(getResult()) * k;
}
int64_t AddOp::getFlops() { return numel(getResult()); }
int64_t MulOp::getFlops() { return numel(getResult()); }
int64_t ScaleOp::getFlops() { return numel(getResult()); }
int64_t DropoutOp::getFlops() { return numel(getResult()); }
int64_t SumToOp::getFlops() { return numel(getInput()); }
int64_t FillOp::getFlops() { return 0; }
int64_t TransposeOp::getFlops() { return 0; }
int64_t LayerNormOp::getFlops() { return 8 * numel(getInput()); }
int64_t LayerNormGradOp::getFlops() { return 14 * numel(getInput()); }
int64_t RmsNormOp::getFlops() { return 5 * numel(getInput()); }
int64_t RmsNormGradOp::getFlops() { return 10 * numel(getInput()); }
int64_t GeluOp::getFlops() { return 10 * numel(getInput()); }
int64_t GeluGradOp::getFlops() { return 16 * numel(getInput()); }
int64_t SoftcapOp::getFlops() { return 10 * numel(getInput()); }
int64_t SoftcapGradOp::getFlops() { return 4 * numel(getDout()); }
int64_t SiluOp::getFlops() { return 5 * numel(getInput()); }
int64_t SiluGradOp::getFlops() { return 8 * numel(getInput()); }
int64_t SwigluOp::getFlops() { return 6 * numel(getGate()); }
int64_t SwigluGradOp::getFlops() { return 10 * numel(getGate()); }
int64_t ClampedSwigluOp::getFlops() { return 8 * numel(getResult()); }
int64_t ClampedSwigluGradOp::getFlops() { return 14 * numel(getDout()); }
int64_t RopeOp::getFlops() { return 3 * numel(getInput()); }
// Causal: row i attends to i + 1 keys, or min(i + 1, window); QK^T and PV each take 2 flops
// per (query, key, channel).
static int64_t causalAttentionFlops(Value q, int64_t window) {
  auto s = cast<RankedTensorType>(q.getType()).getShape();
  const int64_t batch = s[0], seq = s[1], width = s[2];
  const int64_t full = window > 0 && window < seq ? window : seq;  // rows before `full` see i + 1 keys
  const int64_t keys = full * (full + 1) / 2 + (seq - full) * full;
  return 4 * batch * width * keys;
}
int64_t AttentionOp::getFlops() { return causalAttentionFlops(getQ(), getWindow()); }
// Per (b, t, h): the row's dot product with dout, an exp and a multiply-add.
int64_t AttentionSinksGradOp::getFlops() { return 2 * numel(getDout()) + 3 * numel(getLse()); }
int64_t RopeAtOp::getFlops() { return 3 * numel(getInput()); }
// New token t sees at most S + t + 1 keys (the whole cache: the plan does not know p0), or
// its window's.
int64_t CachedAttentionOp::getFlops() {
  auto q = getQ().getType().getShape();
  const int64_t cache = getKCache().getType().getShape()[1];
  const int64_t keys = cache + (q[1] + 1) / 2;
  return 4 * q[0] * q[2] * q[1] * (getWindow() > 0 ? std::min<int64_t>(keys, getWindow()) : keys);
}
// The backward recomputes the scores and forms dP, dQ, dK, dV: 5 products against 2 forward.
int64_t AttentionGradOp::getFlops() { return causalAttentionFlops(getQ(), getWindow()) * 5 / 2; }
int64_t SoftmaxXentOp::getFlops() { return 4 * numel(getLogits()); }
int64_t SoftmaxXentGradOp::getFlops() { return 3 * numel(getLogits()); }
int64_t XentChunkOp::getFlops() { return 4 * numel(getLogits()); }
int64_t XentFinishOp::getFlops() { return numel(getTargets()); }
int64_t XentChunkGradOp::getFlops() { return 3 * numel(getLogits()); }
int64_t CountTargetsOp::getFlops() { return numel(getTargets()); }
int64_t XentTileOp::getFlops() { return 4 * numel(getLogits()); }
int64_t XentTileGradOp::getFlops() { return 3 * numel(getLogits()); }
// Transcendentals count as one flop per element here: the cost model is about matmuls.
int64_t UnaryOp::getFlops() { return numel(getResult()); }
int64_t UnaryGradOp::getFlops() { return 2 * numel(getResult()); }
int64_t ClampOp::getFlops() { return 2 * numel(getResult()); }
int64_t ClampGradOp::getFlops() { return 2 * numel(getResult()); }
int64_t BinaryOp::getFlops() { return numel(getResult()); }
int64_t BinaryGradOp::getFlops() { return 4 * numel(getDout()); }
int64_t WhereOp::getFlops() { return 0; }
int64_t BroadcastOp::getFlops() { return 0; }
int64_t CastOp::getFlops() { return 0; }
int64_t WidenOp::getFlops() { return 0; }
int64_t NarrowOp::getFlops() { return 0; }
int64_t SoftmaxOp::getFlops() { return 5 * numel(getResult()); }
int64_t SoftmaxGradOp::getFlops() { return 4 * numel(getResult()); }
int64_t GatherOp::getFlops() { return 0; }
int64_t GatherGradOp::getFlops() { return numel(getDout()); }
int64_t ConcatOp::getFlops() { return 0; }
int64_t SliceOp::getFlops() { return 0; }
int64_t SliceGradOp::getFlops() { return 0; }
int64_t TriluOp::getFlops() { return 0; }
int64_t H2DOp::getFlops() { return 0; }
int64_t D2HOp::getFlops() { return 0; }

void MatmulOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getTransposeA());
  ints.push_back(getTransposeB());
}
void ScaleOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.push_back(getFactor().convertToFloat());
}
void DropoutOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  ints.push_back(getSite());
  floats.push_back(getRatio().convertToFloat());
}
void FillOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.push_back(getValue().convertToFloat());
}
void TransposeOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.append(getPerm().begin(), getPerm().end());
}
void LayerNormOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.push_back(getEps().convertToFloat());
}
// The offset only where there is one: plans of the norms without it read as before plan 1.33.
void RmsNormOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.push_back(getEps().convertToFloat());
  if (!getOffset().isZero()) floats.push_back(getOffset().convertToFloat());
}
void RmsNormGradOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  if (!getOffset().isZero()) floats.push_back(getOffset().convertToFloat());
}
void GeluOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getTanh());
}
void GeluGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getTanh());
}
void RopeOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  ints.push_back(static_cast<int64_t>(getHeadDim()));
  ints.push_back(getInverse());
  // Plan 1.12: a third attribute where a token tile starts inside its sequence (older plans
  // and untiled ropes have two).
  // Plan 1.18: a fourth, the frequencies' scaling kind, with its parameters after theta.
  // Plan 1.35: a fifth, the rotary dimension, where it is not the head's.
  if (getPositionOffset() != 0 || getScalingKind() != 0 || getRotaryDim() != 0) ints.push_back(getPositionOffset());
  if (getScalingKind() != 0 || getRotaryDim() != 0) ints.push_back(getScalingKind());
  if (getRotaryDim() != 0) ints.push_back(getRotaryDim());
  floats.push_back(getTheta().convertToFloat());
  if (auto scaling = getScaling()) floats.append(scaling->begin(), scaling->end());
}
// Attention calls: [num_heads, num_kv_heads], and the window where there is one (plan 1.19); the
// softcap, a float, where there is one (plan 1.37).
static void attentionAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats, int64_t heads,
                           int64_t kv_heads, int64_t window, APFloat softcap) {
  ints.append({heads, kv_heads});
  if (window != 0) ints.push_back(window);
  if (!softcap.isZero()) floats.push_back(softcap.convertToFloat());
}
void AttentionOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  attentionAttrs(ints, floats, getNumHeads(), getNumKvHeads(), getWindow(), getSoftcap());
}
StringRef AttentionOp::getKernelName() {
  if (getPositions()) return getSinks() ? "mt.attention_packed_sinks" : "mt.attention_packed";
  return getSinks() ? "mt.attention_sinks" : "mt.attention";
}
void RopeAtOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  ints.push_back(static_cast<int64_t>(getHeadDim()));
  // Plan 1.22: a third attribute, inverse, where it is set (a packed plan's gradient); plan 1.35:
  // a fourth, the rotary dimension, where it is not the head's.
  if (getScalingKind() != 0 || getInverse() || getRotaryDim() != 0) ints.push_back(getScalingKind());
  if (getInverse() || getRotaryDim() != 0) ints.push_back(getInverse());
  if (getRotaryDim() != 0) ints.push_back(getRotaryDim());
  floats.push_back(getTheta().convertToFloat());
  if (auto scaling = getScaling()) floats.append(scaling->begin(), scaling->end());
}
void CachedAttentionOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  attentionAttrs(ints, floats, getNumHeads(), getNumKvHeads(), getWindow(), getSoftcap());
}
StringRef CachedAttentionOp::getKernelName() {
  return getSinks() ? "mt.cached_attention_sinks" : "mt.cached_attention";
}
void AttentionGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>& floats) {
  attentionAttrs(ints, floats, getNumHeads(), getNumKvHeads(), getWindow(), getSoftcap());
}
StringRef AttentionGradOp::getKernelName() {
  return getPositions() ? "mt.attention_packed_grad" : "mt.attention_grad";
}

void SoftcapOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.push_back(getCap().convertToFloat());
}
void SoftcapGradOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.push_back(getCap().convertToFloat());
}

void ClampedSwigluOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.append({getAlpha().convertToFloat(), getLimit().convertToFloat()});
}
void ClampedSwigluGradOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.append({getAlpha().convertToFloat(), getLimit().convertToFloat()});
}

void UnaryOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(fnIndex(kUnaryFnNames, getFn().str()));
}
void UnaryGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(fnIndex(kUnaryFnNames, getFn().str()));
}
void ClampOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.push_back(getMin().convertToFloat());
  floats.push_back(getMax().convertToFloat());
}
void ClampGradOp::getKernelAttrs(SmallVectorImpl<int64_t>&, SmallVectorImpl<float>& floats) {
  floats.push_back(getMin().convertToFloat());
  floats.push_back(getMax().convertToFloat());
}
void BinaryOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(fnIndex(kBinaryFnNames, getFn().str()));
}
void BinaryGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(fnIndex(kBinaryFnNames, getFn().str()));
}
void SoftmaxOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(static_cast<int64_t>(getAxis()));
  ints.push_back(getLog());
}
void SoftmaxGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(static_cast<int64_t>(getAxis()));
  ints.push_back(getLog());
}
void GatherOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(static_cast<int64_t>(getAxis()));
}
void GatherGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(static_cast<int64_t>(getAxis()));
}
void ConcatOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(static_cast<int64_t>(getAxis()));
}
void SliceOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.append(getStarts().begin(), getStarts().end());
  ints.append(getSteps().begin(), getSteps().end());
}
void SliceGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.append(getStarts().begin(), getStarts().end());
  ints.append(getSteps().begin(), getSteps().end());
}
void EmbeddingChunkOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getFirst());
}
// int[(padding_id)] and int[first(, padding_id)] (plan 1.36).
void EmbeddingGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  if (auto padding = getPaddingId()) ints.push_back(static_cast<int64_t>(*padding));
}
void EmbeddingGradChunkOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getFirst());
  if (auto padding = getPaddingId()) ints.push_back(static_cast<int64_t>(*padding));
}
void XentChunkOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getFirst());
}
void CountTargetsOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(static_cast<int64_t>(getVocab()));
}
void XentFinishOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getVocab());
}
void XentChunkGradOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getFirst());
  ints.push_back(getVocab());
}
void TriluOp::getKernelAttrs(SmallVectorImpl<int64_t>& ints, SmallVectorImpl<float>&) {
  ints.push_back(getUpper());
  ints.push_back(static_cast<int64_t>(getK()));
}

}  // namespace mt
