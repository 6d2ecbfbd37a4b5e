// Causal attention of a bf16 plan on the tensor cores (attention_mma_cuda.cu), used by the
// CUDA twins of mt.attention and mt.attention_grad and their sinks' and packed rows
// (attention_cuda.cu) where it applies: any window, sinks, packed examples.
#pragma once
#include <cuda_runtime.h>

#include "kernels/attention/attention.h"

namespace mt {
// Whether the tensor-core kernels take this call: bf16 activations, head_dim 64 or 128.
bool attentionOnTensorCores(const Tensor& q, const AttentionShape& d);
// args as attention_cuda's / attention_grad_cuda's and their packed rows' (the positions in `d`);
// `sinks` (H): the call's (attentionSinks), or null.
void attentionForwardTensorCores(const KernelArgs& args, const AttentionShape& d, const float* sinks,
                                 cudaStream_t stream);
void attentionBackwardTensorCores(const KernelArgs& args, const AttentionShape& d, cudaStream_t stream);
}  // namespace mt
