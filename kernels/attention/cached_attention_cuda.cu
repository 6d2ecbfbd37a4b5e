// CUDA twin of mt.cached_attention; kernels/attention/cached_attention_cpu.cc is the reference.
// A decode step reads the whole cache once and does little arithmetic per byte: one block per
// (sequence, head, new token), its warps splitting the keys, each warp keeping an online
// softmax (running max, sum and output, the output's D channels spread over the lanes), the
// warps' partial results merged at the end (with the sink, where the call has one). Its window,
// sinks and softcap as mt.attention's. Agrees with the CPU to rounding (another order
// of the sums, expf for fastExp).
#include "kernels/attention/attention.h"
#include "kernels/attention/cached_attention.h"
#include "kernels/cuda_common.cuh"

namespace mt {
namespace {

using cuda::fromFloat;
using cuda::toFloat;

constexpr int kWarps = 4;
constexpr int kChannelsPerLane = kCachedAttentionMaxHeadDim / 32;

template <typename T>
__global__ void cachedAttentionKernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                      const T* __restrict__ k_cache, const T* __restrict__ v_cache,
                                      const int32_t* __restrict__ positions, const float* __restrict__ sinks,
                                      T* __restrict__ out, AttentionShape s, int64_t cache_rows) {
  const int64_t task = blockIdx.x;
  const int64_t t = task % s.seq, h = (task / s.seq) % s.heads, b = task / (s.seq * s.heads);
  const int64_t kv = (h / (s.heads / s.kv_heads)) * s.head_dim, p0 = cachedPrefix(positions, b, s.seq, cache_rows);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const T* qi = q + (b * s.seq + t) * s.q_stride + h * s.head_dim;
  float qd[kChannelsPerLane], acc[kChannelsPerLane];
  for (int c = 0; c < kChannelsPerLane; ++c) {
    const int64_t d = lane + 32 * c;
    qd[c] = d < s.head_dim ? toFloat(qi[d]) : 0.0f;
    acc[c] = 0.0f;
  }
  float max_score = -INFINITY, sum = 0.0f;
  // Keys [first, p0 + t]: all before the token, or its window's.
  for (int64_t j = firstVisibleKey(s, b, p0 + t) + warp; j < p0 + t + 1; j += kWarps) {
    const T* kj = j < p0 ? k_cache + (b * cache_rows + j) * s.kv_stride + kv : k + (b * s.seq + j - p0) * s.kv_stride + kv;
    const T* vj = j < p0 ? v_cache + (b * cache_rows + j) * s.kv_stride + kv : v + (b * s.seq + j - p0) * s.kv_stride + kv;
    float dot = 0.0f;
    for (int c = 0; c < kChannelsPerLane; ++c) {
      const int64_t d = lane + 32 * c;
      if (d < s.head_dim) dot += qd[c] * toFloat(kj[d]);
    }
    const float score = attentionSoftcap(s, s.scale * cuda::warpSum(dot));
    const float new_max = fmaxf(max_score, score);
    const float rescale = expf(max_score - new_max), p = expf(score - new_max);
    sum = sum * rescale + p;
    for (int c = 0; c < kChannelsPerLane; ++c) {
      const int64_t d = lane + 32 * c;
      acc[c] = acc[c] * rescale + (d < s.head_dim ? p * toFloat(vj[d]) : 0.0f);
    }
    max_score = new_max;
  }
  // Merge the warps: each rescales its sum and output to the block's maximum.
  __shared__ float warp_max[kWarps], warp_sum[kWarps], warp_out[kWarps][kCachedAttentionMaxHeadDim];
  if (lane == 0) warp_max[warp] = max_score, warp_sum[warp] = sum;
  for (int c = 0; c < kChannelsPerLane; ++c) warp_out[warp][lane + 32 * c] = acc[c];
  __syncthreads();
  // The sink, where the call has one, joins the denominator with no value.
  float block_max = sinks ? sinks[h] : -INFINITY;
  for (int w = 0; w < kWarps; ++w) block_max = fmaxf(block_max, warp_max[w]);
  float total = sinks ? expf(sinks[h] - block_max) : 0.0f;
  // A warp that saw no key (max -inf) adds nothing.
  for (int w = 0; w < kWarps; ++w) total += warp_max[w] == -INFINITY ? 0.0f : warp_sum[w] * expf(warp_max[w] - block_max);
  T* oi = out + (b * s.seq + t) * s.q_stride + h * s.head_dim;
  for (int64_t d = threadIdx.x; d < s.head_dim; d += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (warp_max[w] != -INFINITY) o += warp_out[w][d] * expf(warp_max[w] - block_max);
    oi[d] = fromFloat<T>(o / total);
  }
}

}  // namespace

void cached_attention_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& q = args.in[0];
  const AttentionShape s = attentionShape(q, args);
  const float* sinks = args.in.size() == 7 ? args.in[6].f32() : nullptr;
  const int64_t tasks = s.batch * s.heads * s.seq;
  if (tasks == 0) return;
  cuda::withFloat(q.dtype, [&](auto tag) {
    using T = decltype(tag);
    cachedAttentionKernel<T><<<cuda::gridBlocks(tasks, "cached_attention"), 32 * kWarps, 0, launch.stream>>>(
        cuda::data<const T>(q), cuda::data<const T>(args.in[1]), cuda::data<const T>(args.in[2]),
        cuda::data<const T>(args.in[3]), cuda::data<const T>(args.in[4]), args.in[5].i32(), sinks,
        cuda::data<T>(args.out[0]), s, args.in[3].dim(1));
  });
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
