// CUDA twins of the pointwise activations; kernels/activation/activation_cpu.cc is the reference.
#include "kernels/activation/activation.h"
#include "kernels/cuda_common.cuh"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::kThreads;

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

template <typename F>
__global__ void unaryKernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, F f) {
  MT_GRID_STRIDE(i, n) y[i] = f(x[i]);
}
template <typename F>
__global__ void binaryKernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y,
                             int64_t n, F f) {
  MT_GRID_STRIDE(i, n) y[i] = f(a[i], b[i]);
}

__global__ void swigluGradKernel(const float* __restrict__ dy, const float* __restrict__ gate,
                                 const float* __restrict__ up, float* __restrict__ dgate, float* __restrict__ dup,
                                 int64_t n) {
  MT_GRID_STRIDE(i, n) {
    const float s = sigmoid(gate[i]);
    dup[i] = dy[i] * (gate[i] * s);
    dgate[i] = dy[i] * up[i] * s * (1.0f + gate[i] * (1.0f - s));
  }
}

template <typename F>
void launchUnary(const KernelArgs& args, const CudaLaunch& launch, F f) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  unaryKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.in[0].f32(), args.out[0].f32(), n, f);
  MT_CUDA_CHECK_LAUNCH();
}
template <typename F>
void launchBinary(const KernelArgs& args, const CudaLaunch& launch, F f) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  binaryKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.in[0].f32(), args.in[1].f32(), args.out[0].f32(),
                                                             n, f);
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
  swigluGradKernel<<<blocksFor(n), kThreads, 0, launch.stream>>>(args.in[0].f32(), args.in[1].f32(),
                                                                 args.in[2].f32(), args.out[0].f32(),
                                                                 args.out[1].f32(), n);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
