// The attention kernels' CUDA twins against the CPU kernels (the fixture and its tolerances:
// tests/kernels/cuda_twin_harness.h): causal attention on the tiled and warp-per-row kernels,
// packed examples, sliding windows and sinks, Gemma 2's softcap, the decode step's cached
// attention, the tensor cores' bf16 kernels and cuDNN's fused attention.
#include "kernels/attention/attention.h"
#include "tests/kernels/cuda_twin_harness.h"

namespace mt::test {
namespace {

TEST_F(CudaTwinTest, AttentionForwardAndBackward) {
  struct Case {
    int64_t batch, seq, heads, kv_heads, head_dim;
  };
  // Tiled kernels (head_dim <= 128, padded to 16/32/64/128): partial tiles, several tiles per
  // sequence, grouped heads; the warp-per-row kernels: head_dim 160.
  for (const Case& c : {Case{2, 37, 4, 4, 24}, Case{1, 70, 4, 2, 64}, Case{2, 9, 6, 1, 128}, Case{1, 200, 8, 2, 128},
                        Case{2, 131, 2, 1, 12}, Case{1, 66, 3, 3, 96}, Case{1, 45, 2, 1, 160}}) {
    const int64_t wq = c.heads * c.head_dim, wkv = c.kv_heads * c.head_dim;
    const auto q = randomF32({c.batch, c.seq, wq}), k = randomF32({c.batch, c.seq, wkv});
    const auto v = randomF32({c.batch, c.seq, wkv}), dout = randomF32({c.batch, c.seq, wq});
    const std::vector<int64_t> heads{c.heads, c.kv_heads};
    const auto lse = HostTensor::f32({c.batch, c.heads, c.seq});
    expectTwin(KernelId::Attention, {q, k, v}, {HostTensor::f32({c.batch, c.seq, wq}), lse}, heads);
    const auto fwd = runKernel(KernelId::Attention, {q, k, v}, {HostTensor::f32({c.batch, c.seq, wq}), lse}, heads);
    expectTwin(KernelId::AttentionGrad, {dout, q, k, v, fwd[0], fwd[1]},
               {HostTensor::f32({c.batch, c.seq, wq}), HostTensor::f32({c.batch, c.seq, wkv}),
                HostTensor::f32({c.batch, c.seq, wkv})},
               heads);
  }
}

// Packed examples (mt.attention_packed(_sinks|_grad)): rows whose positions restart at examples
// of uneven lengths (one starting inside a tile, one longer than a tile), on the tiled kernels
// (f32), the warp-per-row ones (head_dim 160) and, as a bf16 plan calls them with heads of 64 and
// 128, the tensor cores both ways (never cuDNN), with a window and sinks.
TEST_F(CudaTwinTest, PackedExamples) {
  struct Case {
    int64_t batch, seq, heads, kv_heads, head_dim, window;
  };
  for (const Case& c : {Case{2, 150, 4, 2, 64, 0}, Case{1, 200, 2, 1, 128, 37}, Case{2, 70, 4, 4, 24, 0},
                        Case{1, 45, 2, 1, 160, 20}}) {
    const int64_t wq = c.heads * c.head_dim, wkv = c.kv_heads * c.head_dim;
    const auto q = randomF32({c.batch, c.seq, wq}), k = randomF32({c.batch, c.seq, wkv});
    const auto v = randomF32({c.batch, c.seq, wkv}), dout = randomF32({c.batch, c.seq, wq});
    const auto sinks = randomF32({c.heads}, 2.0f);
    std::vector<int32_t> positions;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t i = 0, start = 0; i < c.seq; ++i) {
        if (i == 1 + 29 * b || i == c.seq / 2 + 3) start = i;  // examples of uneven lengths
        positions.push_back(static_cast<int32_t>(i - start));
      }
    const auto pos = HostTensor::i32({c.batch, c.seq}, positions);
    const std::vector<int64_t> attrs{c.heads, c.kv_heads, c.window};
    const std::vector<HostTensor> outs = {HostTensor::f32({c.batch, c.seq, wq}), HostTensor::f32({c.batch, c.heads, c.seq})};
    const std::vector<HostTensor> grads = {HostTensor::f32({c.batch, c.seq, wq}), HostTensor::f32({c.batch, c.seq, wkv}),
                                           HostTensor::f32({c.batch, c.seq, wkv})};
    expectTwin(KernelId::AttentionPacked, {q, k, v, pos}, outs, attrs);
    expectTwin(KernelId::AttentionPackedSinks, {q, k, v, sinks, pos}, outs, attrs);
    const auto fwd = runKernel(KernelId::AttentionPackedSinks, {q, k, v, sinks, pos}, outs, attrs);
    expectTwin(KernelId::AttentionPackedGrad, {dout, q, k, v, fwd[0], fwd[1], pos}, grads, attrs);
    if (c.head_dim != 64 && c.head_dim != 128) continue;
    expectBf16Twin(KernelId::AttentionPacked, {q, k, v, pos}, outs, attrs);
    expectBf16Twin(KernelId::AttentionPackedSinks, {q, k, v, sinks, pos}, outs, attrs);
    const auto bf16_fwd = runBf16(KernelId::AttentionPacked, {q, k, v, pos}, outs, attrs);
    expectBf16Twin(KernelId::AttentionPackedGrad, {dout, q, k, v, bf16_fwd[0], bf16_fwd[1], pos}, grads, attrs);
  }
}

// gpt-oss's attention: a sliding window (shorter than a tile, longer than one, not a multiple
// of it: rows whose window starts past a key tile's first keys) with and without sinks, on the
// tiled kernels (f32), the warp-per-row ones (head_dim 160) and, as a bf16 plan calls them with
// heads of 64 and 128, the tensor cores both ways (without a window, cuDNN's backward too); the
// sinks' gradient; the decode step's cached attention with both.
TEST_F(CudaTwinTest, SlidingWindowAndSinks) {
  struct Case {
    int64_t batch, seq, heads, kv_heads, head_dim, window;
  };
  for (const Case& c : {Case{2, 150, 4, 2, 64, 37}, Case{1, 200, 2, 1, 64, 128}, Case{1, 70, 4, 4, 24, 1},
                        Case{1, 45, 2, 1, 160, 20}, Case{1, 150, 2, 1, 128, 70}, Case{1, 256, 2, 1, 64, 0}}) {
    const int64_t wq = c.heads * c.head_dim, wkv = c.kv_heads * c.head_dim;
    const auto q = randomF32({c.batch, c.seq, wq}), k = randomF32({c.batch, c.seq, wkv});
    const auto v = randomF32({c.batch, c.seq, wkv}), dout = randomF32({c.batch, c.seq, wq});
    const auto sinks = randomF32({c.heads}, 2.0f);
    const std::vector<int64_t> attrs{c.heads, c.kv_heads, c.window};
    const std::vector<HostTensor> outs = {HostTensor::f32({c.batch, c.seq, wq}), HostTensor::f32({c.batch, c.heads, c.seq})};
    const std::vector<HostTensor> grads = {HostTensor::f32({c.batch, c.seq, wq}), HostTensor::f32({c.batch, c.seq, wkv}),
                                           HostTensor::f32({c.batch, c.seq, wkv})};
    expectTwin(KernelId::Attention, {q, k, v}, outs, attrs);
    expectTwin(KernelId::AttentionSinks, {q, k, v, sinks}, outs, attrs);
    const auto fwd = runKernel(KernelId::AttentionSinks, {q, k, v, sinks}, outs, attrs);
    expectTwin(KernelId::AttentionGrad, {dout, q, k, v, fwd[0], fwd[1]}, grads, attrs);
    expectTwin(KernelId::AttentionSinksGrad, {dout, fwd[0], fwd[1], sinks}, {HostTensor::f32({c.heads})});
    if (c.head_dim != 64 && c.head_dim != 128) continue;
    // As a bf16 plan calls them: on the tensor cores, forward and backward.
    expectBf16Twin(KernelId::AttentionSinks, {q, k, v, sinks}, outs, attrs);
    const auto bf16_fwd = runBf16(KernelId::AttentionSinks, {q, k, v, sinks}, outs, attrs);
    expectBf16Twin(KernelId::AttentionGrad, {dout, q, k, v, bf16_fwd[0], bf16_fwd[1]}, grads, attrs);
    expectBf16Twin(KernelId::AttentionSinksGrad, {dout, bf16_fwd[0], bf16_fwd[1], sinks}, {HostTensor::f32({c.heads})});
    if (c.window != 0) continue;
    // gpt-oss's full layers under --attention auto: the sinks' forward ours, the backward cuDNN's
    // on the lse that counts the sinks (the plain backward given it).
    CudnnAttention cudnn(nullptr);
    cudnn_ = &cudnn;
    expectBf16Twin(KernelId::AttentionGrad, {dout, q, k, v, bf16_fwd[0], bf16_fwd[1]}, grads, attrs);
    cudnn_ = nullptr;
  }
  for (const CachedCase& c : kCachedCases) {
    auto in = cachedAttentionInputs(c);
    const HostTensor out = HostTensor::f32({c.batch, c.fresh, c.heads * c.head_dim});
    expectTwin(KernelId::CachedAttention, in, {out}, {c.heads, c.kv_heads, 5});
    in.push_back(randomF32({c.heads}, 2.0f));
    expectTwin(KernelId::CachedAttentionSinks, in, {out}, {c.heads, c.kv_heads, 5});
  }
}

// Gemma 2's softcapping: attention whose scores (q and k scaled up, so that they pass the cap)
// are capped, on the tiled kernels (f32), the warp-per-row ones (head_dim 256, Gemma 2's), the
// tensor cores both ways as a bf16 plan calls them with heads of 64 and 128 (cuDNN's graph takes
// no softcap), with and without a window; the decode step's cached attention; mt.softcap and its
// gradient, f32 and bf16.
TEST_F(CudaTwinTest, Softcap) {
  struct Case {
    int64_t batch, seq, heads, kv_heads, head_dim, window;
  };
  const std::vector<float> cap{0.75f};
  for (const Case& c : {Case{1, 150, 4, 2, 64, 37}, Case{1, 130, 2, 1, 128, 0}, Case{2, 70, 4, 4, 24, 0},
                        Case{1, 45, 2, 1, 256, 20}}) {
    const int64_t wq = c.heads * c.head_dim, wkv = c.kv_heads * c.head_dim;
    const auto q = randomF32({c.batch, c.seq, wq}, 2.0f), k = randomF32({c.batch, c.seq, wkv}, 2.0f);
    const auto v = randomF32({c.batch, c.seq, wkv}), dout = randomF32({c.batch, c.seq, wq});
    const std::vector<int64_t> attrs{c.heads, c.kv_heads, c.window};
    const std::vector<HostTensor> outs = {HostTensor::f32({c.batch, c.seq, wq}), HostTensor::f32({c.batch, c.heads, c.seq})};
    const std::vector<HostTensor> grads = {HostTensor::f32({c.batch, c.seq, wq}), HostTensor::f32({c.batch, c.seq, wkv}),
                                           HostTensor::f32({c.batch, c.seq, wkv})};
    expectTwin(KernelId::Attention, {q, k, v}, outs, attrs, cap);
    const auto fwd = runKernel(KernelId::Attention, {q, k, v}, outs, attrs, cap);
    expectTwin(KernelId::AttentionGrad, {dout, q, k, v, fwd[0], fwd[1]}, grads, attrs, cap);
    if (c.head_dim != 64 && c.head_dim != 128) continue;
    expectBf16Twin(KernelId::Attention, {q, k, v}, outs, attrs, cap);
    const auto bf16_fwd = runBf16(KernelId::Attention, {q, k, v}, outs, attrs, cap);
    expectBf16Twin(KernelId::AttentionGrad, {dout, q, k, v, bf16_fwd[0], bf16_fwd[1]}, grads, attrs, cap);
  }
  for (const CachedCase& c : kCachedCases)
    expectTwin(KernelId::CachedAttention, cachedAttentionInputs(c),
               {HostTensor::f32({c.batch, c.fresh, c.heads * c.head_dim})}, {c.heads, c.kv_heads, 5}, cap);
  const Shape shape{5, 7, 301};
  const auto x = randomF32(shape, 4.0f), dy = randomF32(shape);
  expectTwin(KernelId::Softcap, {x}, {HostTensor::f32(shape)}, {}, {1.5f});
  const auto y = runKernel(KernelId::Softcap, {x}, {HostTensor::f32(shape)}, {}, {1.5f});
  expectTwin(KernelId::SoftcapGrad, {dy, y[0]}, {HostTensor::f32(shape)}, {}, {1.5f});
  expectBf16Twin(KernelId::Softcap, {x}, {HostTensor::f32(shape)}, {}, {1.5f});
  expectBf16Twin(KernelId::SoftcapGrad, {dy, y[0]}, {HostTensor::f32(shape)}, {}, {1.5f});
}

// The decode step's ops: rope at given positions; attention over a cache (several warps' keys
// merged, head_dim up to 256, grouped heads, one and several new tokens).
TEST_F(CudaTwinTest, RopeAtAndCachedAttention) {
  const auto x = randomF32({2, 3, 96});
  const auto positions = HostTensor::i32({2, 3}, {0, 1, 2, 1000, 1001, 1002});
  expectTwin(KernelId::RopeAt, {x, positions}, {HostTensor::f32({2, 3, 96})}, {24}, {500000.0f});
  expectTwin(KernelId::RopeAt, {x, positions}, {HostTensor::f32({2, 3, 96})}, {24, 3},
             {150000.0f, 32.0f, 0.5f, 2.5f, 0.0f, 1.3466f});
  // LongRoPE by the call's largest position (1002): short factors under an original context of 4096,
  // long ones under 1000, for every token of the call (a grid of fewer blocks, each finding it).
  for (float original : {4096.0f, 1000.0f})
    expectTwin(KernelId::RopeAt, {x, positions}, {HostTensor::f32({2, 3, 96})}, {24, 4, 1, 18},
               longRopeValues(2.0f, original));
  for (const CachedCase& c : kCachedCases) {
    const auto in = cachedAttentionInputs(c);
    expectTwin(KernelId::CachedAttention, in, {HostTensor::f32({c.batch, c.fresh, c.heads * c.head_dim})},
               {c.heads, c.kv_heads});
  }
}

// cuDNN's fused flash attention (mtrun --attention cudnn) against the CPU twin, as a bf16 plan
// calls it: grouped and plain heads, 64 and 128 wide, lengths that are not multiples of its
// tiles (cuDNN 9.16 and later); its backward runs from the CPU's forward, and our backward from
// its forward's out and lse (the two must agree on what lse is). Where libcudnn cannot run the
// graph the test fails naming cuDNN's reason.
TEST_F(CudaTwinTest, CudnnAttention) {
  CudnnAttention cudnn(nullptr);
  std::printf("cuDNN %lld\n", static_cast<long long>(CudnnAttention::version()));
  struct Attn {
    int64_t batch, seq, heads, kv_heads, head_dim;
  };
  std::vector<Attn> cases = {{1, 128, 4, 2, 64}, {2, 256, 8, 2, 128}, {2, 128, 4, 4, 64}};
  if (CudnnAttention::version() >= 91600)  // any length (before 9.16: multiples of 128)
    cases.insert(cases.end(), {{1, 70, 4, 2, 64}, {2, 200, 8, 2, 128}, {1, 33, 2, 1, 128}});
  for (const Attn& c : cases) {
    SCOPED_TRACE("batch " + std::to_string(c.batch) + ", T " + std::to_string(c.seq) + ", heads " +
                 std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " of " + std::to_string(c.head_dim));
    const int64_t wq = c.heads * c.head_dim, wkv = c.kv_heads * c.head_dim;
    const auto q = randomF32({c.batch, c.seq, wq}), k = randomF32({c.batch, c.seq, wkv});
    const auto v = randomF32({c.batch, c.seq, wkv}), dout = randomF32({c.batch, c.seq, wq});
    const std::vector<int64_t> heads{c.heads, c.kv_heads};
    const std::vector<HostTensor> outs = {HostTensor::f32({c.batch, c.seq, wq}), HostTensor::f32({c.batch, c.heads, c.seq})};
    const std::vector<HostTensor> grads = {HostTensor::f32({c.batch, c.seq, wq}), HostTensor::f32({c.batch, c.seq, wkv}),
                                           HostTensor::f32({c.batch, c.seq, wkv})};
    cudnn_ = &cudnn;
    expectBf16Twin(KernelId::Attention, {q, k, v}, outs, heads);
    const auto fwd = runBf16(KernelId::Attention, {q, k, v}, outs, heads);  // the CPU's forward
    expectBf16Twin(KernelId::AttentionGrad, {dout, q, k, v, fwd[0], fwd[1]}, grads, heads);
    // cuDNN's forward, then our backward from its out and lse: the CPU's gradients.
    std::vector<HostTensor> in = {q, k, v}, out = outs;
    toBf16(KernelId::Attention, in, out, false);
    const auto cudnn_fwd = runOnGpu(KernelId::Attention, in, out, heads, {});
    cudnn_ = nullptr;
    expectBf16Twin(KernelId::AttentionGrad, {dout, q, k, v, cudnn_fwd[0], cudnn_fwd[1]}, grads, heads);
  }
  // The backward in runs of one sequence (a workspace cap below one sequence's needs), as a large
  // batch runs: the same gradients.
  {
    CudnnAttention chunked(nullptr, 1);
    const int64_t batch = 3, seq = 128, heads = 4, kv_heads = 2, head_dim = 64;
    const int64_t wq = heads * head_dim, wkv = kv_heads * head_dim;
    const auto q = randomF32({batch, seq, wq}), k = randomF32({batch, seq, wkv});
    const auto v = randomF32({batch, seq, wkv}), dout = randomF32({batch, seq, wq});
    const auto fwd = runBf16(KernelId::Attention, {q, k, v},
                             {HostTensor::f32({batch, seq, wq}), HostTensor::f32({batch, heads, seq})}, {heads, kv_heads});
    cudnn_ = &chunked;
    expectBf16Twin(KernelId::AttentionGrad, {dout, q, k, v, fwd[0], fwd[1]},
                   {HostTensor::f32({batch, seq, wq}), HostTensor::f32({batch, seq, wkv}), HostTensor::f32({batch, seq, wkv})},
                   {heads, kv_heads});
    cudnn_ = nullptr;
  }
  // What it does not take, refused by name.
  Tensor q;
  q.dtype = DType::F32;
  EXPECT_NE(CudnnAttention::unsupported(q, AttentionShape{1, 8, 2, 1, 64, 128, 64, 0.125f}).find("bf16"),
            std::string::npos);
  q.dtype = DType::BF16;
  EXPECT_NE(CudnnAttention::unsupported(q, AttentionShape{1, 8, 2, 1, 160, 320, 160, 0.08f}).find("160"),
            std::string::npos);
  EXPECT_NE(CudnnAttention::unsupported(q, AttentionShape{1, 1, 2, 1, 128, 256, 128, 0.08f}).find("two tokens"),
            std::string::npos);
  EXPECT_EQ(CudnnAttention::unsupported(q, AttentionShape{1, 256, 2, 1, 128, 256, 128, 0.08f}), "");
}

}  // namespace
}  // namespace mt::test
