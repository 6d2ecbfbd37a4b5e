// mt.rope: rotary position embedding, "rotate half" convention (as in Hugging Face Llama):
// in each head of size D, the first R (the rotary dimension: D, or Phi-4-mini's 3/4 of it) turn,
// element i < R/2 paired with i + R/2, and the pair turns by the angle p * f_i, p the position:
// offset + t for token t (dim 1), f_i pair i's inverse frequency, theta^(-2i/R) or scaled as
// Hugging Face's rope_scaling says (RopeFrequencies below); elements R to D - 1 pass unchanged.
//   x (B, T, H*D) -> (B, T, H*D)
//   int attrs: [head_dim, inverse(, offset(, scaling kind(, rotary dim)))]
//   float attrs: [theta] or, scaled, [theta, factor, a, b, c, attention(, LongRoPE's R/2 short
//   factors, then its R/2 long ones)]
// The offset (default 0; plan 1.12) places a token tile that starts inside its sequence.
// inverse = 1 turns by the negated angle: the gradient of rope is rope with inverse flipped.
// mt.rope_at: the same turn at given positions (a decode plan's new tokens after the cache;
// packed examples, each from position 0):
//   (x (B, T, H*D), positions (B, T) i32) -> (B, T, H*D)
//   int attrs: [head_dim(, scaling kind(, inverse(, rotary dim)))]  float attrs: as mt.rope's (plan
//   1.22: inverse, the gradient of a packed plan's rope; plan 1.35: the rotary dimension, 0 or
//   absent for head_dim, and LongRoPE)
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/kernel_args.h"

namespace mt {

// Hugging Face's rope_scaling (plan 1.18), the kernels' int attribute: how each pair's inverse
// frequency is scaled from theta^(-2i/D).
enum class RopeScalingKind : int64_t {
  kNone = 0,
  kLinear = 1,  // divided by `factor`
  kLlama3 = 2,  // Llama 3.1: a = low_freq_factor, b = high_freq_factor, c = original max positions
  kYarn = 3,    // YaRN: a = the ramp's start, b = its length (from beta_fast/slow), c unused
  // LongRoPE (Phi-3): pair i's frequency divided by its own factor, a short one or a long one (past
  // the original context c): a = 0 the short ones, 1 the long ones, 2 the long ones where the call's
  // largest position + 1 passes c (transformers' longrope_frequency_update: a decode step, packed
  // examples; a sequence's plan picks by its length at compile time, so that its token tiles agree).
  kLongRope = 4,
};
enum class LongRopeChoice : int64_t { kShort = 0, kLong = 1, kByPosition = 2 };
inline constexpr int64_t kRopeScalingKinds = 5;
// The most pairs a rotation has (a head of 512): LongRoPE's factors travel by value to the CUDA twin.
inline constexpr int64_t kMaxRopePairs = 256;

// What turns pair i (all in f32, the order of Hugging Face's float32 torch ops): theta, the
// scaling and its parameters, the factor cos and sin are multiplied by (YaRN's and LongRoPE's
// attention factor; 1 otherwise), and LongRoPE's factors of each pair.
struct RopeFrequencies {
  float theta = 10000.0f;
  RopeScalingKind kind = RopeScalingKind::kNone;
  float factor = 1.0f, a = 0.0f, b = 0.0f, c = 0.0f;
  float attention = 1.0f;
  float short_factors[kMaxRopePairs] = {}, long_factors[kMaxRopePairs] = {};  // kLongRope's, pair i's at i
};

// Whether LongRoPE turns by its long factors, for a call whose largest position is `largest`.
MT_HOST_DEVICE inline bool ropeLongFactors(const RopeFrequencies& f, int64_t largest) {
  const auto choice = static_cast<LongRopeChoice>(static_cast<int64_t>(f.a));
  return choice == LongRopeChoice::kLong ||
         (choice == LongRopeChoice::kByPosition && static_cast<float>(largest + 1) > f.c);
}

// Pair i's inverse frequency over a rotation of `rotary_dim` elements (LongRoPE's long factors
// where `long_factors`), on the CPU and in the CUDA twins alike.
MT_HOST_DEVICE inline float ropeInverseFrequency(const RopeFrequencies& f, int64_t i, int64_t rotary_dim,
                                                 bool long_factors = false) {
  const float base = powf(f.theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  const float plain = 1.0f / base;
  switch (f.kind) {
    case RopeScalingKind::kNone: return plain;
    case RopeScalingKind::kLinear: return plain / f.factor;
    case RopeScalingKind::kLlama3: {
      // transformers' _compute_llama3_parameters: wavelengths past the original context's
      // low-frequency bound slowed by `factor`, those under its high-frequency bound kept, the
      // ones between blended.
      const float wavelen = 1.0f / plain * 6.2831855f;  // 2 pi / inv_freq, as torch's __rtruediv__
      const float low_wavelen = f.c / f.a, high_wavelen = f.c / f.b;
      const float slowed = wavelen > low_wavelen ? plain / f.factor : plain;
      if (wavelen < high_wavelen || wavelen > low_wavelen) return slowed;
      const float smooth = (1.0f / wavelen * f.c - f.a) / (f.b - f.a);  // old_context_len / wavelen, as torch
      return (1.0f - smooth) * slowed / f.factor + smooth * slowed;
    }
    case RopeScalingKind::kYarn: {
      // transformers' _compute_yarn_parameters: interpolated (divided by factor) below the ramp,
      // extrapolated (kept) above it, linear across it.
      const float ramp = fminf(fmaxf((static_cast<float>(i) - f.a) / f.b, 0.0f), 1.0f);
      const float extrapolation = 1.0f - ramp;
      return 1.0f / (f.factor * base) * (1.0f - extrapolation) + plain * extrapolation;
    }
    case RopeScalingKind::kLongRope:  // transformers' _compute_longrope_parameters: 1 / (ext_i * base)
      return 1.0f / ((long_factors ? f.long_factors[i] : f.short_factors[i]) * base);
  }
  return plain;
}

// What is wrong with a scaling's parameters ("" if nothing): the kernels' checks and the
// compiler's verifier of mt.rope ask the same.
inline std::string ropeScalingProblem(const RopeFrequencies& f) {
  if (f.kind == RopeScalingKind::kNone) return "";
  for (float v : {f.factor, f.attention})
    if (!(v > 0.0f) || !std::isfinite(v)) return "scaling factors must be positive and finite";
  if (f.kind == RopeScalingKind::kLlama3 && !(f.a > 0.0f && f.b > f.a && f.c > 0.0f && std::isfinite(f.b * f.c)))
    return "llama3 scaling needs 0 < low_freq_factor < high_freq_factor and positive original positions";
  if (f.kind == RopeScalingKind::kYarn && !(f.b > 0.0f && std::isfinite(f.a) && std::isfinite(f.b)))
    return "yarn scaling needs a finite ramp of positive length";
  if (f.kind == RopeScalingKind::kLongRope) {
    if (f.a != 0.0f && f.a != 1.0f && f.a != 2.0f)
      return "longrope scaling's choice must be 0 (short factors), 1 (long) or 2 (by position)";
    if (!(f.c > 0.0f) || !std::isfinite(f.c)) return "longrope scaling needs a positive original context";
    for (int64_t i = 0; i < kMaxRopePairs; ++i)
      for (float v : {f.short_factors[i], f.long_factors[i]})
        if (!(v > 0.0f) || !std::isfinite(v)) return "longrope scaling needs each pair's factor positive and finite";
  }
  return "";
}

// How many values a scaling of `kind` has over a rotation of `rotary_dim` elements: none, or
// factor, a, b, c and attention, and LongRoPE's short and long factors of each pair after them.
inline size_t ropeScalingValues(int64_t kind, int64_t rotary_dim) {
  if (kind == 0) return 0;
  return kind == static_cast<int64_t>(RopeScalingKind::kLongRope) ? 5 + 2 * static_cast<size_t>(rotary_dim / 2) : 5;
}

// The frequencies of theta, scaling `kind` and its values (ropeScalingValues; null for none), as
// mt.rope's attributes give them, over `pairs` pairs (LongRoPE's factors: at most kMaxRopePairs).
inline RopeFrequencies ropeFrequencies(float theta, int64_t kind, const float* scaling, int64_t pairs) {
  RopeFrequencies f;
  f.theta = theta;
  if (kind == 0) return f;
  f.kind = static_cast<RopeScalingKind>(kind);
  f.factor = scaling[0], f.a = scaling[1], f.b = scaling[2], f.c = scaling[3], f.attention = scaling[4];
  if (f.kind == RopeScalingKind::kLongRope) {
    for (int64_t i = 0; i < kMaxRopePairs; ++i) f.short_factors[i] = f.long_factors[i] = 1.0f;  // past the rotation
    for (int64_t i = 0; i < pairs && i < kMaxRopePairs; ++i)
      f.short_factors[i] = scaling[5 + i], f.long_factors[i] = scaling[5 + pairs + i];
  }
  return f;
}

// The rotary dimension of mt.rope's or mt.rope_at's kernel attributes (its int attribute at
// `rotary_at`; absent or 0: the whole head).
inline int64_t ropeRotaryDim(const KernelArgs& args, size_t rotary_at) {
  const int64_t rotary = args.intOrZero(rotary_at);
  return rotary ? rotary : args.ints[0];
}

// mt.rope's and mt.rope_at's frequencies from their kernel attributes (`kind_at`: the index of
// the scaling kind's int attribute; absent: none; `rotary_at`: the rotary dimension's). The checks
// said the attributes are well formed.
inline RopeFrequencies ropeFrequencies(const KernelArgs& args, size_t kind_at, size_t rotary_at) {
  const int64_t kind = args.intOrZero(kind_at);
  return ropeFrequencies(args.floats[0], kind, kind ? args.floats.data() + 1 : nullptr,
                         ropeRotaryDim(args, rotary_at) / 2);
}

// Where mt.rope's and mt.rope_at's int attributes hold the scaling kind and the rotary dimension.
inline constexpr size_t kRopeKindAt = 3, kRopeRotaryAt = 4, kRopeAtKindAt = 1, kRopeAtRotaryAt = 3;

// The position of token 0 of mt.rope's input: its third int attribute where it has one.
inline int64_t ropePositionOffset(const KernelArgs& args) { return args.intOrZero(2); }

std::string rope_check(const KernelArgs& args);
void rope_cpu(const KernelArgs& args);
std::string rope_at_check(const KernelArgs& args);
void rope_at_cpu(const KernelArgs& args);

// CUDA twins (kernels/rope/rope_cuda.cu), built when CUDA is enabled.
void rope_cuda(const KernelArgs& args, const CudaLaunch& launch);
void rope_at_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
