// Every CPU kernel against a double-precision reference on random inputs, and every backward
// kernel against central finite differences of that reference (rope, attention and the losses in
// sequence_kernel_test.cc; bf16, the split master, AdamW and the checksum in
// precision_kernel_test.cc).
#include "tests/kernels/reference.h"

#include <algorithm>
#include <cmath>

#include "kernels/broadcast.h"
#include "kernels/embedding/embedding.h"

namespace mt::test {
namespace {

TEST_F(KernelTest, MatmulSharedAndBatchedWithTransposes) {
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{2, 3, 5, 4}, {4, 6}, false, false}, {{3, 7, 5}, {6, 5}, false, true},
      {{2, 4, 5}, {2, 4, 6}, true, false},  {{2, 5, 4}, {2, 6, 4}, false, true},
      {{9, 3}, {9, 5}, true, false},        {{1, 1}, {1, 1}, false, false},
      // One row (a decode step): the matrix-vector path, both layouts of the weight.
      {{1, 1, 37}, {23, 37}, false, true},   {{1, 1, 37}, {37, 23}, false, false},
  };
  for (const auto& c : cases) {
    const int64_t m = c.ta ? c.a.back() : c.a[c.a.size() - 2], k = c.ta ? c.a[c.a.size() - 2] : c.a.back();
    const int64_t n = c.tb ? c.b[c.b.size() - 2] : c.b.back();
    const int64_t batch = numelOf(c.a) / (m * k);
    Shape out(c.a.begin(), c.a.end() - 2);
    out.push_back(m);
    out.push_back(n);
    auto a = HostTensor::f32(c.a, randomFloats(numelOf(c.a), rng));
    auto b = HostTensor::f32(c.b, randomFloats(numelOf(c.b), rng));
    auto got = runKernel(KernelId::Matmul, {a, b}, {HostTensor::f32(out)}, {c.ta, c.tb});
    expectClose(got[0].floats,
                ref::matmul(a.asDoubles(), b.asDoubles(), batch, m, k, n, c.ta, c.tb, c.b.size() == 2),
                kF32Tol, "matmul " + shapeString(c.a) + " x " + shapeString(c.b));
  }
}

TEST_F(KernelTest, MatmulCheckRejectsMismatchedContraction) {
  auto a = HostTensor::f32({2, 3, 4}), b = HostTensor::f32({5, 6}), out = HostTensor::f32({2, 3, 6});
  KernelArgs args{{a.view(), b.view()}, {out.view()}, {0, 0}, {}};
  EXPECT_NE(checkKernelCall(KernelId::Matmul, args).find("contraction"), std::string::npos);
}

TEST_F(KernelTest, BroadcastAddMulScaleSumToTranspose) {
  auto a = HostTensor::f32({3, 4, 5}, randomFloats(60, rng));
  auto bias = HostTensor::f32({5}, randomFloats(5, rng));
  Doubles add(60), mul(60), scaled(60), summed(5, 0.0), transposed(60);
  for (int i = 0; i < 60; ++i) {
    add[i] = double(a.floats[i]) + bias.floats[i % 5];
    mul[i] = double(a.floats[i]) * bias.floats[i % 5];
    scaled[i] = double(a.floats[i]) * 0.25;
    summed[i % 5] += a.floats[i];
  }
  for (int x = 0; x < 3; ++x)  // perm (2, 0, 1): out[z][x][y] = a[x][y][z]
    for (int y = 0; y < 4; ++y)
      for (int z = 0; z < 5; ++z) transposed[(z * 3 + x) * 4 + y] = a.floats[(x * 4 + y) * 5 + z];
  expectClose(runKernel(KernelId::Add, {a, bias}, {HostTensor::f32({3, 4, 5})})[0].floats, add, kF32Tol, "add");
  expectClose(runKernel(KernelId::Mul, {a, bias}, {HostTensor::f32({3, 4, 5})})[0].floats, mul, kF32Tol, "mul");
  expectClose(runKernel(KernelId::Scale, {a}, {HostTensor::f32({3, 4, 5})}, {}, {0.25f})[0].floats, scaled,
              kF32Tol, "scale");
  expectClose(runKernel(KernelId::SumTo, {a}, {HostTensor::f32({5})})[0].floats, summed, kF32Tol, "sum_to");
  expectClose(runKernel(KernelId::Transpose, {a}, {HostTensor::f32({5, 3, 4})}, {2, 0, 1})[0].floats,
              transposed, 0.0, "transpose");
  expectClose(runKernel(KernelId::Fill, {}, {HostTensor::f32({7})}, {}, {1.5f})[0].floats, Doubles(7, 1.5),
              0.0, "fill");
}

// Which of sum_to_cuda's paths a shape takes (the twin tests run only on a GPU; on the generic
// path DoRA's two sums were 68 % of its step on an H200): keptLeadingRows gives the rows of a
// result that keeps the input's leading dimensions (row sums, where a row fills a warp), isSuffix
// the column sums over leading rows (an f32 result).
TEST_F(KernelTest, SumToPathsFollowTheShapes) {
  EXPECT_EQ(keptLeadingRows({18944, 1}, {18944, 3584}), 18944);  // DoRA's norm of gate_proj
  EXPECT_EQ(keptLeadingRows({4, 33, 1}, {4, 33, 70}), 4 * 33);
  EXPECT_EQ(keptLeadingRows({4, 1, 1}, {4, 33, 70}), 4);
  EXPECT_EQ(keptLeadingRows({1, 1}, {5, 7}), 1);                  // everything into one
  EXPECT_EQ(keptLeadingRows({4, 1, 70}, {4, 33, 70}), -1);        // a middle dimension: generic
  EXPECT_EQ(keptLeadingRows({3584}, {8, 4096, 3584}), -1);       // the magnitude's token sum...
  EXPECT_TRUE(isSuffix({3584}, {8, 4096, 3584}));                 // ...is column sums
}

TEST_F(KernelTest, EmbeddingGatherScatterAndPositions) {
  const int64_t vocab = 11, width = 6;
  auto ids = HostTensor::i32({3, 4}, randomInts(12, vocab, rng));
  ids.ints[5] = ids.ints[2];  // a repeated id accumulates in the gradient
  auto table = HostTensor::f32({vocab, width}, randomFloats(vocab * width, rng));
  auto dout = HostTensor::f32({3, 4, width}, randomFloats(12 * width, rng));
  Doubles gathered(12 * width), scattered(vocab * width, 0.0);
  for (int i = 0; i < 12; ++i)
    for (int c = 0; c < width; ++c) {
      gathered[i * width + c] = table.floats[ids.ints[i] * width + c];
      scattered[ids.ints[i] * width + c] += dout.floats[i * width + c];
    }
  expectClose(runKernel(KernelId::Embedding, {ids, table}, {HostTensor::f32({3, 4, width})})[0].floats,
              gathered, 0.0, "embedding");
  expectClose(runKernel(KernelId::EmbeddingGrad, {ids, dout}, {HostTensor::f32({vocab, width})})[0].floats,
              scattered, kF32Tol, "embedding_grad");
  auto pos = runKernel(KernelId::Positions, {}, {HostTensor::i32({2, 5}, std::vector<int32_t>(10))})[0];
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pos.ints[i], i % 5);
}

// The table in chunks of rows [0, 4), [4, 8), [8, 11): the chained lookups give the whole
// table's rows exactly, each chunk's gradient its rows of the whole gradient.
TEST_F(KernelTest, EmbeddingChunksMatchTheWholeTable) {
  const int64_t vocab = 11, width = 6;
  const int64_t firsts[] = {0, 4, 8, vocab};
  auto ids = HostTensor::i32({3, 4}, randomInts(12, vocab, rng));
  ids.ints[5] = ids.ints[2];
  auto table = HostTensor::f32({vocab, width}, randomFloats(vocab * width, rng));
  auto dout = HostTensor::f32({3, 4, width}, randomFloats(12 * width, rng));
  const auto whole = runKernel(KernelId::Embedding, {ids, table}, {HostTensor::f32({3, 4, width})})[0];
  const auto dwhole = runKernel(KernelId::EmbeddingGrad, {ids, dout}, {HostTensor::f32({vocab, width})})[0];
  auto rowsOf = [&](const HostTensor& t, int64_t first, int64_t rows) {
    return HostTensor::f32({rows, width}, std::vector<float>(t.floats.begin() + first * width,
                                                             t.floats.begin() + (first + rows) * width));
  };
  auto out = HostTensor::f32({3, 4, width}, std::vector<float>(12 * width, 0.0f));
  for (int k = 0; k < 3; ++k) {
    const int64_t first = firsts[k], rows = firsts[k + 1] - first;
    out = runKernel(KernelId::EmbeddingChunk, {ids, rowsOf(table, first, rows), out},
                    {HostTensor::f32({3, 4, width})}, {first})[0];
    const auto dchunk =
        runKernel(KernelId::EmbeddingGradChunk, {ids, dout}, {HostTensor::f32({rows, width})}, {first})[0];
    expectClose(dchunk.floats, rowsOf(dwhole, first, rows).asDoubles(), 0.0, "embedding_grad_chunk");
  }
  expectClose(out.floats, whole.asDoubles(), 0.0, "embedding_chunk");
}

// A padding id (PyTorch's padding_idx, plan 1.36): its tokens add nothing to the table gradient,
// in mt.embedding_grad, in the chunk that holds its row and in the host task; every other row is
// the plain scatter's, bit for bit. Ids out of range and several int attributes are refused.
TEST_F(KernelTest, EmbeddingGradLeavesThePaddingRowOut) {
  const int64_t vocab = 11, width = 6, padding = 7;
  auto ids = HostTensor::i32({3, 4}, randomInts(12, vocab, rng));
  ids.ints[1] = ids.ints[6] = ids.ints[9] = static_cast<int32_t>(padding);
  auto dout = HostTensor::f32({3, 4, width}, randomFloats(12 * width, rng));
  const auto plain = runKernel(KernelId::EmbeddingGrad, {ids, dout}, {HostTensor::f32({vocab, width})})[0];
  const auto padded = runKernel(KernelId::EmbeddingGrad, {ids, dout}, {HostTensor::f32({vocab, width})}, {padding})[0];
  Doubles want = plain.asDoubles();
  ASSERT_NE(want[padding * width], 0.0) << "the test's padding row must have tokens";
  std::fill(want.begin() + padding * width, want.begin() + (padding + 1) * width, 0.0);
  expectClose(padded.floats, want, 0.0, "embedding_grad with a padding id");
  // Rows [4, 8) as a chunk, the id one of the whole table's.
  const auto chunk =
      runKernel(KernelId::EmbeddingGradChunk, {ids, dout}, {HostTensor::f32({4, width})}, {4, padding})[0];
  expectClose(chunk.floats, Doubles(want.begin() + 4 * width, want.begin() + 8 * width), 0.0,
              "embedding_grad_chunk with a padding id");
  // The host task, onto what landed before (a tied head's gradient).
  auto landed = HostTensor::f32({vocab, width}, randomFloats(vocab * width, rng));
  Doubles summed = landed.asDoubles();
  for (size_t i = 0; i < summed.size(); ++i) summed[i] += want[i];
  embedding_grad_host(ids.view(), dout.view(), landed.view(), /*accumulate=*/true, padding);
  expectClose(landed.floats, summed, kF32Tol, "embedding_grad_host with a padding id");

  auto call = [&](std::vector<int64_t> ints, int64_t rows) {
    KernelArgs args;
    auto out = HostTensor::f32({rows, width});
    args.in = {ids.view(), dout.view()};
    args.out = {out.view()};
    args.ints = ints;
    return checkKernelCall(rows == vocab ? KernelId::EmbeddingGrad : KernelId::EmbeddingGradChunk, args);
  };
  EXPECT_NE(call({vocab}, vocab).find("padding_id 11 is not a row"), std::string::npos);
  EXPECT_NE(call({-1}, vocab).find("padding_id -1 is not a row"), std::string::npos);
  EXPECT_NE(call({1, 2}, vocab).find("takes int[(padding_id)]"), std::string::npos);
  EXPECT_NE(call({4, -3}, 4).find("padding_id must not be negative"), std::string::npos);
  EXPECT_NE(call({4, 1, 2}, 4).find("takes int[first(, padding_id)]"), std::string::npos);
  EXPECT_EQ(call({4, 9}, 4), "");  // another chunk's row: this chunk's gradient is the plain one
}

TEST_F(KernelTest, LayerNormForwardAndGradient) {
  const int64_t rows = 6, c = 10;
  const double eps = 1e-5;
  auto x = HostTensor::f32({2, 3, c}, randomFloats(rows * c, rng, 2.0f));
  auto g = HostTensor::f32({c}, randomFloats(c, rng));
  auto b = HostTensor::f32({c}, randomFloats(c, rng));
  auto out = runKernel(KernelId::LayerNorm, {x, g, b},
                       {HostTensor::f32({2, 3, c}), HostTensor::f32({2, 3}), HostTensor::f32({2, 3})}, {},
                       {float(eps)});
  const Doubles want = ref::layernorm(x.asDoubles(), g.asDoubles(), b.asDoubles(), c, eps);
  expectClose(out[0].floats, slice(want, 0, rows * c), kF32Tol, "layernorm y");
  expectClose(out[1].floats, slice(want, rows * c, rows), kF32Tol, "layernorm mean");
  expectClose(out[2].floats, slice(want, rows * c + rows, rows), kF32Tol, "layernorm rstd");

  auto dy = HostTensor::f32({2, 3, c}, randomFloats(rows * c, rng));
  auto grads = runKernel(KernelId::LayerNormGrad, {dy, x, g, out[1], out[2]},
                         {HostTensor::f32({2, 3, c}), HostTensor::f32({c}), HostTensor::f32({c})});
  auto y_of = [&](const Doubles& xv, const Doubles& gv, const Doubles& bv) {
    return slice(ref::layernorm(xv, gv, bv, c, eps), 0, rows * c);
  };
  const Doubles w = dy.asDoubles();
  expectClose(grads[0].floats,
              finiteDifferences([&](const Doubles& v) { return y_of(v, g.asDoubles(), b.asDoubles()); }, x.asDoubles(), w),
              kGradTol, "layernorm dx");
  expectClose(grads[1].floats,
              finiteDifferences([&](const Doubles& v) { return y_of(x.asDoubles(), v, b.asDoubles()); }, g.asDoubles(), w),
              kGradTol, "layernorm dgamma");
  expectClose(grads[2].floats,
              finiteDifferences([&](const Doubles& v) { return y_of(x.asDoubles(), g.asDoubles(), v); }, b.asDoubles(), w),
              kGradTol, "layernorm dbeta");
}

TEST_F(KernelTest, RmsNormForwardAndGradient) {
  const int64_t rows = 5, c = 12;
  const double eps = 1e-6;
  auto x = HostTensor::f32({rows, c}, randomFloats(rows * c, rng, 2.0f));
  auto g = HostTensor::f32({c}, randomFloats(c, rng));
  auto out = runKernel(KernelId::RmsNorm, {x, g}, {HostTensor::f32({rows, c}), HostTensor::f32({rows})}, {},
                       {float(eps)});
  const Doubles want = ref::rmsnorm(x.asDoubles(), g.asDoubles(), c, eps);
  expectClose(out[0].floats, slice(want, 0, rows * c), kF32Tol, "rmsnorm y");
  expectClose(out[1].floats, slice(want, rows * c, rows), kF32Tol, "rmsnorm rstd");
  auto dy = HostTensor::f32({rows, c}, randomFloats(rows * c, rng));
  auto grads = runKernel(KernelId::RmsNormGrad, {dy, x, g, out[1]}, {HostTensor::f32({rows, c}), HostTensor::f32({c})});
  auto y_of = [&](const Doubles& xv, const Doubles& gv) { return slice(ref::rmsnorm(xv, gv, c, eps), 0, rows * c); };
  expectClose(grads[0].floats, finiteDifferences([&](const Doubles& v) { return y_of(v, g.asDoubles()); }, x.asDoubles(), dy.asDoubles()),
              kGradTol, "rmsnorm dx");
  expectClose(grads[1].floats, finiteDifferences([&](const Doubles& v) { return y_of(x.asDoubles(), v); }, g.asDoubles(), dy.asDoubles()),
              kGradTol, "rmsnorm dgamma");
}

// Gemma's norms (plan 1.33): y = x / rms(x) * (1 + w), the offset a float after eps (the gradient's
// first); the gradient is w's, through the offset.
TEST_F(KernelTest, RmsNormWithAnOffsetScalesByOffsetPlusGamma) {
  const int64_t rows = 5, c = 12;
  const double eps = 1e-6, offset = 1.0;
  auto x = HostTensor::f32({rows, c}, randomFloats(rows * c, rng, 2.0f));
  auto w = HostTensor::f32({c}, randomFloats(c, rng, 0.1f));
  auto shifted = [&](Doubles v) {
    for (double& e : v) e += offset;
    return v;
  };
  auto out = runKernel(KernelId::RmsNorm, {x, w}, {HostTensor::f32({rows, c}), HostTensor::f32({rows})}, {},
                       {float(eps), float(offset)});
  const Doubles want = ref::rmsnorm(x.asDoubles(), shifted(w.asDoubles()), c, eps);
  expectClose(out[0].floats, slice(want, 0, rows * c), kF32Tol, "rmsnorm (offset) y");
  auto dy = HostTensor::f32({rows, c}, randomFloats(rows * c, rng));
  auto grads = runKernel(KernelId::RmsNormGrad, {dy, x, w, out[1]}, {HostTensor::f32({rows, c}), HostTensor::f32({c})},
                         {}, {float(offset)});
  auto y_of = [&](const Doubles& xv, const Doubles& wv) {
    return slice(ref::rmsnorm(xv, shifted(wv), c, eps), 0, rows * c);
  };
  expectClose(grads[0].floats, finiteDifferences([&](const Doubles& v) { return y_of(v, w.asDoubles()); }, x.asDoubles(), dy.asDoubles()),
              kGradTol, "rmsnorm (offset) dx");
  expectClose(grads[1].floats, finiteDifferences([&](const Doubles& v) { return y_of(x.asDoubles(), v); }, w.asDoubles(), dy.asDoubles()),
              kGradTol, "rmsnorm (offset) dw");
}

TEST_F(KernelTest, ActivationsForwardAndGradient) {
  const int64_t n = 300;
  auto x = HostTensor::f32({n}, randomFloats(n, rng, 3.0f));
  x.floats[0] = 0.0f;  // GELU near zero, where tanh's cancellation would show
  x.floats[1] = 1e-4f;
  x.floats[2] = -12.0f;
  auto dy = HostTensor::f32({n}, randomFloats(n, rng));
  auto pointwise = [&](auto f) {
    return [f](const Doubles& v) {
      Doubles y(v.size());
      for (size_t i = 0; i < v.size(); ++i) y[i] = f(v[i]);
      return y;
    };
  };
  for (int tanh_approx : {0, 1}) {
    auto f = pointwise([tanh_approx](double v) { return ref::gelu(v, tanh_approx); });
    const std::string name = tanh_approx ? "gelu(tanh)" : "gelu(erf)";
    expectClose(runKernel(KernelId::Gelu, {x}, {HostTensor::f32({n})}, {tanh_approx})[0].floats, f(x.asDoubles()),
                kF32Tol, name);
    expectClose(runKernel(KernelId::GeluGrad, {dy, x}, {HostTensor::f32({n})}, {tanh_approx})[0].floats,
                finiteDifferences(f, x.asDoubles(), dy.asDoubles()), kGradTol, name + " grad");
  }
  auto silu = pointwise([](double v) { return ref::silu(v); });
  expectClose(runKernel(KernelId::Silu, {x}, {HostTensor::f32({n})})[0].floats, silu(x.asDoubles()), kF32Tol, "silu");
  expectClose(runKernel(KernelId::SiluGrad, {dy, x}, {HostTensor::f32({n})})[0].floats,
              finiteDifferences(silu, x.asDoubles(), dy.asDoubles()), kGradTol, "silu grad");

  auto up = HostTensor::f32({n}, randomFloats(n, rng));
  auto swiglu = [](const Doubles& gate, const Doubles& u) {
    Doubles y(gate.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = ref::silu(gate[i]) * u[i];
    return y;
  };
  expectClose(runKernel(KernelId::Swiglu, {x, up}, {HostTensor::f32({n})})[0].floats,
              swiglu(x.asDoubles(), up.asDoubles()), kF32Tol, "swiglu");
  auto grads = runKernel(KernelId::SwigluGrad, {dy, x, up}, {HostTensor::f32({n}), HostTensor::f32({n})});
  expectClose(grads[0].floats,
              finiteDifferences([&](const Doubles& v) { return swiglu(v, up.asDoubles()); }, x.asDoubles(), dy.asDoubles()),
              kGradTol, "swiglu dgate");
  expectClose(grads[1].floats,
              finiteDifferences([&](const Doubles& v) { return swiglu(x.asDoubles(), v); }, up.asDoubles(), dy.asDoubles()),
              kGradTol, "swiglu dup");
}

// gpt-oss's clamped SwiGLU over interleaved gate/up columns, values on both sides of the clamps
// (limit 2 against values of scale 3): the output and the gradient (finite differences; a
// clamped value's is zero) of every column.
TEST_F(KernelTest, ClampedSwigluOverInterleavedGateAndUp) {
  const int64_t rows = 6, f = 10;
  const float alpha = 1.702f, limit = 2.0f;
  auto gate_up = HostTensor::f32({rows, 2 * f}, randomFloats(rows * 2 * f, rng, 3.0f));
  auto dy = HostTensor::f32({rows, f}, randomFloats(rows * f, rng));
  auto reference = [&](const Doubles& gu) {
    Doubles y(rows * f);
    for (int64_t i = 0; i < rows * f; ++i) {
      const double g = std::min<double>(gu[2 * i], limit), u = std::clamp<double>(gu[2 * i + 1], -limit, limit);
      y[i] = (u + 1.0) * g / (1.0 + std::exp(-alpha * g));
    }
    return y;
  };
  int64_t clamped = 0;
  for (float v : gate_up.floats) clamped += std::abs(v) > limit;
  ASSERT_GT(clamped, 10) << "the values must reach past the clamps";
  expectClose(runKernel(KernelId::ClampedSwiglu, {gate_up}, {HostTensor::f32({rows, f})}, {}, {alpha, limit})[0].floats,
              reference(gate_up.asDoubles()), kF32Tol, "clamped_swiglu");
  expectClose(
      runKernel(KernelId::ClampedSwigluGrad, {dy, gate_up}, {HostTensor::f32({rows, 2 * f})}, {}, {alpha, limit})[0].floats,
      finiteDifferences(reference, gate_up.asDoubles(), dy.asDoubles()), kGradTol, "clamped_swiglu grad");
  KernelArgs bad;
  HostTensor odd = HostTensor::f32({2, 3}), half = HostTensor::f32({2, 1});
  bad.in = {odd.view()};
  bad.out = {half.view()};
  bad.floats = {alpha, limit};
  EXPECT_NE(checkKernelCall(KernelId::ClampedSwiglu, bad).find("must be even"), std::string::npos);
  bad.floats = {alpha, -1.0f};
  EXPECT_NE(checkKernelCall(KernelId::ClampedSwiglu, bad).find("limit finite and positive"), std::string::npos);
}

}  // namespace
}  // namespace mt::test
