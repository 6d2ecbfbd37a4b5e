// mt.attention: fused causal self-attention with grouped-query heads (H query heads share
// H/Hkv key/value heads), softmax scale 1/sqrt(D).
//   (q (B, T, H*D), k (B, T, Hkv*D), v (B, T, Hkv*D)) -> (out (B, T, H*D), lse (B, H, T))
//   lse: log-sum-exp of each row's scaled scores, kept for the backward pass.
// mt.attention_grad: (dout, q, k, v, out, lse) -> (dq, dk, dv)
//   int attrs (both): [num_heads, num_kv_heads]
#pragma once
#include "kernels/kernel_args.h"

namespace mt {
// What both implementations derive from q (B, T, H*D) and [num_heads, num_kv_heads] of a call
// the check accepted: one place, so the CPU and CUDA kernels scale the scores alike.
struct AttentionShape {
  int64_t batch, seq, heads, kv_heads, head_dim;
  int64_t q_stride, kv_stride;  // floats between tokens of q/out/dout (H*D) and of k/v (Hkv*D)
  float scale;                  // 1/sqrt(head_dim)
};
AttentionShape attentionShape(const Tensor& q, const KernelArgs& args);

std::string attention_check(const KernelArgs& args);
void attention_cpu(const KernelArgs& args);
std::string attention_grad_check(const KernelArgs& args);
void attention_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/attention/attention_cuda.cu), built when CUDA is enabled.
void attention_cuda(const KernelArgs& args, const CudaLaunch& launch);
void attention_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
