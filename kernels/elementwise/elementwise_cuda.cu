// CUDA twins of the broadcast elementwise kernels; kernels/elementwise/elementwise_cpu.cc is the
// reference they are tested against (tests/kernels/cuda_twin_test.cc).
#include "kernels/cuda_check.h"
#include "kernels/elementwise/elementwise.h"

namespace mt {
namespace {

struct Add {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct Mul {
  __device__ float operator()(float x, float y) const { return x * y; }
};

// out[i] = f(a[i], b[i % inner]): b broadcast over a's leading dims. Grid-stride loop.
template <typename F>
__global__ void broadcastBinary(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ out, int64_t n, int64_t inner, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = f(a[i], b[i % inner]);
}

__global__ void scaleKernel(const float* __restrict__ x, float* __restrict__ out, int64_t n, float factor) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = x[i] * factor;
}

constexpr int kThreads = 256;

unsigned blocksFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 32 ? (blocks > 0 ? blocks : 1) : 65535 * 32);
}

template <typename F>
void launchBroadcast(const KernelArgs& args, CudaStream stream) {
  const int64_t n = args.in[0].numel(), inner = args.in[1].numel();
  if (n == 0 || inner == 0) return;
  broadcastBinary<<<blocksFor(n), kThreads, 0, stream>>>(args.in[0].f32(), args.in[1].f32(), args.out[0].f32(), n,
                                                         inner, F{});
  MT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void add_cuda(const KernelArgs& args, CudaStream stream) { launchBroadcast<Add>(args, stream); }
void mul_cuda(const KernelArgs& args, CudaStream stream) { launchBroadcast<Mul>(args, stream); }

void scale_cuda(const KernelArgs& args, CudaStream stream) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  scaleKernel<<<blocksFor(n), kThreads, 0, stream>>>(args.in[0].f32(), args.out[0].f32(), n, args.floats[0]);
  MT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mt
