// Softmax along any axis.
//   mt.softmax:       out = softmax(x) or log_softmax(x) along `axis`    int attrs: [axis, log]
//   mt.softmax_grad:  dx from dy and the forward result y               int attrs: [axis, log]
#pragma once
#include "kernels/kernel_args.h"

namespace mt {
std::string softmax_check(const KernelArgs& args);
void softmax_cpu(const KernelArgs& args);
std::string softmax_grad_check(const KernelArgs& args);
void softmax_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/softmax/softmax_cuda.cu), built when CUDA is enabled.
void softmax_cuda(const KernelArgs& args, const CudaLaunch& launch);
void softmax_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
