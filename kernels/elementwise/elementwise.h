// Elementwise and layout kernels.
//   mt.add / mt.mul: out = a (op) b, b's shape equal to a's or a suffix of it (broadcast).
//   mt.scale:     out = x * factor                       float attrs: [factor]
//   mt.sum_to:    out = x summed down to out's shape, which broadcasts to x's (numpy rules)
//   mt.fill:      out = value                            float attrs: [value]
//   mt.transpose: out = x permuted                       int attrs: the permutation
#pragma once
#include "kernels/kernel_args.h"

namespace mt {
std::string add_check(const KernelArgs& args);
void add_cpu(const KernelArgs& args);
std::string mul_check(const KernelArgs& args);
void mul_cpu(const KernelArgs& args);
std::string scale_check(const KernelArgs& args);
void scale_cpu(const KernelArgs& args);
std::string sum_to_check(const KernelArgs& args);
void sum_to_cpu(const KernelArgs& args);
std::string fill_check(const KernelArgs& args);
void fill_cpu(const KernelArgs& args);
std::string transpose_check(const KernelArgs& args);
void transpose_cpu(const KernelArgs& args);

// CUDA twins (kernels/elementwise/elementwise_cuda.cu), built when CUDA is enabled.
void add_cuda(const KernelArgs& args, const CudaLaunch& launch);
void mul_cuda(const KernelArgs& args, const CudaLaunch& launch);
void scale_cuda(const KernelArgs& args, const CudaLaunch& launch);
void sum_to_cuda(const KernelArgs& args, const CudaLaunch& launch);
void fill_cuda(const KernelArgs& args, const CudaLaunch& launch);
void transpose_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
