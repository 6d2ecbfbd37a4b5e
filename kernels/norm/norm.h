// Normalisations over the last dimension C.
//   mt.layernorm:      (x (..., C), gamma (C), beta (C)) -> (y (..., C), mean (...), rstd (...))
//                      float attrs: [eps]
//   mt.layernorm_grad: (dy, x, gamma, mean, rstd) -> (dx, dgamma, dbeta)
//   mt.rmsnorm:        (x (..., C), gamma (C)) -> (y (..., C), rstd (...))   float attrs: [eps(, offset)]
//   mt.rmsnorm_grad:   (dy, x, gamma, rstd) -> (dx, dgamma)                  float attrs: [(offset)]
// y = x / rms(x) * (offset + gamma), offset + gamma taken in f32 (plan 1.33: Gemma's norms scale by
// 1 + weight; no offset: 0).
#pragma once
#include "kernels/kernel_args.h"

namespace mt {
std::string layernorm_check(const KernelArgs& args);
void layernorm_cpu(const KernelArgs& args);
std::string layernorm_grad_check(const KernelArgs& args);
void layernorm_grad_cpu(const KernelArgs& args);
std::string rmsnorm_check(const KernelArgs& args);
void rmsnorm_cpu(const KernelArgs& args);
std::string rmsnorm_grad_check(const KernelArgs& args);
void rmsnorm_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/norm/norm_cuda.cu), built when CUDA is enabled.
void layernorm_cuda(const KernelArgs& args, const CudaLaunch& launch);
void layernorm_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void rmsnorm_cuda(const KernelArgs& args, const CudaLaunch& launch);
void rmsnorm_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
