#include "kernels/matmul/lora_merge.h"

#include <cstddef>
#include <vector>

namespace mt {

void loraMerge(const float* w, const float* a, const float* b, int64_t out, int64_t in, int64_t r, double scale,
               float* merged) {
  // Row by row, A's rows streamed in order.
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o) {
    std::vector<double> row(static_cast<size_t>(in), 0.0);
    for (int64_t k = 0; k < r; ++k) {
      const double bk = b[o * r + k];
      const float* ak = a + k * in;
      for (int64_t i = 0; i < in; ++i) row[i] += bk * double(ak[i]);
    }
    for (int64_t i = 0; i < in; ++i) merged[o * in + i] = static_cast<float>(double(w[o * in + i]) + scale * row[i]);
  }
}

}  // namespace mt
