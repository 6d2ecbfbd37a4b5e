// CUDA twins of fused causal attention; kernels/attention/attention_cpu.cc is the reference.
// Flash-style: no score matrix is stored; the backward recomputes the probabilities from the
// saved log-sum-exp. Two implementations:
// - tiled (head_dim <= 128): a block of 256 threads owns a 64 x 64 tile of scores, each thread
//   a 4 x 4 share of it, with query/key/value tiles staged in shared memory; the forward keeps
//   an online softmax per row; the backward is one kernel for dk/dv (block per key tile, summing
//   over the query heads of its group) and one for dq (block per query tile), so every output
//   has one writer: no atomics, deterministic. Exact fp32 on the CUDA cores.
// q, k, v, out and their gradients are f32 or bf16 (T: a bf16 plan): loads widen, stores round
// to nearest even, everything between (scores, softmax, sums) is f32; the lse is f32.
// - one warp per row (head_dim <= 256): the simple version, kept for wide heads whose tiles
//   would not fit in shared memory.
// bf16 calls with head_dim 64 or 128 run on the tensor cores instead (attention_mma_cuda.cu), or,
// where the run chose it (CudaLaunch::cudnn_attention), through cuDNN (attention_cudnn.cc). A
// sliding window, sinks (gpt-oss) or packed examples are not cuDNN's here: the tensor cores take
// all three both ways (the backward of sinks is the plain one given their lse), and these kernels
// the rest (f32 calls, other head widths): they mask by the window and the examples (visibleKey),
// start each row's online softmax from its sink (max = sink, sum = 1, no value) and skip the key
// tiles no query of a tile sees. cuDNN's graph refuses softcapped scores (Gemma 2): every kernel here
// and the tensor cores' cap each scaled score (attentionSoftcap) and scale its gradient by the slope.
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cudnn.h"
#include "kernels/attention/attention_mma.cuh"
#include "kernels/cuda_common.cuh"

#include <type_traits>

namespace mt {
namespace {

using cuda::fromFloat;
using cuda::toFloat;
using cuda::warpSum;

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

using Dims = AttentionShape;

// A row of head_dim floats spread over the lanes: lane l holds elements l, l + 32, ...
struct LaneRow {
  float v[kMaxPerLane];
  template <typename T>
  __device__ void load(const T* row, int64_t head_dim, float factor = 1.0f) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int64_t d = lane + 32 * e;
      v[e] = d < head_dim ? toFloat(row[d]) * factor : 0.0f;
    }
  }
  __device__ void zero() {
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) v[e] = 0.0f;
  }
  template <typename T>
  __device__ void store(T* row, int64_t head_dim, float factor = 1.0f) const {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int64_t d = lane + 32 * e;
      if (d < head_dim) row[d] = fromFloat<T>(v[e] * factor);
    }
  }
  // The dot product with a row in memory, summed over the warp (every lane gets it).
  template <typename T>
  __device__ float dot(const T* row, int64_t head_dim) const {
    const int lane = threadIdx.x & 31;
    float sum = 0.0f;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int64_t d = lane + 32 * e;
      if (d < head_dim) sum += v[e] * toFloat(row[d]);
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
  template <typename T>
  __device__ void axpby(float keep, float factor, const T* row, int64_t head_dim) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int64_t d = lane + 32 * e;
      v[e] = v[e] * keep + (d < head_dim ? factor * toFloat(row[d]) : 0.0f);
    }
  }
};

__device__ int64_t warpIndex() { return (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5; }

// Where warp `w`'s query row (b, h, i) and its key/value head live.
struct QueryRow {
  int64_t b, i, h, lse_index;  // batch row; position; query head; index into lse (B, H, T)
  int64_t q_off;         // offset of the row in q, out, dout, dq
  int64_t kv_base;       // offset of key/value row 0 of its batch and head in k, v
};
__device__ QueryRow queryRow(int64_t w, const Dims& d) {
  const int64_t i = w % d.seq, h = (w / d.seq) % d.heads, b = w / (d.seq * d.heads);
  const int64_t kvh = h / (d.heads / d.kv_heads);
  return {b, i, h, (b * d.heads + h) * d.seq + i, (b * d.seq + i) * d.q_stride + h * d.head_dim,
          b * d.seq * d.kv_stride + kvh * d.head_dim};
}

// Warp per query row (b, h, i): out row and lse.
template <typename T>
__global__ void attentionForward(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                 const float* __restrict__ sinks, T* __restrict__ out, float* __restrict__ lse, Dims d) {
  const int64_t w = warpIndex();
  if (w >= d.batch * d.heads * d.seq) return;
  const QueryRow row = queryRow(w, d);
  const int64_t i = row.i, q_off = row.q_off;
  const T *kb = k + row.kv_base, *vb = v + row.kv_base;
  LaneRow qi, acc;
  qi.load(q + q_off, d.head_dim);
  acc.zero();
  // From the sink where there is one: exp(sink - sink) in the sum, nothing in the output.
  float running_max = sinks ? sinks[row.h] : -INFINITY, sum = sinks ? 1.0f : 0.0f;
  for (int64_t j = firstVisibleKey(d, row.b, i); j <= i; ++j) {
    const float s = attentionSoftcap(d, d.scale * qi.dot(kb + j * d.kv_stride, d.head_dim));
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
template <typename T>
__global__ void attentionGradQuery(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k,
                                   const T* __restrict__ v, const T* __restrict__ out, const float* __restrict__ lse,
                                   T* __restrict__ dq, Dims d) {
  const int64_t w = warpIndex();
  if (w >= d.batch * d.heads * d.seq) return;
  const QueryRow row = queryRow(w, d);
  const int64_t i = row.i, q_off = row.q_off;
  const T *kb = k + row.kv_base, *vb = v + row.kv_base;
  LaneRow qi, doi, oi, acc;
  qi.load(q + q_off, d.head_dim);
  doi.load(dout + q_off, d.head_dim);
  oi.load(out + q_off, d.head_dim);
  acc.zero();
  const float delta = doi.dot(oi), l = lse[row.lse_index];
  for (int64_t j = firstVisibleKey(d, row.b, i); j <= i; ++j) {
    float slope;
    const float p = expf(attentionSoftcap(d, d.scale * qi.dot(kb + j * d.kv_stride, d.head_dim), &slope) - l);
    const float ds = p * (doi.dot(vb + j * d.kv_stride, d.head_dim) - delta) * d.scale * slope;
    acc.axpby(1.0f, ds, kb + j * d.kv_stride, d.head_dim);
  }
  acc.store(dq + q_off, d.head_dim);
}

// Warp per key row (b, kv head, j): dv_j = sum P_ij dO_i, dk_j = sum dS_ij q_i over the query
// heads sharing this key/value head and the rows i >= j.
template <typename T>
__global__ void attentionGradKey(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k,
                                 const T* __restrict__ v, const T* __restrict__ out, const float* __restrict__ lse,
                                 T* __restrict__ dk, T* __restrict__ dv, Dims d) {
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
    for (int64_t i = j, last = queryReachEnd(d, j); i < last; ++i) {
      if (!visibleKey(d, b, i, j)) continue;  // another example's query (packed examples)
      const int64_t q_off = (b * d.seq + i) * d.q_stride + h * d.head_dim;
      qi.load(q + q_off, d.head_dim);
      doi.load(dout + q_off, d.head_dim);
      float slope;
      const float p = expf(attentionSoftcap(d, d.scale * qi.dot(kj), &slope) - lse[(b * d.heads + h) * d.seq + i]);
      const float ds = p * (doi.dot(vj) - doi.dot(out + q_off, d.head_dim)) * d.scale * slope;
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


// ---- Tiled kernels ----------------------------------------------------------------------------
constexpr int kTile = 64;           // query rows and key rows per tile
constexpr int kTileThreads = 256;   // 16 x 16 threads; thread (ty, tx) owns rows ty + 16r, cols tx + 16c
constexpr int kPad = kTile + 1;     // row length of a staged tile: 65 makes rows and columns conflict-free
constexpr int kMaxTiledHeadDim = 128;

// A (rows, head_dim) slab of q/k/v/out (row r at src + r * stride) staged transposed into
// shared memory as (DP, kPad): tile[d * kPad + r]. Rows past `rows` and dims past head_dim
// are zero, so padded rows and columns add nothing.
template <int DP, typename T>
__device__ void stageTransposed(float* tile, const T* __restrict__ src, int64_t rows, int64_t stride,
                                int64_t head_dim) {
  for (int idx = threadIdx.x; idx < DP * kTile; idx += kTileThreads) {
    const int r = idx / DP, dim = idx % DP;
    tile[dim * kPad + r] = r < rows && dim < head_dim ? toFloat(src[r * stride + dim]) : 0.0f;
  }
}

// Sum over the 16 lanes that share a row (the lanes of one half-warp).
__device__ float rowSum16(float v) {
  for (int offset = 8; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ float rowMax16(float v) {
  for (int offset = 8; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// acc[r][c] += sum_d a[d][ty + 16r] * b[d][tx + 16c] over staged (DP, kPad) tiles.
template <int DP>
__device__ void tileDot(float (&acc)[4][4], const float* a, const float* b) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll 4
  for (int dim = 0; dim < DP; ++dim) {
    float x[4], y[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      x[i] = a[dim * kPad + ty + 16 * i];
      y[i] = b[dim * kPad + tx + 16 * i];
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[r][c] += x[r] * y[c];
  }
}

// acc[r][e] += sum_j m[(ty + 16r) * kPad + j] * t[(tx + 16e) * kPad + j]: a (64, 64) row-major
// matrix in shared memory times a staged (DP, kPad) tile; thread rows ty + 16r, dims tx + 16e.
// With `transpose_m`, m is read as m[j * kPad + ty + 16r] (its transpose).
template <int DP, bool transpose_m>
__device__ void tileMatmul(float (&acc)[4][DP / 16], const float* m, const float* t) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll 4
  for (int j = 0; j < kTile; ++j) {
    float x[4], y[DP / 16];
#pragma unroll
    for (int r = 0; r < 4; ++r) x[r] = transpose_m ? m[j * kPad + ty + 16 * r] : m[(ty + 16 * r) * kPad + j];
#pragma unroll
    for (int e = 0; e < DP / 16; ++e) y[e] = t[(tx + 16 * e) * kPad + j];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int e = 0; e < DP / 16; ++e) acc[r][e] += x[r] * y[e];
  }
}

// Writes acc[r][e] * factor[r] to rows first_row + ty + 16r (< rows) and dims tx + 16e
// (< head_dim) of dst (row stride `stride`).
template <int DP, typename T>
__device__ void storeRows(T* __restrict__ dst, const float (&acc)[4][DP / 16], const float (&factor)[4],
                          int64_t first_row, int64_t rows, int64_t stride, int64_t head_dim) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t row = first_row + ty + 16 * r;
    if (row >= rows) continue;
#pragma unroll
    for (int e = 0; e < DP / 16; ++e)
      if (tx + 16 * e < head_dim) dst[row * stride + tx + 16 * e] = fromFloat<T>(acc[r][e] * factor[r]);
  }
}

// Per query row of a tile: its lse and delta = rowsum(dout * out), which the backward needs;
// rows past the sequence get lse = +inf, so their probabilities are 0.
template <typename T>
__device__ void stageRowStats(float* row_lse, float* row_delta, const float* __restrict__ lse_rows,
                             const T* __restrict__ dout, const T* __restrict__ out, int64_t rows, int64_t stride,
                             int64_t head_dim) {
  const int lane = threadIdx.x & 31;
  for (int r = threadIdx.x >> 5; r < kTile; r += kTileThreads / 32) {
    float sum = 0.0f;
    if (r < rows)
      for (int64_t dim = lane; dim < head_dim; dim += 32)
        sum += toFloat(dout[r * stride + dim]) * toFloat(out[r * stride + dim]);
    sum = warpSum(sum);
    if (lane == 0) {
      row_delta[r] = sum;
      row_lse[r] = r < rows ? lse_rows[r] : INFINITY;
    }
  }
}

// Probabilities p and score gradients ds of the (query tile i0, key tile j0) pair from the
// scores s and dp = dout . v, with the causal mask (and the window): p = 0 where the query does
// not see the key.
__device__ void probabilitiesAndScoreGrads(float (&s)[4][4], float (&dp)[4][4], const float* row_lse,
                                           const float* row_delta, int64_t b, int64_t i0, int64_t j0,
                                           const Dims& d) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const bool visible = visibleKey(d, b, i0 + ty + 16 * r, j0 + tx + 16 * c);
      float slope;
      const float p = visible ? expf(attentionSoftcap(d, d.scale * s[r][c], &slope) - row_lse[ty + 16 * r]) : 0.0f;
      s[r][c] = p;
      dp[r][c] = visible ? p * (dp[r][c] - row_delta[ty + 16 * r]) * d.scale * slope : 0.0f;
    }
}

// Where block `block` of a (batch, heads, tiles) grid works, heaviest tiles first when
// `reverse` (a causal query tile t sees t + 1 key tiles).
struct TileCoords {
  int64_t b, head, tile;
};
__device__ TileCoords tileCoords(int64_t heads, int64_t tiles, bool reverse) {
  const int64_t block = blockIdx.x, t = block % tiles;
  return {block / (tiles * heads), (block / tiles) % heads, reverse ? tiles - 1 - t : t};
}

template <int DP, typename T>
__global__ void __launch_bounds__(kTileThreads)
    attentionForwardTiled(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const float* __restrict__ sinks, T* __restrict__ out, float* __restrict__ lse, Dims d) {
  extern __shared__ float smem[];
  float *q_tile = smem, *k_tile = q_tile + DP * kPad, *v_tile = k_tile + DP * kPad;
  float* p_tile = v_tile + DP * kPad;  // (64, kPad) probabilities, row-major
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t tiles = (d.seq + kTile - 1) / kTile;
  const TileCoords at = tileCoords(d.heads, tiles, true);
  const int64_t i0 = at.tile * kTile, kvh = at.head / (d.heads / d.kv_heads);
  const T* qb = q + (at.b * d.seq) * d.q_stride + at.head * d.head_dim;
  const T* kb = k + (at.b * d.seq) * d.kv_stride + kvh * d.head_dim;
  const T* vb = v + (at.b * d.seq) * d.kv_stride + kvh * d.head_dim;
  stageTransposed<DP>(q_tile, qb + i0 * d.q_stride, d.seq - i0, d.q_stride, d.head_dim);

  // Each row's online softmax starts from its sink where there is one (exp(sink - sink) in the sum).
  float row_max[4], row_sum[4], acc[4][DP / 16] = {};
#pragma unroll
  for (int r = 0; r < 4; ++r) row_max[r] = sinks ? sinks[at.head] : -INFINITY, row_sum[r] = sinks ? 1.0f : 0.0f;
  for (int64_t j0 = firstKeyTileStart<kTile>(d, at.b, i0); j0 <= i0; j0 += kTile) {
    __syncthreads();  // the previous key tile's readers are done
    stageTransposed<DP>(k_tile, kb + j0 * d.kv_stride, d.seq - j0, d.kv_stride, d.head_dim);
    stageTransposed<DP>(v_tile, vb + j0 * d.kv_stride, d.seq - j0, d.kv_stride, d.head_dim);
    __syncthreads();
    float s[4][4] = {};
    tileDot<DP>(s, q_tile, k_tile);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      // A row may see none of this tile's keys (its window starts later) and none before: its
      // maximum stays -inf, and nothing is added or rescaled.
      float new_max = row_max[r];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[r][c] = visibleKey(d, at.b, i0 + ty + 16 * r, j0 + tx + 16 * c) ? attentionSoftcap(d, d.scale * s[r][c])
                                                                          : -INFINITY;
        new_max = fmaxf(new_max, s[r][c]);
      }
      new_max = rowMax16(new_max);
      const float keep = new_max == -INFINITY ? 1.0f : expf(row_max[r] - new_max);
      const float base = new_max == -INFINITY ? 0.0f : new_max;  // exp(-inf - base) = 0, never NaN
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float p = expf(s[r][c] - base);
        p_tile[(ty + 16 * r) * kPad + tx + 16 * c] = p;
        sum += p;
      }
      row_sum[r] = row_sum[r] * keep + rowSum16(sum);
      row_max[r] = new_max;
#pragma unroll
      for (int e = 0; e < DP / 16; ++e) acc[r][e] *= keep;
    }
    __syncthreads();
    tileMatmul<DP, false>(acc, p_tile, v_tile);
  }
  float inv_sum[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) inv_sum[r] = 1.0f / row_sum[r];
  storeRows<DP>(out + (at.b * d.seq) * d.q_stride + at.head * d.head_dim, acc, inv_sum, i0, d.seq, d.q_stride,
                d.head_dim);
  if (tx == 0)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      if (i0 + ty + 16 * r < d.seq)
        lse[(at.b * d.heads + at.head) * d.seq + i0 + ty + 16 * r] = row_max[r] + logf(row_sum[r]);
}

// Block per key tile of (batch, kv head): dv = sum P^T dout, dk = sum dS^T q over the query
// heads of its group and the query tiles at or after it.
template <int DP, typename T>
__global__ void __launch_bounds__(kTileThreads)
    attentionGradKeyTiled(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k,
                          const T* __restrict__ v, const T* __restrict__ out, const float* __restrict__ lse,
                          T* __restrict__ dk, T* __restrict__ dv, Dims d) {
  extern __shared__ float smem[];
  float *k_tile = smem, *v_tile = k_tile + DP * kPad, *q_tile = v_tile + DP * kPad, *do_tile = q_tile + DP * kPad;
  float *p_tile = do_tile + DP * kPad, *ds_tile = p_tile + kTile * kPad;  // (64, kPad) each, [query][key]
  float *row_lse = ds_tile + kTile * kPad, *row_delta = row_lse + kTile;
  const int64_t tiles = (d.seq + kTile - 1) / kTile;
  const TileCoords at = tileCoords(d.kv_heads, tiles, false);
  const int64_t j0 = at.tile * kTile, group = d.heads / d.kv_heads;
  const int64_t kv_first = (at.b * d.seq) * d.kv_stride + at.head * d.head_dim;
  stageTransposed<DP>(k_tile, k + kv_first + j0 * d.kv_stride, d.seq - j0, d.kv_stride, d.head_dim);
  stageTransposed<DP>(v_tile, v + kv_first + j0 * d.kv_stride, d.seq - j0, d.kv_stride, d.head_dim);

  // The query tiles that see a key of this tile: from it on, through the last query that does (the
  // window's reach; with packed examples, the end of the last key's example: one scan by the block).
  const int64_t j_last = (j0 + kTile < d.seq ? j0 + kTile : d.seq) - 1;
  const int64_t end = cuda::blockReduce(queriesSeeingKeysEnd(d, at.b, j_last, j0 + threadIdx.x, kTileThreads, j0 + 1),
                                        cuda::MaxOp{}, j0 + 1);
  float dk_acc[4][DP / 16] = {}, dv_acc[4][DP / 16] = {};  // key rows ty + 16r, dims tx + 16e
  for (int64_t h = at.head * group; h < (at.head + 1) * group; ++h) {
    const int64_t q_first = (at.b * d.seq) * d.q_stride + h * d.head_dim;
    for (int64_t i0 = j0; i0 < end; i0 += kTile) {
      __syncthreads();  // the previous query tile's readers are done
      const int64_t row0 = q_first + i0 * d.q_stride;
      stageTransposed<DP>(q_tile, q + row0, d.seq - i0, d.q_stride, d.head_dim);
      stageTransposed<DP>(do_tile, dout + row0, d.seq - i0, d.q_stride, d.head_dim);
      stageRowStats(row_lse, row_delta, lse + (at.b * d.heads + h) * d.seq + i0, dout + row0, out + row0,
                    d.seq - i0, d.q_stride, d.head_dim);
      __syncthreads();
      float s[4][4] = {}, dp[4][4] = {};  // query rows ty + 16r, key cols tx + 16c
      tileDot<DP>(s, q_tile, k_tile);
      tileDot<DP>(dp, do_tile, v_tile);
      probabilitiesAndScoreGrads(s, dp, row_lse, row_delta, at.b, i0, j0, d);
      const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          p_tile[(ty + 16 * r) * kPad + tx + 16 * c] = s[r][c];
          ds_tile[(ty + 16 * r) * kPad + tx + 16 * c] = dp[r][c];
        }
      __syncthreads();
      tileMatmul<DP, true>(dv_acc, p_tile, do_tile);
      tileMatmul<DP, true>(dk_acc, ds_tile, q_tile);
    }
  }
  const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  storeRows<DP>(dk + kv_first, dk_acc, one, j0, d.seq, d.kv_stride, d.head_dim);
  storeRows<DP>(dv + kv_first, dv_acc, one, j0, d.seq, d.kv_stride, d.head_dim);
}

// Block per query tile of (batch, head): dq = sum dS k over the key tiles up to it.
template <int DP, typename T>
__global__ void __launch_bounds__(kTileThreads)
    attentionGradQueryTiled(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k,
                            const T* __restrict__ v, const T* __restrict__ out, const float* __restrict__ lse,
                            T* __restrict__ dq, Dims d) {
  extern __shared__ float smem[];
  float *q_tile = smem, *do_tile = q_tile + DP * kPad, *k_tile = do_tile + DP * kPad, *v_tile = k_tile + DP * kPad;
  float* ds_tile = v_tile + DP * kPad;  // (64, kPad), [query][key]
  float *row_lse = ds_tile + kTile * kPad, *row_delta = row_lse + kTile;
  const int64_t tiles = (d.seq + kTile - 1) / kTile;
  const TileCoords at = tileCoords(d.heads, tiles, true);
  const int64_t i0 = at.tile * kTile, kvh = at.head / (d.heads / d.kv_heads);
  const int64_t row0 = (at.b * d.seq + i0) * d.q_stride + at.head * d.head_dim;
  const int64_t kv_first = (at.b * d.seq) * d.kv_stride + kvh * d.head_dim;
  stageTransposed<DP>(q_tile, q + row0, d.seq - i0, d.q_stride, d.head_dim);
  stageTransposed<DP>(do_tile, dout + row0, d.seq - i0, d.q_stride, d.head_dim);
  stageRowStats(row_lse, row_delta, lse + (at.b * d.heads + at.head) * d.seq + i0, dout + row0, out + row0,
                d.seq - i0, d.q_stride, d.head_dim);

  float dq_acc[4][DP / 16] = {};  // query rows ty + 16r, dims tx + 16e
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int64_t j0 = firstKeyTileStart<kTile>(d, at.b, i0); j0 <= i0; j0 += kTile) {
    __syncthreads();  // the previous key tile's readers are done
    stageTransposed<DP>(k_tile, k + kv_first + j0 * d.kv_stride, d.seq - j0, d.kv_stride, d.head_dim);
    stageTransposed<DP>(v_tile, v + kv_first + j0 * d.kv_stride, d.seq - j0, d.kv_stride, d.head_dim);
    __syncthreads();
    float s[4][4] = {}, dp[4][4] = {};
    tileDot<DP>(s, q_tile, k_tile);
    tileDot<DP>(dp, do_tile, v_tile);
    probabilitiesAndScoreGrads(s, dp, row_lse, row_delta, at.b, i0, j0, d);
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) ds_tile[(ty + 16 * r) * kPad + tx + 16 * c] = dp[r][c];
    __syncthreads();
    tileMatmul<DP, false>(dq_acc, ds_tile, k_tile);
  }
  const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  storeRows<DP>(dq + (at.b * d.seq) * d.q_stride + at.head * d.head_dim, dq_acc, one, i0, d.seq, d.q_stride,
                d.head_dim);
}

// Shared memory of each tiled kernel, in bytes.
template <int DP>
constexpr size_t forwardSmem() { return (3 * DP + kTile) * kPad * sizeof(float); }
template <int DP>
constexpr size_t gradKeySmem() { return ((4 * DP + 2 * kTile) * kPad + 2 * kTile) * sizeof(float); }
template <int DP>
constexpr size_t gradQuerySmem() { return ((4 * DP + kTile) * kPad + 2 * kTile) * sizeof(float); }

// A kernel's dynamic shared memory limit, raised once (the default is 48 KiB).
template <typename Kernel>
void allowSmem(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    MT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <int DP, typename T>
void attentionTiled(const KernelArgs& args, const Dims& d, const float* sinks, cudaStream_t stream) {
  static const bool ready = (allowSmem(attentionForwardTiled<DP, T>, forwardSmem<DP>()), true);
  (void)ready;
  const int64_t tiles = (d.seq + kTile - 1) / kTile;
  attentionForwardTiled<DP, T><<<cuda::gridBlocks(d.batch * d.heads * tiles, "attention"), kTileThreads,
                                 forwardSmem<DP>(), stream>>>(cuda::data<const T>(args.in[0]),
                                                              cuda::data<const T>(args.in[1]),
                                                              cuda::data<const T>(args.in[2]), sinks,
                                                              cuda::data<T>(args.out[0]), args.out[1].f32(), d);
  MT_CUDA_CHECK_LAUNCH();
}

// attention_grad's operands: dout, q, k, v, out (T) and lse.
template <typename T>
struct GradOperands {
  const T *dout, *q, *k, *v, *out;
  const float* lse;
  explicit GradOperands(const KernelArgs& args)
      : dout(cuda::data<const T>(args.in[0])), q(cuda::data<const T>(args.in[1])), k(cuda::data<const T>(args.in[2])),
        v(cuda::data<const T>(args.in[3])), out(cuda::data<const T>(args.in[4])), lse(args.in[5].f32()) {}
};

template <int DP, typename T>
void attentionGradTiled(const KernelArgs& args, const Dims& d, cudaStream_t stream) {
  static const bool ready = (allowSmem(attentionGradKeyTiled<DP, T>, gradKeySmem<DP>()),
                             allowSmem(attentionGradQueryTiled<DP, T>, gradQuerySmem<DP>()), true);
  (void)ready;
  const GradOperands<T> g(args);
  const int64_t tiles = (d.seq + kTile - 1) / kTile;
  attentionGradKeyTiled<DP, T><<<cuda::gridBlocks(d.batch * d.kv_heads * tiles, "attention"), kTileThreads,
                                 gradKeySmem<DP>(), stream>>>(g.dout, g.q, g.k, g.v, g.out, g.lse,
                                                              cuda::data<T>(args.out[1]), cuda::data<T>(args.out[2]),
                                                              d);
  MT_CUDA_CHECK_LAUNCH();
  attentionGradQueryTiled<DP, T><<<cuda::gridBlocks(d.batch * d.heads * tiles, "attention"), kTileThreads,
                                   gradQuerySmem<DP>(), stream>>>(g.dout, g.q, g.k, g.v, g.out, g.lse,
                                                                  cuda::data<T>(args.out[0]), d);
  MT_CUDA_CHECK_LAUNCH();
}

// Calls f(std::integral_constant<int, DP>) with head_dim padded to the tiled kernels' next
// instantiation (a multiple of 16).
template <typename F>
void withPaddedHeadDim(int64_t head_dim, F f) {
  if (head_dim <= 16) f(std::integral_constant<int, 16>{});
  else if (head_dim <= 32) f(std::integral_constant<int, 32>{});
  else if (head_dim <= 64) f(std::integral_constant<int, 64>{});
  else f(std::integral_constant<int, 128>{});
}

Dims attnDims(const Tensor& q, const KernelArgs& args, const Tensor* positions = nullptr) {
  const Dims d = attentionShape(q, args, positions);
  if (d.head_dim > 32 * kMaxPerLane)
    throw std::runtime_error("attention on CUDA supports head_dim <= " + std::to_string(32 * kMaxPerLane) +
                             ", got " + std::to_string(d.head_dim));
  return d;
}

unsigned warpBlocks(int64_t warps) {
  return cuda::gridBlocks((warps + kWarpsPerBlock - 1) / kWarpsPerBlock, "attention");
}

}  // namespace

namespace {

// mt.attention(_sinks) and their packed rows (d.positions set), `sinks` (H) or null. A window,
// sinks or packed examples are not cuDNN's graph (the backend sends no such call to it); the
// tensor cores take them.
void attentionForwardCall(const KernelArgs& args, const Dims& d, const float* sinks, const CudaLaunch& launch) {
  const int64_t rows = d.batch * d.heads * d.seq;
  if (rows == 0) return;
  const bool plain = d.window == 0 && !sinks && !d.positions;
  if (!plain && launch.cudnn_attention && launch.cudnn_only)
    throw std::runtime_error(
        "attention with a sliding window, sinks or packed examples: cuDNN's fused attention here takes none");
  if (plain && CudnnAttention::runs(launch, args.in[0], d)) return launch.cudnn_attention->forward(args, d);
  if (attentionOnTensorCores(args.in[0], d)) return attentionForwardTensorCores(args, d, sinks, launch.stream);
  cuda::withFloat(args.in[0].dtype, [&](auto type) {
    using T = decltype(type);
    if (d.head_dim <= kMaxTiledHeadDim) {
      withPaddedHeadDim(d.head_dim,
                        [&](auto dp) { attentionTiled<decltype(dp)::value, T>(args, d, sinks, launch.stream); });
      return;
    }
    attentionForward<<<warpBlocks(rows), 32 * kWarpsPerBlock, 0, launch.stream>>>(
        cuda::data<const T>(args.in[0]), cuda::data<const T>(args.in[1]), cuda::data<const T>(args.in[2]), sinks,
        cuda::data<T>(args.out[0]), args.out[1].f32(), d);
    MT_CUDA_CHECK_LAUNCH();
  });
}

// mt.attention_grad and its packed row. The backward of sinks is the plain one given their lse;
// a window or packed examples take the tensor cores or these kernels.
void attentionBackwardCall(const KernelArgs& args, const Dims& d, const CudaLaunch& launch) {
  const int64_t query_rows = d.batch * d.heads * d.seq, key_rows = d.batch * d.kv_heads * d.seq;
  if (query_rows == 0) return;
  const bool plain = d.window == 0 && !d.positions;
  if (!plain && launch.cudnn_attention && launch.cudnn_only)
    throw std::runtime_error("attention with a sliding window or packed examples: cuDNN's fused attention here takes neither");
  if (plain && CudnnAttention::runs(launch, args.in[1], d)) return launch.cudnn_attention->backward(args, d);
  if (attentionOnTensorCores(args.in[1], d)) return attentionBackwardTensorCores(args, d, launch.stream);
  cuda::withFloat(args.in[1].dtype, [&](auto type) {
    using T = decltype(type);
    if (d.head_dim <= kMaxTiledHeadDim) {
      withPaddedHeadDim(d.head_dim,
                        [&](auto dp) { attentionGradTiled<decltype(dp)::value, T>(args, d, launch.stream); });
      return;
    }
    const GradOperands<T> g(args);
    attentionGradQuery<<<warpBlocks(query_rows), 32 * kWarpsPerBlock, 0, launch.stream>>>(
        g.dout, g.q, g.k, g.v, g.out, g.lse, cuda::data<T>(args.out[0]), d);
    MT_CUDA_CHECK_LAUNCH();
    attentionGradKey<<<warpBlocks(key_rows), 32 * kWarpsPerBlock, 0, launch.stream>>>(
        g.dout, g.q, g.k, g.v, g.out, g.lse, cuda::data<T>(args.out[1]), cuda::data<T>(args.out[2]), d);
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void attention_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  attentionForwardCall(args, attnDims(args.in[0], args), attentionSinks(args, false), launch);
}

void attention_packed_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  attentionForwardCall(args, attnDims(args.in[0], args, &args.in.back()), attentionSinks(args, true), launch);
}

void attention_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  attentionBackwardCall(args, attnDims(args.in[1], args), launch);
}

void attention_packed_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  attentionBackwardCall(args, attnDims(args.in[1], args, &args.in.back()), launch);
}

}  // namespace mt
