// Elementwise and layout kernels.
//   mt.add / mt.mul: out = a (op) b, b's shape equal to a's or a suffix of it (broadcast).
//   mt.scale:     out = x * factor                       float attrs: [factor]
//   mt.sum_to:    out = x summed down to out's shape, which broadcasts to x's (numpy rules)
//   mt.fill:      out = value                            float attrs: [value]
//   mt.transpose: out = x permuted                       int attrs: the permutation
//   mt.widen:     out (f32) = x (bf16), exact: a weight streamed as its bf16 staging copy, or a
//                 bf16 activation read by an f32-only kernel
//   mt.narrow:    out (bf16) = x (f32) rounded to nearest even: an f32 value entering a bf16
//                 plan's activations
#pragma once
#include <cstring>

#include "kernels/kernel_args.h"

namespace mt {
std::string add_check(const KernelArgs& args);
void add_cpu(const KernelArgs& args);
std::string mul_check(const KernelArgs& args);
void mul_cpu(const KernelArgs& args);
std::string scale_check(const KernelArgs& args);
void scale_cpu(const KernelArgs& args);
std::string sum_to_check(const KernelArgs& args);
void sum_to_cpu(const KernelArgs& args);
std::string fill_check(const KernelArgs& args);
void fill_cpu(const KernelArgs& args);
std::string transpose_check(const KernelArgs& args);
void transpose_cpu(const KernelArgs& args);
std::string widen_check(const KernelArgs& args);
void widen_cpu(const KernelArgs& args);
std::string narrow_check(const KernelArgs& args);
void narrow_cpu(const KernelArgs& args);

// One float rounded to bf16 (to nearest, ties to even; NaN stays NaN, overflow goes to Inf),
// as bits: the rounding of the CPU kernels and their CUDA twins alike.
MT_HOST_DEVICE inline uint16_t bf16Bits(float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
MT_HOST_DEVICE inline float bf16Value(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  memcpy(&x, &bits, 4);
  return x;
}

// `n` floats rounded to bf16 (bf16Bits), the bit patterns mt.widen reads back. (A streamed weight's copy rounds ties away from zero instead, so that the master
// can be held split: kernels/adamw/master_weights.h.)
void round_to_bf16(const float* x, uint16_t* out, int64_t n);
// `n` bf16 bit patterns widened to floats (exact).
void widen_bf16(const uint16_t* x, float* out, int64_t n);

// CUDA twins (kernels/elementwise/elementwise_cuda.cu), built when CUDA is enabled.
void add_cuda(const KernelArgs& args, const CudaLaunch& launch);
void mul_cuda(const KernelArgs& args, const CudaLaunch& launch);
void scale_cuda(const KernelArgs& args, const CudaLaunch& launch);
void sum_to_cuda(const KernelArgs& args, const CudaLaunch& launch);
void fill_cuda(const KernelArgs& args, const CudaLaunch& launch);
void transpose_cuda(const KernelArgs& args, const CudaLaunch& launch);
void widen_cuda(const KernelArgs& args, const CudaLaunch& launch);
void narrow_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
