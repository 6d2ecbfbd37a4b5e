// Generic pointwise kernels: what imported graphs use where no fused op applies.
//   mt.unary:        out = fn(x)                              int attrs: [fn]
//   mt.unary_grad:   dx = dy * fn'(x)                         int attrs: [fn]
//   mt.binary:       out = a (fn) b, numpy broadcasting       int attrs: [fn]
//   mt.binary_grad:  (da, db) in the broadcast shape, before  int attrs: [fn]
//                    the gradient rule sums each down to its operand's shape
//   mt.clamp:        out = min(max(x, lo), hi), NaN kept      float attrs: [lo, hi]
//   mt.clamp_grad:   dx = lo <= x <= hi ? dy : 0              float attrs: [lo, hi]
//   mt.where:        out = cond != 0 ? a : b, numpy broadcasting; a, b, out f32 or i32
//   mt.broadcast:    out = x broadcast to out's shape (f32 or i32)
//   mt.cast:         f32 <-> i32 (toward zero; NaN gives 0, out-of-range saturates)
#pragma once
#include <math.h>

#include <cstdint>
#include <string_view>

#include "kernels/kernel_args.h"

namespace mt {

// The function of mt.unary, by position: the int attribute and the IR name are these.
enum class UnaryFn : int64_t { Neg, Exp, Log, Sqrt, Reciprocal, Tanh, Erf, Sigmoid, Relu, Abs };
inline constexpr std::string_view kUnaryFnNames[] = {"neg",  "exp", "log",     "sqrt", "reciprocal",
                                                     "tanh", "erf", "sigmoid", "relu", "abs"};
// Append only: the int attribute is the position (plan 1.10 added max and min).
enum class BinaryFn : int64_t { Add, Sub, Mul, Div, Pow, Max, Min };
inline constexpr std::string_view kBinaryFnNames[] = {"add", "sub", "mul", "div", "pow", "max", "min"};

// The scalar functions of the kernels below, one code for the CPU kernels, their CUDA twins
// and (applyUnary) the compiler's constant folding.

// fn(x) as mt.unary computes it.
MT_HOST_DEVICE inline float applyUnary(UnaryFn fn, float x) {
  switch (fn) {
    case UnaryFn::Neg: return -x;
    case UnaryFn::Exp: return expf(x);
    case UnaryFn::Log: return logf(x);
    case UnaryFn::Sqrt: return sqrtf(x);
    case UnaryFn::Reciprocal: return 1.0f / x;
    case UnaryFn::Tanh: return tanhf(x);
    case UnaryFn::Erf: return erff(x);
    case UnaryFn::Sigmoid: return 1.0f / (1.0f + expf(-x));
    case UnaryFn::Relu: return x > 0.0f ? x : 0.0f;
    case UnaryFn::Abs: return fabsf(x);
  }
  return x;
}

// d fn(x) / dx.
MT_HOST_DEVICE inline float unaryDerivative(UnaryFn fn, float x) {
  switch (fn) {
    case UnaryFn::Neg: return -1.0f;
    case UnaryFn::Exp: return expf(x);
    case UnaryFn::Log: return 1.0f / x;
    case UnaryFn::Sqrt: return 0.5f / sqrtf(x);
    case UnaryFn::Reciprocal: return -1.0f / (x * x);
    case UnaryFn::Tanh: {
      const float t = tanhf(x);
      return 1.0f - t * t;
    }
    case UnaryFn::Erf: return 1.1283791670955126f * expf(-x * x);  // 2 / sqrt(pi)
    case UnaryFn::Sigmoid: {
      const float s = 1.0f / (1.0f + expf(-x));
      return s * (1.0f - s);
    }
    case UnaryFn::Relu: return x > 0.0f ? 1.0f : 0.0f;
    case UnaryFn::Abs: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
  }
  return 0.0f;
}

// The larger / smaller of a and b, NaN propagating from either side (numpy's and torch's
// maximum/minimum): mt.binary's max and min, and the compiler's folding of ONNX Max/Min (in
// double, exact on integers).
template <typename T>
MT_HOST_DEVICE inline T maxOrNaN(T a, T b) { return a != a || a > b ? a : b; }
template <typename T>
MT_HOST_DEVICE inline T minOrNaN(T a, T b) { return a != a || a < b ? a : b; }

// a (fn) b as mt.binary computes it.
MT_HOST_DEVICE inline float applyBinary(BinaryFn fn, float a, float b) {
  switch (fn) {
    case BinaryFn::Add: return a + b;
    case BinaryFn::Sub: return a - b;
    case BinaryFn::Mul: return a * b;
    case BinaryFn::Div: return a / b;
    case BinaryFn::Pow: return powf(a, b);
    case BinaryFn::Max: return maxOrNaN(a, b);
    case BinaryFn::Min: return minOrNaN(a, b);
  }
  return 0.0f;
}

// The gradients of a (fn) b for its gradient g, as mt.binary_grad computes them.
MT_HOST_DEVICE inline void binaryGradient(BinaryFn fn, float g, float a, float b, float& da, float& db) {
  switch (fn) {
    case BinaryFn::Add: da = g, db = g; return;
    case BinaryFn::Sub: da = g, db = -g; return;
    case BinaryFn::Mul: da = g * b, db = g * a; return;
    case BinaryFn::Div: da = g / b, db = -g * a / (b * b); return;
    case BinaryFn::Pow:
      da = g * b * powf(a, b - 1.0f);
      // a^b ln a: zero where a is 0 (the limit along b), as PyTorch defines it.
      db = a == 0.0f ? 0.0f : g * powf(a, b) * logf(a);
      return;
    // To the side that was taken; half to each at a tie (as torch.maximum/minimum).
    case BinaryFn::Max:
      da = a > b ? g : (a == b ? 0.5f * g : 0.0f), db = b > a ? g : (a == b ? 0.5f * g : 0.0f);
      return;
    case BinaryFn::Min:
      da = a < b ? g : (a == b ? 0.5f * g : 0.0f), db = b < a ? g : (a == b ? 0.5f * g : 0.0f);
      return;
  }
}

// mt.clamp: below lo gives lo, above hi gives hi (all hi where lo > hi, as torch.clamp), NaN
// stays NaN. Also the compiler's folding of ONNX Clip (in double, exact on integers).
template <typename T>
MT_HOST_DEVICE inline T applyClamp(T x, T lo, T hi) {
  const T raised = x < lo ? lo : x;
  return raised > hi ? hi : raised;
}
// Its derivative: 1 inside [lo, hi] (bounds included, as torch.clamp's backward), else 0.
MT_HOST_DEVICE inline bool clampPasses(float x, float lo, float hi) { return x >= lo && x <= hi; }

// mt.cast f32 -> i32: toward zero, saturating; NaN gives 0.
MT_HOST_DEVICE inline int32_t castToI32(float v) {
  constexpr float kMax = 2147483520.0f;  // the largest float below 2^31
  return v != v ? 0 : static_cast<int32_t>(fminf(fmaxf(v, -kMax), kMax));
}

// The position of `name` in `names`, or -1.
template <size_t N>
int64_t fnIndex(const std::string_view (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<int64_t>(i);
  return -1;
}

std::string unary_check(const KernelArgs& args);
void unary_cpu(const KernelArgs& args);
std::string unary_grad_check(const KernelArgs& args);
void unary_grad_cpu(const KernelArgs& args);
std::string binary_check(const KernelArgs& args);
void binary_cpu(const KernelArgs& args);
std::string binary_grad_check(const KernelArgs& args);
void binary_grad_cpu(const KernelArgs& args);
std::string clamp_check(const KernelArgs& args);
void clamp_cpu(const KernelArgs& args);
std::string clamp_grad_check(const KernelArgs& args);
void clamp_grad_cpu(const KernelArgs& args);
std::string where_check(const KernelArgs& args);
void where_cpu(const KernelArgs& args);
std::string broadcast_check(const KernelArgs& args);
void broadcast_cpu(const KernelArgs& args);
std::string cast_check(const KernelArgs& args);
void cast_cpu(const KernelArgs& args);

// CUDA twins (kernels/pointwise/pointwise_cuda.cu), built when CUDA is enabled.
void unary_cuda(const KernelArgs& args, const CudaLaunch& launch);
void unary_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void binary_cuda(const KernelArgs& args, const CudaLaunch& launch);
void binary_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void clamp_cuda(const KernelArgs& args, const CudaLaunch& launch);
void clamp_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void where_cuda(const KernelArgs& args, const CudaLaunch& launch);
void broadcast_cuda(const KernelArgs& args, const CudaLaunch& launch);
void cast_cuda(const KernelArgs& args, const CudaLaunch& launch);

}  // namespace mt
