// Every CUDA kernel against its CPU twin on random inputs (fp32: relative error <= 1e-5; a bf16
// call against the CPU's emulation of bf16 storage: <= 1e-2), forward and backward, on shapes
// that are not multiples of the launch geometry, outputs poisoned first (the fixture:
// tests/kernels/cuda_twin_harness.h; the attention kernels' cases: cuda_twin_attention_test.cc).
// Skips, saying why, where no GPU is usable.
#include <cuda_runtime.h>

#include "kernels/checksum/checksum.h"
#include "kernels/layout/layout.h"
#include "kernels/loss/loss.h"
#include "kernels/pointwise/pointwise.h"
#include "kernels/softmax/softmax.h"
#include "tests/kernels/cuda_twin_harness.h"

namespace mt::test {
namespace {

TEST_F(CudaTwinTest, ElementwiseAndLayout) {
  const auto a = randomF32({4, 33, 70}), b = randomF32({70});
  const auto out = HostTensor::f32({4, 33, 70});
  expectTwin(KernelId::Add, {a, b}, {out});
  expectTwin(KernelId::Mul, {a, b}, {out});
  expectTwin(KernelId::Add, {a, a}, {out});
  expectTwin(KernelId::Scale, {a}, {out}, {}, {0.3f});
  expectTwin(KernelId::Fill, {}, {out}, {}, {-2.5f});
  expectTwin(KernelId::SumTo, {a}, {HostTensor::f32({70})});       // a bias gradient
  expectTwin(KernelId::SumTo, {a}, {HostTensor::f32({33, 70})});
  expectTwin(KernelId::SumTo, {a}, {HostTensor::f32({4, 1, 70})});  // keepdims
  expectTwin(KernelId::SumTo, {a}, {HostTensor::f32({4, 33, 1})});
  // Row sums (DoRA's weight norm), rows longer than a warp's 32 lanes and more rows than one block's warps.
  const auto weight = randomF32({300, 517});
  expectTwin(KernelId::SumTo, {weight}, {HostTensor::f32({300, 1})});
  expectTwin(KernelId::Transpose, {a}, {HostTensor::f32({70, 4, 33})}, {2, 0, 1});
  const auto x4 = randomF32({2, 5, 3, 7});
  expectTwin(KernelId::Transpose, {x4}, {HostTensor::f32({2, 3, 5, 7})}, {0, 2, 1, 3});
  // A weight streamed as bf16 (mt-stage-bf16): exact, so tolerance 0.
  std::vector<uint16_t> bits(4 * 33 * 70);
  round_to_bf16(a.floats.data(), bits.data(), static_cast<int64_t>(bits.size()));
  expectTwin(KernelId::Widen, {HostTensor::bf16({4, 33, 70}, bits)}, {out}, {}, {}, 0.0);
  // Dropout draws the CPU's mask bit for bit (one product per kept element: tolerance 0).
  expectTwin(KernelId::Dropout, {a}, {out}, {5}, {0.25f}, 0.0);
  expectTwin(KernelId::Dropout, {a}, {out}, {0}, {0.0f}, 0.0);
}

TEST_F(CudaTwinTest, Matmul) {
  struct Case {
    Shape a, b, out;
    int64_t ta, tb;
  };
  for (const Case& c : {Case{{3, 17, 40}, {40, 23}, {3, 17, 23}, 0, 0},  // weights shared by the batch
                        Case{{3, 17, 40}, {23, 40}, {3, 17, 23}, 0, 1},  // x · Wᵀ (a linear layer)
                        Case{{3, 40, 17}, {40, 23}, {3, 17, 23}, 1, 0},  // xᵀ · dy (a weight gradient)
                        Case{{51, 40}, {51, 23}, {40, 23}, 1, 0},
                        Case{{2, 3, 17, 40}, {2, 3, 40, 9}, {2, 3, 17, 9}, 0, 0},  // batched rhs
                        Case{{2, 3, 17, 40}, {2, 3, 9, 40}, {2, 3, 17, 9}, 0, 1}})
    expectTwin(KernelId::Matmul, {randomF32(c.a), randomF32(c.b)}, {HostTensor::f32(c.out)}, {c.ta, c.tb});
}

TEST_F(CudaTwinTest, Norms) {
  for (int64_t width : {64, 200, 1000}) {
    const Shape shape{3, 11, width};
    const auto x = randomF32(shape), dy = randomF32(shape), gamma = randomF32({width}), beta = randomF32({width});
    const auto rows = HostTensor::f32({3, 11});
    expectTwin(KernelId::LayerNorm, {x, gamma, beta}, {HostTensor::f32(shape), rows, rows}, {}, {1e-5f});
    const auto ln = runKernel(KernelId::LayerNorm, {x, gamma, beta}, {HostTensor::f32(shape), rows, rows}, {}, {1e-5f});
    expectTwin(KernelId::LayerNormGrad, {dy, x, gamma, ln[1], ln[2]},
               {HostTensor::f32(shape), HostTensor::f32({width}), HostTensor::f32({width})});
    expectTwin(KernelId::RmsNorm, {x, gamma}, {HostTensor::f32(shape), rows}, {}, {1e-6f});
    const auto rms = runKernel(KernelId::RmsNorm, {x, gamma}, {HostTensor::f32(shape), rows}, {}, {1e-6f});
    expectTwin(KernelId::RmsNormGrad, {dy, x, gamma, rms[1]}, {HostTensor::f32(shape), HostTensor::f32({width})});
    // Gemma's: offset 1 + gamma (plan 1.33).
    expectTwin(KernelId::RmsNorm, {x, gamma}, {HostTensor::f32(shape), rows}, {}, {1e-6f, 1.0f});
    const auto gemma = runKernel(KernelId::RmsNorm, {x, gamma}, {HostTensor::f32(shape), rows}, {}, {1e-6f, 1.0f});
    expectTwin(KernelId::RmsNormGrad, {dy, x, gamma, gemma[1]}, {HostTensor::f32(shape), HostTensor::f32({width})}, {},
               {1.0f});
  }
}

TEST_F(CudaTwinTest, Activations) {
  const Shape shape{5, 7, 301};
  const auto x = randomF32(shape, 2.0f), up = randomF32(shape), dy = randomF32(shape);
  const auto out = HostTensor::f32(shape);
  for (int64_t tanh_approx : {0, 1}) {
    expectTwin(KernelId::Gelu, {x}, {out}, {tanh_approx});
    expectTwin(KernelId::GeluGrad, {dy, x}, {out}, {tanh_approx});
  }
  expectTwin(KernelId::Silu, {x}, {out});
  expectTwin(KernelId::SiluGrad, {dy, x}, {out});
  expectTwin(KernelId::Swiglu, {x, up}, {out});
  expectTwin(KernelId::SwigluGrad, {dy, x, up}, {out, out});
}

TEST_F(CudaTwinTest, Rope) {
  const auto x = randomF32({2, 37, 4 * 24});
  for (int64_t inverse : {0, 1})
    expectTwin(KernelId::Rope, {x}, {HostTensor::f32({2, 37, 96})}, {24, inverse}, {10000.0f});
  // A token tile inside its sequence (mt-tile-tokens): positions from the offset on.
  expectTwin(KernelId::Rope, {x}, {HostTensor::f32({2, 37, 96})}, {24, 1, 4096}, {10000.0f});
  // Scaled frequencies (rope_scaling): linear, llama3 (kept, blended and slowed pairs), yarn (a
  // fractional ramp, cos and sin times its attention factor); at a position past 4096 too.
  expectTwin(KernelId::Rope, {x}, {HostTensor::f32({2, 37, 96})}, {24, 0, 0, 1}, {10000.0f, 4.0f, 0, 0, 0, 1.0f});
  expectTwin(KernelId::Rope, {x}, {HostTensor::f32({2, 37, 96})}, {24, 0, 5000, 2},
             {500000.0f, 8.0f, 1.0f, 4.0f, 32.0f, 1.0f});
  expectTwin(KernelId::Rope, {x}, {HostTensor::f32({2, 37, 96})}, {24, 1, 0, 3},
             {150000.0f, 32.0f, 0.0f, 1.766f, 0.0f, 1.3466f});
  // The first 18 of each head's 24 turning (partial_rotary_factor 0.75), the rest passing; with
  // LongRoPE's factor of each of the 9 pairs (plan 1.35), forward and inverse.
  expectTwin(KernelId::Rope, {x}, {HostTensor::f32({2, 37, 96})}, {24, 0, 0, 0, 18}, {10000.0f});
  for (int64_t inverse : {0, 1})
    for (float choice : {0.0f, 1.0f, 2.0f})
      expectTwin(KernelId::Rope, {x}, {HostTensor::f32({2, 37, 96})}, {24, inverse, 70, 4, 18},
                 longRopeValues(choice, choice == 2.0f ? 100.0f : 4096.0f));
}

// The transfer checksum (mtrun --verify-transfers): the GPU's partial sums, written to mapped
// host memory as the CUDA backend has them, add up to the CPU's checksum of the same bytes.
TEST_F(CudaTwinTest, TransferChecksum) {
  uint64_t* partials = nullptr;
  MT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&partials), sizeof(uint64_t) * kChecksumPartials,
                              cudaHostAllocMapped));
  std::mt19937 rng(7);
  for (int64_t bytes : {int64_t{0}, int64_t{5}, int64_t{8}, int64_t{4099}, int64_t{3} << 20}) {
    std::vector<unsigned char> data(bytes);
    for (auto& b : data) b = static_cast<unsigned char>(rng());
    void* device = nullptr;
    MT_CUDA_CHECK(cudaMalloc(&device, std::max<int64_t>(bytes, 8)));
    MT_CUDA_CHECK(cudaMemcpy(device, data.data(), bytes, cudaMemcpyHostToDevice));
    uint64_t* mapped = nullptr;
    MT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&mapped), partials, 0));
    checksum_cuda(device, bytes, mapped, nullptr);
    MT_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(checksumOfPartials(partials), checksum_cpu(data.data(), bytes)) << bytes << " bytes";
    MT_CUDA_CHECK(cudaFree(device));
  }
  MT_CUDA_CHECK(cudaFreeHost(partials));
}

// The generic ops an ONNX import leaves unfused: every unary and binary function forward and
// backward (broadcasting both ways), clamp, where and broadcast on f32 and i32 words, the casts.
TEST_F(CudaTwinTest, GenericPointwise) {
  auto positive = [&](Shape shape) {  // log, sqrt, pow need a > 0
    HostTensor t = randomF32(std::move(shape));
    for (float& v : t.floats) v = std::abs(v) + 0.1f;
    return t;
  };
  const auto x = positive({4, 33, 7}), dy = randomF32({4, 33, 7}), signed_x = randomF32({4, 33, 7});
  for (int64_t fn = 0; fn < static_cast<int64_t>(std::size(kUnaryFnNames)); ++fn) {
    const bool needs_positive = fn == int64_t(UnaryFn::Log) || fn == int64_t(UnaryFn::Sqrt);
    const auto& in = needs_positive ? x : signed_x;
    expectTwin(KernelId::Unary, {in}, {HostTensor::f32({4, 33, 7})}, {fn});
    expectTwin(KernelId::UnaryGrad, {dy, in}, {HostTensor::f32({4, 33, 7})}, {fn});
  }
  const auto a = positive({4, 1, 7}), b = positive({33, 1});  // broadcast to (4, 33, 7)
  const auto dout = randomF32({4, 33, 7});
  for (int64_t fn = 0; fn < static_cast<int64_t>(std::size(kBinaryFnNames)); ++fn) {
    expectTwin(KernelId::Binary, {a, b}, {HostTensor::f32({4, 33, 7})}, {fn});
    expectTwin(KernelId::BinaryGrad, {dout, a, b}, {HostTensor::f32({4, 33, 7}), HostTensor::f32({4, 33, 7})}, {fn});
  }
  // Clamp across both bounds (a value on a bound: its gradient passes), and crossed bounds.
  auto clamped = randomF32({4, 33, 7});
  clamped.floats[0] = 0.5f, clamped.floats[1] = -0.5f;
  for (const std::vector<float>& bounds : {std::vector<float>{-0.5f, 0.5f}, std::vector<float>{0.5f, -0.5f}}) {
    expectTwin(KernelId::Clamp, {clamped}, {HostTensor::f32({4, 33, 7})}, {}, bounds, 0.0);
    expectTwin(KernelId::ClampGrad, {dy, clamped}, {HostTensor::f32({4, 33, 7})}, {}, bounds, 0.0);
  }
  const auto cond = HostTensor::i32({33, 1}, randomInts(33, 2, rng));
  expectTwin(KernelId::Where, {cond, randomF32({4, 1, 7}), randomF32({7})}, {HostTensor::f32({4, 33, 7})});
  expectTwin(KernelId::Where, {cond, HostTensor::i32({4, 33, 1}, randomInts(4 * 33, 1000, rng)),
                               HostTensor::i32({1}, {-5})},
             {HostTensor::i32({4, 33, 1}, std::vector<int32_t>(4 * 33))});
  expectTwin(KernelId::Broadcast, {randomF32({33, 1})}, {HostTensor::f32({4, 33, 7})});
  expectTwin(KernelId::Broadcast, {HostTensor::i32({7}, randomInts(7, 100, rng))},
             {HostTensor::i32({2, 3, 7}, std::vector<int32_t>(42))});
  auto wide = randomF32({5, 9}, 1e10f);  // saturates both ways
  wide.floats[3] = std::nanf("");
  expectTwin(KernelId::Cast, {wide}, {HostTensor::i32({5, 9}, std::vector<int32_t>(45))});
  expectTwin(KernelId::Cast, {HostTensor::i32({5, 9}, randomInts(45, 1 << 30, rng))}, {HostTensor::f32({5, 9})});
  expectTwin(KernelId::Cast, {randomF32({5, 9})}, {HostTensor::f32({5, 9})});
}

// The layout and softmax ops an ONNX import leaves unfused: gather (negative and out-of-range
// indices) and its scatter-add gradient (repeated indices: atomics, another order), concat,
// slice with steps and its gradient, trilu both ways, softmax and log-softmax along an inner
// and the last axis with their gradients.
TEST_F(CudaTwinTest, GenericLayoutAndSoftmax) {
  const auto data = randomF32({3, 10, 6});
  const auto indices = HostTensor::i32({2, 4}, {0, -1, 3, 12, 3, 3, -10, 9});
  expectTwin(KernelId::Gather, {data, indices}, {HostTensor::f32({3, 2, 4, 6})}, {1});
  expectTwin(KernelId::Gather, {HostTensor::i32({3, 10, 6}, randomInts(180, 1000, rng)), indices},
             {HostTensor::i32({3, 2, 4, 6}, std::vector<int32_t>(144))}, {1});
  expectTwin(KernelId::GatherGrad, {indices, randomF32({3, 2, 4, 6})}, {HostTensor::f32({3, 10, 6})}, {1});
  expectTwin(KernelId::Concat, {randomF32({2, 3, 5}), randomF32({2, 4, 5})}, {HostTensor::f32({2, 7, 5})}, {1});
  expectTwin(KernelId::Concat, {randomF32({2, 3}), randomF32({2, 1})}, {HostTensor::f32({2, 4})}, {1});
  // x (6, 9, 4): rows 1, 3, 5; columns 8, 6, 4, 2 (negative step); all 4 of the last.
  const std::vector<int64_t> slice = {1, 8, 0, 2, -2, 1};
  expectTwin(KernelId::Slice, {randomF32({6, 9, 4})}, {HostTensor::f32({3, 4, 4})}, slice);
  expectTwin(KernelId::SliceGrad, {randomF32({3, 4, 4})}, {HostTensor::f32({6, 9, 4})}, slice);
  const auto square = randomF32({2, 5, 7});
  for (int64_t upper : {0, 1})
    for (int64_t k : {-2, 0, 3}) expectTwin(KernelId::Trilu, {square}, {HostTensor::f32({2, 5, 7})}, {upper, k});
  const auto x = randomF32({4, 9, 6}, 3.0f), dy = randomF32({4, 9, 6});
  for (int64_t axis : {1, 2})
    for (int64_t log : {0, 1}) {
      const auto y = runKernel(KernelId::Softmax, {x}, {HostTensor::f32({4, 9, 6})}, {axis, log})[0];
      expectTwin(KernelId::Softmax, {x}, {HostTensor::f32({4, 9, 6})}, {axis, log});
      expectTwin(KernelId::SoftmaxGrad, {dy, y}, {HostTensor::f32({4, 9, 6})}, {axis, log});
    }
}

TEST_F(CudaTwinTest, CrossEntropyAndLookups) {
  const int64_t vocab = 1003;
  const auto logits = randomF32({3, 29, vocab}, 3.0f);
  auto target_ids = randomInts(3 * 29, vocab, rng);
  target_ids[5] = -1;  // ignored, as torch's ignore_index
  const auto targets = HostTensor::i32({3, 29}, target_ids);
  expectTwin(KernelId::SoftmaxXent, {logits, targets}, {HostTensor::f32({}), HostTensor::f32({3, 29})});
  const auto fwd = runKernel(KernelId::SoftmaxXent, {logits, targets}, {HostTensor::f32({}), HostTensor::f32({3, 29})});
  expectTwin(KernelId::SoftmaxXentGrad, {HostTensor::f32({}, {0.7f}), logits, targets, fwd[1]},
             {HostTensor::f32({3, 29, vocab})});
  // The vocabulary-split form on a chunk of ids [600, 1003) of a vocabulary of 1500.
  auto running = randomF32({3, 29, 2}, 2.0f);
  for (int64_t r = 0; r < 3 * 29; r += 7) running.floats[2 * r] = -INFINITY;  // the first chunk's rows
  expectTwin(KernelId::XentChunk, {logits, targets, running}, {HostTensor::f32({3, 29, 2})}, {600});
  expectTwin(KernelId::XentFinish, {randomF32({3, 29, 2}, 2.0f), targets}, {HostTensor::f32({}), HostTensor::f32({3, 29})}, {1500});
  expectTwin(KernelId::XentChunkGrad, {HostTensor::f32({}, {0.7f}), logits, targets, fwd[1]},
             {HostTensor::f32({3, 29, vocab})}, {600, 1500});
  // The token-tiled form (a tile of the batch, the whole batch's count given).
  expectTwin(KernelId::CountTargets, {targets}, {HostTensor::f32({})}, {vocab});
  const auto count = HostTensor::f32({}, {200.0f});
  expectTwin(KernelId::XentTile, {logits, targets, count}, {HostTensor::f32({}), HostTensor::f32({3, 29})});
  expectTwin(KernelId::XentTileGrad, {HostTensor::f32({}, {0.7f}), logits, targets, fwd[1], count},
             {HostTensor::f32({3, 29, vocab})});
  // Preference training: each row's log-probability (its sum over 29 tokens) and its backward; the
  // DPO loss of the rows' pairs (a fourth row for an even batch). Each row counts its own number of
  // targets (a prompt's ignored, one past the vocabulary) and row 3 none, so that a mean divides
  // by its own row's count.
  auto row_targets = randomInts(4 * 29, vocab, rng);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < 3 * b + 2; ++t) row_targets[b * 29 + t] = -1;
  row_targets[40] = static_cast<int32_t>(vocab);
  for (int64_t t = 0; t < 29; ++t) row_targets[3 * 29 + t] = -1;
  const auto rows4 = HostTensor::i32({4, 29}, row_targets);
  const auto logits4 = randomF32({4, 29, vocab}, 3.0f);
  expectTwin(KernelId::SequenceLogprob, {logits4, rows4}, {HostTensor::f32({4}), HostTensor::f32({4, 29})});
  const auto seq = runKernel(KernelId::SequenceLogprob, {logits4, rows4}, {HostTensor::f32({4}), HostTensor::f32({4, 29})});
  expectTwin(KernelId::SequenceLogprobGrad, {HostTensor::f32({4}, {0.7f, -0.2f, 1.5f, -1.0f}), logits4, rows4, seq[1]},
             {HostTensor::f32({4, 29, vocab})});
  // The means (the IPO loss's: average 1).
  expectTwin(KernelId::SequenceLogprob, {logits4, rows4}, {HostTensor::f32({4}), HostTensor::f32({4, 29})}, {1});
  expectTwin(KernelId::SequenceLogprobGrad, {HostTensor::f32({4}, {0.7f, -0.2f, 1.5f, -1.0f}), logits4, rows4, seq[1]},
             {HostTensor::f32({4, 29, vocab})}, {1});
  // Its vocabulary-split form: the sums (means) from a running state, a chunk of ids from 600 of a
  // vocabulary of 1500 (its columns past 1500 count no target).
  for (int64_t average : {0, 1}) {
    expectTwin(KernelId::SequenceLogprobFinish, {randomF32({4, 29, 2}, 2.0f), rows4},
               {HostTensor::f32({4}), HostTensor::f32({4, 29})}, {1500, average});
    expectTwin(KernelId::SequenceLogprobChunkGrad,
               {HostTensor::f32({4}, {0.7f, -0.2f, 1.5f, -1.0f}), logits4, rows4, seq[1]},
               {HostTensor::f32({4, 29, vocab})}, {600, 1500, average});
  }
  for (int64_t average : {0, 1}) {  // the NLL term of the chosen rows (0 and 2 count 27 and 21 targets)
    expectTwin(KernelId::PairNll, {seq[0], rows4}, {HostTensor::f32({})}, {vocab, average}, {0.7f});
    expectTwin(KernelId::PairNllGrad, {HostTensor::f32({}, {0.5f}), seq[0], rows4}, {HostTensor::f32({4})},
               {vocab, average}, {0.7f});
  }
  const auto reference = randomF32({4}, 20.0f);
  // ORPO's odds of the rows' means (row 3 counts nothing: a mean of 0, certain), no reference.
  const auto means = runKernel(KernelId::SequenceLogprob, {logits4, rows4},
                               {HostTensor::f32({4}), HostTensor::f32({4, 29})}, {1})[0];
  const auto zeros = HostTensor::f32({4}, {0.0f, 0.0f, 0.0f, 0.0f});
  // Every kind (sigmoid, hinge, robust, IPO, SimPO with gamma, ORPO, EXO, SPPO, NCA, APO, DiscoPOP
  // with tau); smoothed.
  for (int64_t kind = 0; kind < kDpoLossKinds; ++kind) {
    const bool orpo = kind == static_cast<int64_t>(DpoLossKind::kOrpo);
    const HostTensor &logp = orpo ? means : seq[0], &ref = orpo ? zeros : reference;
    std::vector<float> floats{0.1f, 0.2f};
    if (dpoHasThirdFloat(kind)) floats.push_back(0.3f);
    expectTwin(KernelId::DpoLoss, {logp, ref}, {HostTensor::f32({})}, {kind}, floats);
    expectTwin(KernelId::DpoLossGrad, {HostTensor::f32({}, {0.7f}), logp, ref}, {HostTensor::f32({4})}, {kind}, floats);
  }
  // A reward model's scores at positions (the row's last and first among them) and its loss, centred.
  const auto positions = HostTensor::i32({4}, {30, 0, 7, 12});
  const auto scores = randomF32({4, 31, 1});
  expectTwin(KernelId::RowScore, {scores, positions}, {HostTensor::f32({4})});
  expectTwin(KernelId::RowScoreGrad, {randomF32({4}), scores, positions}, {HostTensor::f32({4, 31, 1})});
  expectTwin(KernelId::RewardLoss, {reference}, {HostTensor::f32({})}, {}, {0.05f});
  expectTwin(KernelId::RewardLossGrad, {HostTensor::f32({}, {0.7f}), reference}, {HostTensor::f32({4})}, {}, {0.05f});
  const auto margins = HostTensor::f32({2}, {0.5f, -0.25f});  // ... with each pair's margin
  expectTwin(KernelId::RewardMarginLoss, {reference, margins}, {HostTensor::f32({})}, {}, {0.05f});
  expectTwin(KernelId::RewardMarginLossGrad, {HostTensor::f32({}, {0.7f}), reference, margins}, {HostTensor::f32({4})},
             {}, {0.05f});
  // KTO: one desirable example and one undesirable, weighted unequally.
  const auto labels = HostTensor::f32({2}, {1.0f, 0.0f});
  expectTwin(KernelId::KtoLoss, {seq[0], reference, labels}, {HostTensor::f32({})}, {}, {0.1f, 0.8f, 1.3f});
  expectTwin(KernelId::KtoLossGrad, {HostTensor::f32({}, {0.7f}), seq[0], reference, labels}, {HostTensor::f32({4})}, {},
             {0.1f, 0.8f, 1.3f});

  auto ids = randomInts(4 * 31, 50, rng);
  ids[3] = 50;  // outside the table: a zero row, no gradient
  ids[9] = ids[70] = 33;  // the padding id below, in the chunk [20, 45)
  const auto tokens = HostTensor::i32({4, 31}, ids);
  expectTwin(KernelId::Embedding, {tokens, randomF32({50, 72})}, {HostTensor::f32({4, 31, 72})});
  expectTwin(KernelId::EmbeddingGrad, {tokens, randomF32({4, 31, 72})}, {HostTensor::f32({50, 72})});
  expectTwin(KernelId::Positions, {}, {HostTensor::i32({4, 31}, std::vector<int32_t>(4 * 31, -7))});
  // Rows [20, 45) of a table of 50 as a chunk.
  expectTwin(KernelId::EmbeddingChunk, {tokens, randomF32({25, 72}), randomF32({4, 31, 72})},
             {HostTensor::f32({4, 31, 72})}, {20});
  expectTwin(KernelId::EmbeddingGradChunk, {tokens, randomF32({4, 31, 72})}, {HostTensor::f32({25, 72})}, {20});
  // A padding id (plan 1.36): its tokens add nothing, in the whole table and in the chunk that
  // holds its row.
  expectTwin(KernelId::EmbeddingGrad, {tokens, randomF32({4, 31, 72})}, {HostTensor::f32({50, 72})}, {33});
  expectTwin(KernelId::EmbeddingGradChunk, {tokens, randomF32({4, 31, 72})}, {HostTensor::f32({25, 72})}, {20, 33});
}

// Every kernel a bf16 plan calls, on bf16 activations (op_table.def's cuda_bf16), against the
// CPU's emulation: bf16 loads and stores, f32 math, statistics and weight gradients f32.
TEST_F(CudaTwinTest, Bf16Activations) {
  using H = HostTensor;
  const auto a = randomF32({4, 33, 70}), b = randomF32({70}), out = H::f32({4, 33, 70});
  expectBf16Twin(KernelId::Add, {a, b}, {out});
  expectBf16Twin(KernelId::Mul, {a, a}, {out});
  expectBf16Twin(KernelId::Scale, {a}, {out}, {}, {0.3f});
  expectBf16Twin(KernelId::Dropout, {a}, {out}, {5}, {0.25f});
  expectBf16Twin(KernelId::Fill, {}, {out}, {}, {-2.5f});
  expectBf16Twin(KernelId::SumTo, {a}, {H::f32({70})}, {}, {}, /*f32_any=*/true);  // a bias gradient
  expectBf16Twin(KernelId::SumTo, {a}, {H::f32({70})});
  expectBf16Twin(KernelId::SumTo, {a}, {H::f32({4, 33, 1})}, {}, {}, true);
  expectBf16Twin(KernelId::SumTo, {randomF32({300, 517})}, {H::f32({300, 1})}, {}, {}, true);
  expectBf16Twin(KernelId::SumTo, {randomF32({300, 517})}, {H::f32({300, 1})});  // DoRA's norm: bf16 in and out
  expectBf16Twin(KernelId::Transpose, {a}, {H::f32({70, 4, 33})}, {2, 0, 1});
  expectTwin(KernelId::Narrow, {a}, {H::bf16({4, 33, 70}, {})}, {}, {}, 0.0);  // the same rounding
  // Products: bf16 out, and a weight gradient f32 out from bf16 operands.
  expectBf16Twin(KernelId::Matmul, {randomF32({3, 17, 40}), randomF32({23, 40})}, {H::f32({3, 17, 23})}, {0, 1});
  expectBf16Twin(KernelId::Matmul, {randomF32({51, 40}), randomF32({51, 23})}, {H::f32({40, 23})}, {1, 0}, {}, true);
  expectBf16Twin(KernelId::Matmul, {randomF32({2, 3, 17, 40}), randomF32({2, 3, 9, 40})}, {H::f32({2, 3, 17, 9})},
                 {0, 1});
  for (int64_t width : {64, 1000}) {
    const Shape shape{3, 11, width};
    const auto x = randomF32(shape), dy = randomF32(shape), gamma = randomF32({width}), beta = randomF32({width});
    const auto rows = H::f32({3, 11});
    expectBf16Twin(KernelId::LayerNorm, {x, gamma, beta}, {H::f32(shape), rows, rows}, {}, {1e-5f});
    const auto ln = runBf16(KernelId::LayerNorm, {x, gamma, beta}, {H::f32(shape), rows, rows}, {}, {1e-5f});
    expectBf16Twin(KernelId::LayerNormGrad, {dy, x, gamma, ln[1], ln[2]}, {H::f32(shape), H::f32({width}), H::f32({width})});
    expectBf16Twin(KernelId::RmsNorm, {x, gamma}, {H::f32(shape), rows}, {}, {1e-6f});
    const auto rms = runBf16(KernelId::RmsNorm, {x, gamma}, {H::f32(shape), rows}, {}, {1e-6f});
    expectBf16Twin(KernelId::RmsNormGrad, {dy, x, gamma, rms[1]}, {H::f32(shape), H::f32({width})});
    expectBf16Twin(KernelId::RmsNorm, {x, gamma}, {H::f32(shape), rows}, {}, {1e-6f, 1.0f});
    const auto gemma = runBf16(KernelId::RmsNorm, {x, gamma}, {H::f32(shape), rows}, {}, {1e-6f, 1.0f});
    expectBf16Twin(KernelId::RmsNormGrad, {dy, x, gamma, gemma[1]}, {H::f32(shape), H::f32({width})}, {}, {1.0f});
  }
  const Shape shape{5, 7, 301};
  const auto x = randomF32(shape, 2.0f), up = randomF32(shape), dy = randomF32(shape), act = H::f32(shape);
  expectBf16Twin(KernelId::Gelu, {x}, {act}, {1});
  expectBf16Twin(KernelId::GeluGrad, {dy, x}, {act}, {0});
  expectBf16Twin(KernelId::Silu, {x}, {act});
  expectBf16Twin(KernelId::SiluGrad, {dy, x}, {act});
  expectBf16Twin(KernelId::Swiglu, {x, up}, {act});
  expectBf16Twin(KernelId::SwigluGrad, {dy, x, up}, {act, act});
  // The eight-wide bf16 paths (n a multiple of 8, 16-byte aligned; 5 x 7 x 301 above takes the
  // scalar ones): a residual add and the activations.
  const Shape wide{3, 5, 64};
  const auto g8 = randomF32(wide, 2.0f), u8 = randomF32(wide), d8 = randomF32(wide), o8 = H::f32(wide);
  expectBf16Twin(KernelId::Add, {g8, u8}, {o8});
  expectBf16Twin(KernelId::Add, {g8, randomF32({64})}, {o8});  // a bias add: b repeated, 8 a thread
  expectBf16Twin(KernelId::Mul, {g8, randomF32({5, 64})}, {o8});
  expectBf16Twin(KernelId::Swiglu, {g8, u8}, {o8});
  expectBf16Twin(KernelId::SwigluGrad, {d8, g8, u8}, {o8, o8});
  expectBf16Twin(KernelId::SiluGrad, {d8, g8}, {o8});
  expectBf16Twin(KernelId::GeluGrad, {d8, g8}, {o8}, {1});
  expectBf16Twin(KernelId::Rope, {randomF32({2, 37, 96})}, {H::f32({2, 37, 96})}, {24, 0}, {10000.0f});
  expectBf16Twin(KernelId::RopeAt, {randomF32({2, 1, 96}), H::i32({2, 1}, {5, 700})}, {H::f32({2, 1, 96})}, {24},
                 {10000.0f});
  for (const CachedCase& c : kCachedCases)
    expectBf16Twin(KernelId::CachedAttention, cachedAttentionInputs(c), {H::f32({c.batch, c.fresh, c.heads * c.head_dim})},
                   {c.heads, c.kv_heads});
  struct Attn {
    int64_t batch, seq, heads, kv_heads, head_dim;
  };
  for (const Attn& c : {Attn{1, 70, 4, 2, 64}, Attn{1, 200, 8, 2, 128}, Attn{1, 45, 2, 1, 160}}) {
    const int64_t wq = c.heads * c.head_dim, wkv = c.kv_heads * c.head_dim;
    const auto q = randomF32({c.batch, c.seq, wq}), k = randomF32({c.batch, c.seq, wkv});
    const auto v = randomF32({c.batch, c.seq, wkv}), dout = randomF32({c.batch, c.seq, wq});
    const std::vector<int64_t> heads{c.heads, c.kv_heads};
    const std::vector<H> outs = {H::f32({c.batch, c.seq, wq}), H::f32({c.batch, c.heads, c.seq})};
    expectBf16Twin(KernelId::Attention, {q, k, v}, outs, heads);
    const auto fwd = runBf16(KernelId::Attention, {q, k, v}, outs, heads);
    expectBf16Twin(KernelId::AttentionGrad, {dout, q, k, v, fwd[0], fwd[1]},
                   {H::f32({c.batch, c.seq, wq}), H::f32({c.batch, c.seq, wkv}), H::f32({c.batch, c.seq, wkv})}, heads);
  }
  const int64_t vocab = 1003;
  const auto logits = randomF32({3, 29, vocab}, 3.0f);
  auto ids = randomInts(3 * 29, vocab, rng);
  for (int64_t t : {0, 1, 29, 30, 31, 32}) ids[t] = -1;  // rows counting 27, 25 and 29 targets
  const auto targets = H::i32({3, 29}, ids);
  expectBf16Twin(KernelId::SoftmaxXent, {logits, targets}, {H::f32({}), H::f32({3, 29})});
  const auto fwd = runBf16(KernelId::SoftmaxXent, {logits, targets}, {H::f32({}), H::f32({3, 29})});
  expectBf16Twin(KernelId::SoftmaxXentGrad, {H::f32({}, {0.7f}), logits, targets, fwd[1]}, {H::f32({3, 29, vocab})});
  expectBf16Twin(KernelId::XentChunk, {logits, targets, randomF32({3, 29, 2}, 2.0f)}, {H::f32({3, 29, 2})}, {600});
  expectBf16Twin(KernelId::XentChunkGrad, {H::f32({}, {0.7f}), logits, targets, fwd[1]}, {H::f32({3, 29, vocab})},
                 {600, 1500});
  expectBf16Twin(KernelId::XentTile, {logits, targets, H::f32({}, {150.0f})}, {H::f32({}), H::f32({3, 29})});
  expectBf16Twin(KernelId::XentTileGrad, {H::f32({}, {0.7f}), logits, targets, fwd[1], H::f32({}, {150.0f})},
                 {H::f32({3, 29, vocab})});
  expectBf16Twin(KernelId::SequenceLogprob, {logits, targets}, {H::f32({3}), H::f32({3, 29})});
  expectBf16Twin(KernelId::SequenceLogprobGrad, {H::f32({3}, {0.7f, -0.2f, 1.5f}), logits, targets, fwd[1]},
                 {H::f32({3, 29, vocab})});
  expectBf16Twin(KernelId::SequenceLogprobChunkGrad, {H::f32({3}, {0.7f, -0.2f, 1.5f}), logits, targets, fwd[1]},
                 {H::f32({3, 29, vocab})}, {600, 1500, 1});
  const auto tokens = H::i32({4, 31}, randomInts(4 * 31, 50, rng));
  expectBf16Twin(KernelId::Embedding, {tokens, randomF32({50, 72})}, {H::f32({4, 31, 72})});
  expectBf16Twin(KernelId::EmbeddingGrad, {tokens, randomF32({4, 31, 72})}, {H::f32({50, 72})});
  expectBf16Twin(KernelId::EmbeddingChunk, {tokens, randomF32({25, 72}), randomF32({4, 31, 72})}, {H::f32({4, 31, 72})},
                 {20});
  expectBf16Twin(KernelId::EmbeddingGradChunk, {tokens, randomF32({4, 31, 72})}, {H::f32({25, 72})}, {20});
  expectBf16Twin(KernelId::EmbeddingGrad, {tokens, randomF32({4, 31, 72})}, {H::f32({50, 72})}, {tokens.ints[0]});
}

// The mixture-of-experts kernels (kernels/moe): the router's softmax and sigmoid weightings (the
// sigmoid's bias, groups and scale; the softmax's groups) and their gradients, the counting sort (an expert no token chooses, indices out of range), the grouped
// products in both layouts and their weight gradients (whole and a group's), the combine and its
// backward.
TEST_F(CudaTwinTest, MixtureOfExperts) {
  const int64_t tokens = 37, experts = 5, k = 2, d = 24, f = 40, rows = tokens * k;
  const auto logits = randomF32({tokens, experts}, 2.0f);
  auto routeOutputs = [&] {
    return std::vector<HostTensor>{HostTensor::f32({tokens, k}),
                                   HostTensor::i32({tokens, k}, std::vector<int32_t>(rows))};
  };
  for (int64_t routing : {0, 1, 2}) {
    expectTwin(KernelId::MoeRoute, {logits}, routeOutputs(), {k, routing});
    const auto chosen = runKernel(KernelId::MoeRoute, {logits}, routeOutputs(), {k, routing})[1];
    expectTwin(KernelId::MoeRouteGrad, {randomF32({tokens, k}), logits, chosen}, {HostTensor::f32({tokens, experts})},
               {k, routing});
  }
  // The sigmoid routers (GLM-4.5's, DeepSeek-V3's): chosen by score + bias within the better of 2
  // groups of 4, scaled; and plain, unnormalized.
  const auto wide_logits = randomF32({tokens, 8}, 2.0f), bias = randomF32({8}, 0.3f);
  for (int64_t routing : {3, 4}) {
    const std::vector<int64_t> grouped = {k, routing, 2, 1};
    expectTwin(KernelId::MoeRouteBiased, {wide_logits, bias}, routeOutputs(), grouped, {2.5f});
    expectTwin(KernelId::MoeRoute, {wide_logits}, routeOutputs(), {k, routing});
    const auto chosen = runKernel(KernelId::MoeRouteBiased, {wide_logits, bias}, routeOutputs(), grouped, {2.5f})[1];
    expectTwin(KernelId::MoeRouteGrad, {randomF32({tokens, k}), wide_logits, chosen}, {HostTensor::f32({tokens, 8})},
               {k, routing}, {2.5f});
  }
  // DeepSeek-V2's softmax router within the one of 4 groups whose best probability is largest, x 16
  // (one group kept, so that the groups decide: with k no more than the groups kept, the top k lie in them).
  for (int64_t routing : {0, 1}) expectTwin(KernelId::MoeRoute, {wide_logits}, routeOutputs(), {k, routing, 4, 1}, {16.0f});
  std::vector<int32_t> choices(rows);
  for (int64_t s = 0; s < rows; ++s) choices[s] = static_cast<int32_t>(s * 7 % experts == 3 ? 4 : s * 7 % experts);
  choices[5] = -1, choices[9] = static_cast<int32_t>(experts);  // out of range: no expert's
  const std::vector<HostTensor> dispatch_outputs = {HostTensor::f32({rows, d}),
                                                    HostTensor::i32({tokens, k}, std::vector<int32_t>(rows)),
                                                    HostTensor::i32({experts}, std::vector<int32_t>(experts))};
  const std::vector<HostTensor> dispatch_inputs = {randomF32({tokens, d}), HostTensor::i32({tokens, k}, choices)};
  expectTwin(KernelId::MoeDispatch, dispatch_inputs, dispatch_outputs);
  const auto dispatched = runKernel(KernelId::MoeDispatch, dispatch_inputs, dispatch_outputs);
  const HostTensor &routed = dispatched[0], &positions = dispatched[1], &counts = dispatched[2];
  for (int64_t tb : {0, 1}) {
    const Shape weight = tb ? Shape{experts, f, d} : Shape{experts, d, f};
    expectTwin(KernelId::GroupedMatmul, {routed, randomF32(weight), counts}, {HostTensor::f32({rows, f})}, {tb});
    expectTwin(KernelId::GroupedMatmulWeightGrad, {routed, randomF32({rows, f}), counts}, {HostTensor::f32(weight)},
               {tb});
    // A group of experts 1..3 (mt-split-experts): its products over `into`, its weight gradient.
    Shape group = weight;
    group[0] = 3;
    expectTwin(KernelId::GroupedMatmulInto, {routed, randomF32(group), counts, randomF32({rows, f})},
               {HostTensor::f32({rows, f})}, {tb, 1});
    expectTwin(KernelId::GroupedMatmulWeightGrad, {routed, randomF32({rows, f}), counts}, {HostTensor::f32(group)},
               {tb, 1});
  }
  expectTwin(KernelId::MoeDispatchGrad, {randomF32({rows, d}), positions}, {HostTensor::f32({tokens, d})});
  // gpt-oss's experts: the biases over the same ranges (and clipped counts), the clamped SwiGLU
  // with values past its clamps.
  for (const auto& c : {counts, HostTensor::i32({experts}, {-3, 100, 0, 5, 2})}) {
    expectTwin(KernelId::GroupedAddBias, {randomF32({rows, f}), randomF32({experts, f}), c}, {HostTensor::f32({rows, f})});
    expectTwin(KernelId::GroupedBiasGrad, {randomF32({rows, f}), c}, {HostTensor::f32({experts, f})});
  }
  const auto gate_up = randomF32({rows, 2 * f}, 4.0f);
  expectTwin(KernelId::ClampedSwiglu, {gate_up}, {HostTensor::f32({rows, f})}, {}, {1.702f, 3.0f});
  expectTwin(KernelId::ClampedSwigluGrad, {randomF32({rows, f}), gate_up}, {HostTensor::f32({rows, 2 * f})}, {},
             {1.702f, 3.0f});
  const auto weights = randomF32({tokens, k});
  expectTwin(KernelId::MoeCombine, {randomF32({rows, d}), positions, weights}, {HostTensor::f32({tokens, d})});
  expectTwin(KernelId::MoeCombineGrad, {randomF32({tokens, d}), randomF32({rows, d}), positions, weights},
             {HostTensor::f32({rows, d}), HostTensor::f32({tokens, k})});
}

// The router's load-balancing statistics: small (37 tokens, 5 experts, choices out of range) and
// large (more tokens than the block's warps, more experts than a warp's lanes), their gradient,
// the loss and its gradient; with a token mask and the loss's rows from the counts.
TEST_F(CudaTwinTest, RouterLoadBalancing) {
  for (auto [tokens, experts] : {std::pair<int64_t, int64_t>{37, 5}, {3001, 130}}) {
    const int64_t k = 2;
    std::vector<int32_t> choices(tokens * k);
    for (int64_t s = 0; s < tokens * k; ++s) choices[s] = static_cast<int32_t>(s * 7 % (experts + 1)) - (s % 11 == 0);
    const auto logits = randomF32({tokens, experts}, 2.0f);
    expectTwin(KernelId::MoeBalanceStats,
               {logits, HostTensor::i32({tokens, k}, choices), randomF32({2, experts})},
               {HostTensor::f32({2, experts})});
    expectTwin(KernelId::MoeBalanceStatsGrad, {randomF32({2, experts}), logits}, {HostTensor::f32({tokens, experts})});
    const int64_t rows = 4 * tokens;
    expectTwin(KernelId::MoeBalanceLoss, {randomF32({2, experts})}, {HostTensor::f32({})}, {rows});
    expectTwin(KernelId::MoeBalanceLossGrad, {randomF32({}), randomF32({2, experts})}, {HostTensor::f32({2, experts})},
               {rows});
    // With a token mask (every third token left out) and the loss's rows from the counts.
    std::vector<float> keep(tokens);
    for (int64_t t = 0; t < tokens; ++t) keep[t] = t % 3 == 1 ? 0.0f : 1.0f;
    expectTwin(KernelId::MoeBalanceStatsMasked,
               {logits, HostTensor::i32({tokens, k}, choices), randomF32({2, experts}), HostTensor::f32({tokens}, keep)},
               {HostTensor::f32({2, experts})});
    expectTwin(KernelId::MoeBalanceStatsGradMasked, {randomF32({2, experts}), logits, HostTensor::f32({tokens}, keep)},
               {HostTensor::f32({tokens, experts})});
    std::vector<float> counted(2 * experts);
    for (int64_t e = 0; e < 2 * experts; ++e) counted[e] = e < experts ? float(e * 3 % 7) : 0.5f + float(e);
    expectTwin(KernelId::MoeBalanceLoss, {HostTensor::f32({2, experts}, counted)}, {HostTensor::f32({})}, {rows, k});
    expectTwin(KernelId::MoeBalanceLossGrad, {randomF32({}), HostTensor::f32({2, experts}, counted)},
               {HostTensor::f32({2, experts})}, {rows, k});
  }
}

}  // namespace
}  // namespace mt::test
