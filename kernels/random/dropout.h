// mt.dropout: out = keep(i) ? x * scale : 0, scale = 1 / (1 - ratio) (inverted dropout, as
// torch.nn.Dropout), each element kept with probability 1 - ratio.
//   int attrs: [site]   float attrs: [ratio], 0 <= ratio < 1
// The mask is never stored: keep(i) is a pure function of the step's randomness (the run's
// seed and the plan run's index, KernelArgs::random), the op's site (which Dropout of the model)
// and the element's flat index i. So a recompute redraws exactly the forward's mask, the
// gradient is the same op applied to the incoming gradient, and the CUDA twin draws the CPU's
// mask bit for bit. In evaluation (StepRandomness::training false) it is the identity.
#pragma once
#include <cstdint>

#include "kernels/kernel_args.h"
#include "kernels/random/counter_rng.h"

namespace mt {

// One call's mask: element i is kept iff the top 32 bits of splitmix64(base + i) are at least
// `threshold` (= floor(ratio * 2^32): probability ratio of dropping).
struct DropoutMask {
  uint64_t base = 0;
  uint32_t threshold = 0;
  float scale = 1.0f;  // 1 / (1 - ratio) in f32
};
// base = splitmix64(splitmix64(splitmix64(seed ^ 0xd50f) ^ pass) ^ site).
DropoutMask dropoutMask(const StepRandomness& random, int64_t site, float ratio);

MT_HOST_DEVICE inline bool dropoutKeeps(const DropoutMask& mask, uint64_t i) {
  return static_cast<uint32_t>(splitmix64(mask.base + i) >> 32) >= mask.threshold;
}

std::string dropout_check(const KernelArgs& args);
void dropout_cpu(const KernelArgs& args);

// CUDA twin (kernels/random/dropout_cuda.cu), built when CUDA is enabled.
void dropout_cuda(const KernelArgs& args, const CudaLaunch& launch);

}  // namespace mt
