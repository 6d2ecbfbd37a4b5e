// Rope, attention (causal, grouped heads, over a key/value cache) and the cross-entropy losses
// (whole, vocabulary-chunked, token-tiled): each CPU kernel against a double-precision reference
// on random inputs, and each backward kernel against central finite differences of it.
#include "tests/kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "kernels/attention/attention.h"
#include "kernels/rope/rope.h"

namespace mt::test {
namespace {

TEST_F(KernelTest, RopeForwardAndGradientIsTheInverseRotation) {
  const int64_t b = 2, t = 7, d = 8, width = 3 * d;
  const float theta = 10000.0f;
  auto x = HostTensor::f32({b, t, width}, randomFloats(b * t * width, rng));
  expectClose(runKernel(KernelId::Rope, {x}, {HostTensor::f32({b, t, width})}, {d, 0}, {theta})[0].floats,
              ref::rope(x.asDoubles(), b, t, width, d, theta, false), kF32Tol, "rope");
  auto dy = HostTensor::f32({b, t, width}, randomFloats(b * t * width, rng));
  expectClose(runKernel(KernelId::Rope, {dy}, {HostTensor::f32({b, t, width})}, {d, 1}, {theta})[0].floats,
              finiteDifferences([&](const Doubles& v) { return ref::rope(v, b, t, width, d, theta, false); },
                                x.asDoubles(), dy.asDoubles()),
              kGradTol, "rope grad");
}

// mt.rope_at turns a token at position p exactly as mt.rope turns row p: a decode step's keys
// are the keys the whole-sequence forward would have made.
TEST_F(KernelTest, RopeAtTurnsAsRopeAtTheSamePosition) {
  const int64_t b = 2, t = 9, d = 8, width = 3 * d;
  const float theta = 500000.0f;
  auto x = HostTensor::f32({b, t, width}, randomFloats(b * t * width, rng));
  const auto whole = runKernel(KernelId::Rope, {x}, {HostTensor::f32({b, t, width})}, {d, 0}, {theta})[0].floats;
  // Three consecutive tokens of each sequence, from position 2 in the first and 6 in the second.
  const int64_t n = 3, first[] = {2, 6};
  std::vector<float> part, want;
  std::vector<int32_t> positions;
  for (int64_t r = 0; r < b; ++r)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = (r * t + first[r] + i) * width;
      part.insert(part.end(), x.floats.begin() + at, x.floats.begin() + at + width);
      want.insert(want.end(), whole.begin() + at, whole.begin() + at + width);
      positions.push_back(static_cast<int32_t>(first[r] + i));
    }
  const auto got = runKernel(KernelId::RopeAt, {HostTensor::f32({b, n, width}, part), HostTensor::i32({b, n}, positions)},
                             {HostTensor::f32({b, n, width})}, {d}, {theta})[0].floats;
  EXPECT_EQ(got, want) << "rope_at differs from rope at the same positions";
  // Its inverse (a packed plan's gradient): rope's inverse at the same positions.
  const auto whole_back = runKernel(KernelId::Rope, {x}, {HostTensor::f32({b, t, width})}, {d, 1}, {theta})[0].floats;
  std::vector<float> want_back;
  for (int64_t r = 0; r < b; ++r) {
    const int64_t at = (r * t + first[r]) * width;
    want_back.insert(want_back.end(), whole_back.begin() + at, whole_back.begin() + at + n * width);
  }
  const auto back = runKernel(KernelId::RopeAt, {HostTensor::f32({b, n, width}, part), HostTensor::i32({b, n}, positions)},
                              {HostTensor::f32({b, n, width})}, {d, 0, 1}, {theta})[0].floats;
  EXPECT_EQ(back, want_back) << "rope_at's inverse differs from rope's at the same positions";
}

// mt.rope with a position offset p turns a token tile as the whole sequence's rope turns its rows
// [p, p + n) (mt-tile-tokens' tiles inside a sequence), forward and inverse, bit for bit.
TEST_F(KernelTest, RopeWithOffsetTurnsATileAsTheWholeSequence) {
  const int64_t t = 12, n = 4, d = 8, width = 2 * d, offset = 8;
  const float theta = 10000.0f;
  auto x = HostTensor::f32({1, t, width}, randomFloats(t * width, rng));
  for (int64_t inverse : {0, 1}) {
    const auto whole = runKernel(KernelId::Rope, {x}, {HostTensor::f32({1, t, width})}, {d, inverse}, {theta})[0].floats;
    const std::vector<float> tile(x.floats.begin() + offset * width, x.floats.begin() + (offset + n) * width);
    const auto got = runKernel(KernelId::Rope, {HostTensor::f32({1, n, width}, tile)}, {HostTensor::f32({1, n, width})},
                               {d, inverse, offset}, {theta})[0].floats;
    EXPECT_EQ(got, std::vector<float>(whole.begin() + offset * width, whole.begin() + (offset + n) * width))
        << "rope at offset " << offset << (inverse ? " (inverse)" : "") << " differs from the whole sequence's rows";
  }
  // A negative offset, or one that pushes a position past int32, is refused by the kernel's check.
  for (int64_t bad : {int64_t{-1}, int64_t{INT32_MAX}}) {
    KernelArgs args;
    args.in.push_back(Tensor{nullptr, {1, n, width}, DType::F32});
    args.out.push_back(Tensor{nullptr, {1, n, width}, DType::F32});
    args.ints = {d, 0, bad};
    args.floats = {theta};
    EXPECT_NE(rope_check(args).find("position offset"), std::string::npos) << "offset " << bad;
  }
}

// Scaled frequencies (Hugging Face's rope_scaling, plan 1.18): each pair turns by the angle the
// scaling's formula gives, computed here in double from transformers' definitions (llama3:
// kept, blended, slowed by the factor; yarn: interpolated below the ramp, kept above, cos and
// sin times the attention factor); the inverse turns back; rope_at turns as rope at the same
// positions; malformed attributes are refused.
TEST_F(KernelTest, RopeScalingTurnsByTheScaledFrequencies) {
  const int64_t t = 6, d = 16, width = 2 * d, half = d / 2;
  const float theta = 10000.0f;
  auto x = HostTensor::f32({1, t, width}, randomFloats(t * width, rng));
  struct Case {
    int64_t kind;
    std::vector<float> floats;
    std::function<double(int64_t)> inv_freq;  // of pair i
    double attention;
  };
  const auto plain = [&](int64_t i) { return 1.0 / std::pow(double(theta), 2.0 * i / d); };
  const auto llama3 = [&](int64_t i) {
    const double f = plain(i), wavelen = 2 * M_PI / f, factor = 8, low = 1, high = 4, original = 32;
    if (wavelen < original / high) return f;
    if (wavelen > original / low) return f / factor;
    const double smooth = (original / wavelen - low) / (high - low);
    return (1 - smooth) * f / factor + smooth * f;
  };
  const auto yarn = [&](int64_t i) {
    const double ramp = std::clamp((i - 0.25) / 1.5, 0.0, 1.0);
    return plain(i) / 4 * ramp + plain(i) * (1 - ramp);
  };
  const std::vector<Case> cases = {{1, {theta, 4.0f, 0, 0, 0, 1.0f}, [&](int64_t i) { return plain(i) / 4; }, 1.0},
                                   {2, {theta, 8.0f, 1.0f, 4.0f, 32.0f, 1.0f}, llama3, 1.0},
                                   {3, {theta, 4.0f, 0.25f, 1.5f, 0.0f, 1.25f}, yarn, 1.25}};
  for (const Case& c : cases) {
    const auto got = runKernel(KernelId::Rope, {x}, {HostTensor::f32({1, t, width})}, {d, 0, 0, c.kind}, c.floats)[0].floats;
    double worst = 0;
    for (int64_t p = 0; p < t; ++p)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const int64_t at = p * width + h * d + i;
          const double angle = p * c.inv_freq(i), x1 = x.floats[at], x2 = x.floats[at + half];
          const double y1 = c.attention * (x1 * std::cos(angle) - x2 * std::sin(angle));
          const double y2 = c.attention * (x2 * std::cos(angle) + x1 * std::sin(angle));
          worst = std::max({worst, std::fabs(got[at] - y1), std::fabs(got[at + half] - y2)});
        }
    EXPECT_LT(worst, 2e-5) << "scaling kind " << c.kind;
    // The gradient turns back: inverse(rope(x)) = attention^2 x.
    const auto back = runKernel(KernelId::Rope, {HostTensor::f32({1, t, width}, got)}, {HostTensor::f32({1, t, width})},
                                {d, 1, 0, c.kind}, c.floats)[0].floats;
    for (size_t e = 0; e < back.size(); e += 7)
      EXPECT_NEAR(back[e], c.attention * c.attention * x.floats[e], 1e-5) << "kind " << c.kind << " element " << e;
    std::vector<int32_t> positions(t);
    std::iota(positions.begin(), positions.end(), 0);
    const auto at = runKernel(KernelId::RopeAt, {x, HostTensor::i32({1, t}, positions)}, {HostTensor::f32({1, t, width})},
                              {d, c.kind}, c.floats)[0].floats;
    EXPECT_EQ(at, got) << "rope_at differs from rope with scaling kind " << c.kind;
  }
  KernelArgs args;
  args.in.push_back(Tensor{nullptr, {1, t, width}, DType::F32});
  args.out.push_back(Tensor{nullptr, {1, t, width}, DType::F32});
  args.ints = {d, 0, 0, 5};
  args.floats = {theta, 1, 0, 0, 0, 1};
  EXPECT_NE(rope_check(args).find("scaling kind 5 is unknown"), std::string::npos);
  args.ints = {d, 0, 0, 2};
  args.floats = {theta};
  EXPECT_NE(rope_check(args).find("takes 6 float attributes"), std::string::npos);
  args.floats = {theta, 8, 4, 1, 32, 1};  // high_freq_factor below low_freq_factor
  EXPECT_NE(rope_check(args).find("llama3 scaling needs"), std::string::npos);
  args.ints = {d, 0, 0, 3};
  args.floats = {theta, 4, 0, 0, 0, 1};  // a ramp of no length
  EXPECT_NE(rope_check(args).find("yarn scaling needs"), std::string::npos);
}

// A rotation over the first R of each head's D elements (Hugging Face's partial_rotary_factor,
// plan 1.35): pair i < R/2 is (i, i + R/2), its frequency theta^(-2i/R) — with LongRoPE's (kind 4)
// divided by the pair's short or long factor and cos and sin times the attention factor, as
// transformers' _compute_longrope_parameters computes them —, and elements R to D - 1 pass bit for
// bit; the inverse turns back; rope_at turns as rope, and picks LongRoPE's factors by its largest
// position (choice 2: the long ones where it passes the original context c); malformed attributes
// are refused.
TEST_F(KernelTest, RopeTurnsPartOfEachHeadWithLongRopeFactors) {
  const int64_t t = 6, d = 16, r = 12, width = 2 * d, half = r / 2;
  const float theta = 10000.0f, attention = 1.1f, original = 16.0f;
  const std::vector<float> short_factors = {1.0f, 1.1f, 1.2f, 1.4f, 1.7f, 2.0f};
  const std::vector<float> long_factors = {1.0f, 1.5f, 2.0f, 3.0f, 5.0f, 8.0f};
  auto x = HostTensor::f32({1, t, width}, randomFloats(t * width, rng));
  // The expected rotation of x at positions `at` (one per token) by the given factors (none: plain).
  auto expected = [&](const std::vector<int32_t>& at, const std::vector<float>* factors, double scale) {
    std::vector<double> want(x.floats.begin(), x.floats.end());
    for (int64_t p = 0; p < t; ++p)
      for (int64_t h = 0; h < 2; ++h) {
        const int64_t head = p * width + h * d;
        for (int64_t i = 0; i < half; ++i) {
          const double inv = 1.0 / ((factors ? (*factors)[i] : 1.0) * std::pow(double(theta), 2.0 * i / r));
          const double angle = at[p] * inv, x1 = x.floats[head + i], x2 = x.floats[head + i + half];
          want[head + i] = scale * (x1 * std::cos(angle) - x2 * std::sin(angle));
          want[head + i + half] = scale * (x2 * std::cos(angle) + x1 * std::sin(angle));
        }
      }
    return want;
  };
  auto worstOf = [](const std::vector<float>& got, const std::vector<double>& want) {
    double worst = 0;
    for (size_t e = 0; e < got.size(); ++e) worst = std::max(worst, std::fabs(got[e] - want[e]));
    return worst;
  };
  std::vector<int32_t> positions(t), late(t);
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(late.begin(), late.end(), 15);  // the last, 20, passes the original context of 16
  struct Case {
    int64_t kind;
    float choice;  // LongRoPE's: 0 short, 1 long, 2 by position
    const std::vector<float>* factors;  // what rope at positions 0..5 turns by
  };
  for (const Case& c : {Case{0, 0, nullptr}, Case{4, 0, &short_factors}, Case{4, 1, &long_factors},
                        Case{4, 2, &short_factors}}) {
    std::vector<float> floats = {theta};
    if (c.kind) {
      floats.insert(floats.end(), {1.0f, c.choice, 0.0f, original, attention});
      floats.insert(floats.end(), short_factors.begin(), short_factors.end());
      floats.insert(floats.end(), long_factors.begin(), long_factors.end());
    }
    const double scale = c.kind ? attention : 1.0;
    const std::string name = "kind " + std::to_string(c.kind) + ", choice " + std::to_string(int(c.choice));
    const auto got =
        runKernel(KernelId::Rope, {x}, {HostTensor::f32({1, t, width})}, {d, 0, 0, c.kind, r}, floats)[0].floats;
    EXPECT_LT(worstOf(got, expected(positions, c.factors, scale)), 2e-5) << name;
    for (int64_t p = 0; p < t; ++p)
      for (int64_t e = r; e < d; ++e) EXPECT_EQ(got[p * width + e], x.floats[p * width + e]) << name << ": passes";
    const auto back = runKernel(KernelId::Rope, {HostTensor::f32({1, t, width}, got)}, {HostTensor::f32({1, t, width})},
                                {d, 1, 0, c.kind, r}, floats)[0].floats;
    for (int64_t e = 0; e < t * width; ++e)
      EXPECT_NEAR(back[e], (e % d < r ? scale * scale : 1.0) * x.floats[e], 1e-5) << name << " inverse, element " << e;
    const auto at = runKernel(KernelId::RopeAt, {x, HostTensor::i32({1, t}, positions)}, {HostTensor::f32({1, t, width})},
                              {d, c.kind, 0, r}, floats)[0].floats;
    EXPECT_EQ(at, got) << "rope_at differs from rope, " << name;
    if (c.choice == 2) {  // past the original context: the long factors, for every token of the call
      const auto past = runKernel(KernelId::RopeAt, {x, HostTensor::i32({1, t}, late)}, {HostTensor::f32({1, t, width})},
                                  {d, c.kind, 0, r}, floats)[0].floats;
      EXPECT_LT(worstOf(past, expected(late, &long_factors, scale)), 2e-4) << "rope_at past the original context";
    }
  }
  KernelArgs args;
  args.in.push_back(Tensor{nullptr, {1, t, width}, DType::F32});
  args.out.push_back(Tensor{nullptr, {1, t, width}, DType::F32});
  args.ints = {d, 0, 0, 0, 10 + d};
  args.floats = {theta};
  EXPECT_NE(rope_check(args).find("rotary dimension 26 must be even and at most head_dim 16"), std::string::npos);
  args.ints = {d, 0, 0, 0, 7};
  EXPECT_NE(rope_check(args).find("rotary dimension 7"), std::string::npos);
  args.ints = {d, 0, 0, 4, r};
  args.floats = {theta, 1, 0, 0, 16, 1, 1, 1, 1, 1, 1, 1};  // the short factors alone
  EXPECT_NE(rope_check(args).find("takes 18 float attributes"), std::string::npos);
  std::vector<float> bad = {theta, 1, 0, 0, 16, 1};
  for (int64_t i = 0; i < 2 * half; ++i) bad.push_back(i == 3 ? 0.0f : 1.0f);  // a factor of 0
  args.floats = bad;
  EXPECT_NE(rope_check(args).find("longrope scaling needs each pair's factor positive"), std::string::npos);
  bad[6 + 3] = 1.0f, bad[4] = 0.0f;  // the factor mended; c = 0: no original context
  args.floats = bad;
  EXPECT_NE(rope_check(args).find("longrope scaling needs a positive original context"), std::string::npos);
  bad[4] = 16.0f, bad[2] = 3.0f;  // choice 3
  args.floats = bad;
  EXPECT_NE(rope_check(args).find("longrope scaling's choice must be"), std::string::npos);
}

// mt.cached_attention gives the rows of causal attention: new tokens p0 .. p0 + n - 1 over cache
// rows [0, p0) and each other; with a sliding window and sinks, those of mt.attention with them.
// Cache rows from p0 on hold NaN: a read of them would show.
TEST_F(KernelTest, CachedAttentionReproducesCausalAttentionRows) {
  const int64_t b = 2, t = 70, h = 4, hk = 2, d = 8, cache_rows = 72, wq = h * d, wkv = hk * d;
  auto q = HostTensor::f32({b, t, wq}, randomFloats(b * t * wq, rng));
  auto k = HostTensor::f32({b, t, wkv}, randomFloats(b * t * wkv, rng));
  auto v = HostTensor::f32({b, t, wkv}, randomFloats(b * t * wkv, rng));
  const auto sinks = HostTensor::f32({h}, {1.0f, -0.5f, 0.25f, 3.0f});
  // Rows [from, from + n) of each sequence of x (b, t, width).
  auto rows = [&](const HostTensor& x, int64_t from, int64_t n, int64_t width) {
    std::vector<float> out;
    for (int64_t r = 0; r < b; ++r)
      out.insert(out.end(), x.floats.begin() + (r * t + from) * width, x.floats.begin() + (r * t + from + n) * width);
    return out;
  };
  for (const int64_t window : {int64_t{0}, int64_t{5}}) {
    const bool with_sinks = window > 0;
    const Doubles sinks_or_none = with_sinks ? sinks.asDoubles() : Doubles{};
    const Doubles whole = slice(
        ref::attention(q.asDoubles(), k.asDoubles(), v.asDoubles(), b, t, h, hk, d, window, sinks_or_none), 0, b * t * wq);
    for (const auto [p0, n] : {std::pair<int64_t, int64_t>{0, 1}, {1, 1}, {40, 1}, {69, 1}, {0, 3}, {33, 3}, {67, 3}}) {
      std::vector<float> k_cache(b * cache_rows * wkv, std::numeric_limits<float>::quiet_NaN()), v_cache = k_cache;
      for (int64_t r = 0; r < b; ++r)
        for (int64_t j = 0; j < p0 * wkv; ++j) {
          k_cache[r * cache_rows * wkv + j] = k.floats[r * t * wkv + j];
          v_cache[r * cache_rows * wkv + j] = v.floats[r * t * wkv + j];
        }
      std::vector<int32_t> positions;
      for (int64_t r = 0; r < b; ++r)
        for (int64_t i = 0; i < n; ++i) positions.push_back(static_cast<int32_t>(p0 + i));
      std::vector<HostTensor> in = {
          HostTensor::f32({b, n, wq}, rows(q, p0, n, wq)), HostTensor::f32({b, n, wkv}, rows(k, p0, n, wkv)),
          HostTensor::f32({b, n, wkv}, rows(v, p0, n, wkv)), HostTensor::f32({b, cache_rows, wkv}, k_cache),
          HostTensor::f32({b, cache_rows, wkv}, v_cache), HostTensor::i32({b, n}, positions)};
      if (with_sinks) in.push_back(sinks);
      const auto got = runKernel(with_sinks ? KernelId::CachedAttentionSinks : KernelId::CachedAttention, in,
                                 {HostTensor::f32({b, n, wq})}, {h, hk, window})[0].floats;
      Doubles want;
      for (int64_t r = 0; r < b; ++r)
        want.insert(want.end(), whole.begin() + (r * t + p0) * wq, whole.begin() + (r * t + p0 + n) * wq);
      expectClose(got, want, kF32Tol,
                  "cached_attention at p0 = " + std::to_string(p0) + ", " + std::to_string(n) + " new, window " +
                      std::to_string(window));
    }
  }
}

// A position past the cache (the caller's error) is clamped: the kernel reads only the cache.
TEST_F(KernelTest, CachedAttentionClampsAPositionPastTheCache) {
  const int64_t h = 2, d = 4, cache_rows = 5;
  const auto q = HostTensor::f32({1, 1, h * d}, randomFloats(h * d, rng));
  const auto k = HostTensor::f32({1, 1, h * d}, randomFloats(h * d, rng)), v = k;
  const auto cache = HostTensor::f32({1, cache_rows, h * d}, randomFloats(cache_rows * h * d, rng));
  auto run = [&](int32_t position) {
    return runKernel(KernelId::CachedAttention, {q, k, v, cache, cache, HostTensor::i32({1, 1}, {position})},
                     {HostTensor::f32({1, 1, h * d})}, {h, h})[0].floats;
  };
  EXPECT_EQ(run(1 << 30), run(cache_rows - 1));
  EXPECT_EQ(run(-7), run(0));
}

// T = 70 spans two query blocks of the kernel; 4 query heads share 2 key/value heads.
TEST_F(KernelTest, CausalAttentionWithGroupedHeadsForwardAndGradient) {
  const int64_t b = 1, t = 70, h = 4, hk = 2, d = 4;
  auto q = HostTensor::f32({b, t, h * d}, randomFloats(b * t * h * d, rng));
  auto k = HostTensor::f32({b, t, hk * d}, randomFloats(b * t * hk * d, rng));
  auto v = HostTensor::f32({b, t, hk * d}, randomFloats(b * t * hk * d, rng));
  auto out = runKernel(KernelId::Attention, {q, k, v}, {HostTensor::f32({b, t, h * d}), HostTensor::f32({b, h, t})},
                       {h, hk});
  const Doubles want = ref::attention(q.asDoubles(), k.asDoubles(), v.asDoubles(), b, t, h, hk, d);
  expectClose(out[0].floats, slice(want, 0, b * t * h * d), kF32Tol, "attention out");
  expectClose(out[1].floats, slice(want, b * t * h * d, b * h * t), kF32Tol, "attention lse");

  auto dout = HostTensor::f32({b, t, h * d}, randomFloats(b * t * h * d, rng));
  auto grads = runKernel(KernelId::AttentionGrad, {dout, q, k, v, out[0], out[1]},
                         {HostTensor::f32({b, t, h * d}), HostTensor::f32({b, t, hk * d}), HostTensor::f32({b, t, hk * d})},
                         {h, hk});
  auto o_of = [&](const Doubles& qv, const Doubles& kv, const Doubles& vv) {
    return slice(ref::attention(qv, kv, vv, b, t, h, hk, d), 0, b * t * h * d);
  };
  const Doubles w = dout.asDoubles();
  expectClose(grads[0].floats, finiteDifferences([&](const Doubles& x) { return o_of(x, k.asDoubles(), v.asDoubles()); }, q.asDoubles(), w),
              kGradTol, "attention dq");
  expectClose(grads[1].floats, finiteDifferences([&](const Doubles& x) { return o_of(q.asDoubles(), x, v.asDoubles()); }, k.asDoubles(), w),
              kGradTol, "attention dk");
  expectClose(grads[2].floats, finiteDifferences([&](const Doubles& x) { return o_of(q.asDoubles(), k.asDoubles(), x); }, v.asDoubles(), w),
              kGradTol, "attention dv");
}

// A sliding window shorter than the sequence (query blocks of 64 whose keys start inside the
// sequence, a window not a multiple of the block) with gpt-oss's sinks: the outputs, lse and the
// gradients of q, k, v and the sinks against the double reference and its finite differences.
TEST_F(KernelTest, SlidingWindowAttentionWithSinksForwardAndGradient) {
  const int64_t b = 1, t = 100, h = 4, hk = 2, d = 4;
  auto q = HostTensor::f32({b, t, h * d}, randomFloats(b * t * h * d, rng));
  auto k = HostTensor::f32({b, t, hk * d}, randomFloats(b * t * hk * d, rng));
  auto v = HostTensor::f32({b, t, hk * d}, randomFloats(b * t * hk * d, rng));
  auto sinks = HostTensor::f32({h}, {0.5f, -1.0f, 2.0f, 0.0f});
  for (const int64_t window : {int64_t{0}, int64_t{1}, int64_t{37}, int64_t{100}}) {
    const std::string at = "window " + std::to_string(window);
    for (const bool with_sinks : {false, true}) {
      const std::string what = at + (with_sinks ? " with sinks" : "");
      std::vector<HostTensor> in = {q, k, v};
      if (with_sinks) in.push_back(sinks);
      auto out = runKernel(with_sinks ? KernelId::AttentionSinks : KernelId::Attention, in,
                           {HostTensor::f32({b, t, h * d}), HostTensor::f32({b, h, t})}, {h, hk, window});
      const Doubles sinks_or_none = with_sinks ? sinks.asDoubles() : Doubles{};
      const Doubles want = ref::attention(q.asDoubles(), k.asDoubles(), v.asDoubles(), b, t, h, hk, d, window, sinks_or_none);
      expectClose(out[0].floats, slice(want, 0, b * t * h * d), kF32Tol, "attention out, " + what);
      expectClose(out[1].floats, slice(want, b * t * h * d, b * h * t), kF32Tol, "attention lse, " + what);
      if (window != 37 || !with_sinks) continue;  // the gradients once (finite differences are slow)
      auto dout = HostTensor::f32({b, t, h * d}, randomFloats(b * t * h * d, rng));
      auto grads = runKernel(KernelId::AttentionGrad, {dout, q, k, v, out[0], out[1]},
                             {HostTensor::f32({b, t, h * d}), HostTensor::f32({b, t, hk * d}), HostTensor::f32({b, t, hk * d})},
                             {h, hk, window});
      auto o_of = [&](const Doubles& qv, const Doubles& kv, const Doubles& vv, const Doubles& sv) {
        return slice(ref::attention(qv, kv, vv, b, t, h, hk, d, window, sv), 0, b * t * h * d);
      };
      const Doubles w = dout.asDoubles(), qd = q.asDoubles(), kd = k.asDoubles(), vd = v.asDoubles();
      expectClose(grads[0].floats, finiteDifferences([&](const Doubles& x) { return o_of(x, kd, vd, sinks_or_none); }, qd, w),
                  kGradTol, "dq, " + what);
      expectClose(grads[1].floats, finiteDifferences([&](const Doubles& x) { return o_of(qd, x, vd, sinks_or_none); }, kd, w),
                  kGradTol, "dk, " + what);
      expectClose(grads[2].floats, finiteDifferences([&](const Doubles& x) { return o_of(qd, kd, x, sinks_or_none); }, vd, w),
                  kGradTol, "dv, " + what);
      auto dsinks = runKernel(KernelId::AttentionSinksGrad, {dout, out[0], out[1], sinks}, {HostTensor::f32({h})}, {});
      expectClose(dsinks[0].floats, finiteDifferences([&](const Doubles& x) { return o_of(qd, kd, vd, x); }, sinks.asDoubles(), w),
                  kGradTol, "dsinks, " + what);
    }
  }
}

// Packed examples: a row's positions restart at each example, and each example's outputs, lse
// and gradients are the plain kernels' on that example alone (its own sequence), with and
// without a window and sinks; segments shorter and longer than a query block of 64, one starting
// inside a block.
TEST_F(KernelTest, PackedAttentionKeepsEachExampleToItself) {
  const int64_t b = 2, t = 100, h = 4, hk = 2, d = 4;
  const std::vector<std::vector<int64_t>> examples = {{30, 55, 15}, {1, 70, 29}};  // lengths, per row
  std::vector<int32_t> positions;
  for (const auto& row : examples)
    for (const int64_t length : row)
      for (int64_t i = 0; i < length; ++i) positions.push_back(static_cast<int32_t>(i));
  const auto pos = HostTensor::i32({b, t}, positions);
  auto q = HostTensor::f32({b, t, h * d}, randomFloats(b * t * h * d, rng));
  auto k = HostTensor::f32({b, t, hk * d}, randomFloats(b * t * hk * d, rng));
  auto v = HostTensor::f32({b, t, hk * d}, randomFloats(b * t * hk * d, rng));
  auto dout = HostTensor::f32({b, t, h * d}, randomFloats(b * t * h * d, rng));
  auto sinks = HostTensor::f32({h}, {0.5f, -1.0f, 2.0f, 0.0f});
  // Tokens [start, start + n) of row r of a (b, t, width) tensor, as a (1, n, width) one.
  auto part = [&](const HostTensor& x, int64_t r, int64_t start, int64_t n) {
    const int64_t width = x.shape[2];
    const auto first = x.floats.begin() + (r * t + start) * width;
    return HostTensor::f32({1, n, width}, std::vector<float>(first, first + n * width));
  };
  for (const int64_t window : {int64_t{0}, int64_t{20}}) {
    for (const bool with_sinks : {false, true}) {
      const std::string what = "window " + std::to_string(window) + (with_sinks ? " with sinks" : "");
      std::vector<HostTensor> in = {q, k, v};
      if (with_sinks) in.push_back(sinks);
      in.push_back(pos);
      const std::vector<int64_t> attrs = {h, hk, window};
      auto out = runKernel(with_sinks ? KernelId::AttentionPackedSinks : KernelId::AttentionPacked, in,
                           {HostTensor::f32({b, t, h * d}), HostTensor::f32({b, h, t})}, attrs);
      auto grads = runKernel(KernelId::AttentionPackedGrad, {dout, q, k, v, out[0], out[1], pos},
                             {HostTensor::f32({b, t, h * d}), HostTensor::f32({b, t, hk * d}), HostTensor::f32({b, t, hk * d})},
                             attrs);
      for (int64_t r = 0; r < b; ++r) {
        int64_t start = 0;
        for (const int64_t n : examples[r]) {
          const std::string at = what + ", row " + std::to_string(r) + " from " + std::to_string(start);
          std::vector<HostTensor> alone = {part(q, r, start, n), part(k, r, start, n), part(v, r, start, n)};
          if (with_sinks) alone.push_back(sinks);
          auto want = runKernel(with_sinks ? KernelId::AttentionSinks : KernelId::Attention, alone,
                                {HostTensor::f32({1, n, h * d}), HostTensor::f32({1, h, n})}, attrs);
          expectClose(part(out[0], r, start, n).floats, want[0].asDoubles(), kF32Tol, "packed out, " + at);
          for (int64_t head = 0; head < h; ++head) {
            const auto lse = out[1].floats.begin() + (r * h + head) * t + start;
            expectClose(std::vector<float>(lse, lse + n), slice(want[1].asDoubles(), head * n, n), kF32Tol,
                        "packed lse, " + at);
          }
          auto want_grads = runKernel(KernelId::AttentionGrad, {part(dout, r, start, n), alone[0], alone[1], alone[2],
                                                                want[0], want[1]},
                                      {HostTensor::f32({1, n, h * d}), HostTensor::f32({1, n, hk * d}),
                                       HostTensor::f32({1, n, hk * d})},
                                      attrs);
          const char* names[] = {"dq", "dk", "dv"};
          for (int g = 0; g < 3; ++g)
            expectClose(part(grads[g], r, start, n).floats, want_grads[g].asDoubles(), kF32Tol,
                        std::string("packed ") + names[g] + ", " + at);
          start += n;
        }
      }
    }
  }
  // Positions no run writes (negative, past the token, falling): each row still sees itself and
  // the kernels stay inside the tensors.
  std::vector<int32_t> odd(b * t);
  for (int64_t i = 0; i < b * t; ++i) odd[i] = static_cast<int32_t>((i * 37) % 211) - 50;
  auto out = runKernel(KernelId::AttentionPacked, {q, k, v, HostTensor::i32({b, t}, odd)},
                       {HostTensor::f32({b, t, h * d}), HostTensor::f32({b, h, t})}, {h, hk});
  for (const float x : out[1].floats) ASSERT_TRUE(std::isfinite(x));
}

// The bounds the tiled and tensor-core kernels loop over (attention.h): a query tile's key tiles
// start at firstKeyTileStart, at or before every key its rows see and at the tile of the lowest
// one, which is also the least rowFirstKey over the tile's rows, past the sequence too (the
// tensor cores' block reduction); no query at or past queryReachEnd(j) sees key j, and without
// packing the one before it does; queriesSeeingKeysEnd, whole or as the maximum of 128 threads'
// shares, is past the last query that sees a key of a key tile. Windows shorter and longer than a
// tile, packed rows of real positions and of positions no run writes (negative, past the token,
// falling).
TEST_F(KernelTest, AttentionTileBoundsHoldEveryVisibleKey) {
  const int64_t batch = 2, seq = 150;
  std::vector<int32_t> examples(batch * seq), odd(batch * seq);
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t i = 0, start = 0; i < seq; ++i) {
      if (i == 1 + 29 * r || i == 70 + r || i == 133) start = i;
      examples[r * seq + i] = static_cast<int32_t>(i - start);
      odd[r * seq + i] = static_cast<int32_t>((r * seq + i) * 37 % 211) - 50;
    }
  const std::vector<const int32_t*> row_positions = {nullptr, examples.data(), odd.data()};
  for (const int32_t* positions : row_positions)
    for (const int64_t window : {int64_t{0}, int64_t{1}, int64_t{20}, int64_t{70}})
      for (const int64_t tile : {int64_t{32}, int64_t{64}}) {
        AttentionShape d{batch, seq, 2, 1, 64, 128, 64, 0.125f, window, positions};
        auto tileStart = [&](int64_t b, int64_t i0) {
          return tile == 32 ? firstKeyTileStart<32>(d, b, i0) : firstKeyTileStart<64>(d, b, i0);
        };
        const std::string what = std::string(positions == nullptr ? "unpacked" : positions == examples.data()
                                                                                    ? "packed"
                                                                                    : "odd positions") +
                                 ", window " + std::to_string(window) + ", tile " + std::to_string(tile);
        for (int64_t b = 0; b < batch; ++b) {
          for (int64_t i0 = 0; i0 < seq; i0 += tile) {
            int64_t lowest = seq;
            for (int64_t i = i0; i < std::min(seq, i0 + tile); ++i)
              for (int64_t j = 0; j <= i; ++j)
                if (visibleKey(d, b, i, j)) lowest = std::min(lowest, j);
            EXPECT_EQ(tileStart(b, i0), lowest / tile * tile) << what << ", queries from " << i0;
            int64_t least = std::numeric_limits<int64_t>::max();
            for (int64_t i = i0; i < i0 + tile; ++i) least = std::min(least, rowFirstKey(d, b, i));
            EXPECT_EQ(least / tile * tile, tileStart(b, i0)) << what << ", queries from " << i0;
            // Key tile [i0, i0 + tile): past the last query that sees one of its keys.
            const int64_t j_last = std::min(seq, i0 + tile) - 1;
            int64_t end = i0 + 1;
            for (int64_t i = i0; i < seq; ++i)
              for (int64_t j = i0; j <= j_last; ++j)
                if (visibleKey(d, b, i, j)) end = std::max(end, i + 1);
            EXPECT_EQ(queriesSeeingKeysEnd(d, b, j_last, i0, 1, i0 + 1), end) << what << ", keys from " << i0;
            int64_t shares = i0 + 1;
            for (int64_t thread = 0; thread < 128; ++thread)
              shares = std::max(shares, queriesSeeingKeysEnd(d, b, j_last, i0 + thread, 128, i0 + 1));
            EXPECT_EQ(shares, end) << what << ", keys from " << i0 << " in 128 shares";
          }
          for (int64_t j = 0; j < seq; ++j) {
            const int64_t end = queryReachEnd(d, j);
            for (int64_t i = end; i < seq; ++i)
              ASSERT_FALSE(visibleKey(d, b, i, j)) << what << ": query " << i << " sees key " << j << " past its reach";
            if (!positions) EXPECT_TRUE(visibleKey(d, b, end - 1, j)) << what << ", key " << j;
          }
        }
      }
}

// The checks name a negative window, sinks of the wrong length and a third attribute too many.
TEST_F(KernelTest, AttentionChecksNameABadWindowAndBadSinks) {
  KernelArgs args;
  const Tensor q{nullptr, {1, 4, 8}, DType::F32}, kv{nullptr, {1, 4, 4}, DType::F32};
  const Tensor out = q, lse{nullptr, {1, 2, 4}, DType::F32}, sinks3{nullptr, {3}, DType::F32};
  args.in = {q, kv, kv};
  args.out = {out, lse};
  args.ints = {2, 1, -5};
  EXPECT_NE(attention_check(args).find("window -5 must not be negative"), std::string::npos);
  args.ints = {2, 1, 3, 4};
  EXPECT_NE(attention_check(args).find("takes 2 or 3 int attributes"), std::string::npos);
  args.ints = {2, 1, 3};
  EXPECT_EQ(attention_check(args), "");
  args.in.push_back(sinks3);
  EXPECT_NE(attention_check(args).find("attention sinks"), std::string::npos);
}

TEST_F(KernelTest, SoftmaxCrossEntropyIgnoresOutOfRangeTargetsAndHasTheRightGradient) {
  const int64_t rows = 6, vocab = 9;
  auto logits = HostTensor::f32({2, 3, vocab}, randomFloats(rows * vocab, rng, 2.0f));
  auto targets = HostTensor::i32({2, 3}, randomInts(rows, vocab, rng));
  targets.ints[4] = -1;  // ignored
  auto out = runKernel(KernelId::SoftmaxXent, {logits, targets}, {HostTensor::f32({}), HostTensor::f32({2, 3})});
  const Doubles want = ref::softmaxXent(logits.asDoubles(), targets.ints, vocab);
  expectClose(out[0].floats, slice(want, 0, 1), kF32Tol, "softmax_xent loss");
  expectClose(out[1].floats, slice(want, 1, rows), kF32Tol, "softmax_xent lse");
  auto dloss = HostTensor::f32({}, {0.7f});
  auto grad = runKernel(KernelId::SoftmaxXentGrad, {dloss, logits, targets, out[1]}, {HostTensor::f32({2, 3, vocab})});
  expectClose(grad[0].floats,
              finiteDifferences([&](const Doubles& x) { return slice(ref::softmaxXent(x, targets.ints, vocab), 0, 1); },
                                logits.asDoubles(), {0.7}),
              kGradTol, "softmax_xent grad");
}

// The cross-entropy over vocabulary chunks (uneven ones, the target in each of them, one row
// ignored) gives softmax_xent's loss, lse and dlogits.
TEST_F(KernelTest, ChunkedCrossEntropyMatchesTheWholeVocabulary) {
  const int64_t rows = 6, vocab = 11;
  const int64_t firsts[] = {0, 4, 8, vocab};  // chunks [0, 4), [4, 8), [8, 11)
  auto logits = HostTensor::f32({2, 3, vocab}, randomFloats(rows * vocab, rng, 3.0f));
  auto targets = HostTensor::i32({2, 3}, {1, 5, 10, 4, -1, 8});
  const auto whole = runKernel(KernelId::SoftmaxXent, {logits, targets}, {HostTensor::f32({}), HostTensor::f32({2, 3})});
  const auto dwhole = runKernel(KernelId::SoftmaxXentGrad, {HostTensor::f32({}, {0.7f}), logits, targets, whole[1]},
                                {HostTensor::f32({2, 3, vocab})});
  auto chunkOf = [&](const HostTensor& t, int64_t first, int64_t width) {
    HostTensor out = HostTensor::f32({2, 3, width});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c) out.floats[r * width + c] = t.floats[r * vocab + first + c];
    return out;
  };
  auto running = HostTensor::f32({2, 3, 2}, std::vector<float>(rows * 2, -INFINITY));
  for (int k = 0; k < 3; ++k) {
    const int64_t first = firsts[k], width = firsts[k + 1] - first;
    running = runKernel(KernelId::XentChunk, {chunkOf(logits, first, width), targets, running},
                        {HostTensor::f32({2, 3, 2})}, {first})[0];
  }
  const auto finished = runKernel(KernelId::XentFinish, {running, targets},
                                  {HostTensor::f32({}), HostTensor::f32({2, 3})}, {vocab});
  expectClose(finished[0].floats, whole[0].asDoubles(), kF32Tol, "xent_finish loss");
  expectClose(finished[1].floats, whole[1].asDoubles(), kF32Tol, "xent_finish lse");
  for (int k = 0; k < 3; ++k) {
    const int64_t first = firsts[k], width = firsts[k + 1] - first;
    const auto dchunk = runKernel(KernelId::XentChunkGrad,
                                  {HostTensor::f32({}, {0.7f}), chunkOf(logits, first, width), targets, finished[1]},
                                  {HostTensor::f32({2, 3, width})}, {first, vocab});
    expectClose(dchunk[0].floats, chunkOf(dwhole[0], first, width).asDoubles(), kF32Tol, "xent_chunk_grad");
  }
}

// The cross-entropy over token tiles (mtc --token-tiles): the whole batch's count, each tile's
// share of the loss over it, summing to softmax_xent's loss; each tile's lse and dlogits are the
// whole's rows, bit for bit. A batch that counts nothing gives 0, not NaN.
TEST_F(KernelTest, TokenTiledCrossEntropyMatchesTheWhole) {
  const int64_t vocab = 7;
  auto logits = HostTensor::f32({1, 8, vocab}, randomFloats(8 * vocab, rng, 3.0f));
  auto targets = HostTensor::i32({1, 8}, {1, 5, -1, 4, 6, 0, -1, 2});
  const auto whole = runKernel(KernelId::SoftmaxXent, {logits, targets}, {HostTensor::f32({}), HostTensor::f32({1, 8})});
  const auto dwhole = runKernel(KernelId::SoftmaxXentGrad, {HostTensor::f32({}, {0.7f}), logits, targets, whole[1]},
                                {HostTensor::f32({1, 8, vocab})});
  const auto count = runKernel(KernelId::CountTargets, {targets}, {HostTensor::f32({})}, {vocab})[0];
  EXPECT_EQ(count.floats[0], 6.0f);
  double loss = 0.0;
  for (int64_t tile = 0; tile < 2; ++tile) {  // rows [4 tile, 4 tile + 4)
    auto rows = [&](const HostTensor& t, int64_t width) {
      const auto begin = t.floats.begin() + tile * 4 * width;
      return std::vector<float>(begin, begin + 4 * width);
    };
    auto logitsTile = HostTensor::f32({1, 4, vocab}, rows(logits, vocab));
    auto targetsTile = HostTensor::i32({1, 4}, std::vector<int32_t>(targets.ints.begin() + tile * 4,
                                                                     targets.ints.begin() + tile * 4 + 4));
    const auto share = runKernel(KernelId::XentTile, {logitsTile, targetsTile, count},
                                 {HostTensor::f32({}), HostTensor::f32({1, 4})});
    loss += share[0].floats[0];
    EXPECT_EQ(share[1].floats, rows(whole[1], 1)) << "tile " << tile << "'s lse";
    const auto dtile = runKernel(KernelId::XentTileGrad, {HostTensor::f32({}, {0.7f}), logitsTile, targetsTile,
                                                          share[1], count},
                                 {HostTensor::f32({1, 4, vocab})});
    EXPECT_EQ(dtile[0].floats, rows(dwhole[0], vocab)) << "tile " << tile << "'s dlogits";
  }
  expectClose({static_cast<float>(loss)}, whole[0].asDoubles(), kF32Tol, "the tiles' shares summed");
  // Nothing counted: a share of 0 and zero gradients.
  auto none = HostTensor::i32({1, 8}, std::vector<int32_t>(8, -1));
  const auto zero = runKernel(KernelId::CountTargets, {none}, {HostTensor::f32({})}, {vocab})[0];
  const auto share = runKernel(KernelId::XentTile, {logits, none, zero}, {HostTensor::f32({}), HostTensor::f32({1, 8})});
  EXPECT_EQ(share[0].floats[0], 0.0f);
  const auto dnone = runKernel(KernelId::XentTileGrad, {HostTensor::f32({}, {1.0f}), logits, none, share[1], zero},
                               {HostTensor::f32({1, 8, vocab})});
  EXPECT_EQ(dnone[0].floats, std::vector<float>(8 * vocab, 0.0f));
}

}  // namespace
}  // namespace mt::test
