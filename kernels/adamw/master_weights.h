// Where a parameter's fp32 master weights live on the host, and the bf16 copy of them that
// streams to the device.
//
// Plain: `f32` holds the master; `bf16`, if set, is its streamed copy (a plan 1.6 staging copy),
// written from it whenever the master changes.
// Split (plan 1.7, ROLE_RESIDUAL): no fp32 copy exists. The master is held as its bf16 rounding
// `bf16` (contiguous: the very bytes the device copy reads) and a 16-bit `residual` that
// restores it exactly: bits(master) = (bf16 << 16) + residual, as 32-bit integers. 4 host bytes
// per weight, as plain fp32, with the streamed copy included.
// Bf16 alone (plan 1.32, a frozen weight whose values are bf16): `bf16` without a residual, which
// would be zero. 2 host bytes per weight; writing a value that is not bf16 would lose its low
// bits, so the writer checks them first (isBf16).
//
// The rounding is to nearest with ties away from zero (bits + 0x8000, truncated), so that the
// residual lies in [-0x8000, 0x7fff] for every finite value and Inf. Round-to-nearest-even would
// need one residual value more (at an exact tie, 0x8000 above or below an even bf16), so it
// cannot be restored from 16 bits; the two roundings differ only at exact ties (low 16 bits
// 0x8000, one value in 65,536), by one bf16 ulp. NaN is held as a quiet NaN with residual 0 (its
// low payload bits are lost; a master is never NaN: no update writes one).
#pragma once
#include <cstdint>
#include <cstring>

namespace mt {

struct MasterWeights {
  float* f32 = nullptr;         // the master (plain), or null (split)
  uint16_t* bf16 = nullptr;     // its streamed bf16 copy, or null (plain, not streamed as bf16)
  int16_t* residual = nullptr;  // split: what restores the master from `bf16`
  bool split() const { return f32 == nullptr; }  // split or bf16 alone
  // The same master from element `begin` on (a slice of it).
  MasterWeights from(int64_t begin) const {
    return {f32 ? f32 + begin : nullptr, bf16 ? bf16 + begin : nullptr, residual ? residual + begin : nullptr};
  }
};

// x as (its bf16 rounding, the residual); see above.
inline void splitMaster(float x, uint16_t& hi, int16_t& lo) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN
    hi = static_cast<uint16_t>((bits >> 16) | 0x7fc0u);
    lo = 0;
    return;
  }
  hi = static_cast<uint16_t>((bits + 0x8000u) >> 16);  // Inf stays Inf; FLT_MAX rounds to Inf
  lo = static_cast<int16_t>(static_cast<uint16_t>(bits - (uint32_t{hi} << 16)));
}

// Whether x is a bf16 value (its low 16 bits zero): what a master held as bf16 alone can hold.
inline bool isBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return (bits & 0xffffu) == 0;
}

inline float joinMaster(uint16_t hi, int16_t lo) {
  const uint32_t bits = (uint32_t{hi} << 16) + static_cast<uint32_t>(int32_t{lo});
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// Master elements [begin, begin + n) into `out`.
void read_master(const MasterWeights& w, int64_t begin, int64_t n, float* out);
// Sets master elements [begin, begin + n) to `in` (which may be w.f32 + begin itself, for a
// plain master updated in place) and its bf16 copy, if it has one.
void write_master(const MasterWeights& w, int64_t begin, int64_t n, const float* in);

}  // namespace mt
