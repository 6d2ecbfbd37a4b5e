// mt.rope: rotary position embedding, "rotate half" convention (as in Hugging Face Llama):
// in each head of size D, element i < D/2 pairs with i + D/2 and the pair turns by the angle
// p * theta^(-2i/D), p the position: offset + t for token t (dim 1).
//   x (B, T, H*D) -> (B, T, H*D)     int attrs: [head_dim, inverse(, offset)]  float attrs: [theta]
// The offset (default 0; plan 1.12) places a token tile that starts inside its sequence.
// inverse = 1 turns by the negated angle: the gradient of rope is rope with inverse flipped.
// mt.rope_at: the same turn at given positions (a decode plan's new tokens after the cache):
//   (x (B, T, H*D), positions (B, T) i32) -> (B, T, H*D)   int attrs: [head_dim]  float attrs: [theta]
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/kernel_args.h"

namespace mt {
// theta^(-2i/D) in float, exactly as rope_cpu computes it: pair i's angle per position.
inline float ropeInverseFrequency(float theta, int64_t i, int64_t head_dim) {
  return 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
}

// The position of token 0 of mt.rope's input: its third int attribute where it has one.
inline int64_t ropePositionOffset(const KernelArgs& args) { return args.ints.size() > 2 ? args.ints[2] : 0; }

std::string rope_check(const KernelArgs& args);
void rope_cpu(const KernelArgs& args);
std::string rope_at_check(const KernelArgs& args);
void rope_at_cpu(const KernelArgs& args);

// CUDA twins (kernels/rope/rope_cuda.cu), built when CUDA is enabled.
void rope_cuda(const KernelArgs& args, const CudaLaunch& launch);
void rope_at_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
