// The kernels of precision and transfers against their definitions: bf16 rounding and widening,
// bf16 calls on the CPU (the precision column; storage around the f32 kernel), the transfer
// checksum, the split master (bf16 copy and residual, or bf16 alone), the gradient norm's sums
// and AdamW on every master layout (the other kernels: kernel_test.cc).
#include "tests/kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/adamw/adamw.h"
#include "kernels/checksum/checksum.h"
#include "kernels/elementwise/elementwise.h"

namespace mt::test {
namespace {

// Rounding to bf16, to nearest even (NaN stays NaN, overflow goes to Inf), and mt.widen gives
// back exactly the rounded value.
TEST_F(KernelTest, Bf16RoundingAndWidening) {
  const float inf = std::numeric_limits<float>::infinity();
  auto bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  struct Case {
    float in;
    uint16_t want;
  };
  const Case cases[] = {
      {1.0f, 0x3f80},
      {bits(0x3f808000), 0x3f80},    // a tie, even below: down
      {bits(0x3f818000), 0x3f82},    // a tie, odd below: up
      {bits(0x3f808001), 0x3f81},    // above the tie: up
      {bits(0x3f807fff), 0x3f80},    // below the tie: down
      {-2.5f, 0xc020},
      {bits(0x7f7fffff), 0x7f80},    // the largest float rounds to Inf
      {inf, 0x7f80},
      {-inf, 0xff80},
      {0.0f, 0x0000},
      {bits(0x00000001), 0x0000},    // the smallest subnormal rounds to zero
  };
  for (const Case& c : cases) {
    uint16_t got = 0;
    round_to_bf16(&c.in, &got, 1);
    EXPECT_EQ(got, c.want) << "round_to_bf16(" << c.in << ")";
  }
  uint16_t nan = 0;
  const float quiet = std::numeric_limits<float>::quiet_NaN(), signaling = bits(0x7f800001);
  for (float x : {quiet, signaling}) {
    round_to_bf16(&x, &nan, 1);
    EXPECT_TRUE((nan & 0x7f80) == 0x7f80 && (nan & 0x007f) != 0) << std::hex << nan << " is not a NaN";
  }
  // Widening is exact: every rounded value comes back bit for bit, and within bf16's half-ulp
  // (2^-8 relative: 8 significant bits) of what was rounded.
  std::vector<float> x = randomFloats(1000, rng, 3.0f);
  std::vector<uint16_t> rounded(x.size());
  round_to_bf16(x.data(), rounded.data(), static_cast<int64_t>(x.size()));
  const auto widened = runKernel(KernelId::Widen, {HostTensor::bf16({10, 100}, rounded)}, {HostTensor::f32({10, 100})});
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t w;
    std::memcpy(&w, &widened[0].floats[i], 4);
    ASSERT_EQ(w, static_cast<uint32_t>(rounded[i]) << 16) << i;
    EXPECT_LE(std::abs(widened[0].floats[i] - x[i]), std::abs(x[i]) * 0x1p-8f) << i;
  }
}

// mt.narrow rounds to nearest even, as round_to_bf16; widening it back is within half an ulp.
TEST_F(KernelTest, NarrowRoundsToNearestEven) {
  std::vector<float> x = randomFloats(1000, rng, 3.0f);
  x[0] = std::nanf("");
  std::vector<uint16_t> want(x.size());
  round_to_bf16(x.data(), want.data(), static_cast<int64_t>(x.size()));
  const auto out = runKernel(KernelId::Narrow, {HostTensor::f32({1000}, x)}, {HostTensor::bf16({1000}, {})});
  EXPECT_TRUE(out[0].halves == want);
  EXPECT_TRUE(std::isnan(out[0].values()[0]));
}

// The precision column decides which dtypes a call may have: activations all f32 or all bf16,
// statistics f32, a weight gradient's product f32 from bf16 operands; f32-only kernels refuse bf16.
TEST_F(KernelTest, Bf16CallsFollowThePrecisionColumn) {
  auto call = [](std::vector<HostTensor> in, std::vector<HostTensor> out, std::vector<int64_t> ints = {},
                 std::vector<float> floats = {}) {
    KernelArgs args;
    for (auto& t : in) args.in.push_back(t.view());
    for (auto& t : out) args.out.push_back(t.view());
    args.ints = ints, args.floats = floats;
    return args;
  };
  using H = HostTensor;
  const std::vector<int64_t> flags = {0, 0};
  EXPECT_EQ(checkKernelCall(KernelId::Matmul, call({H::bf16({2, 3}, {}), H::bf16({3, 4}, {})}, {H::bf16({2, 4}, {})}, flags)), "");
  EXPECT_EQ(checkKernelCall(KernelId::Matmul, call({H::bf16({2, 3}, {}), H::bf16({3, 4}, {})}, {H::f32({2, 4})}, flags)), "");
  EXPECT_NE(checkKernelCall(KernelId::Matmul, call({H::bf16({2, 3}, {}), H::f32({3, 4})}, {H::bf16({2, 4}, {})}, flags))
                .find("all f32 or all bf16"), std::string::npos);
  EXPECT_NE(checkKernelCall(KernelId::Matmul, call({H::bf16({2, 3}, {}), H::bf16({4, 5}, {})}, {H::f32({2, 4})}, flags))
                .find("contraction"), std::string::npos) << "the f32 view is still checked";
  EXPECT_EQ(checkKernelCall(KernelId::RmsNorm, call({H::bf16({2, 4}, {}), H::bf16({4}, {})},
                                                   {H::bf16({2, 4}, {}), H::f32({2})}, {}, {1e-5f})), "");
  EXPECT_NE(checkKernelCall(KernelId::RmsNorm, call({H::bf16({2, 4}, {}), H::bf16({4}, {})},
                                                   {H::bf16({2, 4}, {}), H::bf16({2}, {})}, {}, {1e-5f}))
                .find("output 1 must be f32"), std::string::npos);
  EXPECT_NE(checkKernelCall(KernelId::SoftmaxXentGrad,
                            call({H::bf16({}, {}), H::bf16({2, 5}, {}), H::i32({2}, {0, 1}), H::f32({2})},
                                 {H::bf16({2, 5}, {})}))
                .find("input 0 must be f32"), std::string::npos);
  EXPECT_NE(checkKernelCall(KernelId::Unary, call({H::bf16({4}, {})}, {H::bf16({4}, {})}, {0})).find("must be f32"),
            std::string::npos);
}

// A bf16 call on the CPU is bf16 storage around the f32 kernel: its bf16 outputs are exactly
// the f32 kernel's on the widened inputs, rounded to nearest even; its f32 outputs (statistics,
// a weight gradient) exactly the f32 kernel's; and all within bf16 rounding of the f32 call on
// the unrounded inputs.
TEST_F(KernelTest, Bf16CallsRunOnWidenedCopiesAndRoundTheirResults) {
  struct Case {
    KernelId id;
    std::vector<HostTensor> in;  // f32 (or i32) values
    std::vector<HostTensor> out;  // f32 shapes
    std::vector<bool> f32_out;
    std::vector<int64_t> ints;
    std::vector<float> floats;
  };
  const int64_t b = 2, t = 5, h = 2, d = 4;
  using H = HostTensor;
  auto r = [&](Shape shape) { return H::f32(shape, randomFloats(numelOf(shape), rng)); };
  std::vector<Case> cases = {
      {KernelId::Matmul, {r({3, 7, 16}), r({16, 9})}, {H::f32({3, 7, 9})}, {false}, {0, 0}, {}},
      {KernelId::Matmul, {r({21, 16}), r({21, 9})}, {H::f32({16, 9})}, {true}, {1, 0}, {}},
      {KernelId::RmsNorm, {r({6, 8}), r({8})}, {H::f32({6, 8}), H::f32({6})}, {false, true}, {}, {1e-5f}},
      {KernelId::Attention, {r({b, t, h * d}), r({b, t, h * d}), r({b, t, h * d})},
       {H::f32({b, t, h * d}), H::f32({b, h, t})}, {false, true}, {h, h}, {}},
      {KernelId::Swiglu, {r({4, 6}), r({4, 6})}, {H::f32({4, 6})}, {false}, {}, {}},
  };
  for (Case& c : cases) {
    const std::string name(kKernelTable[static_cast<size_t>(c.id)].op_name);
    const KernelPrecision& precision = kKernelTable[static_cast<size_t>(c.id)].precision;
    std::vector<H> in16, in32;  // the bf16 operands, and their exact f32 widenings
    for (size_t i = 0; i < c.in.size(); ++i) {
      const bool stat = precision.f32Input(static_cast<int>(i)) || c.in[i].dtype != DType::F32;
      in16.push_back(stat ? c.in[i] : H::bf16Of(c.in[i].shape, c.in[i].floats));
      in32.push_back(stat ? c.in[i] : H::f32(c.in[i].shape, in16.back().values()));
    }
    std::vector<H> out16;
    for (size_t i = 0; i < c.out.size(); ++i) out16.push_back(c.f32_out[i] ? c.out[i] : H::bf16(c.out[i].shape, {}));
    const auto got = runKernel(c.id, in16, out16, c.ints, c.floats);
    const auto exact = runKernel(c.id, in32, c.out, c.ints, c.floats);
    const auto unrounded = runKernel(c.id, c.in, c.out, c.ints, c.floats);
    for (size_t i = 0; i < c.out.size(); ++i) {
      std::vector<float> want = exact[i].floats;
      if (!c.f32_out[i])
        for (float& x : want) x = bf16Value(bf16Bits(x));
      EXPECT_TRUE(got[i].values() == want) << name << " output " << i << " is not the rounded f32 kernel's";
      expectClose(got[i].values(), unrounded[i].asDoubles(), 2e-2, name + " output " + std::to_string(i));
    }
  }
}

// The transfer checksum is the sum of its words' terms (any alignment, a short tail zero-padded)
// and changes with any one flipped bit.
TEST_F(KernelTest, TransferChecksumSeesEveryBit) {
  std::vector<unsigned char> data(1 + 8 * 37 + 5);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const unsigned char* range = data.data() + 1;  // unaligned
  const int64_t bytes = static_cast<int64_t>(data.size()) - 1;
  uint64_t want = 0;
  for (int64_t i = 0; i * 8 < bytes; ++i) {
    uint64_t word = 0;
    for (int64_t b = 0; b < 8 && i * 8 + b < bytes; ++b) word |= uint64_t{range[i * 8 + b]} << (8 * b);
    want += checksumTerm(word, static_cast<uint64_t>(i));
  }
  const uint64_t sum = checksum_cpu(range, bytes);
  EXPECT_EQ(sum, want);
  for (int64_t bit = 0; bit < 8 * bytes; bit += 7) {
    std::vector<unsigned char> flipped(range, range + bytes);
    flipped[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    ASSERT_NE(checksum_cpu(flipped.data(), bytes), sum) << "bit " << bit << " flipped goes unseen";
  }
  // Two words swapped (a copy written out of order) is seen too.
  std::vector<unsigned char> swapped(range, range + bytes);
  std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 8);
  EXPECT_NE(checksum_cpu(swapped.data(), bytes), sum);
}

// The split master (plan 1.7): every finite float and Inf comes back bit for bit from its bf16
// copy and residual; the copy is the float rounded to nearest (round_to_bf16's result except at
// an exact tie, where it is the neighbour away from zero); NaN stays NaN.
TEST_F(KernelTest, SplitMasterRestoresEveryFloatExactly) {
  auto check = [](uint32_t bits, int64_t& failures) {
    float x;
    std::memcpy(&x, &bits, 4);
    uint16_t hi, nearest_even;
    int16_t lo;
    splitMaster(x, hi, lo);
    round_to_bf16(&x, &nearest_even, 1);
    const float back = joinMaster(hi, lo);
    uint32_t back_bits;
    std::memcpy(&back_bits, &back, 4);
    const bool nan = std::isnan(x), tie = (bits & 0xffffu) == 0x8000u;
    const bool ok = nan ? std::isnan(back) && (hi & 0x7f80) == 0x7f80 && (hi & 0x7f) != 0
                        : back_bits == bits && (tie ? hi == ((bits + 0x8000u) >> 16) : hi == nearest_even);
    if (!ok && failures++ < 5)
      ADD_FAILURE() << std::hex << "0x" << bits << ": bf16 0x" << hi << " residual " << std::dec << lo
                    << " restore 0x" << std::hex << back_bits << " (nearest even 0x" << nearest_even << ")";
  };
  int64_t failures = 0;
  // Every bf16 value (sign, exponent, 7 mantissa bits) with the low halves at and around the
  // rounding boundaries, then random patterns.
  for (uint32_t high = 0; high <= 0xffffu; ++high)
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xfffeu, 0xffffu})
      check(high << 16 | low, failures);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 1000000; ++i) check(any(rng), failures);
  EXPECT_EQ(failures, 0);
}

// A master held as bf16 alone (plan 1.32, no residual): every bf16 value but NaN (isBf16; a master
// is never NaN) is written and read back bit for bit, Inf and -0 included; a value with low bits
// is not bf16.
TEST_F(KernelTest, Bf16OnlyMasterHoldsEveryBf16ValueWhole) {
  std::vector<float> values;
  for (uint32_t high = 0; high <= 0xffffu; ++high) {
    const uint32_t bits = high << 16;
    float x;
    std::memcpy(&x, &bits, 4);
    if (std::isnan(x)) continue;
    ASSERT_TRUE(isBf16(x)) << std::hex << bits;
    values.push_back(x);
  }
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<uint16_t> staging(n);
  const MasterWeights w{nullptr, staging.data(), nullptr};
  write_master(w, 0, n, values.data());
  std::vector<float> back(n);
  read_master(w, 0, n, back.data());
  EXPECT_EQ(std::memcmp(back.data(), values.data(), n * sizeof(float)), 0);
  std::vector<float> tail(5);
  read_master(w.from(n - 5), 0, 5, tail.data());
  EXPECT_EQ(std::memcmp(tail.data(), values.data() + n - 5, 5 * sizeof(float)), 0);
  for (float off : {1.0f + 1.0f / 1024, 0.1f, 3.14159f}) EXPECT_FALSE(isBf16(off)) << off;
}

// A GRAD_NORM task's many gradients in one pass: each array's chunk sums are the ones it has
// alone, bit for bit, in order (arrays of no element, under a chunk, a chunk and a tail), and a
// NaN stays in its own array's chunk.
TEST_F(KernelTest, SumSquaresOfManyArraysGivesEachArraysOwnChunkSums) {
  constexpr int64_t kChunk = 1 << 16;
  const std::vector<int64_t> sizes = {57344, 0, 1, 2 * kChunk + 17, kChunk, 303104};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> values;
  std::vector<const float*> arrays;
  int64_t total = 0;
  for (int64_t n : sizes) {
    values.emplace_back(static_cast<size_t>(n));
    for (float& x : values.back()) x = normal(rng);
    total += adamw_chunks(n);
  }
  values[3][kChunk + 9] = std::nanf("");
  for (const auto& v : values) arrays.push_back(v.data());
  std::vector<double> many(static_cast<size_t>(total), -1.0);
  sum_squares_chunks_many_cpu(arrays, sizes, many.data());
  int64_t at = 0;
  for (size_t a = 0; a < sizes.size(); ++a) {
    const int64_t chunks = adamw_chunks(sizes[a]);
    std::vector<double> alone(static_cast<size_t>(chunks));
    sum_squares_chunks_cpu(arrays[a], sizes[a], alone.data());
    for (int64_t c = 0; c < chunks; ++c) {
      const double got = many[static_cast<size_t>(at + c)], want = alone[static_cast<size_t>(c)];
      EXPECT_TRUE(std::memcmp(&got, &want, sizeof got) == 0)
          << "array " << a << " chunk " << c << ": " << got << " in one pass, " << want << " alone";
      EXPECT_EQ(std::isnan(got), a == 3 && c == 1) << "array " << a << " chunk " << c;
    }
    if (a != 3) EXPECT_EQ(sum_of_chunks(many.data() + at, chunks), sum_squares_cpu(arrays[a], sizes[a]));
    at += chunks;
  }
}

// AdamW's result does not depend on where the master lives: plain fp32, fp32 with a bf16 copy
// (each updated chunk rounded into it), or split (restored, updated, split again) give the
// same weights, moments and bf16 copy bit for bit. The on-arrival update's one pass gives the
// same norm, bit for bit, as sum_squares_cpu and the same state as adamw_cpu; a chunk (65536
// elements) holding NaN is left untouched, its bf16 copy and residual with it.
TEST_F(KernelTest, AdamwIsTheSameOnEveryMasterLayoutAndSkipsANonFiniteChunk) {
  constexpr int64_t kChunk = 1 << 16, n = 3 * kChunk + 123;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> param(n), grad(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i)
    param[i] = normal(rng), grad[i] = normal(rng), m[i] = 0.1f * normal(rng), v[i] = std::abs(normal(rng));
  AdamWParams p;
  p.lr = 1e-3, p.weight_decay = 0.1, p.step = 3;
  struct Layout {
    std::vector<float> f32, m, v;
    std::vector<uint16_t> bf16;
    std::vector<int16_t> residual;
    MasterWeights master() {
      return {f32.empty() ? nullptr : f32.data(), bf16.empty() ? nullptr : bf16.data(),
              residual.empty() ? nullptr : residual.data()};
    }
    std::vector<float> weights() {
      std::vector<float> w(m.size());
      read_master(master(), 0, static_cast<int64_t>(w.size()), w.data());
      return w;
    }
  };
  for (const bool with_nan : {false, true}) {
    std::vector<float> g = grad;
    if (with_nan) g[kChunk + 5] = std::nanf("");
    Layout plain{param, m, v}, staged{param, m, v, std::vector<uint16_t>(n)},
        split{{}, m, v, std::vector<uint16_t>(n), std::vector<int16_t>(n)};
    write_master(staged.master(), 0, n, param.data());
    write_master(split.master(), 0, n, param.data());
    const std::vector<uint16_t> bf16_before = split.bf16;
    const std::vector<int16_t> residual_before = split.residual;
    const double fused = adamw_with_norm_cpu(split.master(), g.data(), split.m.data(), split.v.data(), n, p);
    adamw_cpu(plain.master(), g.data(), plain.m.data(), plain.v.data(), n, p);
    adamw_cpu(staged.master(), g.data(), staged.m.data(), staged.v.data(), n, p);
    EXPECT_EQ(std::isfinite(fused), !with_nan);
    if (with_nan) EXPECT_TRUE(std::isnan(fused));
    else EXPECT_EQ(fused, sum_squares_cpu(g.data(), n));  // bit for bit
    EXPECT_TRUE(staged.bf16 == split.bf16 || with_nan) << "the bf16 copies of plain and split masters differ";
    const std::vector<float> w_plain = plain.weights(), w_staged = staged.weights(), w_split = split.weights();
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool skipped = with_nan && i / kChunk == 1;  // only the fused update skips the chunk
      const bool same = skipped ? w_split[i] == param[i] && split.m[i] == m[i] && split.v[i] == v[i] &&
                                      split.bf16[i] == bf16_before[i] && split.residual[i] == residual_before[i]
                                : std::memcmp(&w_split[i], &w_plain[i], 4) == 0 &&
                                      std::memcmp(&w_staged[i], &w_plain[i], 4) == 0 && split.m[i] == plain.m[i] &&
                                      split.v[i] == plain.v[i] && staged.m[i] == plain.m[i] &&
                                      staged.v[i] == plain.v[i] && staged.bf16[i] == split.bf16[i];
      if (!same && mismatches++ < 5)
        ADD_FAILURE() << (with_nan ? "with NaN: " : "") << "element " << i << (skipped ? " (skipped chunk)" : "")
                      << ": split " << w_split[i] << ", plain " << w_plain[i] << ", with bf16 copy " << w_staged[i];
    }
    EXPECT_EQ(mismatches, 0);
  }
}

}  // namespace
}  // namespace mt::test
