// CUDA twin of mt.dropout; kernels/random/dropout_cpu.cc is the reference it is tested against
// (tests/kernels/cuda_twin_test.cc): the same mask, bit for bit.
#include <stdexcept>

#include "kernels/cuda_common.cuh"
#include "kernels/random/dropout.h"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::data;
using cuda::fromFloat;
using cuda::kThreads;
using cuda::toFloat;
using cuda::withFloat;

template <typename T>
__global__ void dropoutKernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, DropoutMask mask) {
  MT_GRID_STRIDE(i, n) {
    out[i] = dropoutKeeps(mask, static_cast<uint64_t>(i)) ? fromFloat<T>(toFloat(x[i]) * mask.scale) : fromFloat<T>(0.0f);
  }
}

}  // namespace

void dropout_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  if (!args.random) throw std::logic_error("mt.dropout run without the step's randomness (KernelArgs::random)");
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  if (!args.random->training) {
    if (args.out[0].data != args.in[0].data)
      MT_CUDA_CHECK(cudaMemcpyAsync(args.out[0].data, args.in[0].data, static_cast<size_t>(args.in[0].bytes()),
                                    cudaMemcpyDeviceToDevice, launch.stream));
    return;
  }
  const DropoutMask mask = dropoutMask(*args.random, args.ints[0], args.floats[0]);
  withFloat(args.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    dropoutKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(data<const T>(args.in[0]), data<T>(args.out[0]), n,
                                                                mask);
  });
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
