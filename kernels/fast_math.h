// Branch-free float exp/tanh/sigmoid that the compiler vectorises (libm's are scalar calls);
// tests/kernels/vector_code.sh checks that the kernels using them stay vectorised.
// exp: Cephes range reduction and degree-6 polynomial, within 2 ulp of expf on [-87, 88];
// inputs outside are clamped (exp(-87.3) ~ 1e-38 stands in for 0).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace mt {

inline float fastExp(float in) {
  // NaN is kept out of the integer conversion below (undefined behaviour for NaN; issue 18:
  // UBSan caught one) by the clamp itself: each comparison is false for NaN, which so takes a
  // bound. It is returned as it came by a select on bits at the end: a `nan ? in : ...` select
  // made GCC give up vectorising every loop this is inlined in (issue 29: GELU at libm speed).
  float x = in > -87.3f ? in : -87.3f;
  x = x < 88.7f ? x : 88.7f;
  // n = floor(t), written with an integer conversion: GCC does not vectorise std::floor
  // under the default -ftrapping-math.
  const float t = x * 1.44269504088896341f + 0.5f;
  int32_t truncated = static_cast<int32_t>(t);
  truncated -= t < static_cast<float>(truncated);
  const float n = static_cast<float>(truncated);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t exponent = truncated + 127;
  const float result = y * std::bit_cast<float>(exponent << 23);
  const uint32_t keep = 0u - static_cast<uint32_t>(in == in);  // all ones unless `in` is NaN
  return std::bit_cast<float>((std::bit_cast<uint32_t>(result) & keep) | (std::bit_cast<uint32_t>(in) & ~keep));
}

inline float fastSigmoid(float x) { return 1.0f / (1.0f + fastExp(-x)); }

// tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~1e-7 (relative error grows near 0,
// harmless where tanh is added to 1, as in GELU).
inline float fastTanh(float u) { return 1.0f - 2.0f / (fastExp(2.0f * u) + 1.0f); }

}  // namespace mt
