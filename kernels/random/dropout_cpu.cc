// mt.dropout on the CPU: the reference its CUDA twin is tested against.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/random/dropout.h"

namespace mt {

DropoutMask dropoutMask(const StepRandomness& random, int64_t site, float ratio) {
  DropoutMask mask;
  mask.base = splitmix64(splitmix64(splitmix64(random.seed ^ 0xd50full) ^ random.pass) ^ static_cast<uint64_t>(site));
  // ratio < 1 (the check), so the product is below 2^32.
  mask.threshold = static_cast<uint32_t>(std::floor(static_cast<double>(ratio) * 4294967296.0));
  mask.scale = 1.0f / (1.0f - ratio);
  return mask;
}

std::string dropout_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::F32, "dropout input"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "dropout result"));
  MT_CHECK(expectShape(args.out[0], args.in[0].shape, "dropout result"));
  if (args.ints[0] < 0) return "dropout site " + std::to_string(args.ints[0]) + " is negative";
  const float ratio = args.floats[0];
  if (!(ratio >= 0.0f && ratio < 1.0f)) return "dropout ratio " + std::to_string(ratio) + " is outside [0, 1)";
  return "";
}

void dropout_cpu(const KernelArgs& args) {
  if (!args.random) throw std::logic_error("mt.dropout run without the step's randomness (KernelArgs::random)");
  const float* x = args.in[0].f32();
  float* out = args.out[0].f32();
  const int64_t n = args.in[0].numel();
  if (!args.random->training) {
    if (out != x) std::copy(x, x + n, out);
    return;
  }
  const DropoutMask mask = dropoutMask(*args.random, args.ints[0], args.floats[0]);
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) out[i] = dropoutKeeps(mask, static_cast<uint64_t>(i)) ? x[i] * mask.scale : 0.0f;
}

}  // namespace mt
