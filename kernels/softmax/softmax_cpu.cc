#include <cmath>

#include "kernels/softmax/softmax.h"

namespace mt {
namespace {

std::string check(const KernelArgs& args, const char* op) {
  for (const Tensor& t : args.in) MT_CHECK(expectDType(t, DType::F32, op));
  MT_CHECK(expectDType(args.out[0], DType::F32, op));
  for (const Tensor& t : args.in) MT_CHECK(expectShape(t, args.out[0].shape, op));
  if (args.ints[0] < 0 || args.ints[0] >= args.out[0].rank())
    return std::string(op) + ": axis out of range";
  if (args.ints[1] != 0 && args.ints[1] != 1) return std::string(op) + ": log must be 0 or 1";
  return "";
}

// Calls f(base, stride, n) for every line along the axis.
template <typename F>
void forLines(const Tensor& t, int64_t axis, F f) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < t.rank(); ++i)
    if (i < axis) outer *= t.shape[i];
    else if (i > axis) inner *= t.shape[i];
  const int64_t n = t.shape[axis];
#pragma omp parallel for collapse(2) schedule(static) if (t.numel() > 32768)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) f(o * n * inner + i, inner, n);
}

}  // namespace

std::string softmax_check(const KernelArgs& args) { return check(args, "softmax"); }
void softmax_cpu(const KernelArgs& args) {
  const float* x = args.in[0].f32();
  float* y = args.out[0].f32();
  const bool log = args.ints[1];
  forLines(args.in[0], args.ints[0], [&](int64_t base, int64_t stride, int64_t n) {
    float max = -INFINITY;
    for (int64_t j = 0; j < n; ++j) max = std::fmax(max, x[base + j * stride]);
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(x[base + j * stride] - max);
    // (x - max) - log(sum): subtracting max first keeps large inputs exact.
    const float log_sum = static_cast<float>(std::log(sum));
    for (int64_t j = 0; j < n; ++j) {
      const float v = (x[base + j * stride] - max) - log_sum;
      y[base + j * stride] = log ? v : std::exp(v);
    }
  });
}

std::string softmax_grad_check(const KernelArgs& args) { return check(args, "softmax_grad"); }
void softmax_grad_cpu(const KernelArgs& args) {
  const float *dy = args.in[0].f32(), *y = args.in[1].f32();
  float* dx = args.out[0].f32();
  const bool log = args.ints[1];
  forLines(args.out[0], args.ints[0], [&](int64_t base, int64_t stride, int64_t n) {
    // softmax: dx = y (dy - sum(dy y));  log_softmax: dx = dy - exp(y) sum(dy).
    double dot = 0.0;
    for (int64_t j = 0; j < n; ++j) dot += dy[base + j * stride] * (log ? 1.0f : y[base + j * stride]);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = base + j * stride;
      dx[at] = log ? dy[at] - std::exp(y[at]) * static_cast<float>(dot) : y[at] * (dy[at] - static_cast<float>(dot));
    }
  });
}

}  // namespace mt
