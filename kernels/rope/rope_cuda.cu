// CUDA twin of mt.rope; kernels/rope/rope_cpu.cc is the reference (same float formulas for the
// inverse frequency and the angle).
#include "kernels/cuda_common.cuh"
#include "kernels/rope/rope.h"

namespace mt {
namespace {

using cuda::fromFloat;
using cuda::toFloat;

// One thread per rotated pair (b, t, head, i < D/2).
template <typename T>
__global__ void ropeKernel(const T* __restrict__ x, T* __restrict__ y, int64_t pairs, int64_t seq, int64_t heads,
                           int64_t head_dim, float theta, float sign) {
  const int64_t half = head_dim / 2;
  MT_GRID_STRIDE(p, pairs) {
    const int64_t i = p % half, token = p / (half * heads), h = (p / half) % heads;
    const int64_t t = token % seq;
    const float inv_freq = 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    const float angle = static_cast<float>(t) * inv_freq;
    const float c = cosf(angle), s = sign * sinf(angle);
    const int64_t base = token * heads * head_dim + h * head_dim;
    const float x1 = toFloat(x[base + i]), x2 = toFloat(x[base + i + half]);
    y[base + i] = fromFloat<T>(x1 * c - x2 * s);
    y[base + i + half] = fromFloat<T>(x2 * c + x1 * s);
  }
}

}  // namespace

void rope_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& x = args.in[0];
  const int64_t head_dim = args.ints[0], heads = x.dim(2) / head_dim;
  const int64_t pairs = x.numel() / 2;
  if (pairs == 0) return;
  cuda::withFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    ropeKernel<<<cuda::blocksFor(pairs), cuda::kThreads, 0, launch.stream>>>(
        cuda::data<const T>(x), cuda::data<T>(args.out[0]), pairs, x.dim(1), heads, head_dim, args.floats[0],
        args.ints[1] ? -1.0f : 1.0f);
  });
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
