// mt.softmax_xent: mean softmax cross-entropy over the rows of the logits.
//   (logits (..., V), targets (...) i32) -> (loss () , lse (...))
//   A target outside [0, V) (e.g. -1) is ignored: it adds nothing and is not counted in the
//   mean, as torch's ignore_index.
// mt.softmax_xent_grad: (dloss (), logits, targets, lse) -> dlogits (..., V)
#pragma once
#include "kernels/kernel_args.h"

namespace mt {
std::string softmax_xent_check(const KernelArgs& args);
void softmax_xent_cpu(const KernelArgs& args);
std::string softmax_xent_grad_check(const KernelArgs& args);
void softmax_xent_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/loss/loss_cuda.cu), built when CUDA is enabled.
void softmax_xent_cuda(const KernelArgs& args, const CudaLaunch& launch);
void softmax_xent_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
