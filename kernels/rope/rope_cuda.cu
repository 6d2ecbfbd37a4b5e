// CUDA twins of mt.rope and mt.rope_at; kernels/rope/rope_cpu.cc is the reference (same float
// formulas for the inverse frequency and the angle).
#include "kernels/cuda_common.cuh"
#include "kernels/rope/rope.h"

namespace mt {
namespace {

using cuda::fromFloat;
using cuda::toFloat;

// One thread per rotated pair (b, t, head, i < D/2); token (b, t) sits at positions[b * seq + t]
// (mt.rope_at) or at offset + t (positions null: mt.rope).
template <typename T>
__global__ void ropeKernel(const T* __restrict__ x, const int32_t* __restrict__ positions, T* __restrict__ y,
                           int64_t pairs, int64_t seq, int64_t heads, int64_t head_dim, RopeFrequencies f,
                           float sign, int64_t offset) {
  const int64_t half = head_dim / 2;
  MT_GRID_STRIDE(p, pairs) {
    const int64_t i = p % half, token = p / (half * heads), h = (p / half) % heads;
    const int64_t t = positions ? int64_t{positions[token]} : offset + token % seq;
    const float angle = static_cast<float>(t) * ropeInverseFrequency(f, i, head_dim);
    const float c = cosf(angle) * f.attention, s = sign * (sinf(angle) * f.attention);
    const int64_t base = token * heads * head_dim + h * head_dim;
    const float x1 = toFloat(x[base + i]), x2 = toFloat(x[base + i + half]);
    y[base + i] = fromFloat<T>(x1 * c - x2 * s);
    y[base + i + half] = fromFloat<T>(x2 * c + x1 * s);
  }
}

void launchRope(const Tensor& x, const int32_t* positions, const Tensor& y, int64_t head_dim,
                const RopeFrequencies& f, float sign, int64_t offset, cudaStream_t stream) {
  const int64_t heads = x.dim(2) / head_dim, pairs = x.numel() / 2;
  if (pairs == 0) return;
  cuda::withFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    ropeKernel<<<cuda::blocksFor(pairs), cuda::kThreads, 0, stream>>>(
        cuda::data<const T>(x), positions, cuda::data<T>(y), pairs, x.dim(1), heads, head_dim, f, sign, offset);
  });
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchRope(args.in[0], nullptr, args.out[0], args.ints[0], ropeFrequencies(args, 3), args.ints[1] ? -1.0f : 1.0f,
             ropePositionOffset(args), launch.stream);
}

void rope_at_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchRope(args.in[0], args.in[1].i32(), args.out[0], args.ints[0], ropeFrequencies(args, 1), 1.0f, 0,
             launch.stream);
}

}  // namespace mt
