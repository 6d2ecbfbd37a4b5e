// Layout kernels: data movement by index, for f32 and i32 alike (both 4-byte words).
//   mt.gather:       out = data taken along `axis` at `indices` (i32; negative counts from the
//                    end; out of range gives zeros)                int attrs: [axis]
//   mt.gather_grad:  d data: zeros, then dy scatter-added at the indices  int attrs: [axis]
//   mt.concat:       out = a then b along `axis`                   int attrs: [axis]
//   mt.slice:        out[i] = x[start + i * step] per dimension    int attrs: [starts..., steps...]
//   mt.slice_grad:   d x: zeros, dy placed where the slice read    int attrs: [starts..., steps...]
//   mt.trilu:        the lower (upper) triangle of the last two dims, diagonal offset k,
//                    zeros elsewhere                               int attrs: [upper, k]
#pragma once
#include "kernels/kernel_args.h"

namespace mt {
// The row a gather index names along an axis of `size` (negative counts from the end), or -1
// when out of range.
MT_HOST_DEVICE inline int64_t normalisedIndex(int32_t index, int64_t size) {
  const int64_t i = index < 0 ? index + size : index;
  return i >= 0 && i < size ? i : -1;
}

std::string gather_check(const KernelArgs& args);
void gather_cpu(const KernelArgs& args);
std::string gather_grad_check(const KernelArgs& args);
void gather_grad_cpu(const KernelArgs& args);
std::string concat_check(const KernelArgs& args);
void concat_cpu(const KernelArgs& args);
std::string slice_check(const KernelArgs& args);
void slice_cpu(const KernelArgs& args);
std::string slice_grad_check(const KernelArgs& args);
void slice_grad_cpu(const KernelArgs& args);
std::string trilu_check(const KernelArgs& args);
void trilu_cpu(const KernelArgs& args);

// CUDA twins (kernels/layout/layout_cuda.cu), built when CUDA is enabled.
void gather_cuda(const KernelArgs& args, const CudaLaunch& launch);
void gather_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void concat_cuda(const KernelArgs& args, const CudaLaunch& launch);
void slice_cuda(const KernelArgs& args, const CudaLaunch& launch);
void slice_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void trilu_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
