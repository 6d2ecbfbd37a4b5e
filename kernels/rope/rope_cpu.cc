#include <cmath>

#include "kernels/rope/rope.h"

namespace mt {

std::string rope_check(const KernelArgs& args) {
  const Tensor &x = args.in[0], &out = args.out[0];
  MT_CHECK(expectDType(x, DType::F32, "rope input"));
  MT_CHECK(expectDType(out, DType::F32, "rope result"));
  if (x.rank() != 3) return "rope input must be (B, T, H*D), got " + shapeString(x.shape);
  const int64_t head_dim = args.ints[0];
  if (head_dim <= 0 || head_dim % 2 != 0 || x.dim(2) % head_dim != 0)
    return "rope head_dim " + std::to_string(head_dim) + " must be even and divide " +
           std::to_string(x.dim(2));
  if (args.ints[1] != 0 && args.ints[1] != 1) return "rope inverse flag must be 0 or 1";
  if (!(args.floats[0] > 0.0f)) return "rope theta must be positive";
  return expectShape(out, x.shape, "rope result");
}

void rope_cpu(const KernelArgs& args) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int64_t batch = x.dim(0), seq = x.dim(1), width = x.dim(2);
  const int64_t head_dim = args.ints[0], half = head_dim / 2, heads = width / head_dim;
  const float sign = args.ints[1] ? -1.0f : 1.0f;
  const float theta = args.floats[0];
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = ropeInverseFrequency(theta, i, head_dim);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < seq; ++t) {
    std::vector<float> cos_t(half), sin_t(half);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(t) * inv_freq[i];
      cos_t[i] = std::cos(angle);
      sin_t[i] = sign * std::sin(angle);
    }
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = (b * seq + t) * width + h * head_dim;
        const float* xi = x.f32() + base;
        float* yi = out.f32() + base;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = xi[i], x2 = xi[i + half];
          yi[i] = x1 * cos_t[i] - x2 * sin_t[i];
          yi[i + half] = x2 * cos_t[i] + x1 * sin_t[i];
        }
      }
    }
  }
}

}  // namespace mt
