// Softmax along any axis.
//   mt.softmax:       out = softmax(x) or log_softmax(x) along `axis`    int attrs: [axis, log]
//   mt.softmax_grad:  dx from dy and the forward result y               int attrs: [axis, log]
#pragma once
#include <math.h>

#include "kernels/kernel_args.h"

namespace mt {
// One line of n elements `stride` apart along the axis, on the CPU and on CUDA alike.
// y = softmax(x) or log_softmax(x): (x - max) - log(sum), the sum in double; subtracting max
// first keeps large inputs exact.
MT_HOST_DEVICE inline void softmaxLine(const float* x, float* y, int64_t stride, int64_t n, bool log) {
  float max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) max = fmaxf(max, x[j * stride]);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += expf(x[j * stride] - max);
  const float log_sum = static_cast<float>(::log(sum));
  for (int64_t j = 0; j < n; ++j) {
    const float v = (x[j * stride] - max) - log_sum;
    y[j * stride] = log ? v : expf(v);
  }
}
// softmax: dx = y (dy - sum(dy y));  log_softmax: dx = dy - exp(y) sum(dy).
MT_HOST_DEVICE inline void softmaxGradLine(const float* dy, const float* y, float* dx, int64_t stride, int64_t n,
                                           bool log) {
  double dot = 0.0;
  for (int64_t j = 0; j < n; ++j) dot += dy[j * stride] * (log ? 1.0f : y[j * stride]);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t at = j * stride;
    dx[at] = log ? dy[at] - expf(y[at]) * static_cast<float>(dot) : y[at] * (dy[at] - static_cast<float>(dot));
  }
}

std::string softmax_check(const KernelArgs& args);
void softmax_cpu(const KernelArgs& args);
std::string softmax_grad_check(const KernelArgs& args);
void softmax_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/softmax/softmax_cuda.cu), built when CUDA is enabled.
void softmax_cuda(const KernelArgs& args, const CudaLaunch& launch);
void softmax_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
