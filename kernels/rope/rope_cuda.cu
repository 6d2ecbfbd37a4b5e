// CUDA twins of mt.rope and mt.rope_at; kernels/rope/rope_cpu.cc is the reference (same float
// formulas for the inverse frequency and the angle).
#include "kernels/cuda_common.cuh"
#include "kernels/rope/rope.h"

#include <algorithm>

namespace mt {
namespace {

using cuda::fromFloat;
using cuda::toFloat;

// A block per token (b, t), at positions[b * seq + t] (mt.rope_at) or offset + t (positions
// null: mt.rope): a thread per pair i < R/2 (R the rotary dimension) computes its angle's cosine
// and sine once and turns pair i of every head (the index arithmetic and the transcendentals once
// per token, not once per element: at a GPU's bandwidth they, not the bytes, bounded a thread per
// pair); the elements past R, where a head has them, pass unchanged.
// LongRoPE's choice by position over positions[0, tokens) (mt.rope_at: a decode step's, packed
// examples'): each block finds the call's largest position itself (a grid of at most
// kLongRopeBlocks then); `long_factors` otherwise.
template <typename T>
__global__ void ropeKernel(const T* __restrict__ x, const int32_t* __restrict__ positions, T* __restrict__ y,
                           int64_t tokens, int64_t seq, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                           RopeFrequencies f, float sign, int64_t offset, bool long_factors, bool choose) {
  const int64_t half = rotary_dim / 2, pass = head_dim - rotary_dim;
  if (choose) {
    __shared__ int largest;
    if (threadIdx.x == 0) largest = -1;
    __syncthreads();
    int mine = -1;
    for (int64_t token = threadIdx.x; token < tokens; token += blockDim.x) mine = max(mine, positions[token]);
    atomicMax(&largest, mine);
    __syncthreads();
    long_factors = ropeLongFactors(f, largest);
  }
  for (int64_t token = blockIdx.x; token < tokens; token += gridDim.x) {
    const int64_t t = positions ? int64_t{positions[token]} : offset + token % seq;
    const T* row = x + token * heads * head_dim;
    T* out = y + token * heads * head_dim;
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const float angle = static_cast<float>(t) * ropeInverseFrequency(f, i, rotary_dim, long_factors);
      const float c = cosf(angle) * f.attention, s = sign * (sinf(angle) * f.attention);
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = h * head_dim;
        const float x1 = toFloat(row[base + i]), x2 = toFloat(row[base + i + half]);
        out[base + i] = fromFloat<T>(x1 * c - x2 * s);
        out[base + i + half] = fromFloat<T>(x2 * c + x1 * s);
      }
    }
    for (int64_t j = threadIdx.x; j < heads * pass; j += blockDim.x) {
      const int64_t at = (j / pass) * head_dim + rotary_dim + j % pass;
      out[at] = row[at];
    }
  }
}

void launchRope(const Tensor& x, const int32_t* positions, const Tensor& y, int64_t head_dim, int64_t rotary_dim,
                const RopeFrequencies& f, float sign, int64_t offset, cudaStream_t stream) {
  if (x.numel() == 0 || head_dim < 2) return;
  const int64_t heads = x.dim(2) / head_dim, tokens = x.numel() / x.dim(2), half = rotary_dim / 2;
  const int threads = static_cast<int>(std::min<int64_t>((half + 31) / 32 * 32, 128));
  // LongRoPE picks its factors by the call's largest position: mt.rope's known here (its offset
  // and length), mt.rope_at's found by each block on the device (fewer blocks, each reading them all).
  const bool longrope = f.kind == RopeScalingKind::kLongRope;
  const bool choose = longrope && positions && static_cast<LongRopeChoice>(static_cast<int64_t>(f.a)) ==
                                                   LongRopeChoice::kByPosition;
  const bool long_factors = longrope && !choose && ropeLongFactors(f, offset + x.dim(1) - 1);
  constexpr int64_t kLongRopeBlocks = 1024;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(tokens, choose ? kLongRopeBlocks : int64_t{1} << 30));
  cuda::withFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    ropeKernel<<<blocks, threads, 0, stream>>>(cuda::data<const T>(x), positions, cuda::data<T>(y), tokens, x.dim(1),
                                               heads, head_dim, rotary_dim, f, sign, offset, long_factors, choose);
  });
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchRope(args.in[0], nullptr, args.out[0], args.ints[0], ropeRotaryDim(args, kRopeRotaryAt),
             ropeFrequencies(args, kRopeKindAt, kRopeRotaryAt), args.ints[1] ? -1.0f : 1.0f, ropePositionOffset(args),
             launch.stream);
}

void rope_at_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchRope(args.in[0], args.in[1].i32(), args.out[0], args.ints[0], ropeRotaryDim(args, kRopeAtRotaryAt),
             ropeFrequencies(args, kRopeAtKindAt, kRopeAtRotaryAt), args.intOrZero(2) ? -1.0f : 1.0f, 0,
             launch.stream);
}

}  // namespace mt
