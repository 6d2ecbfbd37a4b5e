// mt.rope: rotary position embedding, "rotate half" convention (as in Hugging Face Llama):
// in each head of size D, element i < D/2 pairs with i + D/2 and the pair turns by the angle
// t * theta^(-2i/D), t the position (dim 1).
//   x (B, T, H*D) -> (B, T, H*D)     int attrs: [head_dim, inverse]  float attrs: [theta]
// inverse = 1 turns by the negated angle: the gradient of rope is rope with inverse flipped.
#pragma once
#include "kernels/kernel_args.h"

namespace mt {
std::string rope_check(const KernelArgs& args);
void rope_cpu(const KernelArgs& args);
}  // namespace mt
