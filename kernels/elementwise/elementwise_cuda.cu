// CUDA twins of the elementwise and layout kernels; kernels/elementwise/elementwise_cpu.cc is
// the reference they are tested against (tests/kernels/cuda_twin_test.cc).
#include "kernels/broadcast.h"
#include "kernels/cuda_common.cuh"
#include "kernels/elementwise/elementwise.h"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::Dims;
using cuda::kThreads;
using cuda::requireRank;

struct Add {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct Mul {
  __device__ float operator()(float x, float y) const { return x * y; }
};

// out[i] = f(a[i], b[i % inner]): b broadcast over a's leading dims.
template <typename F>
__global__ void broadcastBinary(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ out, int64_t n, int64_t inner, F f) {
  MT_GRID_STRIDE(i, n) out[i] = f(a[i], b[i % inner]);
}

__global__ void scaleKernel(const float* __restrict__ x, float* __restrict__ out, int64_t n, float factor) {
  MT_GRID_STRIDE(i, n) out[i] = x[i] * factor;
}

__global__ void fillKernel(float* __restrict__ out, int64_t n, float value) {
  MT_GRID_STRIDE(i, n) out[i] = value;
}

__global__ void widenKernel(const uint16_t* __restrict__ x, uint32_t* __restrict__ out, int64_t n) {
  MT_GRID_STRIDE(i, n) out[i] = static_cast<uint32_t>(x[i]) << 16;
}

// Every output element sums its input elements along the reduced dimensions, in input order.
//   x_dims: the input shape; reduced: 1 where the output has size 1 and the input does not.
__global__ void sumToKernel(const float* __restrict__ x, float* __restrict__ out, int64_t n_out, int rank,
                            Dims x_dims, Dims x_strides, Dims reduced, int64_t reduced_count) {
  MT_GRID_STRIDE(o, n_out) {
    // The output index, in the input's rank (reduced dimensions have index 0).
    int64_t base = 0, rem = o;
    for (int d = rank - 1; d >= 0; --d) {
      if (reduced.v[d]) continue;
      base += (rem % x_dims.v[d]) * x_strides.v[d];
      rem /= x_dims.v[d];
    }
    float sum = 0.0f;
    for (int64_t r = 0; r < reduced_count; ++r) {
      int64_t offset = base, rest = r;
      for (int d = rank - 1; d >= 0; --d) {
        if (!reduced.v[d]) continue;
        offset += (rest % x_dims.v[d]) * x_strides.v[d];
        rest /= x_dims.v[d];
      }
      sum += x[offset];
    }
    out[o] = sum;
  }
}

// out[o] = x[the input element at o's permuted index]; strides: the input stride of each
// output dimension.
template <typename T>
__global__ void transposeKernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, int rank, Dims out_dims,
                                Dims strides) {
  MT_GRID_STRIDE(o, n) {
    int64_t rem = o, offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      offset += (rem % out_dims.v[d]) * strides.v[d];
      rem /= out_dims.v[d];
    }
    out[o] = x[offset];
  }
}

template <typename F>
void launchBroadcast(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel(), inner = args.in[1].numel();
  if (n == 0 || inner == 0) return;
  broadcastBinary<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.in[0].f32(), args.in[1].f32(),
                                                                args.out[0].f32(), n, inner, F{});
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void add_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchBroadcast<Add>(args, launch); }
void mul_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchBroadcast<Mul>(args, launch); }

void scale_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  scaleKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.in[0].f32(), args.out[0].f32(), n, args.floats[0]);
  MT_CUDA_CHECK_LAUNCH();
}

void fill_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.out[0].numel();
  if (n == 0) return;
  fillKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.out[0].f32(), n, args.floats[0]);
  MT_CUDA_CHECK_LAUNCH();
}

void widen_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  widenKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(static_cast<const uint16_t*>(args.in[0].data),
                                                            static_cast<uint32_t*>(args.out[0].data), n);
  MT_CUDA_CHECK_LAUNCH();
}

void sum_to_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  const int rank = x.rank();
  requireRank(rank, "sum_to");
  if (isSuffix(out.shape, x.shape)) {
    // The common case (a bias gradient): column sums over the leading rows.
    const float* xp = x.f32();
    const int64_t cols = n_out;
    cuda::columnSums(
        x.numel() / cols, cols, [xp, cols] __device__(int64_t r, int64_t c) { return xp[r * cols + c]; },
        out.f32(), launch.stream);
    return;
  }
  Dims x_dims{}, x_strides{}, reduced{};
  int64_t stride = 1, reduced_count = 1;
  const int offset = rank - out.rank();
  for (int d = rank - 1; d >= 0; --d) {
    x_dims.v[d] = x.shape[d];
    x_strides.v[d] = stride;
    stride *= x.shape[d];
    const int64_t out_dim = d >= offset ? out.shape[d - offset] : 1;
    reduced.v[d] = out_dim == 1 && x.shape[d] != 1;
    if (reduced.v[d]) reduced_count *= x.shape[d];
  }
  sumToKernel<<<blocksFor(n_out), kThreads, 0, launch.stream>>>(x.f32(), out.f32(), n_out, rank, x_dims, x_strides,
                                                                reduced, reduced_count);
  MT_CUDA_CHECK_LAUNCH();
}

void transpose_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int64_t n = x.numel();
  if (n == 0) return;
  const int rank = x.rank();
  requireRank(rank, "transpose");
  Dims in_strides{}, out_dims{}, strides{};
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    in_strides.v[d] = stride;
    stride *= x.shape[d];
  }
  for (int d = 0; d < rank; ++d) {
    out_dims.v[d] = out.shape[d];
    strides.v[d] = in_strides.v[args.ints[d]];
  }
  if (dtypeSize(x.dtype) == 4)
    transposeKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(static_cast<const uint32_t*>(x.data),
                                                                  static_cast<uint32_t*>(out.data), n, rank,
                                                                  out_dims, strides);
  else
    transposeKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(static_cast<const uint16_t*>(x.data),
                                                                  static_cast<uint16_t*>(out.data), n, rank,
                                                                  out_dims, strides);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
