// CUDA twin of mt.clamped_swiglu(_grad); kernels/activation/clamped_swiglu_cpu.cc is the
// reference, and the per-pair math (clamped_swiglu.h) is the same code. f32 (the op table's
// F32_ONLY, as the experts' other kernels).
#include "kernels/activation/clamped_swiglu.h"
#include "kernels/cuda_common.cuh"

namespace mt {
namespace {

__global__ void clampedSwigluKernel(const float* __restrict__ gate_up, float* __restrict__ out, int64_t n, float alpha,
                                    float limit) {
  MT_GRID_STRIDE(i, n) out[i] = clampedSwiglu(gate_up[2 * i], gate_up[2 * i + 1], alpha, limit);
}

__global__ void clampedSwigluGradKernel(const float* __restrict__ dout, const float* __restrict__ gate_up,
                                        float* __restrict__ dgate_up, int64_t n, float alpha, float limit) {
  MT_GRID_STRIDE(i, n) {
    clampedSwigluGrad(dout[i], gate_up[2 * i], gate_up[2 * i + 1], alpha, limit, &dgate_up[2 * i],
                      &dgate_up[2 * i + 1]);
  }
}

}  // namespace

void clamped_swiglu_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.out[0].numel();
  if (n == 0) return;
  clampedSwigluKernel<<<cuda::blocksFor(n), cuda::kThreads, 0, launch.stream>>>(
      args.in[0].f32(), args.out[0].f32(), n, args.floats[0], args.floats[1]);
  MT_CUDA_CHECK_LAUNCH();
}

void clamped_swiglu_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t n = args.in[0].numel();
  if (n == 0) return;
  clampedSwigluGradKernel<<<cuda::blocksFor(n), cuda::kThreads, 0, launch.stream>>>(
      args.in[0].f32(), args.in[1].f32(), args.out[0].f32(), n, args.floats[0], args.floats[1]);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
