// CUDA twins of the pointwise activations; kernels/activation/activation_cpu.cc is the reference.
#include "kernels/activation/activation.h"
#include "kernels/cuda_common.cuh"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::launchBf16x8;
using cuda::data;
using cuda::fromFloat;
using cuda::kThreads;
using cuda::toFloat;
using cuda::withFloat;

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kTanhCoeff = 0.044715f;

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

struct Gelu {
  bool tanh_approx;
  __device__ float operator()(float x) const {
    if (tanh_approx) return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kTanhCoeff * x * x * x)));
    return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
  }
};
struct GeluGrad {
  bool tanh_approx;
  __device__ float operator()(float dy, float x) const {
    if (tanh_approx) {
      const float x2 = x * x;
      const float t = tanhf(kSqrt2OverPi * (x + kTanhCoeff * x2 * x));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kTanhCoeff * x2);
      return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    }
    const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
    return dy * (cdf + x * kInvSqrt2Pi * expf(-0.5f * x * x));
  }
};
struct Silu {
  __device__ float operator()(float x) const { return x * sigmoid(x); }
};
struct SiluGrad {
  __device__ float operator()(float dy, float x) const {
    const float s = sigmoid(x);
    return dy * s * (1.0f + x * (1.0f - s));
  }
};
struct Swiglu {
  __device__ float operator()(float gate, float up) const { return gate * sigmoid(gate) * up; }
};
struct Softcap {
  float cap;
  __device__ float operator()(float x) const { return softcapValue(x, cap); }
};
struct SoftcapGrad {
  float cap;
  __device__ float operator()(float dy, float y) const { return softcapGradValue(dy, y, cap); }
};

template <typename T, typename F>
__global__ void unaryKernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, F f) {
  MT_GRID_STRIDE(i, n) y[i] = fromFloat<T>(f(toFloat(x[i])));
}
template <typename T, typename F>
__global__ void binaryKernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t n, F f) {
  MT_GRID_STRIDE(i, n) y[i] = fromFloat<T>(f(toFloat(a[i]), toFloat(b[i])));
}

// SwiGLU's gradient: in dy, gate, up; out dgate, dup (the scalar and eight-wide kernels' math).
struct SwigluGrad {
  __device__ void operator()(const float (&in)[3], float (&out)[2]) const {
    const float d = in[0], g = in[1], s = sigmoid(g);
    out[1] = d * (g * s);
    out[0] = d * in[2] * s * (1.0f + g * (1.0f - s));
  }
};
template <typename T>
__global__ void swigluGradKernel(const T* __restrict__ dy, const T* __restrict__ gate, const T* __restrict__ up,
                                 T* __restrict__ dgate, T* __restrict__ dup, int64_t n) {
  MT_GRID_STRIDE(i, n) {
    const float in[3] = {toFloat(dy[i]), toFloat(gate[i]), toFloat(up[i])};
    float out[2];
    SwigluGrad{}(in, out);
    dgate[i] = fromFloat<T>(out[0]);
    dup[i] = fromFloat<T>(out[1]);
  }
}

template <typename F>
void launchUnary(const KernelArgs& args, const CudaLaunch& launch, F f) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  withFloat(args.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    unaryKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(data<const T>(args.in[0]), data<T>(args.out[0]), n, f);
  });
  MT_CUDA_CHECK_LAUNCH();
}
template <typename F>
void launchBinary(const KernelArgs& args, const CudaLaunch& launch, F f) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  if (launchBf16x8<2, 1>({&args.in[0], &args.in[1]}, {&args.out[0]}, n, cuda::BinaryOnArrays<F>{f}, launch.stream))
    return;
  withFloat(args.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    binaryKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(data<const T>(args.in[0]), data<const T>(args.in[1]),
                                                               data<T>(args.out[0]), n, f);
  });
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gelu_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchUnary(args, launch, Gelu{args.ints[0] != 0}); }
void gelu_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchBinary(args, launch, GeluGrad{args.ints[0] != 0});
}
void silu_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchUnary(args, launch, Silu{}); }
void silu_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchBinary(args, launch, SiluGrad{}); }
void swiglu_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchBinary(args, launch, Swiglu{}); }
void swiglu_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  if (launchBf16x8<3, 2>({&args.in[0], &args.in[1], &args.in[2]}, {&args.out[0], &args.out[1]}, n,
                         SwigluGrad{}, launch.stream))
    return;
  withFloat(args.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    swigluGradKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(data<const T>(args.in[0]), data<const T>(args.in[1]),
                                                                   data<const T>(args.in[2]), data<T>(args.out[0]),
                                                                   data<T>(args.out[1]), n);
  });
  MT_CUDA_CHECK_LAUNCH();
}

void softcap_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchUnary(args, launch, Softcap{args.floats[0]}); }
void softcap_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchBinary(args, launch, SoftcapGrad{args.floats[0]});
}

}  // namespace mt
