#include <cmath>

#include "kernels/activation/activation.h"
#include "kernels/fast_math.h"

namespace mt {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kTanhCoeff = 0.044715f;

// Every input and output has the same shape and is f32.
std::string checkPointwise(const KernelArgs& args, const char* op) {
  const std::vector<int64_t>& shape = args.in[0].shape;
  for (const Tensor& t : args.in) {
    MT_CHECK(expectDType(t, DType::F32, op));
    MT_CHECK(expectShape(t, shape, op));
  }
  for (const Tensor& t : args.out) {
    MT_CHECK(expectDType(t, DType::F32, op));
    MT_CHECK(expectShape(t, shape, op));
  }
  if (!args.ints.empty() && args.ints[0] != 0 && args.ints[0] != 1)
    return std::string(op) + ": tanh flag must be 0 or 1";
  return "";
}

float sigmoid(float x) { return fastSigmoid(x); }

}  // namespace

std::string gelu_check(const KernelArgs& args) { return checkPointwise(args, "gelu"); }
void gelu_cpu(const KernelArgs& args) {
  const float* x = args.in[0].f32();
  float* y = args.out[0].f32();
  const int64_t n = args.in[0].numel();
  if (args.ints[0]) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float u = kSqrt2OverPi * (x[i] + kTanhCoeff * x[i] * x[i] * x[i]);
      y[i] = 0.5f * x[i] * (1.0f + fastTanh(u));
    }
  } else {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
  }
}

std::string gelu_grad_check(const KernelArgs& args) { return checkPointwise(args, "gelu_grad"); }
void gelu_grad_cpu(const KernelArgs& args) {
  const float *dy = args.in[0].f32(), *x = args.in[1].f32();
  float* dx = args.out[0].f32();
  const int64_t n = args.in[0].numel();
  if (args.ints[0]) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float x2 = x[i] * x[i];
      const float t = fastTanh(kSqrt2OverPi * (x[i] + kTanhCoeff * x2 * x[i]));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kTanhCoeff * x2);
      dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * x[i] * (1.0f - t * t) * du);
    }
  } else {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float cdf = 0.5f * (1.0f + std::erf(x[i] * kInvSqrt2));
      const float pdf = kInvSqrt2Pi * fastExp(-0.5f * x[i] * x[i]);
      dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
  }
}

std::string silu_check(const KernelArgs& args) { return checkPointwise(args, "silu"); }
void silu_cpu(const KernelArgs& args) {
  const float* x = args.in[0].f32();
  float* y = args.out[0].f32();
  const int64_t n = args.in[0].numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid(x[i]);
}

std::string silu_grad_check(const KernelArgs& args) { return checkPointwise(args, "silu_grad"); }
void silu_grad_cpu(const KernelArgs& args) {
  const float *dy = args.in[0].f32(), *x = args.in[1].f32();
  float* dx = args.out[0].f32();
  const int64_t n = args.in[0].numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(x[i]);
    dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
  }
}

std::string swiglu_check(const KernelArgs& args) { return checkPointwise(args, "swiglu"); }
void swiglu_cpu(const KernelArgs& args) {
  const float *gate = args.in[0].f32(), *up = args.in[1].f32();
  float* y = args.out[0].f32();
  const int64_t n = args.in[0].numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] * sigmoid(gate[i]) * up[i];
}

std::string swiglu_grad_check(const KernelArgs& args) {
  return checkPointwise(args, "swiglu_grad");
}
void swiglu_grad_cpu(const KernelArgs& args) {
  const float *dy = args.in[0].f32(), *gate = args.in[1].f32(), *up = args.in[2].f32();
  float *dgate = args.out[0].f32(), *dup = args.out[1].f32();
  const int64_t n = args.in[0].numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(gate[i]);
    const float silu = gate[i] * s;
    dup[i] = dy[i] * silu;
    dgate[i] = dy[i] * up[i] * s * (1.0f + gate[i] * (1.0f - s));
  }
}

namespace {
// The softcap's one float: c, positive and finite.
std::string checkCap(const KernelArgs& args, const char* op) {
  MT_CHECK(checkPointwise(args, op));
  if (args.floats.size() != 1) return std::string(op) + " takes 1 float attribute (the cap)";
  if (!(args.floats[0] > 0.0f) || !std::isfinite(args.floats[0]))
    return std::string(op) + ": the cap must be positive and finite, got " + std::to_string(args.floats[0]);
  return "";
}
}  // namespace

std::string softcap_check(const KernelArgs& args) { return checkCap(args, "softcap"); }
void softcap_cpu(const KernelArgs& args) {
  const float* x = args.in[0].f32();
  float* y = args.out[0].f32();
  const float cap = args.floats[0];
  const int64_t n = args.in[0].numel();
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) y[i] = softcapValue(x[i], cap);
}

std::string softcap_grad_check(const KernelArgs& args) { return checkCap(args, "softcap_grad"); }
void softcap_grad_cpu(const KernelArgs& args) {
  const float *dy = args.in[0].f32(), *y = args.in[1].f32();
  float* dx = args.out[0].f32();
  const float cap = args.floats[0];
  const int64_t n = args.in[0].numel();
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dx[i] = softcapGradValue(dy[i], y[i], cap);
}

}  // namespace mt
