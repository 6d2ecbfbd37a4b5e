#include "kernels/activation/clamped_swiglu.h"

#include <cmath>

namespace mt {
namespace {

// gate_up (..., 2F) and its (..., F) partner (out or dout): f32, the same leading dimensions.
std::string checkPairs(const Tensor& gate_up, const Tensor& half, const char* op) {
  MT_CHECK(expectDType(gate_up, DType::F32, op));
  MT_CHECK(expectDType(half, DType::F32, op));
  if (gate_up.rank() < 1 || gate_up.shape.back() % 2 != 0)
    return std::string(op) + ": gate_up's last dimension must be even (gate and up interleaved), got " +
           shapeString(gate_up.shape);
  std::vector<int64_t> want = gate_up.shape;
  want.back() /= 2;
  return expectShape(half, want, op);
}

std::string checkAlphaLimit(const KernelArgs& args, const char* op) {
  if (args.floats.size() != 2) return std::string(op) + " takes 2 float attributes (alpha, limit)";
  if (!std::isfinite(args.floats[0]) || !(args.floats[1] > 0.0f) || !std::isfinite(args.floats[1]))
    return std::string(op) + ": alpha must be finite and limit finite and positive, got " +
           std::to_string(args.floats[0]) + " and " + std::to_string(args.floats[1]);
  return "";
}

}  // namespace

std::string clamped_swiglu_check(const KernelArgs& args) {
  MT_CHECK(checkAlphaLimit(args, "clamped_swiglu"));
  return checkPairs(args.in[0], args.out[0], "clamped_swiglu");
}

void clamped_swiglu_cpu(const KernelArgs& args) {
  const float* gate_up = args.in[0].f32();
  float* out = args.out[0].f32();
  const float alpha = args.floats[0], limit = args.floats[1];
  const int64_t n = args.out[0].numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = clampedSwiglu(gate_up[2 * i], gate_up[2 * i + 1], alpha, limit);
}

std::string clamped_swiglu_grad_check(const KernelArgs& args) {
  MT_CHECK(checkAlphaLimit(args, "clamped_swiglu_grad"));
  MT_CHECK(checkPairs(args.in[1], args.in[0], "clamped_swiglu_grad"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "clamped_swiglu_grad"));
  return expectShape(args.out[0], args.in[1].shape, "clamped_swiglu_grad");
}

void clamped_swiglu_grad_cpu(const KernelArgs& args) {
  const float *dout = args.in[0].f32(), *gate_up = args.in[1].f32();
  float* dgate_up = args.out[0].f32();
  const float alpha = args.floats[0], limit = args.floats[1];
  const int64_t n = args.in[0].numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    clampedSwigluGrad(dout[i], gate_up[2 * i], gate_up[2 * i + 1], alpha, limit, &dgate_up[2 * i], &dgate_up[2 * i + 1]);
}

}  // namespace mt
