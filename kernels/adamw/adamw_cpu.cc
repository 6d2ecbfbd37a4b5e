#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/adamw/adamw.h"

namespace mt {

namespace {

// The update loop; kL2 adds the coupled L2 term (a separate instantiation, so that AdamW's loop
// stays exactly torch's operation sequence).
template <bool kL2>
void adamwLoop(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& p) {
  const float decay = static_cast<float>(1.0 - p.lr * p.weight_decay);
  const float beta1 = static_cast<float>(p.beta1), beta2 = static_cast<float>(p.beta2);
  const float one_minus_b1 = static_cast<float>(1.0 - p.beta1);
  const float one_minus_b2 = static_cast<float>(1.0 - p.beta2);
  const double bias1 = p.bias_correction ? 1.0 - std::pow(p.beta1, double(p.step)) : 1.0;
  const double bias2 = p.bias_correction ? 1.0 - std::pow(p.beta2, double(p.step)) : 1.0;
  const float step_size = static_cast<float>(p.lr / bias1);
  const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  const float eps = static_cast<float>(p.eps), scale = p.grad_scale, l2 = static_cast<float>(p.l2);
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] * scale;
    if constexpr (kL2) g += l2 * param[i];
    const float w = param[i] * decay;
    const float mi = m[i] * beta1 + g * one_minus_b1;
    const float vi = v[i] * beta2 + g * g * one_minus_b2;
    const float denom = std::sqrt(vi) / bias2_sqrt + eps;
    m[i] = mi;
    v[i] = vi;
    param[i] = w + (-step_size) * (mi / denom);
  }
}

}  // namespace

void adamw_cpu(float* param, const float* grad, float* m, float* v, int64_t n,
               const AdamWParams& p) {
  if (p.l2 != 0.0)
    adamwLoop<true>(param, grad, m, v, n, p);
  else
    adamwLoop<false>(param, grad, m, v, n, p);
}

double sum_squares_cpu(const float* x, int64_t n) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks, 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * kChunk);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = c * kChunk; i < end; ++i) s += double(x[i]) * x[i];
    partial[c] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace mt
