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
  const AxisExtents e = extentsAround(t.shape, axis);
#pragma omp parallel for collapse(2) schedule(static) if (t.numel() > 32768)
  for (int64_t o = 0; o < e.outer; ++o)
    for (int64_t i = 0; i < e.inner; ++i) f(o * e.axis * e.inner + i, e.inner, e.axis);
}

}  // namespace

std::string softmax_check(const KernelArgs& args) { return check(args, "softmax"); }
void softmax_cpu(const KernelArgs& args) {
  const float* x = args.in[0].f32();
  float* y = args.out[0].f32();
  const bool log = args.ints[1];
  forLines(args.in[0], args.ints[0], [&](int64_t base, int64_t stride, int64_t n) {
    softmaxLine(x + base, y + base, stride, n, log);
  });
}

std::string softmax_grad_check(const KernelArgs& args) { return check(args, "softmax_grad"); }
void softmax_grad_cpu(const KernelArgs& args) {
  const float *dy = args.in[0].f32(), *y = args.in[1].f32();
  float* dx = args.out[0].f32();
  const bool log = args.ints[1];
  forLines(args.out[0], args.ints[0], [&](int64_t base, int64_t stride, int64_t n) {
    softmaxGradLine(dy + base, y + base, dx + base, stride, n, log);
  });
}

}  // namespace mt
