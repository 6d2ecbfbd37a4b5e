// CUDA twins of softmax along any axis (what an ONNX import leaves unfused);
// kernels/softmax/softmax_cpu.cc is the reference they are tested against
// (tests/kernels/cuda_twin_test.cc). One thread per line along the axis, summing in double as
// the CPU does; fused attention and cross-entropy have kernels of their own, so these lines
// are the rare generic ones.
#include "kernels/cuda_common.cuh"
#include "kernels/softmax/softmax.h"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::kThreads;

// The lines of `t` along `axis`: outer x inner of them, n elements `inner` apart.
struct Lines {
  int64_t outer = 1, inner = 1, n = 1;
};
Lines linesOf(const Tensor& t, int64_t axis) {
  Lines l;
  for (int64_t i = 0; i < t.rank(); ++i)
    if (i < axis) l.outer *= t.shape[i];
    else if (i > axis) l.inner *= t.shape[i];
  l.n = t.shape[axis];
  return l;
}

__global__ void softmaxKernel(const float* __restrict__ x, float* __restrict__ y, Lines l, bool log) {
  MT_GRID_STRIDE(line, l.outer * l.inner) {
    const int64_t base = (line / l.inner) * l.n * l.inner + line % l.inner, stride = l.inner;
    float max = -INFINITY;
    for (int64_t j = 0; j < l.n; ++j) max = fmaxf(max, x[base + j * stride]);
    double sum = 0.0;
    for (int64_t j = 0; j < l.n; ++j) sum += expf(x[base + j * stride] - max);
    const float log_sum = static_cast<float>(::log(sum));  // (x - max) - log(sum), as the CPU
    for (int64_t j = 0; j < l.n; ++j) {
      const float v = (x[base + j * stride] - max) - log_sum;
      y[base + j * stride] = log ? v : expf(v);
    }
  }
}

// softmax: dx = y (dy - sum(dy y));  log_softmax: dx = dy - exp(y) sum(dy).
__global__ void softmaxGradKernel(const float* __restrict__ dy, const float* __restrict__ y, float* __restrict__ dx,
                                  Lines l, bool log) {
  MT_GRID_STRIDE(line, l.outer * l.inner) {
    const int64_t base = (line / l.inner) * l.n * l.inner + line % l.inner, stride = l.inner;
    double dot = 0.0;
    for (int64_t j = 0; j < l.n; ++j) dot += dy[base + j * stride] * (log ? 1.0f : y[base + j * stride]);
    for (int64_t j = 0; j < l.n; ++j) {
      const int64_t at = base + j * stride;
      dx[at] = log ? dy[at] - expf(y[at]) * static_cast<float>(dot) : y[at] * (dy[at] - static_cast<float>(dot));
    }
  }
}

}  // namespace

void softmax_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  if (args.in[0].numel() == 0) return;
  const Lines l = linesOf(args.in[0], args.ints[0]);
  softmaxKernel<<<blocksFor(l.outer * l.inner), kThreads, 0, launch.stream>>>(args.in[0].f32(), args.out[0].f32(), l,
                                                                             args.ints[1] != 0);
  MT_CUDA_CHECK_LAUNCH();
}

void softmax_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  if (args.out[0].numel() == 0) return;
  const Lines l = linesOf(args.out[0], args.ints[0]);
  softmaxGradKernel<<<blocksFor(l.outer * l.inner), kThreads, 0, launch.stream>>>(
      args.in[0].f32(), args.in[1].f32(), args.out[0].f32(), l, args.ints[1] != 0);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
