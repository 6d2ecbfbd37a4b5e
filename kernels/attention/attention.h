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
#pragma once
#include "kernels/kernel_args.h"

namespace mt {
// What both implementations derive from q (B, T, H*D) and [num_heads, num_kv_heads(, window)] of
// a call the check accepted: one place, so the CPU and CUDA kernels scale the scores alike.
struct AttentionShape {
  int64_t batch, seq, heads, kv_heads, head_dim;
  int64_t q_stride, kv_stride;  // floats between tokens of q/out/dout (H*D) and of k/v (Hkv*D)
  float scale;                  // 1/sqrt(head_dim)
  int64_t window = 0;           // keys a query sees back to and including itself; 0: all before it
};
AttentionShape attentionShape(const Tensor& q, const KernelArgs& args);
// The first key query `i` sees, and whether it sees key `j` (the CPU kernels and the CUDA twins).
MT_HOST_DEVICE inline int64_t firstVisibleKey(const AttentionShape& d, int64_t i) {
  return d.window > 0 && i >= d.window ? i - d.window + 1 : 0;
}
MT_HOST_DEVICE inline bool visibleKey(const AttentionShape& d, int64_t i, int64_t j) {
  return j <= i && (d.window == 0 || i - j < d.window);
}
// "" or what is wrong with an attention call's int attributes (2, or 3 with the window), or with
// its sinks (H f32).
std::string attentionAttrsProblem(const KernelArgs& args, const char* op);
std::string attentionSinksProblem(const Tensor& sinks, int64_t heads, const char* op);

std::string attention_check(const KernelArgs& args);
void attention_cpu(const KernelArgs& args);
std::string attention_grad_check(const KernelArgs& args);
void attention_grad_cpu(const KernelArgs& args);
std::string attention_sinks_grad_check(const KernelArgs& args);
void attention_sinks_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/attention/attention_cuda.cu), built when CUDA is enabled; attention_cuda
// takes the sinks where the call has them (mt.attention_sinks).
void attention_cuda(const KernelArgs& args, const CudaLaunch& launch);
void attention_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void attention_sinks_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
