// mt.matmul: out = op(a) @ op(b), op = optional transpose of the last two dims.
//   a: (..., M, K) or (..., K, M) with transpose_a;  b: (K, N) or (N, K) with transpose_b,
//   either rank 2 (shared by every batch) or the same rank and batch dims as a.
//   out: (..., M, N).  int attrs: [transpose_a, transpose_b].
#pragma once
#include "kernels/kernel_args.h"

namespace mt {
std::string matmul_check(const KernelArgs& args);
void matmul_cpu(const KernelArgs& args);

// CUDA twins (kernels/matmul/matmul_cuda.cu), built when CUDA is enabled.
void matmul_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
