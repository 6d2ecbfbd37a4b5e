// mt.attention: fused causal self-attention with grouped-query heads (H query heads share
// H/Hkv key/value heads), softmax scale 1/sqrt(D).
//   (q (B, T, H*D), k (B, T, Hkv*D), v (B, T, Hkv*D)[, sinks (H)]) -> (out (B, T, H*D), lse (B, H, T))
//   lse: log-sum-exp of each row's scaled scores (and its sink), kept for the backward pass.
// mt.attention_grad: (dout, q, k, v, out, lse) -> (dq, dk, dv)
//   int attrs (both): [num_heads, num_kv_heads(, window)]
// A window W > 0 (sliding-window attention: Mistral, gpt-oss's alternate layers) lets query i
// see keys j with i - W < j <= i, as transformers' sliding-window mask does; 0 sees all j <= i.
// Sinks (gpt-oss; the kernel row mt.attention_sinks): a learned logit per query head that joins
// each row's softmax denominator, unscaled, and contributes no value: a row's probabilities
// sum to 1 - exp(sink - lse). The backward of q, k, v is the same given that lse;
// mt.attention_sinks_grad: (dout, out, lse, sinks) -> dsinks (H), the sinks' own gradient,
//   dsink_h = -sum over (b, t) of exp(sink_h - lse[b, h, t]) * rowsum(dout * out)[b, t, h].
// Packed examples (mtc --packed-examples; the kernel rows mt.attention_packed(_sinks|_grad)): the
// calls' last input is positions (B, T) i32, each token's position in its example, and query i
// of row b sees only keys of its own example, j >= i - positions[b, i] (clamped to [0, i]): as
// flash-attention's variable-length calls, the examples packed in a row never see each other.
// Positions rise by one within an example and restart at 0 where the next begins (mtrun fills
// them so); the kernels take any positions without reading outside the call's tensors.
// Softcapping (Gemma 2; plan 1.37, float attrs [softcap] where it is set): the softmax takes
// c * tanh(s / c) of each scaled score s, as transformers' Gemma 2 caps its attention logits
// (before the mask; a sink is not capped). The backward multiplies each score's gradient by the
// slope 1 - tanh^2 of the score it recomputes (attentionSoftcap).
#pragma once
#include "kernels/activation/softcap.h"
#include "kernels/kernel_args.h"

namespace mt {
// What both implementations derive from q (B, T, H*D), [num_heads, num_kv_heads(, window)] and
// the softcap float of a call the check accepted: one place, so the CPU and CUDA kernels scale and
// cap the scores alike.
struct AttentionShape {
  int64_t batch, seq, heads, kv_heads, head_dim;
  int64_t q_stride, kv_stride;  // floats between tokens of q/out/dout (H*D) and of k/v (Hkv*D)
  float scale;                  // 1/sqrt(head_dim)
  int64_t window = 0;           // keys a query sees back to and including itself; 0: all before it
  const int32_t* positions = nullptr;  // (B, T) packed examples: each token's position in its example
  float softcap = 0.0f;                // c of the scores' c * tanh(s / c) (Gemma 2); 0: none
};
// `positions`: a packed call's (its last input), or null.
AttentionShape attentionShape(const Tensor& q, const KernelArgs& args, const Tensor* positions = nullptr);
// The score the softmax takes from a scaled score s: c * tanh(s / c) where the call caps it (its
// slope d(capped)/ds = 1 - tanh^2 into `slope` where given), else s (slope 1).
MT_HOST_DEVICE inline float attentionSoftcap(const AttentionShape& d, float s, float* slope = nullptr) {
  if (d.softcap <= 0.0f) {
    if (slope) *slope = 1.0f;
    return s;
  }
  const float capped = softcapValue(s, d.softcap);
  if (slope) *slope = softcapGradValue(1.0f, capped, d.softcap);
  return capped;
}
// The first key query `i` of row `b` sees, and whether it sees key `j` (the CPU kernels and the
// CUDA twins): the window's start, or its example's where that is later.
MT_HOST_DEVICE inline int64_t firstVisibleKey(const AttentionShape& d, int64_t b, int64_t i) {
  int64_t first = d.window > 0 && i >= d.window ? i - d.window + 1 : 0;
  if (d.positions && i < d.seq) {  // (a tile's rows past the sequence are computed, never kept)
    const int64_t position = d.positions[b * d.seq + i];
    const int64_t example_start = position < 0 ? i : position > i ? 0 : i - position;
    if (example_start > first) first = example_start;
  }
  return first;
}
// The lowest key any of queries [i0, i0 + rows) of row `b` sees: where a block's keys start.
MT_HOST_DEVICE inline int64_t firstKeyOfRows(const AttentionShape& d, int64_t b, int64_t i0, int64_t rows) {
  int64_t first = firstVisibleKey(d, b, i0);
  for (int64_t r = 1; d.positions && r < rows; ++r) {
    const int64_t row_first = firstVisibleKey(d, b, i0 + r);
    if (row_first < first) first = row_first;
  }
  return first;
}
MT_HOST_DEVICE inline bool visibleKey(const AttentionShape& d, int64_t b, int64_t i, int64_t j) {
  return j <= i && j >= firstVisibleKey(d, b, i);
}
// Where a tiled kernel's loop over key tiles (of kTile keys) starts for the query tile of row `b`
// beginning at i0: the first key of the tile holding the lowest key any of its queries (those
// inside the sequence) sees. 0 without a window or packed examples.
template <int64_t kTile>
MT_HOST_DEVICE inline int64_t firstKeyTileStart(const AttentionShape& d, int64_t b, int64_t i0) {
  return firstKeyOfRows(d, b, i0, d.seq - i0 < kTile ? d.seq - i0 : kTile) / kTile * kTile;
}
// Past the last query that sees key `j`: the end of its window's reach, else of the sequence.
MT_HOST_DEVICE inline int64_t queryReachEnd(const AttentionShape& d, int64_t j) {
  return d.window > 0 && j + d.window < d.seq ? j + d.window : d.seq;
}
// A tile's row i's first visible key, for the tensor-core kernels' per-warp bounds: a row past
// the sequence (computed, never kept) counts as seeing only itself, so it lowers no bound.
MT_HOST_DEVICE inline int64_t rowFirstKey(const AttentionShape& d, int64_t b, int64_t i) {
  return i < d.seq ? firstVisibleKey(d, b, i) : i;
}
// Past the last of queries from, from + stride, ... (before queryReachEnd(j_last)) that sees a key
// at or before j_last, else `none`: a thread's share of the scan bounding a key tile's queries
// (the block's maximum; stride 1: the whole bound). With packed examples, the end of the example
// of j_last (any positions: every query is read).
MT_HOST_DEVICE inline int64_t queriesSeeingKeysEnd(const AttentionShape& d, int64_t b, int64_t j_last, int64_t from,
                                                   int64_t stride, int64_t none) {
  const int64_t reach = queryReachEnd(d, j_last);
  if (!d.positions) return reach > from ? reach : none;  // every query of the reach sees j_last
  int64_t end = none;
  for (int64_t i = from; i < reach; i += stride)
    if (firstVisibleKey(d, b, i) <= j_last) end = i + 1;
  return end;
}
// A call's sinks (H), or null: the fourth input of mt.attention_sinks and of
// mt.attention_packed_sinks (its positions after them); `packed`: a call of a packed row.
inline const float* attentionSinks(const KernelArgs& args, bool packed) {
  return args.in.size() == (packed ? 5u : 4u) ? args.in[3].f32() : nullptr;
}
// "" or what is wrong with an attention call's attributes (2 ints, or 3 with the window; no float,
// or the softcap), or with its sinks (H f32).
std::string attentionAttrsProblem(const KernelArgs& args, const char* op);
std::string attentionSinksProblem(const Tensor& sinks, int64_t heads, const char* op);

std::string attention_check(const KernelArgs& args);
void attention_cpu(const KernelArgs& args);
std::string attention_grad_check(const KernelArgs& args);
void attention_grad_cpu(const KernelArgs& args);
std::string attention_packed_check(const KernelArgs& args);
void attention_packed_cpu(const KernelArgs& args);
std::string attention_packed_grad_check(const KernelArgs& args);
void attention_packed_grad_cpu(const KernelArgs& args);
std::string attention_sinks_grad_check(const KernelArgs& args);
void attention_sinks_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/attention/attention_cuda.cu), built when CUDA is enabled; attention_cuda
// takes the sinks where the call has them (mt.attention_sinks).
void attention_cuda(const KernelArgs& args, const CudaLaunch& launch);
void attention_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void attention_sinks_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void attention_packed_cuda(const KernelArgs& args, const CudaLaunch& launch);
void attention_packed_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
