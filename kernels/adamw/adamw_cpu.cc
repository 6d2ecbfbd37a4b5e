#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/adamw/adamw.h"

namespace mt {

namespace {

// AdamW's per-step coefficients, in torch's rounding.
struct Coefficients {
  float decay, beta1, beta2, one_minus_b1, one_minus_b2, step_size, bias2_sqrt, eps, scale, l2;
  explicit Coefficients(const AdamWParams& p) {
    decay = static_cast<float>(1.0 - p.lr * p.weight_decay);
    beta1 = static_cast<float>(p.beta1), beta2 = static_cast<float>(p.beta2);
    one_minus_b1 = static_cast<float>(1.0 - p.beta1);
    one_minus_b2 = static_cast<float>(1.0 - p.beta2);
    const double bias1 = p.bias_correction ? 1.0 - std::pow(p.beta1, double(p.step)) : 1.0;
    const double bias2 = p.bias_correction ? 1.0 - std::pow(p.beta2, double(p.step)) : 1.0;
    step_size = static_cast<float>(p.lr / bias1);
    bias2_sqrt = static_cast<float>(std::sqrt(bias2));
    eps = static_cast<float>(p.eps), scale = p.grad_scale, l2 = static_cast<float>(p.l2);
  }
};

// The master's elements inside the update loop: plain fp32, or split (restored and split again
// in registers, the loop still one pass over memory).
struct PlainMaster {
  float* f32;
  float load(int64_t i) const { return f32[i]; }
  void store(int64_t i, float x) const { f32[i] = x; }
};
struct SplitMaster {
  uint16_t* bf16;
  int16_t* residual;
  float load(int64_t i) const { return joinMaster(bf16[i], residual[i]); }
  void store(int64_t i, float x) const { splitMaster(x, bf16[i], residual[i]); }
};

// The update of elements [0, n) of the arrays given; kL2 adds the coupled L2 term (a separate
// instantiation, so that AdamW's loop stays exactly torch's operation sequence).
template <bool kL2, typename Master>
inline void adamwRange(Master param, const float* grad, float* m, float* v, int64_t n, const Coefficients& k) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float p = param.load(i);
    float g = grad[i] * k.scale;
    if constexpr (kL2) g += k.l2 * p;
    const float w = p * k.decay;
    const float mi = m[i] * k.beta1 + g * k.one_minus_b1;
    const float vi = v[i] * k.beta2 + g * g * k.one_minus_b2;
    const float denom = std::sqrt(vi) / k.bias2_sqrt + k.eps;
    m[i] = mi;
    v[i] = vi;
    param.store(i, w + (-k.step_size) * (mi / denom));
  }
}

template <typename Master>
void updateRange(Master param, const float* grad, float* m, float* v, int64_t n, const Coefficients& k, bool l2) {
  if (l2)
    adamwRange<true>(param, grad, m, v, n, k);
  else
    adamwRange<false>(param, grad, m, v, n, k);
}

inline double sumSquaresRange(const float* x, int64_t begin, int64_t end) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = begin; i < end; ++i) s += double(x[i]) * x[i];
  return s;
}

constexpr int64_t kChunk = kAdamWChunk;

// One chunk's update of the master: in place (then its bf16 copy, if any, from the chunk just
// written), or split.
void updateChunk(const MasterWeights& w, const float* grad, float* m, float* v, int64_t begin, int64_t end,
                 const Coefficients& k, bool l2) {
  if (w.split()) {
    updateRange(SplitMaster{w.bf16 + begin, w.residual + begin}, grad + begin, m + begin, v + begin, end - begin, k,
                l2);
    return;
  }
  updateRange(PlainMaster{w.f32 + begin}, grad + begin, m + begin, v + begin, end - begin, k, l2);
  if (w.bf16) write_master(w, begin, end - begin, w.f32 + begin);
}

}  // namespace

void adamw_cpu(const MasterWeights& w, const float* grad, float* m, float* v, int64_t n, const AdamWParams& p) {
  const Coefficients k(p);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c)
    updateChunk(w, grad, m, v, c * kChunk, std::min(n, (c + 1) * kChunk), k, p.l2 != 0.0);
}

void sum_squares_chunks_cpu(const float* x, int64_t n, double* partials) {
  sum_squares_chunks_many_cpu({x}, {n}, partials);
}

void sum_squares_chunks_many_cpu(const std::vector<const float*>& arrays, const std::vector<int64_t>& sizes,
                                 double* partials) {
  struct Chunk {
    const float* x;
    int64_t begin, end;
  };
  std::vector<Chunk> chunks;  // every array's chunks in order: partials' order
  for (size_t a = 0; a < arrays.size(); ++a)
    for (int64_t begin = 0; begin < sizes[a]; begin += kChunk)
      chunks.push_back({arrays[a], begin, std::min(sizes[a], begin + kChunk)});
  const int64_t count = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t c = 0; c < count; ++c) partials[c] = sumSquaresRange(chunks[c].x, chunks[c].begin, chunks[c].end);
}

double sum_of_chunks(const double* partials, int64_t chunks) {
  double total = 0.0;  // non-negative partials: not finite exactly when one is not
  for (int64_t c = 0; c < chunks; ++c) total += partials[c];
  return total;
}

double sum_squares_cpu(const float* x, int64_t n) {
  std::vector<double> partials(adamw_chunks(n));
  sum_squares_chunks_cpu(x, n, partials.data());
  return sum_of_chunks(partials.data(), adamw_chunks(n));
}

void adamw_with_norm_chunks_cpu(const MasterWeights& w, const float* grad, float* m, float* v, int64_t n,
                                const AdamWParams& p, double* partials) {
  const Coefficients k(p);
  const int64_t chunks = adamw_chunks(n);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, end = std::min(n, (c + 1) * kChunk);
    partials[c] = sumSquaresRange(grad, begin, end);
    if (!std::isfinite(partials[c])) continue;
    updateChunk(w, grad, m, v, begin, end, k, p.l2 != 0.0);
  }
}

double adamw_with_norm_cpu(const MasterWeights& w, const float* grad, float* m, float* v, int64_t n,
                           const AdamWParams& p) {
  std::vector<double> partials(adamw_chunks(n));
  adamw_with_norm_chunks_cpu(w, grad, m, v, n, p, partials.data());
  return sum_of_chunks(partials.data(), adamw_chunks(n));
}

void accumulate_gradient_cpu(float* sum, float* grad, int64_t n, int64_t index, int64_t count, float weight,
                             float divisor) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, end = std::min(n, (c + 1) * kChunk);
    if (index == 0) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) sum[i] = weight * grad[i];
    } else if (index + 1 < count) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) sum[i] += weight * grad[i];
    } else {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) grad[i] = (sum[i] + weight * grad[i]) / divisor;
    }
  }
}

}  // namespace mt
