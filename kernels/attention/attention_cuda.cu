// CUDA twins of fused causal attention; kernels/attention/attention_cpu.cc is the reference.
// One warp per row: the forward streams the keys of a query row with an online softmax (no
// score matrix is stored, as in flash attention); the backward runs one warp per query row for
// dq and one per key row for dk/dv (each warp owns its outputs: no atomics), recomputing the
// probabilities from the saved log-sum-exp. Each lane holds head_dim/32 elements of a row.
// Correct and memory-frugal, not yet fast: the tensor-core kernel is future work (docs/perf.md).
#include "kernels/attention/attention.h"
#include "kernels/cuda_common.cuh"

namespace mt {
namespace {

using cuda::warpSum;

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

using Dims = AttentionShape;

// A row of head_dim floats spread over the lanes: lane l holds elements l, l + 32, ...
struct LaneRow {
  float v[kMaxPerLane];
  __device__ void load(const float* row, int64_t head_dim, float factor = 1.0f) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int64_t d = lane + 32 * e;
      v[e] = d < head_dim ? row[d] * factor : 0.0f;
    }
  }
  __device__ void zero() {
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) v[e] = 0.0f;
  }
  __device__ void store(float* row, int64_t head_dim, float factor = 1.0f) const {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int64_t d = lane + 32 * e;
      if (d < head_dim) row[d] = v[e] * factor;
    }
  }
  // The dot product with a row in memory, summed over the warp (every lane gets it).
  __device__ float dot(const float* row, int64_t head_dim) const {
    const int lane = threadIdx.x & 31;
    float sum = 0.0f;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int64_t d = lane + 32 * e;
      if (d < head_dim) sum += v[e] * row[d];
    }
    return warpSum(sum);
  }
  __device__ float dot(const LaneRow& other) const {
    float sum = 0.0f;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) sum += v[e] * other.v[e];
    return warpSum(sum);
  }
  // this = this * keep + factor * row
  __device__ void axpby(float keep, float factor, const float* row, int64_t head_dim) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int64_t d = lane + 32 * e;
      v[e] = v[e] * keep + (d < head_dim ? factor * row[d] : 0.0f);
    }
  }
};

__device__ int64_t warpIndex() { return (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5; }

// Where warp `w`'s query row (b, h, i) and its key/value head live.
struct QueryRow {
  int64_t i, lse_index;  // position; index into lse (B, H, T)
  int64_t q_off;         // offset of the row in q, out, dout, dq
  int64_t kv_base;       // offset of key/value row 0 of its batch and head in k, v
};
__device__ QueryRow queryRow(int64_t w, const Dims& d) {
  const int64_t i = w % d.seq, h = (w / d.seq) % d.heads, b = w / (d.seq * d.heads);
  const int64_t kvh = h / (d.heads / d.kv_heads);
  return {i, (b * d.heads + h) * d.seq + i, (b * d.seq + i) * d.q_stride + h * d.head_dim,
          b * d.seq * d.kv_stride + kvh * d.head_dim};
}

// Warp per query row (b, h, i): out row and lse.
__global__ void attentionForward(const float* __restrict__ q, const float* __restrict__ k,
                                 const float* __restrict__ v, float* __restrict__ out, float* __restrict__ lse,
                                 Dims d) {
  const int64_t w = warpIndex();
  if (w >= d.batch * d.heads * d.seq) return;
  const QueryRow row = queryRow(w, d);
  const int64_t i = row.i, q_off = row.q_off;
  const float *kb = k + row.kv_base, *vb = v + row.kv_base;
  LaneRow qi, acc;
  qi.load(q + q_off, d.head_dim);
  acc.zero();
  float running_max = -INFINITY, sum = 0.0f;
  for (int64_t j = 0; j <= i; ++j) {
    const float s = d.scale * qi.dot(kb + j * d.kv_stride, d.head_dim);
    const float new_max = fmaxf(running_max, s);
    const float keep = expf(running_max - new_max), p = expf(s - new_max);
    sum = sum * keep + p;
    acc.axpby(keep, p, vb + j * d.kv_stride, d.head_dim);
    running_max = new_max;
  }
  acc.store(out + q_off, d.head_dim, 1.0f / sum);
  if ((threadIdx.x & 31) == 0) lse[row.lse_index] = running_max + logf(sum);
}

// Warp per query row (b, h, i): dq = sum_j dS_ij k_j, dS = P (dP - rowsum(dO * O)) * scale.
__global__ void attentionGradQuery(const float* __restrict__ dout, const float* __restrict__ q,
                                   const float* __restrict__ k, const float* __restrict__ v,
                                   const float* __restrict__ out, const float* __restrict__ lse,
                                   float* __restrict__ dq, Dims d) {
  const int64_t w = warpIndex();
  if (w >= d.batch * d.heads * d.seq) return;
  const QueryRow row = queryRow(w, d);
  const int64_t i = row.i, q_off = row.q_off;
  const float *kb = k + row.kv_base, *vb = v + row.kv_base;
  LaneRow qi, doi, oi, acc;
  qi.load(q + q_off, d.head_dim);
  doi.load(dout + q_off, d.head_dim);
  oi.load(out + q_off, d.head_dim);
  acc.zero();
  const float delta = doi.dot(oi), l = lse[row.lse_index];
  for (int64_t j = 0; j <= i; ++j) {
    const float p = expf(d.scale * qi.dot(kb + j * d.kv_stride, d.head_dim) - l);
    const float ds = p * (doi.dot(vb + j * d.kv_stride, d.head_dim) - delta) * d.scale;
    acc.axpby(1.0f, ds, kb + j * d.kv_stride, d.head_dim);
  }
  acc.store(dq + q_off, d.head_dim);
}

// Warp per key row (b, kv head, j): dv_j = sum P_ij dO_i, dk_j = sum dS_ij q_i over the query
// heads sharing this key/value head and the rows i >= j.
__global__ void attentionGradKey(const float* __restrict__ dout, const float* __restrict__ q,
                                 const float* __restrict__ k, const float* __restrict__ v,
                                 const float* __restrict__ out, const float* __restrict__ lse,
                                 float* __restrict__ dk, float* __restrict__ dv, Dims d) {
  const int64_t w = warpIndex();
  if (w >= d.batch * d.kv_heads * d.seq) return;
  const int64_t j = w % d.seq, kvh = (w / d.seq) % d.kv_heads, b = w / (d.seq * d.kv_heads);
  const int64_t group = d.heads / d.kv_heads;
  const int64_t kv_off = (b * d.seq + j) * d.kv_stride + kvh * d.head_dim;
  LaneRow kj, vj, dkj, dvj, qi, doi;
  kj.load(k + kv_off, d.head_dim);
  vj.load(v + kv_off, d.head_dim);
  dkj.zero();
  dvj.zero();
  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    for (int64_t i = j; i < d.seq; ++i) {
      const int64_t q_off = (b * d.seq + i) * d.q_stride + h * d.head_dim;
      qi.load(q + q_off, d.head_dim);
      doi.load(dout + q_off, d.head_dim);
      const float p = expf(d.scale * qi.dot(kj) - lse[(b * d.heads + h) * d.seq + i]);
      const float ds = p * (doi.dot(vj) - doi.dot(out + q_off, d.head_dim)) * d.scale;
#pragma unroll
      for (int e = 0; e < kMaxPerLane; ++e) {
        dvj.v[e] += p * doi.v[e];
        dkj.v[e] += ds * qi.v[e];
      }
    }
  }
  dkj.store(dk + kv_off, d.head_dim);
  dvj.store(dv + kv_off, d.head_dim);
}

Dims attnDims(const Tensor& q, const KernelArgs& args) {
  const Dims d = attentionShape(q, args);
  if (d.head_dim > 32 * kMaxPerLane)
    throw std::runtime_error("attention on CUDA supports head_dim <= " + std::to_string(32 * kMaxPerLane) +
                             ", got " + std::to_string(d.head_dim));
  return d;
}

unsigned warpBlocks(int64_t warps) {
  return cuda::gridBlocks((warps + kWarpsPerBlock - 1) / kWarpsPerBlock, "attention");
}

}  // namespace

void attention_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Dims d = attnDims(args.in[0], args);
  const int64_t rows = d.batch * d.heads * d.seq;
  if (rows == 0) return;
  attentionForward<<<warpBlocks(rows), 32 * kWarpsPerBlock, 0, launch.stream>>>(
      args.in[0].f32(), args.in[1].f32(), args.in[2].f32(), args.out[0].f32(), args.out[1].f32(), d);
  MT_CUDA_CHECK_LAUNCH();
}

void attention_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Dims d = attnDims(args.in[1], args);
  const float *dout = args.in[0].f32(), *q = args.in[1].f32(), *k = args.in[2].f32(), *v = args.in[3].f32();
  const float *out = args.in[4].f32(), *lse = args.in[5].f32();
  const int64_t query_rows = d.batch * d.heads * d.seq, key_rows = d.batch * d.kv_heads * d.seq;
  if (query_rows == 0) return;
  attentionGradQuery<<<warpBlocks(query_rows), 32 * kWarpsPerBlock, 0, launch.stream>>>(dout, q, k, v, out, lse,
                                                                                       args.out[0].f32(), d);
  MT_CUDA_CHECK_LAUNCH();
  attentionGradKey<<<warpBlocks(key_rows), 32 * kWarpsPerBlock, 0, launch.stream>>>(
      dout, q, k, v, out, lse, args.out[1].f32(), args.out[2].f32(), d);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
