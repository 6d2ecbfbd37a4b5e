// Softcapping's math, c * tanh(x / c) and its slope, written once for every kernel that caps:
// mt.softcap (kernels/activation/activation.h: Gemma 2's logits) and the attention kernels
// (kernels/attention/attention.h: its scores), CPU and CUDA alike.
#pragma once
#include <cmath>

#include "kernels/kernel_args.h"

namespace mt {
MT_HOST_DEVICE inline float softcapValue(float x, float cap) { return cap * tanhf(x / cap); }
// dy times d(capped)/dx, from the capped value y: 1 - (y / c)^2 = 1 - tanh^2.
MT_HOST_DEVICE inline float softcapGradValue(float dy, float y, float cap) {
  const float t = y / cap;
  return dy * (1.0f - t * t);
}
}  // namespace mt
