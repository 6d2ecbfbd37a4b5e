// Causal attention of a bf16 plan on the tensor cores (head_dim 64 or 128): flash-style, as the
// CUDA-core kernels of attention_cuda.cu, with the products on WMMA 16x16x16 bf16 fragments
// accumulating in f32. A block of 4 warps owns 64 query rows (forward, dq) or 64 key rows (dk,
// dv); each warp 16 of them. Tiles of q, k, v and dout are staged in shared memory as bf16; the
// scores, the online softmax (forward), the probabilities and score gradients are f32, rounded
// to bf16 only as the operands of the next product (what FlashAttention does); outputs are
// rounded once. The backward is two kernels, as the CUDA-core one: dk/dv per key tile summing
// over the query heads of its group, dq per query tile: one writer per output, no atomics.
// kernels/attention/attention_cpu.cc (with bf16 storage emulated) is the reference the twin
// tests compare with (tests/kernels/cuda_twin_test.cc, Bf16Activations).
#include <mma.h>

#include "kernels/attention/attention_mma.cuh"
#include "kernels/cuda_common.cuh"

namespace mt {
namespace {

using namespace nvcuda;
using cuda::bf16;

constexpr int kRows = 64;          // query (or key) rows per block, 16 per warp
constexpr int kCols = 64;          // key (or query) rows per tile the block loops over
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kScoreLd = kCols + 4;  // f32 (16, kCols) per-warp score tiles
constexpr int kProbLd = kCols + 8;   // bf16 (16, kCols) per-warp probability tiles

template <int D>
struct Layout {
  static constexpr int kLd = D + 8;  // bf16 rows of staged tiles: 16-byte aligned, fewer bank conflicts
  static constexpr int kOutLd = D + 4;
  static constexpr size_t kTile = size_t(kRows) * kLd * sizeof(bf16);                   // a staged (64, D) tile
  static constexpr size_t kScores = size_t(kWarps) * 16 * kScoreLd * sizeof(float);   // per-warp (16, 64) f32
  static constexpr size_t kProbs = size_t(kWarps) * 16 * kProbLd * sizeof(bf16);      // per-warp (16, 64) bf16
  static constexpr size_t kOut = size_t(kWarps) * 16 * kOutLd * sizeof(float);        // per-warp (16, D) f32
};

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Rows [first, first + kRows) of a (seq, D) slab (row r at src + r * stride) into a staged
// tile, 8 bf16 (16 bytes) per access; rows past `rows` are zero.
template <int D>
__device__ void stageTile(bf16* tile, const bf16* __restrict__ src, int64_t rows, int64_t stride) {
  constexpr int kChunks = D / 8;
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < rows) value = *reinterpret_cast<const uint4*>(src + r * stride + c * 8);
    *reinterpret_cast<uint4*>(tile + r * Layout<D>::kLd + c * 8) = value;
  }
}

// scores (16, kCols) f32 of warp rows = a (16, D) rows of `a` times the (kCols, D) rows of `b`
// transposed: a · bᵀ (both staged row-major).
template <int D>
__device__ void productABt(float* scores, const bf16* a, const bf16* b) {
  constexpr int kLd = Layout<D>::kLd;
#pragma unroll
  for (int c = 0; c < kCols / 16; ++c) {
    FragAcc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < D / 16; ++k) {
      FragA fa;
      FragBCol fb;
      wmma::load_matrix_sync(fa, a + k * 16, kLd);
      wmma::load_matrix_sync(fb, b + c * 16 * kLd + k * 16, kLd);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(scores + c * 16, acc, kScoreLd, wmma::mem_row_major);
  }
}

// acc[n] += p (16, kCols) bf16 times the staged (kCols, D) tile t: p · t.
template <int D>
__device__ void accumulatePT(FragAcc (&acc)[D / 16], const bf16* p, const bf16* t) {
#pragma unroll
  for (int k = 0; k < kCols / 16; ++k) {
    FragA fa;
    wmma::load_matrix_sync(fa, p + k * 16, kProbLd);
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      FragBRow fb;
      wmma::load_matrix_sync(fb, t + k * 16 * Layout<D>::kLd + n * 16, Layout<D>::kLd);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

// Writes a warp's (16, D) f32 accumulators, through its staging area, as bf16 rows
// first_row + r (< rows) of dst (row stride `stride`).
template <int D>
__device__ void storeWarpRows(float* staging, FragAcc (&acc)[D / 16], bf16* __restrict__ dst, int64_t first_row,
                              int64_t rows, int64_t stride) {
#pragma unroll
  for (int n = 0; n < D / 16; ++n)
    wmma::store_matrix_sync(staging + n * 16, acc[n], Layout<D>::kOutLd, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x & 31;
  for (int idx = lane; idx < 16 * D; idx += 32) {
    const int r = idx / D, c = idx % D;
    if (first_row + r < rows) dst[(first_row + r) * stride + c] = __float2bfloat16_rn(staging[r * Layout<D>::kOutLd + c]);
  }
}

// Per query row of a tile: its lse (+inf past the sequence: probability 0) and
// delta = rowsum(dout * out), by warps.
template <int D>
__device__ void stageRowStats(float* row_lse, float* row_delta, const float* __restrict__ lse_rows,
                              const bf16* __restrict__ dout, const bf16* __restrict__ out, int64_t rows,
                              int64_t stride) {
  const int lane = threadIdx.x & 31;
  for (int r = threadIdx.x >> 5; r < kRows; r += kWarps) {
    float sum = 0.0f;
    if (r < rows)
      for (int c = lane; c < D; c += 32) sum += __bfloat162float(dout[r * stride + c]) * __bfloat162float(out[r * stride + c]);
    sum = cuda::warpSum(sum);
    if (lane == 0) {
      row_delta[r] = sum;
      row_lse[r] = r < rows ? lse_rows[r] : INFINITY;
    }
  }
}

// (b, head, tile) of this block in a (batch, heads, tiles) grid, heaviest causal tiles first
// when `reverse`.
struct Coords {
  int64_t b, head, tile;
};
__device__ Coords blockCoords(int64_t heads, int64_t tiles, bool reverse) {
  const int64_t block = blockIdx.x, t = block % tiles;
  return {block / (tiles * heads), (block / tiles) % heads, reverse ? tiles - 1 - t : t};
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    flashForward(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                 bf16* __restrict__ out, float* __restrict__ lse, AttentionShape d) {
  using L = Layout<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *q_tile = reinterpret_cast<bf16*>(smem), *k_tile = q_tile + kRows * L::kLd, *v_tile = k_tile + kRows * L::kLd;
  float* scores = reinterpret_cast<float*>(smem + 3 * L::kTile);
  bf16* probs = reinterpret_cast<bf16*>(smem + 3 * L::kTile + L::kScores);
  float* o_rows = reinterpret_cast<float*>(smem + 3 * L::kTile + L::kScores + L::kProbs);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = lane >> 1, half = lane & 1;  // this lane's row of the warp's 16 and half of its columns
  float* warp_scores = scores + warp * 16 * kScoreLd;
  bf16* warp_probs = probs + warp * 16 * kProbLd;
  float* warp_o = o_rows + warp * 16 * L::kOutLd;

  const int64_t tiles = (d.seq + kRows - 1) / kRows;
  const Coords at = blockCoords(d.heads, tiles, true);
  const int64_t i0 = at.tile * kRows, kvh = at.head / (d.heads / d.kv_heads);
  const bf16* qb = q + (at.b * d.seq) * d.q_stride + at.head * D;
  const bf16* kb = k + (at.b * d.seq) * d.kv_stride + kvh * D;
  const bf16* vb = v + (at.b * d.seq) * d.kv_stride + kvh * D;
  stageTile<D>(q_tile, qb + i0 * d.q_stride, d.seq - i0, d.q_stride);
  for (int idx = lane; idx < 16 * L::kOutLd; idx += 32) warp_o[idx] = 0.0f;
  const int64_t qi = i0 + warp * 16 + row;
  float row_max = -INFINITY, row_sum = 0.0f;
  for (int64_t j0 = 0; j0 <= i0; j0 += kCols) {
    __syncthreads();  // the previous tile's readers are done
    stageTile<D>(k_tile, kb + j0 * d.kv_stride, d.seq - j0, d.kv_stride);
    stageTile<D>(v_tile, vb + j0 * d.kv_stride, d.seq - j0, d.kv_stride);
    __syncthreads();
    productABt<D>(warp_scores, q_tile + warp * 16 * L::kLd, k_tile);
    __syncwarp();
    // Online softmax of this lane's half row; key j0 is visible to every row (j0 <= i0 <= qi).
    float tile_max = -INFINITY;
    for (int c = half * (kCols / 2); c < (half + 1) * (kCols / 2); ++c) {
      const float s = j0 + c <= qi ? d.scale * warp_scores[row * kScoreLd + c] : -INFINITY;
      warp_scores[row * kScoreLd + c] = s;
      tile_max = fmaxf(tile_max, s);
    }
    const float new_max = fmaxf(row_max, fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1)));
    const float keep = expf(row_max - new_max);
    float sum = 0.0f;
    for (int c = half * (kCols / 2); c < (half + 1) * (kCols / 2); ++c) {
      const float p = expf(warp_scores[row * kScoreLd + c] - new_max);
      warp_probs[row * kProbLd + c] = __float2bfloat16_rn(p);
      sum += p;
    }
    row_sum = row_sum * keep + sum + __shfl_xor_sync(0xffffffffu, sum, 1);
    row_max = new_max;
    for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c) warp_o[row * L::kOutLd + c] *= keep;
    __syncwarp();
    FragAcc acc[D / 16];
#pragma unroll
    for (int n = 0; n < D / 16; ++n) wmma::load_matrix_sync(acc[n], warp_o + n * 16, L::kOutLd, wmma::mem_row_major);
    accumulatePT<D>(acc, warp_probs, v_tile);
#pragma unroll
    for (int n = 0; n < D / 16; ++n) wmma::store_matrix_sync(warp_o + n * 16, acc[n], L::kOutLd, wmma::mem_row_major);
    __syncwarp();
  }
  if (qi < d.seq) {
    bf16* dst = out + (at.b * d.seq + qi) * d.q_stride + at.head * D;
    const float inv = 1.0f / row_sum;
    for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c)
      dst[c] = __float2bfloat16_rn(warp_o[row * L::kOutLd + c] * inv);
    if (half == 0) lse[(at.b * d.heads + at.head) * d.seq + qi] = row_max + logf(row_sum);
  }
}

// Block per key tile of (batch, kv head): dv = Σ Pᵀ dout, dk = Σ dSᵀ q over the query heads of
// its group and the query tiles at or after it. Warp w owns keys j0 + 16w .. + 15.
template <int D>
__global__ void __launch_bounds__(kThreads)
    flashGradKeys(const bf16* __restrict__ dout, const bf16* __restrict__ q, const bf16* __restrict__ k,
                  const bf16* __restrict__ v, const bf16* __restrict__ out, const float* __restrict__ lse,
                  bf16* __restrict__ dk, bf16* __restrict__ dv, AttentionShape d) {
  using L = Layout<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* k_tile = reinterpret_cast<bf16*>(smem);
  bf16 *v_tile = k_tile + kRows * L::kLd, *q_tile = v_tile + kRows * L::kLd, *do_tile = q_tile + kRows * L::kLd;
  float* scores = reinterpret_cast<float*>(smem + 4 * L::kTile);  // Sᵀ, then dPᵀ beside it
  float* dp = scores + kWarps * 16 * kScoreLd;
  bf16* probs = reinterpret_cast<bf16*>(smem + 4 * L::kTile + 2 * L::kScores);  // Pᵀ, then dSᵀ beside it
  bf16* ds = probs + kWarps * 16 * kProbLd;
  float* row_lse = reinterpret_cast<float*>(smem + 4 * L::kTile + 2 * L::kScores + 2 * L::kProbs);
  float* row_delta = row_lse + kCols;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, row = lane >> 1, half = lane & 1;
  float *warp_s = scores + warp * 16 * kScoreLd, *warp_dp = dp + warp * 16 * kScoreLd;
  bf16 *warp_p = probs + warp * 16 * kProbLd, *warp_ds = ds + warp * 16 * kProbLd;

  const int64_t tiles = (d.seq + kRows - 1) / kRows;
  const Coords at = blockCoords(d.kv_heads, tiles, false);
  const int64_t j0 = at.tile * kRows, group = d.heads / d.kv_heads;
  const int64_t kv_first = (at.b * d.seq) * d.kv_stride + at.head * D;
  stageTile<D>(k_tile, k + kv_first + j0 * d.kv_stride, d.seq - j0, d.kv_stride);
  stageTile<D>(v_tile, v + kv_first + j0 * d.kv_stride, d.seq - j0, d.kv_stride);
  const int64_t kj = j0 + warp * 16 + row;
  FragAcc dk_acc[D / 16], dv_acc[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(dk_acc[n], 0.0f), wmma::fill_fragment(dv_acc[n], 0.0f);
  for (int64_t h = at.head * group; h < (at.head + 1) * group; ++h) {
    const int64_t q_first = (at.b * d.seq) * d.q_stride + h * D;
    for (int64_t i0 = j0; i0 < d.seq; i0 += kCols) {
      __syncthreads();  // the previous tile's readers are done
      const int64_t row0 = q_first + i0 * d.q_stride;
      stageTile<D>(q_tile, q + row0, d.seq - i0, d.q_stride);
      stageTile<D>(do_tile, dout + row0, d.seq - i0, d.q_stride);
      stageRowStats<D>(row_lse, row_delta, lse + (at.b * d.heads + h) * d.seq + i0, dout + row0, out + row0,
                       d.seq - i0, d.q_stride);
      __syncthreads();
      productABt<D>(warp_s, k_tile + warp * 16 * L::kLd, q_tile);   // Sᵀ: keys x queries
      productABt<D>(warp_dp, v_tile + warp * 16 * L::kLd, do_tile);  // dPᵀ = v · doutᵀ
      __syncwarp();
      for (int c = half * (kCols / 2); c < (half + 1) * (kCols / 2); ++c) {
        const float p = kj <= i0 + c ? expf(d.scale * warp_s[row * kScoreLd + c] - row_lse[c]) : 0.0f;
        warp_p[row * kProbLd + c] = __float2bfloat16_rn(p);
        warp_ds[row * kProbLd + c] = __float2bfloat16_rn(p * (warp_dp[row * kScoreLd + c] - row_delta[c]) * d.scale);
      }
      __syncwarp();
      accumulatePT<D>(dv_acc, warp_p, do_tile);
      accumulatePT<D>(dk_acc, warp_ds, q_tile);
    }
  }
  __syncthreads();  // the staging below reuses the score areas of every warp
  float* staging = scores + warp * 16 * Layout<D>::kOutLd;
  storeWarpRows<D>(staging, dk_acc, dk + kv_first, j0 + warp * 16, d.seq, d.kv_stride);
  __syncwarp();
  storeWarpRows<D>(staging, dv_acc, dv + kv_first, j0 + warp * 16, d.seq, d.kv_stride);
}

// Block per query tile of (batch, head): dq = Σ dS k over the key tiles up to it.
template <int D>
__global__ void __launch_bounds__(kThreads)
    flashGradQueries(const bf16* __restrict__ dout, const bf16* __restrict__ q, const bf16* __restrict__ k,
                     const bf16* __restrict__ v, const bf16* __restrict__ out, const float* __restrict__ lse,
                     bf16* __restrict__ dq, AttentionShape d) {
  using L = Layout<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* q_tile = reinterpret_cast<bf16*>(smem);
  bf16 *do_tile = q_tile + kRows * L::kLd, *k_tile = do_tile + kRows * L::kLd, *v_tile = k_tile + kRows * L::kLd;
  float* scores = reinterpret_cast<float*>(smem + 4 * L::kTile);
  float* dp = scores + kWarps * 16 * kScoreLd;
  bf16* ds = reinterpret_cast<bf16*>(smem + 4 * L::kTile + 2 * L::kScores);
  float* row_lse = reinterpret_cast<float*>(smem + 4 * L::kTile + 2 * L::kScores + L::kProbs);
  float* row_delta = row_lse + kRows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, row = lane >> 1, half = lane & 1;
  float *warp_s = scores + warp * 16 * kScoreLd, *warp_dp = dp + warp * 16 * kScoreLd;
  bf16* warp_ds = ds + warp * 16 * kProbLd;

  const int64_t tiles = (d.seq + kRows - 1) / kRows;
  const Coords at = blockCoords(d.heads, tiles, true);
  const int64_t i0 = at.tile * kRows, kvh = at.head / (d.heads / d.kv_heads);
  const int64_t row0 = (at.b * d.seq + i0) * d.q_stride + at.head * D;
  const int64_t kv_first = (at.b * d.seq) * d.kv_stride + kvh * D;
  stageTile<D>(q_tile, q + row0, d.seq - i0, d.q_stride);
  stageTile<D>(do_tile, dout + row0, d.seq - i0, d.q_stride);
  stageRowStats<D>(row_lse, row_delta, lse + (at.b * d.heads + at.head) * d.seq + i0, dout + row0, out + row0,
                   d.seq - i0, d.q_stride);
  const int r = warp * 16 + row;  // this lane's query row in the tile
  const int64_t qi = i0 + r;
  FragAcc dq_acc[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(dq_acc[n], 0.0f);
  for (int64_t j0 = 0; j0 <= i0; j0 += kCols) {
    __syncthreads();  // the previous tile's readers are done (and, the first time, the row stats written)
    stageTile<D>(k_tile, k + kv_first + j0 * d.kv_stride, d.seq - j0, d.kv_stride);
    stageTile<D>(v_tile, v + kv_first + j0 * d.kv_stride, d.seq - j0, d.kv_stride);
    __syncthreads();
    productABt<D>(warp_s, q_tile + warp * 16 * L::kLd, k_tile);    // S
    productABt<D>(warp_dp, do_tile + warp * 16 * L::kLd, v_tile);  // dP = dout · vᵀ
    __syncwarp();
    for (int c = half * (kCols / 2); c < (half + 1) * (kCols / 2); ++c) {
      const float p = j0 + c <= qi ? expf(d.scale * warp_s[row * kScoreLd + c] - row_lse[r]) : 0.0f;
      warp_ds[row * kProbLd + c] = __float2bfloat16_rn(p * (warp_dp[row * kScoreLd + c] - row_delta[r]) * d.scale);
    }
    __syncwarp();
    accumulatePT<D>(dq_acc, warp_ds, k_tile);
  }
  __syncthreads();
  float* staging = scores + warp * 16 * Layout<D>::kOutLd;
  storeWarpRows<D>(staging, dq_acc, dq + (at.b * d.seq) * d.q_stride + at.head * D, i0 + warp * 16, d.seq, d.q_stride);
}

template <int D>
constexpr size_t forwardSmem() {
  return 3 * Layout<D>::kTile + Layout<D>::kScores + Layout<D>::kProbs + Layout<D>::kOut;
}
template <int D>
constexpr size_t gradKeysSmem() {
  return 4 * Layout<D>::kTile + 2 * Layout<D>::kScores + 2 * Layout<D>::kProbs + 2 * kCols * sizeof(float);
}
template <int D>
constexpr size_t gradQueriesSmem() {
  return 4 * Layout<D>::kTile + 2 * Layout<D>::kScores + Layout<D>::kProbs + 2 * kRows * sizeof(float);
}
// The backward's staging of a warp's (16, D) f32 result reuses the two score areas.
static_assert(2 * Layout<128>::kScores >= Layout<128>::kOut && 2 * Layout<64>::kScores >= Layout<64>::kOut);

template <typename Kernel>
void allowSmem(Kernel kernel, size_t bytes) {
  MT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <int D>
void forward(const KernelArgs& args, const AttentionShape& d, cudaStream_t stream) {
  static const bool ready = (allowSmem(flashForward<D>, forwardSmem<D>()), true);
  (void)ready;
  const int64_t tiles = (d.seq + kRows - 1) / kRows;
  flashForward<D><<<cuda::gridBlocks(d.batch * d.heads * tiles, "attention"), kThreads, forwardSmem<D>(), stream>>>(
      cuda::data<const bf16>(args.in[0]), cuda::data<const bf16>(args.in[1]), cuda::data<const bf16>(args.in[2]),
      cuda::data<bf16>(args.out[0]), args.out[1].f32(), d);
  MT_CUDA_CHECK_LAUNCH();
}

template <int D>
void backward(const KernelArgs& args, const AttentionShape& d, cudaStream_t stream) {
  static const bool ready =
      (allowSmem(flashGradKeys<D>, gradKeysSmem<D>()), allowSmem(flashGradQueries<D>, gradQueriesSmem<D>()), true);
  (void)ready;
  const bf16 *dout = cuda::data<const bf16>(args.in[0]), *q = cuda::data<const bf16>(args.in[1]);
  const bf16 *k = cuda::data<const bf16>(args.in[2]), *v = cuda::data<const bf16>(args.in[3]);
  const bf16* out = cuda::data<const bf16>(args.in[4]);
  const float* lse = args.in[5].f32();
  const int64_t tiles = (d.seq + kRows - 1) / kRows;
  flashGradKeys<D><<<cuda::gridBlocks(d.batch * d.kv_heads * tiles, "attention"), kThreads, gradKeysSmem<D>(),
                     stream>>>(dout, q, k, v, out, lse, cuda::data<bf16>(args.out[1]), cuda::data<bf16>(args.out[2]), d);
  MT_CUDA_CHECK_LAUNCH();
  flashGradQueries<D><<<cuda::gridBlocks(d.batch * d.heads * tiles, "attention"), kThreads, gradQueriesSmem<D>(),
                        stream>>>(dout, q, k, v, out, lse, cuda::data<bf16>(args.out[0]), d);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool attentionOnTensorCores(const Tensor& q, const AttentionShape& d) {
  return q.dtype == DType::BF16 && (d.head_dim == 64 || d.head_dim == 128);
}

void attentionForwardTensorCores(const KernelArgs& args, const AttentionShape& d, cudaStream_t stream) {
  if (d.head_dim == 64)
    forward<64>(args, d, stream);
  else
    forward<128>(args, d, stream);
}

void attentionBackwardTensorCores(const KernelArgs& args, const AttentionShape& d, cudaStream_t stream) {
  if (d.head_dim == 64)
    backward<64>(args, d, stream);
  else
    backward<128>(args, d, stream);
}

}  // namespace mt
