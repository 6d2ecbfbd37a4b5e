// Pointwise activations.
//   mt.gelu:        y = x * Phi(x) (erf) or its tanh approximation    int attrs: [tanh]
//   mt.gelu_grad:   (dy, x) -> dx                                     int attrs: [tanh]
//   mt.silu:        y = x * sigmoid(x);             mt.silu_grad: (dy, x) -> dx
//   mt.swiglu:      (gate, up) -> silu(gate) * up;  mt.swiglu_grad: (dy, gate, up) -> (dgate, dup)
//   mt.softcap:     y = c * tanh(x / c)                               float attrs: [c]
//   mt.softcap_grad: (dy, y) -> dx = dy * (1 - (y / c)^2), from the capped output (the loss reads
//                   it anyway, so the uncapped logits need not be kept)  float attrs: [c]
//   (Gemma 2's final logit softcapping, plan 1.37; its math: kernels/activation/softcap.h.)
#pragma once
#include "kernels/activation/softcap.h"
#include "kernels/kernel_args.h"

namespace mt {
std::string gelu_check(const KernelArgs& args);
void gelu_cpu(const KernelArgs& args);
std::string gelu_grad_check(const KernelArgs& args);
void gelu_grad_cpu(const KernelArgs& args);
std::string silu_check(const KernelArgs& args);
void silu_cpu(const KernelArgs& args);
std::string silu_grad_check(const KernelArgs& args);
void silu_grad_cpu(const KernelArgs& args);
std::string swiglu_check(const KernelArgs& args);
void swiglu_cpu(const KernelArgs& args);
std::string swiglu_grad_check(const KernelArgs& args);
void swiglu_grad_cpu(const KernelArgs& args);
std::string softcap_check(const KernelArgs& args);
void softcap_cpu(const KernelArgs& args);
std::string softcap_grad_check(const KernelArgs& args);
void softcap_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/activation/activation_cuda.cu), built when CUDA is enabled.
void gelu_cuda(const KernelArgs& args, const CudaLaunch& launch);
void gelu_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void silu_cuda(const KernelArgs& args, const CudaLaunch& launch);
void silu_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void swiglu_cuda(const KernelArgs& args, const CudaLaunch& launch);
void swiglu_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void softcap_cuda(const KernelArgs& args, const CudaLaunch& launch);
void softcap_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
