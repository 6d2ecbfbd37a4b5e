// CUDA twins of the generic pointwise kernels (what an ONNX import leaves unfused);
// kernels/pointwise/pointwise_cpu.cc is the reference they are tested against
// (tests/kernels/cuda_twin_test.cc). One thread per output element; a broadcast operand is
// read through its strides over the output's dimensions (0 where it broadcasts).
#include <cmath>

#include "kernels/broadcast.h"
#include "kernels/cuda_common.cuh"
#include "kernels/pointwise/pointwise.h"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::kThreads;

constexpr int kMaxRank = 8;
// The output's shape, and an operand's element stride along each of its dimensions.
struct Shape {
  int rank;
  int64_t dim[kMaxRank];
};
struct Strides {
  int64_t v[kMaxRank];
};

Shape shapeOf(const Tensor& out, const char* op) {
  if (out.rank() > kMaxRank)
    throw std::runtime_error(std::string(op) + " on CUDA: rank " + std::to_string(out.rank()) + " is over " +
                             std::to_string(kMaxRank));
  Shape s{out.rank(), {}};
  for (int d = 0; d < out.rank(); ++d) s.dim[d] = out.shape[d];
  return s;
}

// `in` broadcast to `out` (aligned at the right; the checks made sure it broadcasts).
Strides stridesOf(const std::vector<int64_t>& in, const Shape& out) {
  Strides s{};
  int64_t stride = 1;
  for (int d = out.rank - 1, k = static_cast<int>(in.size()) - 1; d >= 0; --d, --k) {
    const int64_t dim = k >= 0 ? in[k] : 1;
    s.v[d] = dim == out.dim[d] && dim != 1 ? stride : 0;
    stride *= dim;
  }
  return s;
}

__device__ int64_t offsetOf(int64_t o, const Shape& shape, const Strides& strides) {
  int64_t offset = 0;
  for (int d = shape.rank - 1; d >= 0; --d) {
    offset += (o % shape.dim[d]) * strides.v[d];
    o /= shape.dim[d];
  }
  return offset;
}

__device__ float unaryOf(int64_t fn, float x) {
  switch (static_cast<UnaryFn>(fn)) {
    case UnaryFn::Neg: return -x;
    case UnaryFn::Exp: return expf(x);
    case UnaryFn::Log: return logf(x);
    case UnaryFn::Sqrt: return sqrtf(x);
    case UnaryFn::Reciprocal: return 1.0f / x;
    case UnaryFn::Tanh: return tanhf(x);
    case UnaryFn::Erf: return erff(x);
    case UnaryFn::Sigmoid: return 1.0f / (1.0f + expf(-x));
    case UnaryFn::Relu: return x > 0.0f ? x : 0.0f;
    case UnaryFn::Abs: return fabsf(x);
  }
  return x;
}

__device__ float unaryDerivativeOf(int64_t fn, float x) {
  switch (static_cast<UnaryFn>(fn)) {
    case UnaryFn::Neg: return -1.0f;
    case UnaryFn::Exp: return expf(x);
    case UnaryFn::Log: return 1.0f / x;
    case UnaryFn::Sqrt: return 0.5f / sqrtf(x);
    case UnaryFn::Reciprocal: return -1.0f / (x * x);
    case UnaryFn::Tanh: {
      const float t = tanhf(x);
      return 1.0f - t * t;
    }
    case UnaryFn::Erf: return 1.1283791670955126f * expf(-x * x);  // 2 / sqrt(pi)
    case UnaryFn::Sigmoid: {
      const float s = 1.0f / (1.0f + expf(-x));
      return s * (1.0f - s);
    }
    case UnaryFn::Relu: return x > 0.0f ? 1.0f : 0.0f;
    case UnaryFn::Abs: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
  }
  return 0.0f;
}

__device__ float binaryOf(int64_t fn, float a, float b) {
  switch (static_cast<BinaryFn>(fn)) {
    case BinaryFn::Add: return a + b;
    case BinaryFn::Sub: return a - b;
    case BinaryFn::Mul: return a * b;
    case BinaryFn::Div: return a / b;
    case BinaryFn::Pow: return powf(a, b);
  }
  return 0.0f;
}

__global__ void unaryKernel(int64_t fn, const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  MT_GRID_STRIDE(i, n) out[i] = unaryOf(fn, x[i]);
}

__global__ void unaryGradKernel(int64_t fn, const float* __restrict__ dy, const float* __restrict__ x,
                                float* __restrict__ dx, int64_t n) {
  MT_GRID_STRIDE(i, n) dx[i] = dy[i] * unaryDerivativeOf(fn, x[i]);
}

__global__ void binaryKernel(int64_t fn, const float* __restrict__ a, const float* __restrict__ b,
                             float* __restrict__ out, int64_t n, Shape shape, Strides sa, Strides sb) {
  MT_GRID_STRIDE(o, n) out[o] = binaryOf(fn, a[offsetOf(o, shape, sa)], b[offsetOf(o, shape, sb)]);
}

// (da, db) in dy's (the broadcast) shape.
__global__ void binaryGradKernel(int64_t fn, const float* __restrict__ dy, const float* __restrict__ a,
                                 const float* __restrict__ b, float* __restrict__ da, float* __restrict__ db,
                                 int64_t n, Shape shape, Strides sa, Strides sb) {
  MT_GRID_STRIDE(o, n) {
    const float g = dy[o], x = a[offsetOf(o, shape, sa)], y = b[offsetOf(o, shape, sb)];
    switch (static_cast<BinaryFn>(fn)) {
      case BinaryFn::Add: da[o] = g, db[o] = g; break;
      case BinaryFn::Sub: da[o] = g, db[o] = -g; break;
      case BinaryFn::Mul: da[o] = g * y, db[o] = g * x; break;
      case BinaryFn::Div: da[o] = g / y, db[o] = -g * x / (y * y); break;
      case BinaryFn::Pow:
        da[o] = g * y * powf(x, y - 1.0f);
        db[o] = x == 0.0f ? 0.0f : g * powf(x, y) * logf(x);  // a^b ln a, zero where a is 0
        break;
    }
  }
}

// f32 and i32 alike: the selected branch's bits.
__global__ void whereKernel(const int32_t* __restrict__ cond, const uint32_t* __restrict__ a,
                            const uint32_t* __restrict__ b, uint32_t* __restrict__ out, int64_t n, Shape shape,
                            Strides sc, Strides sa, Strides sb) {
  MT_GRID_STRIDE(o, n) out[o] = cond[offsetOf(o, shape, sc)] ? a[offsetOf(o, shape, sa)] : b[offsetOf(o, shape, sb)];
}

__global__ void broadcastKernel(const uint32_t* __restrict__ x, uint32_t* __restrict__ out, int64_t n, Shape shape,
                                Strides sx) {
  MT_GRID_STRIDE(o, n) out[o] = x[offsetOf(o, shape, sx)];
}

__global__ void i32ToF32Kernel(const int32_t* __restrict__ x, float* __restrict__ out, int64_t n) {
  MT_GRID_STRIDE(i, n) out[i] = static_cast<float>(x[i]);
}

// Toward zero, saturating; NaN gives 0 (as the CPU kernel).
__global__ void f32ToI32Kernel(const float* __restrict__ x, int32_t* __restrict__ out, int64_t n) {
  constexpr float kMax = 2147483520.0f;  // the largest float below 2^31
  MT_GRID_STRIDE(i, n) {
    const float v = x[i];
    out[i] = isnan(v) ? 0 : static_cast<int32_t>(fminf(fmaxf(v, -kMax), kMax));
  }
}

}  // namespace

void unary_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  unaryKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.ints[0], args.in[0].f32(), args.out[0].f32(), n);
  MT_CUDA_CHECK_LAUNCH();
}

void unary_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[1].numel();
  if (n == 0) return;
  unaryGradKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.ints[0], args.in[0].f32(), args.in[1].f32(),
                                                                args.out[0].f32(), n);
  MT_CUDA_CHECK_LAUNCH();
}

void binary_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &a = args.in[0], &b = args.in[1], &out = args.out[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const Shape shape = shapeOf(out, "binary");
  binaryKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.ints[0], a.f32(), b.f32(), out.f32(), n, shape,
                                                             stridesOf(a.shape, shape), stridesOf(b.shape, shape));
  MT_CUDA_CHECK_LAUNCH();
}

void binary_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &dy = args.in[0], &a = args.in[1], &b = args.in[2];
  const int64_t n = dy.numel();
  if (n == 0) return;
  const Shape shape = shapeOf(dy, "binary_grad");
  binaryGradKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.ints[0], dy.f32(), a.f32(), b.f32(),
                                                                 args.out[0].f32(), args.out[1].f32(), n, shape,
                                                                 stridesOf(a.shape, shape), stridesOf(b.shape, shape));
  MT_CUDA_CHECK_LAUNCH();
}

void where_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &cond = args.in[0], &a = args.in[1], &b = args.in[2], &out = args.out[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const Shape shape = shapeOf(out, "where");
  whereKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(
      cond.i32(), static_cast<const uint32_t*>(a.data), static_cast<const uint32_t*>(b.data),
      static_cast<uint32_t*>(out.data), n, shape, stridesOf(cond.shape, shape), stridesOf(a.shape, shape),
      stridesOf(b.shape, shape));
  MT_CUDA_CHECK_LAUNCH();
}

void broadcast_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const Shape shape = shapeOf(out, "broadcast");
  broadcastKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(static_cast<const uint32_t*>(x.data),
                                                                static_cast<uint32_t*>(out.data), n, shape,
                                                                stridesOf(x.shape, shape));
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
