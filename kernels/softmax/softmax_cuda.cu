// CUDA twins of softmax along any axis (what an ONNX import leaves unfused);
// kernels/softmax/softmax_cpu.cc is the reference they are tested against
// (tests/kernels/cuda_twin_test.cc). One thread per line along the axis, running the CPU's own
// line code (softmax.h); fused attention and cross-entropy have kernels of their own, so these
// lines are the rare generic ones.
#include "kernels/cuda_common.cuh"
#include "kernels/softmax/softmax.h"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::kThreads;

// Line l of extents e starts at (l / inner) * axis * inner + l % inner, its elements inner apart.
__device__ int64_t lineStart(int64_t line, const AxisExtents& e) {
  return (line / e.inner) * e.axis * e.inner + line % e.inner;
}

__global__ void softmaxKernel(const float* __restrict__ x, float* __restrict__ y, AxisExtents e, bool log) {
  MT_GRID_STRIDE(line, e.outer * e.inner) {
    const int64_t base = lineStart(line, e);
    softmaxLine(x + base, y + base, e.inner, e.axis, log);
  }
}

__global__ void softmaxGradKernel(const float* __restrict__ dy, const float* __restrict__ y, float* __restrict__ dx,
                                  AxisExtents e, bool log) {
  MT_GRID_STRIDE(line, e.outer * e.inner) {
    const int64_t base = lineStart(line, e);
    softmaxGradLine(dy + base, y + base, dx + base, e.inner, e.axis, log);
  }
}

}  // namespace

void softmax_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  if (args.in[0].numel() == 0) return;
  const AxisExtents e = extentsAround(args.in[0].shape, args.ints[0]);
  softmaxKernel<<<blocksFor(e.outer * e.inner), kThreads, 0, launch.stream>>>(args.in[0].f32(), args.out[0].f32(), e,
                                                                             args.ints[1] != 0);
  MT_CUDA_CHECK_LAUNCH();
}

void softmax_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  if (args.out[0].numel() == 0) return;
  const AxisExtents e = extentsAround(args.out[0].shape, args.ints[0]);
  softmaxGradKernel<<<blocksFor(e.outer * e.inner), kThreads, 0, launch.stream>>>(
      args.in[0].f32(), args.in[1].f32(), args.out[0].f32(), e, args.ints[1] != 0);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
