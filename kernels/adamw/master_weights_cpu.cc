#include "kernels/adamw/master_weights.h"

#include <algorithm>

namespace mt {

void read_master(const MasterWeights& w, int64_t begin, int64_t n, float* out) {
  if (!w.split()) {
    std::copy(w.f32 + begin, w.f32 + begin + n, out);
    return;
  }
  const uint16_t* hi = w.bf16 + begin;
  if (!w.residual) {  // bf16 alone
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = joinMaster(hi[i], 0);
    return;
  }
  const int16_t* lo = w.residual + begin;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = joinMaster(hi[i], lo[i]);
}

void write_master(const MasterWeights& w, int64_t begin, int64_t n, const float* in) {
  if (!w.split()) {
    if (in != w.f32 + begin) std::copy(in, in + n, w.f32 + begin);
    if (!w.bf16) return;
    uint16_t* hi = w.bf16 + begin;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      int16_t unused;
      splitMaster(in[i], hi[i], unused);
    }
    return;
  }
  uint16_t* hi = w.bf16 + begin;
  if (!w.residual) {  // bf16 alone: `in` holds bf16 values (the caller checked isBf16), kept whole
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      int16_t zero;
      splitMaster(in[i], hi[i], zero);
    }
    return;
  }
  int16_t* lo = w.residual + begin;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) splitMaster(in[i], hi[i], lo[i]);
}

}  // namespace mt
