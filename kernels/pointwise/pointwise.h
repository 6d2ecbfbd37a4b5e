// Generic pointwise kernels: what imported graphs use where no fused op applies.
//   mt.unary:        out = fn(x)                              int attrs: [fn]
//   mt.unary_grad:   dx = dy * fn'(x)                         int attrs: [fn]
//   mt.binary:       out = a (fn) b, numpy broadcasting       int attrs: [fn]
//   mt.binary_grad:  (da, db) in the broadcast shape, before  int attrs: [fn]
//                    the gradient rule sums each down to its operand's shape
//   mt.where:        out = cond != 0 ? a : b, numpy broadcasting; a, b, out f32 or i32
//   mt.broadcast:    out = x broadcast to out's shape (f32 or i32)
//   mt.cast:         f32 <-> i32 (toward zero; NaN gives 0, out-of-range saturates)
#pragma once
#include <cmath>
#include <string_view>

#include "kernels/kernel_args.h"

namespace mt {

// The function of mt.unary, by position: the int attribute and the IR name are these.
enum class UnaryFn : int64_t { Neg, Exp, Log, Sqrt, Reciprocal, Tanh, Erf, Sigmoid, Relu, Abs };
inline constexpr std::string_view kUnaryFnNames[] = {"neg",  "exp", "log",     "sqrt", "reciprocal",
                                                     "tanh", "erf", "sigmoid", "relu", "abs"};
enum class BinaryFn : int64_t { Add, Sub, Mul, Div, Pow };
inline constexpr std::string_view kBinaryFnNames[] = {"add", "sub", "mul", "div", "pow"};

// fn(x) as mt.unary computes it; the compiler folds constants with the same function.
inline float applyUnary(UnaryFn fn, float x) {
  switch (fn) {
    case UnaryFn::Neg: return -x;
    case UnaryFn::Exp: return std::exp(x);
    case UnaryFn::Log: return std::log(x);
    case UnaryFn::Sqrt: return std::sqrt(x);
    case UnaryFn::Reciprocal: return 1.0f / x;
    case UnaryFn::Tanh: return std::tanh(x);
    case UnaryFn::Erf: return std::erf(x);
    case UnaryFn::Sigmoid: return 1.0f / (1.0f + std::exp(-x));
    case UnaryFn::Relu: return x > 0.0f ? x : 0.0f;
    case UnaryFn::Abs: return std::fabs(x);
  }
  return x;
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
void where_cuda(const KernelArgs& args, const CudaLaunch& launch);
void broadcast_cuda(const KernelArgs& args, const CudaLaunch& launch);
void cast_cuda(const KernelArgs& args, const CudaLaunch& launch);

}  // namespace mt
