// mt.clamped_swiglu: gpt-oss's expert activation over its interleaved gate/up product.
//   gate_up (..., 2F): gate_j at column 2j, up_j at 2j + 1 (Hugging Face's gate_up[..., ::2] and
//   [..., 1::2]) -> out (..., F) = (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha * g),
//   g = min(gate, limit)                                          float attrs: [alpha, limit]
// mt.clamped_swiglu_grad: (dout (..., F), gate_up (..., 2F)) -> dgate_up (..., 2F); as torch's
// clamp, a value at a bound passes its gradient, one beyond takes none.
// The per-pair math is written once for the CPU kernel and its CUDA twin.
#pragma once
#include <cmath>

#include "kernels/kernel_args.h"

namespace mt {

// gate clamped from above and up both ways, as torch.clamp: a NaN stays NaN (the comparisons are
// written so that it falls through).
MT_HOST_DEVICE inline float clampedGate(float gate, float limit) { return gate > limit ? limit : gate; }
MT_HOST_DEVICE inline float clampedUp(float up, float limit) { return up < -limit ? -limit : (up > limit ? limit : up); }

MT_HOST_DEVICE inline float clampedSwiglu(float gate, float up, float alpha, float limit) {
  const float g = clampedGate(gate, limit);
  return (clampedUp(up, limit) + 1.0f) * g / (1.0f + expf(-alpha * g));
}

// d(out)/d(gate) and d(out)/d(up) times dout, written to *dgate and *dup.
MT_HOST_DEVICE inline void clampedSwigluGrad(float dout, float gate, float up, float alpha, float limit, float* dgate,
                                             float* dup) {
  const float g = clampedGate(gate, limit), u = clampedUp(up, limit);
  const float s = 1.0f / (1.0f + expf(-alpha * g));
  *dgate = gate <= limit ? dout * (u + 1.0f) * s * (1.0f + alpha * g * (1.0f - s)) : 0.0f;
  *dup = up >= -limit && up <= limit ? dout * g * s : 0.0f;
}

std::string clamped_swiglu_check(const KernelArgs& args);
void clamped_swiglu_cpu(const KernelArgs& args);
std::string clamped_swiglu_grad_check(const KernelArgs& args);
void clamped_swiglu_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/activation/clamped_swiglu_cuda.cu), built when CUDA is enabled.
void clamped_swiglu_cuda(const KernelArgs& args, const CudaLaunch& launch);
void clamped_swiglu_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
