// CUDA twins of the elementwise and layout kernels; kernels/elementwise/elementwise_cpu.cc is
// the reference they are tested against (tests/kernels/cuda_twin_test.cc).
#include "kernels/broadcast.h"
#include "kernels/cuda_common.cuh"
#include "kernels/elementwise/elementwise.h"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::launchBf16x8;
using cuda::data;
using cuda::Dims;
using cuda::fromFloat;
using cuda::kThreads;
using cuda::requireRank;
using cuda::toFloat;
using cuda::withFloat;

struct Add {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct Mul {
  __device__ float operator()(float x, float y) const { return x * y; }
};

// out[i] = f(a[i], b[i % inner]): b broadcast over a's leading dims.
template <typename T, typename F>
__global__ void broadcastBinary(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n,
                                int64_t inner, F f) {
  MT_GRID_STRIDE(i, n) out[i] = fromFloat<T>(f(toFloat(a[i]), toFloat(b[i % inner])));
}

// The same with bf16 values eight a thread, b's size a multiple of 8 (a bias add): one 16-byte
// load of each operand and one index division per eight values.
template <typename F>
__global__ void broadcastBf16x8(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ out,
                                int64_t words, int64_t inner_words, F f) {
  MT_GRID_STRIDE(w, words) {
    const uint4 x = a[w], y = b[w % inner_words];
    uint4 z;
    const auto* xs = reinterpret_cast<const cuda::bf16*>(&x);
    const auto* ys = reinterpret_cast<const cuda::bf16*>(&y);
    auto* zs = reinterpret_cast<cuda::bf16*>(&z);
#pragma unroll
    for (int k = 0; k < 8; ++k) zs[k] = fromFloat<cuda::bf16>(f(toFloat(xs[k]), toFloat(ys[k])));
    out[w] = z;
  }
}

template <typename T>
__global__ void scaleKernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, float factor) {
  MT_GRID_STRIDE(i, n) out[i] = fromFloat<T>(toFloat(x[i]) * factor);
}

template <typename T>
__global__ void fillKernel(T* __restrict__ out, int64_t n, float value) {
  MT_GRID_STRIDE(i, n) out[i] = fromFloat<T>(value);
}

__global__ void widenKernel(const uint16_t* __restrict__ x, uint32_t* __restrict__ out, int64_t n) {
  MT_GRID_STRIDE(i, n) out[i] = static_cast<uint32_t>(x[i]) << 16;
}

__global__ void narrowKernel(const float* __restrict__ x, uint16_t* __restrict__ out, int64_t n) {
  MT_GRID_STRIDE(i, n) out[i] = bf16Bits(x[i]);
}

// Every output element sums its input elements along the reduced dimensions, in input order.
//   x_dims: the input shape; reduced: 1 where the output has size 1 and the input does not.
template <typename In, typename Out>
__global__ void sumToKernel(const In* __restrict__ x, Out* __restrict__ out, int64_t n_out, int rank, Dims x_dims,
                            Dims x_strides, Dims reduced, int64_t reduced_count) {
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
      sum += toFloat(x[offset]);
    }
    out[o] = fromFloat<Out>(sum);
  }
}

// out[r] = the sum of row r of a row-major (rows, cols) x: a warp a row, its lanes reading
// consecutive elements (DoRA's weight norm: an (out, in) weight's squares to (out, 1)). The
// generic kernel above gives each output a thread, whose reads along a row hit one cache line
// each: with DoRA's magnitude sums (then bf16, so off the column-sum path) 68 % of a DoRA step
// on an H200 (docs/perf.md). Taken where keptLeadingRows says the result keeps x's leading
// dimensions and a row fills a warp (KernelTest.SumToPathsFollowTheShapes).
template <typename In, typename Out>
__global__ void rowSumsKernel(const In* __restrict__ x, Out* __restrict__ out, int64_t rows, int64_t cols) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  // r is the same for the warp's lanes: the shuffles of warpSum see all 32.
  for (int64_t r = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5; r < rows; r += warps) {
    const In* row = x + r * cols;
    float sum = 0.0f;
#pragma unroll 4
    for (int64_t c = lane; c < cols; c += 32) sum += toFloat(row[c]);
    sum = cuda::warpSum(sum);
    if (lane == 0) out[r] = fromFloat<Out>(sum);
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

// Element (r, c) of a row-major (rows, cols) activation, as f32.
template <typename T>
struct RowMajor {
  const T* x;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const { return toFloat(x[r * cols + c]); }
};

template <typename F>
void launchBroadcast(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel(), inner = args.in[1].numel();
  if (n == 0 || inner == 0) return;
  // The same shapes (a residual add): no index arithmetic, eight values a thread in bf16.
  if (inner == n &&
      launchBf16x8<2, 1>({&args.in[0], &args.in[1]}, {&args.out[0]}, n, cuda::BinaryOnArrays<F>{F{}}, launch.stream))
    return;
  if (inner % 8 == 0 && cuda::bf16x8Aligned({&args.in[0], &args.in[1], &args.out[0]})) {  // n: a multiple of inner
    broadcastBf16x8<<<blocksFor(n / 8), kThreads, 0, launch.stream>>>(
        data<const uint4>(args.in[0]), data<const uint4>(args.in[1]), data<uint4>(args.out[0]), n / 8, inner / 8, F{});
    MT_CUDA_CHECK_LAUNCH();
    return;
  }
  withFloat(args.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    broadcastBinary<<<blocksFor(n), kThreads, 0, launch.stream>>>(data<const T>(args.in[0]), data<const T>(args.in[1]),
                                                                  data<T>(args.out[0]), n, inner, F{});
  });
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void add_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchBroadcast<Add>(args, launch); }
void mul_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchBroadcast<Mul>(args, launch); }

void scale_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  withFloat(args.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    scaleKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(data<const T>(args.in[0]), data<T>(args.out[0]), n,
                                                              args.floats[0]);
  });
  MT_CUDA_CHECK_LAUNCH();
}

void fill_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.out[0].numel();
  if (n == 0) return;
  withFloat(args.out[0].dtype, [&](auto t) {
    using T = decltype(t);
    fillKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(data<T>(args.out[0]), n, args.floats[0]);
  });
  MT_CUDA_CHECK_LAUNCH();
}

void widen_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  widenKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(static_cast<const uint16_t*>(args.in[0].data),
                                                            static_cast<uint32_t*>(args.out[0].data), n);
  MT_CUDA_CHECK_LAUNCH();
}

void narrow_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  narrowKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.in[0].f32(), static_cast<uint16_t*>(args.out[0].data),
                                                             n);
  MT_CUDA_CHECK_LAUNCH();
}

void sum_to_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  const int rank = x.rank();
  requireRank(rank, "sum_to");
  if (isSuffix(out.shape, x.shape) && out.dtype == DType::F32) {
    // The common case (a bias gradient): column sums over the leading rows.
    const int64_t cols = n_out;
    withFloat(x.dtype, [&](auto t) {
      using T = decltype(t);
      cuda::columnSums(x.numel() / cols, cols, RowMajor<T>{data<const T>(x), cols}, out.f32(), launch.stream);
    });
    return;
  }
  if (const int64_t rows = keptLeadingRows(out.shape, x.shape); rows > 0 && x.numel() / rows >= 32) {
    const int64_t cols = x.numel() / rows;
    withFloat(x.dtype, [&](auto in) {
      withFloat(out.dtype, [&](auto o) {
        using In = decltype(in);
        using Out = decltype(o);
        rowSumsKernel<<<blocksFor(rows * 32), kThreads, 0, launch.stream>>>(data<const In>(x), data<Out>(out), rows,
                                                                             cols);
      });
    });
    MT_CUDA_CHECK_LAUNCH();
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
  withFloat(x.dtype, [&](auto in) {
    withFloat(out.dtype, [&](auto o) {
      using In = decltype(in);
      using Out = decltype(o);
      sumToKernel<<<blocksFor(n_out), kThreads, 0, launch.stream>>>(data<const In>(x), data<Out>(out), n_out, rank,
                                                                    x_dims, x_strides, reduced, reduced_count);
    });
  });
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
