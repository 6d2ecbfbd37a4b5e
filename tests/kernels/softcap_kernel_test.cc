// Gemma 2's softcapping: attention whose scaled scores are capped at c * tanh(s / c) (forward,
// backward, over a key/value cache) and mt.softcap on the logits, each CPU kernel against the
// double-precision reference and the backward kernels against its central finite differences.
// The caps are small beside the random scores (|s| up to ~3), so that a kernel that skipped the
// cap, or its slope in the backward, would be far off.
#include "tests/kernels/reference.h"

#include <cmath>
#include <limits>

#include "kernels/attention/attention.h"

namespace mt::test {
namespace {

constexpr float kCap = 0.75f;

// T = 100 spans two query blocks of the CPU kernel; 4 query heads share 2 key/value heads; with
// no window and with one of 37 (the blocks' keys start inside the sequence) and sinks, the
// gradients with the latter.
TEST_F(KernelTest, SoftcappedAttentionForwardAndGradient) {
  const int64_t b = 1, t = 100, h = 4, hk = 2, d = 4;
  auto q = HostTensor::f32({b, t, h * d}, randomFloats(b * t * h * d, rng, 2.0f));
  auto k = HostTensor::f32({b, t, hk * d}, randomFloats(b * t * hk * d, rng, 2.0f));
  auto v = HostTensor::f32({b, t, hk * d}, randomFloats(b * t * hk * d, rng));
  const auto sinks = HostTensor::f32({h}, {0.5f, -1.0f, 2.0f, 0.0f});
  for (const int64_t window : {int64_t{0}, int64_t{37}}) {
    const bool with_sinks = window > 0;
    const std::string what = "softcap " + std::to_string(kCap) + ", window " + std::to_string(window);
    const Doubles sinks_or_none = with_sinks ? sinks.asDoubles() : Doubles{};
    std::vector<HostTensor> in = {q, k, v};
    if (with_sinks) in.push_back(sinks);
    auto out = runKernel(with_sinks ? KernelId::AttentionSinks : KernelId::Attention, in,
                         {HostTensor::f32({b, t, h * d}), HostTensor::f32({b, h, t})}, {h, hk, window}, {kCap});
    const Doubles want =
        ref::attention(q.asDoubles(), k.asDoubles(), v.asDoubles(), b, t, h, hk, d, window, sinks_or_none, kCap);
    expectClose(out[0].floats, slice(want, 0, b * t * h * d), kF32Tol, "attention out, " + what);
    expectClose(out[1].floats, slice(want, b * t * h * d, b * h * t), kF32Tol, "attention lse, " + what);
    // Without the cap the outputs are elsewhere: the test can tell.
    const Doubles uncapped = ref::attention(q.asDoubles(), k.asDoubles(), v.asDoubles(), b, t, h, hk, d, window,
                                            sinks_or_none);
    double apart = 0;
    for (int64_t i = 0; i < b * t * h * d; ++i) apart = std::max(apart, std::abs(uncapped[i] - want[i]));
    EXPECT_GT(apart, 0.1) << what;
    if (window == 0) continue;  // the gradients once (finite differences are slow)
    auto dout = HostTensor::f32({b, t, h * d}, randomFloats(b * t * h * d, rng));
    auto grads = runKernel(KernelId::AttentionGrad, {dout, q, k, v, out[0], out[1]},
                           {HostTensor::f32({b, t, h * d}), HostTensor::f32({b, t, hk * d}), HostTensor::f32({b, t, hk * d})},
                           {h, hk, window}, {kCap});
    auto o_of = [&](const Doubles& qv, const Doubles& kv, const Doubles& vv) {
      return slice(ref::attention(qv, kv, vv, b, t, h, hk, d, window, sinks_or_none, kCap), 0, b * t * h * d);
    };
    const Doubles w = dout.asDoubles(), qd = q.asDoubles(), kd = k.asDoubles(), vd = v.asDoubles();
    expectClose(grads[0].floats, finiteDifferences([&](const Doubles& x) { return o_of(x, kd, vd); }, qd, w), kGradTol,
                "dq, " + what);
    expectClose(grads[1].floats, finiteDifferences([&](const Doubles& x) { return o_of(qd, x, vd); }, kd, w), kGradTol,
                "dk, " + what);
    expectClose(grads[2].floats, finiteDifferences([&](const Doubles& x) { return o_of(qd, kd, x); }, vd, w), kGradTol,
                "dv, " + what);
  }
}

// A decode step's attention over the cache with the cap: the capped causal rows.
TEST_F(KernelTest, SoftcappedCachedAttentionReproducesTheCappedRows) {
  const int64_t b = 2, t = 20, h = 4, hk = 2, d = 8, cache_rows = 24, wq = h * d, wkv = hk * d, p0 = 17;
  auto q = HostTensor::f32({b, t, wq}, randomFloats(b * t * wq, rng, 2.0f));
  auto k = HostTensor::f32({b, t, wkv}, randomFloats(b * t * wkv, rng, 2.0f));
  auto v = HostTensor::f32({b, t, wkv}, randomFloats(b * t * wkv, rng));
  const Doubles whole =
      ref::attention(q.asDoubles(), k.asDoubles(), v.asDoubles(), b, t, h, hk, d, 5, {}, kCap);
  std::vector<float> k_cache(b * cache_rows * wkv, std::numeric_limits<float>::quiet_NaN()), v_cache = k_cache;
  std::vector<float> q_new, k_new, v_new;
  Doubles want;
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t j = 0; j < p0 * wkv; ++j) {
      k_cache[r * cache_rows * wkv + j] = k.floats[r * t * wkv + j];
      v_cache[r * cache_rows * wkv + j] = v.floats[r * t * wkv + j];
    }
    q_new.insert(q_new.end(), q.floats.begin() + (r * t + p0) * wq, q.floats.begin() + (r * t + p0 + 1) * wq);
    k_new.insert(k_new.end(), k.floats.begin() + (r * t + p0) * wkv, k.floats.begin() + (r * t + p0 + 1) * wkv);
    v_new.insert(v_new.end(), v.floats.begin() + (r * t + p0) * wkv, v.floats.begin() + (r * t + p0 + 1) * wkv);
    want.insert(want.end(), whole.begin() + (r * t + p0) * wq, whole.begin() + (r * t + p0 + 1) * wq);
  }
  const auto got = runKernel(KernelId::CachedAttention,
                             {HostTensor::f32({b, 1, wq}, q_new), HostTensor::f32({b, 1, wkv}, k_new),
                              HostTensor::f32({b, 1, wkv}, v_new), HostTensor::f32({b, cache_rows, wkv}, k_cache),
                              HostTensor::f32({b, cache_rows, wkv}, v_cache),
                              HostTensor::i32({b, 1}, {static_cast<int32_t>(p0), static_cast<int32_t>(p0)})},
                             {HostTensor::f32({b, 1, wq})}, {h, hk, 5}, {kCap})[0]
                       .floats;
  expectClose(got, want, kF32Tol, "cached_attention with a softcap");
}

// mt.softcap and its gradient from the capped output; large inputs saturate at the cap.
TEST_F(KernelTest, SoftcapForwardAndGradient) {
  const int64_t n = 300;
  const float cap = 1.5f;
  auto x = HostTensor::f32({3, n / 3}, randomFloats(n, rng, 4.0f));
  x.floats[0] = 0.0f, x.floats[1] = 1e-4f, x.floats[2] = -80.0f, x.floats[3] = 80.0f;
  auto f = [&](const Doubles& v) {
    Doubles y(v.size());
    for (size_t i = 0; i < v.size(); ++i) y[i] = cap * std::tanh(v[i] / cap);
    return y;
  };
  const auto y = runKernel(KernelId::Softcap, {x}, {HostTensor::f32({3, n / 3})}, {}, {cap})[0];
  expectClose(y.floats, f(x.asDoubles()), kF32Tol, "softcap");
  EXPECT_EQ(y.floats[2], -cap);
  EXPECT_EQ(y.floats[3], cap);
  auto dy = HostTensor::f32({3, n / 3}, randomFloats(n, rng));
  expectClose(runKernel(KernelId::SoftcapGrad, {dy, y}, {HostTensor::f32({3, n / 3})}, {}, {cap})[0].floats,
              finiteDifferences(f, x.asDoubles(), dy.asDoubles()), kGradTol, "softcap grad");
}

// The checks name a cap that is not positive and finite, and a second float.
TEST_F(KernelTest, SoftcapChecksNameABadCap) {
  KernelArgs args;
  const Tensor q{nullptr, {1, 4, 8}, DType::F32}, kv{nullptr, {1, 4, 4}, DType::F32};
  const Tensor lse{nullptr, {1, 2, 4}, DType::F32};
  args.in = {q, kv, kv};
  args.out = {q, lse};
  args.ints = {2, 1};
  for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::nanf("")}) {
    args.floats = {bad};
    EXPECT_NE(attention_check(args).find("must be positive and finite"), std::string::npos) << bad;
    KernelArgs cap;
    cap.in = {q};
    cap.out = {q};
    cap.floats = {bad};
    EXPECT_NE(checkKernelCall(KernelId::Softcap, cap).find("the cap must be positive and finite"), std::string::npos)
        << bad;
  }
  args.floats = {1.0f, 2.0f};
  EXPECT_NE(attention_check(args).find("takes no float attribute or one (softcap)"), std::string::npos);
  args.floats = {50.0f};
  EXPECT_EQ(attention_check(args), "");
}

}  // namespace
}  // namespace mt::test
