#include "kernels/matmul/lora_merge.h"

#include <cmath>
#include <cstddef>
#include <vector>

namespace mt {

void loraMerge(const float* w, const float* a, const float* b, int64_t out, int64_t in, int64_t r, double scale,
               float* merged, const float* magnitude) {
  // Row by row, A's rows streamed in order.
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o) {
    std::vector<double> row(static_cast<size_t>(in), 0.0);
    for (int64_t k = 0; k < r; ++k) {
      const double bk = b[o * r + k];
      const float* ak = a + k * in;
      for (int64_t i = 0; i < in; ++i) row[i] += bk * double(ak[i]);
    }
    float* m = merged + o * in;
    for (int64_t i = 0; i < in; ++i) m[i] = static_cast<float>(double(w[o * in + i]) + scale * row[i]);
    if (!magnitude) continue;
    float norm;
    rowNorms(m, 1, in, &norm);
    const float factor = magnitude[o] / norm;
    for (int64_t i = 0; i < in; ++i) m[i] *= factor;
  }
}

void loraMergeExperts(const float* w, const float* a, const float* b, int64_t experts, int64_t out, int64_t in,
                      int64_t r, double scale, bool in_out, float* merged) {
  std::vector<float> at(in_out ? static_cast<size_t>(in * r) : 0), bt(in_out ? static_cast<size_t>(r * out) : 0);
  for (int64_t e = 0; e < experts; ++e) {
    const float *we = w + e * out * in, *ae = a + e * r * in, *be = b + e * out * r;
    float* me = merged + e * out * in;
    if (!in_out) {
      loraMerge(we, ae, be, out, in, r, scale, me);
      continue;
    }
    for (int64_t k = 0; k < r; ++k)
      for (int64_t i = 0; i < in; ++i) at[i * r + k] = ae[k * in + i];  // A_e^T (in, r)
    for (int64_t j = 0; j < out; ++j)
      for (int64_t k = 0; k < r; ++k) bt[k * out + j] = be[j * r + k];  // B_e^T (r, out)
    loraMerge(we, /*a=*/bt.data(), /*b=*/at.data(), in, out, r, scale, me);  // W_e (in, out) + s A_e^T B_e^T
  }
}

void rowNorms(const float* w, int64_t rows, int64_t cols, float* norms) {
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
  for (int64_t o = 0; o < rows; ++o) {
    double sum = 0.0;
    for (int64_t i = 0; i < cols; ++i) sum += double(w[o * cols + i]) * double(w[o * cols + i]);
    norms[o] = static_cast<float>(std::sqrt(sum));
  }
}

}  // namespace mt
