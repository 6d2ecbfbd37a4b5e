// CUDA twins of the generic pointwise kernels (what an ONNX import leaves unfused);
// kernels/pointwise/pointwise_cpu.cc is the reference they are tested against
// (tests/kernels/cuda_twin_test.cc). One thread per output element, computing with the CPU's
// own scalar functions (pointwise.h); a broadcast operand is read through its strides over the
// output's dimensions (0 where it broadcasts).
#include "kernels/broadcast.h"
#include "kernels/cuda_common.cuh"
#include "kernels/pointwise/pointwise.h"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::Dims;
using cuda::kThreads;

// An operand broadcast to the output: its element stride along each output dimension (0
// where it broadcasts). `in` is aligned at the right; the checks made sure it broadcasts.
Dims stridesOf(const std::vector<int64_t>& in, const Tensor& out) {
  Dims s{};
  int64_t stride = 1;
  for (int d = out.rank() - 1, k = static_cast<int>(in.size()) - 1; d >= 0; --d, --k) {
    const int64_t dim = k >= 0 ? in[k] : 1;
    s.v[d] = dim == out.shape[d] && dim != 1 ? stride : 0;
    stride *= dim;
  }
  return s;
}

// The output's dimensions, after checking its rank.
Dims dimsOf(const Tensor& out, const char* op) {
  cuda::requireRank(out.rank(), op);
  Dims s{};
  for (int d = 0; d < out.rank(); ++d) s.v[d] = out.shape[d];
  return s;
}

__device__ int64_t offsetOf(int64_t o, int rank, const Dims& dims, const Dims& strides) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (o % dims.v[d]) * strides.v[d];
    o /= dims.v[d];
  }
  return offset;
}

__global__ void unaryKernel(UnaryFn fn, const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  MT_GRID_STRIDE(i, n) out[i] = applyUnary(fn, x[i]);
}

__global__ void unaryGradKernel(UnaryFn fn, const float* __restrict__ dy, const float* __restrict__ x,
                                float* __restrict__ dx, int64_t n) {
  MT_GRID_STRIDE(i, n) dx[i] = dy[i] * unaryDerivative(fn, x[i]);
}

__global__ void clampKernel(const float* __restrict__ x, float* __restrict__ out, int64_t n, float lo, float hi) {
  MT_GRID_STRIDE(i, n) out[i] = applyClamp(x[i], lo, hi);
}

__global__ void clampGradKernel(const float* __restrict__ dy, const float* __restrict__ x, float* __restrict__ dx,
                                int64_t n, float lo, float hi) {
  MT_GRID_STRIDE(i, n) dx[i] = clampPasses(x[i], lo, hi) ? dy[i] : 0.0f;
}

__global__ void binaryKernel(BinaryFn fn, const float* __restrict__ a, const float* __restrict__ b,
                             float* __restrict__ out, int64_t n, int rank, Dims dims, Dims sa, Dims sb) {
  MT_GRID_STRIDE(o, n) out[o] = applyBinary(fn, a[offsetOf(o, rank, dims, sa)], b[offsetOf(o, rank, dims, sb)]);
}

// (da, db) in dy's (the broadcast) shape.
__global__ void binaryGradKernel(BinaryFn fn, const float* __restrict__ dy, const float* __restrict__ a,
                                 const float* __restrict__ b, float* __restrict__ da, float* __restrict__ db,
                                 int64_t n, int rank, Dims dims, Dims sa, Dims sb) {
  MT_GRID_STRIDE(o, n) {
    binaryGradient(fn, dy[o], a[offsetOf(o, rank, dims, sa)], b[offsetOf(o, rank, dims, sb)], da[o], db[o]);
  }
}

// f32 and i32 alike: the selected branch's bits.
__global__ void whereKernel(const int32_t* __restrict__ cond, const uint32_t* __restrict__ a,
                            const uint32_t* __restrict__ b, uint32_t* __restrict__ out, int64_t n, int rank,
                            Dims dims, Dims sc, Dims sa, Dims sb) {
  MT_GRID_STRIDE(o, n) {
    out[o] = cond[offsetOf(o, rank, dims, sc)] ? a[offsetOf(o, rank, dims, sa)] : b[offsetOf(o, rank, dims, sb)];
  }
}

__global__ void broadcastKernel(const uint32_t* __restrict__ x, uint32_t* __restrict__ out, int64_t n, int rank,
                                Dims dims, Dims sx) {
  MT_GRID_STRIDE(o, n) out[o] = x[offsetOf(o, rank, dims, sx)];
}

__global__ void i32ToF32Kernel(const int32_t* __restrict__ x, float* __restrict__ out, int64_t n) {
  MT_GRID_STRIDE(i, n) out[i] = static_cast<float>(x[i]);
}

__global__ void f32ToI32Kernel(const float* __restrict__ x, int32_t* __restrict__ out, int64_t n) {
  MT_GRID_STRIDE(i, n) out[i] = castToI32(x[i]);
}

}  // namespace

void unary_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  unaryKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(static_cast<UnaryFn>(args.ints[0]), args.in[0].f32(),
                                                            args.out[0].f32(), n);
  MT_CUDA_CHECK_LAUNCH();
}

void unary_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[1].numel();
  if (n == 0) return;
  unaryGradKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(static_cast<UnaryFn>(args.ints[0]), args.in[0].f32(),
                                                                args.in[1].f32(), args.out[0].f32(), n);
  MT_CUDA_CHECK_LAUNCH();
}

void clamp_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  clampKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.in[0].f32(), args.out[0].f32(), n, args.floats[0],
                                                            args.floats[1]);
  MT_CUDA_CHECK_LAUNCH();
}

void clamp_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[1].numel();
  if (n == 0) return;
  clampGradKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.in[0].f32(), args.in[1].f32(), args.out[0].f32(),
                                                                n, args.floats[0], args.floats[1]);
  MT_CUDA_CHECK_LAUNCH();
}

void binary_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &a = args.in[0], &b = args.in[1], &out = args.out[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  binaryKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(static_cast<BinaryFn>(args.ints[0]), a.f32(), b.f32(),
                                                             out.f32(), n, out.rank(), dimsOf(out, "binary"),
                                                             stridesOf(a.shape, out), stridesOf(b.shape, out));
  MT_CUDA_CHECK_LAUNCH();
}

void binary_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &dy = args.in[0], &a = args.in[1], &b = args.in[2];
  const int64_t n = dy.numel();
  if (n == 0) return;
  binaryGradKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(
      static_cast<BinaryFn>(args.ints[0]), dy.f32(), a.f32(), b.f32(), args.out[0].f32(), args.out[1].f32(), n,
      dy.rank(), dimsOf(dy, "binary_grad"), stridesOf(a.shape, dy), stridesOf(b.shape, dy));
  MT_CUDA_CHECK_LAUNCH();
}

void where_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &cond = args.in[0], &a = args.in[1], &b = args.in[2], &out = args.out[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  whereKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(
      cond.i32(), static_cast<const uint32_t*>(a.data), static_cast<const uint32_t*>(b.data),
      static_cast<uint32_t*>(out.data), n, out.rank(), dimsOf(out, "where"), stridesOf(cond.shape, out),
      stridesOf(a.shape, out), stridesOf(b.shape, out));
  MT_CUDA_CHECK_LAUNCH();
}

void broadcast_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  broadcastKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(static_cast<const uint32_t*>(x.data),
                                                                static_cast<uint32_t*>(out.data), n, out.rank(),
                                                                dimsOf(out, "broadcast"), stridesOf(x.shape, out));
  MT_CUDA_CHECK_LAUNCH();
}

void cast_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int64_t n = x.numel();
  if (n == 0) return;
  if (x.dtype == out.dtype) {
    MT_CUDA_CHECK(cudaMemcpyAsync(out.data, x.data, x.bytes(), cudaMemcpyDeviceToDevice, launch.stream));
    return;
  }
  if (x.dtype == DType::I32)
    i32ToF32Kernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(x.i32(), out.f32(), n);
  else
    f32ToI32Kernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(x.f32(), out.i32(), n);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
