// Causal attention of a bf16 plan on the tensor cores (head_dim 64 or 128), FlashAttention-2
// style: mma.sync m16n8k16 (bf16 operands, f32 accumulation) with the scores, probabilities and
// output accumulators held in registers; tiles of q, k, v and dout staged in shared memory by
// cp.async, double-buffered (the next tile lands while this one is multiplied), read by
// ldmatrix. A block of 4 warps owns 64 rows, each warp 16: query rows (forward, dq) or key rows
// (dk, dv). The scores and the online softmax are f32 (in base 2: the scale folds log2(e) in);
// probabilities and score gradients are rounded to bf16 only as the operands of the next
// product (what FlashAttention does); outputs are rounded once. The backward is two kernels:
// dk/dv per key tile summing over the query heads of its group, dq per query tile: one writer
// per output, no atomics (the scores are computed twice, 7 products instead of 5, for results
// that do not depend on scheduling). Every kernel masks by each row's first visible key (a
// sliding window's start, or a packed row's example's: firstVisibleKey) besides the causal mask,
// and skips the tiles a warp's rows never see; softcapped scores (Gemma 2) are capped in f32 after
// the product and their gradients scaled by the cap's slope. kernels/attention/attention_cpu.cc (with bf16 storage
// emulated) is the reference the twin tests compare with (tests/kernels/cuda_twin_test.cc,
// Bf16Activations; tests/kernels/cuda_twin_attention_test.cc, Softcap); bench/gpu_kernel_rate.cc checks sampled rows at T 4096 and times them.
// (The WMMA kernels this replaces ran at 36 TFLOP/s forward, 25 backward in training on an H200.)
#include "kernels/attention/attention_mma.cuh"
#include "kernels/cuda_common.cuh"

namespace mt {
namespace {

using cuda::bf16;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 64;  // rows a block owns (16 per warp), and the key tile of the forward and dq
constexpr float kLog2e = 1.4426950408889634f;

// bf16 per staged row: rows 16 bytes apart modulo 128, so ldmatrix's 8 rows hit distinct banks.
template <int D>
__host__ __device__ constexpr int rowLd() { return D + 8; }
// Query rows per tile of the dk/dv kernel: 32 for head_dim 128 keeps its accumulators (dk and dv,
// 16 x 128 f32 each per warp) and two score tiles within the registers.
template <int D>
__host__ __device__ constexpr int gradQueryRows() { return D == 128 ? 32 : 64; }

// A raw score q.k as the online softmax takes it, in base 2: scaled (scale2 = scale * log2(e)), or,
// where the call caps the scores (Gemma 2), scaled, capped and then times log2(e), its cap's slope
// into `slope` (left as it is without a cap).
__device__ __forceinline__ float scoreLog2(const AttentionShape& d, float raw, float scale2, float* slope = nullptr) {
  return d.softcap > 0.0f ? attentionSoftcap(d, raw * d.scale, slope) * kLog2e : raw * scale2;
}

__device__ __forceinline__ uint32_t sharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes from global to shared memory, asynchronously; zeros where !valid (nothing is read).
__device__ __forceinline__ void copyAsync16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sharedAddress(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix4(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(sharedAddress(p)));
}
__device__ __forceinline__ void ldmatrix4Trans(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(sharedAddress(p)));
}
// c (16 x 8, f32) += a (16 x 16, bf16, row-major) · b (16 x 8, bf16). A thread holds c[0], c[1] at
// row lane/4, columns 2(lane%4) and +1, and c[2], c[3] eight rows below.
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // lo in the low half: the lower column
  return *reinterpret_cast<const uint32_t*>(&v);
}
// The A operand (16 x 16) spanning score columns 16kk.. of accumulators s[2kk], s[2kk + 1]: a
// product's f32 result, rounded, is the next product's bf16 operand without leaving the registers.
template <int N>
__device__ __forceinline__ void scoresAsA(uint32_t (&a)[4], const float (&s)[N][4], int kk) {
  a[0] = packBf16(s[2 * kk][0], s[2 * kk][1]);
  a[1] = packBf16(s[2 * kk][2], s[2 * kk][3]);
  a[2] = packBf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = packBf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// The A operand: rows r0.. r0+15, columns c0.. c0+15 of a staged row-major tile.
template <int D>
__device__ __forceinline__ void loadA(uint32_t (&a)[4], const bf16* tile, int r0, int c0) {
  const int lane = threadIdx.x & 31;
  ldmatrix4(a, tile + (r0 + (lane & 15)) * rowLd<D>() + c0 + (lane >> 4) * 8);
}
// B operands of two 8-column tiles (n0.., n0+8..) over k0.. k0+15 from a tile stored n-major
// (a row per n: keys for q·kᵀ): b[0], b[1] for columns n0.., b[2], b[3] for n0+8...
template <int D>
__device__ __forceinline__ void loadBt(uint32_t (&b)[4], const bf16* tile, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  ldmatrix4(b, tile + (n0 + (lane & 7) + (lane >> 4) * 8) * rowLd<D>() + k0 + ((lane >> 3) & 1) * 8);
}
// The same from a tile stored k-major (a row per k: values for p·v), by transposing loads.
template <int D>
__device__ __forceinline__ void loadB(uint32_t (&b)[4], const bf16* tile, int k0, int n0) {
  const int lane = threadIdx.x & 31;
  ldmatrix4Trans(b, tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * rowLd<D>() + n0 + (lane >> 4) * 8);
}

// acc (16 x kN) += a-rows (16 x D, rows r0.. of tile_a) · rowsᵀ (kN rows of tile_b): scores.
template <int D, int kN>
__device__ __forceinline__ void productABt(float (&acc)[kN / 8][4], const bf16* tile_a, int r0, const bf16* tile_b) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    loadA<D>(a, tile_a, r0, kk * 16);
#pragma unroll
    for (int np = 0; np < kN / 16; ++np) {
      uint32_t b[4];
      loadBt<D>(b, tile_b, np * 16, kk * 16);
      mma(acc[2 * np], a, b[0], b[1]);
      mma(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}
// acc (16 x D) += p (16 x kK, f32 accumulators rounded to bf16) · tile (kK rows x D).
template <int D, int kK>
__device__ __forceinline__ void accumulatePT(float (&acc)[D / 8][4], const float (&p)[kK / 8][4], const bf16* tile) {
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t a[4];
    scoresAsA(a, p, kk);
#pragma unroll
    for (int np = 0; np < D / 16; ++np) {
      uint32_t b[4];
      loadB<D>(b, tile, kk * 16, np * 16);
      mma(acc[2 * np], a, b[0], b[1]);
      mma(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// Rows [0, kTileRows) of a (seq, D) slab (row r at src + r * stride) into a staged tile,
// asynchronously, 16 bytes per copy; rows at or past `rows` are zero.
template <int D, int kTileRows>
__device__ __forceinline__ void stageAsync(bf16* tile, const bf16* __restrict__ src, int64_t rows, int64_t stride) {
  constexpr int kChunks = D / 8;
  for (int idx = threadIdx.x; idx < kTileRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool valid = r < rows;
    copyAsync16(tile + r * rowLd<D>() + c * 8, valid ? src + r * stride + c * 8 : src, valid);
  }
}

// Per query row of a tile: its log-sum-exp in base 2 (+inf past the sequence: probability 0)
// and delta = rowsum(dout * out), by warps.
template <int D>
__device__ void stageRowStats(float* lse2, float* delta, int n_rows, const float* __restrict__ lse_rows,
                              const bf16* __restrict__ dout, const bf16* __restrict__ out, int64_t rows,
                              int64_t stride) {
  const int lane = threadIdx.x & 31;
  for (int r = threadIdx.x >> 5; r < n_rows; r += kWarps) {
    float sum = 0.0f;
    if (r < rows)
      for (int c = 2 * lane; c < D; c += 64) {
        const float2 g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(dout + r * stride + c));
        const float2 o = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(out + r * stride + c));
        sum += g.x * o.x + g.y * o.y;
      }
    sum = cuda::warpSum(sum);
    if (lane == 0) {
      delta[r] = sum;
      lse2[r] = r < rows ? lse_rows[r] * kLog2e : INFINITY;
    }
  }
}

// Writes a warp's (16, D) accumulators, times `scale_a` (row lane/4) and `scale_b` (8 below),
// as bf16 rows first_row + lane/4 and + 8 (those < rows) of dst (row stride `stride`).
template <int D>
__device__ __forceinline__ void storeRows(const float (&acc)[D / 8][4], float scale_a, float scale_b,
                                          bf16* __restrict__ dst, int64_t first_row, int64_t rows, int64_t stride) {
  const int lane = threadIdx.x & 31;
  const int64_t row_a = first_row + (lane >> 2), row_b = row_a + 8;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int c = n * 8 + 2 * (lane & 3);
    if (row_a < rows)
      *reinterpret_cast<__nv_bfloat162*>(dst + row_a * stride + c) =
          __floats2bfloat162_rn(acc[n][0] * scale_a, acc[n][1] * scale_a);
    if (row_b < rows)
      *reinterpret_cast<__nv_bfloat162*>(dst + row_b * stride + c) =
          __floats2bfloat162_rn(acc[n][2] * scale_b, acc[n][3] * scale_b);
  }
}

// The first key each of a thread's two query rows sees (rowFirstKey: 0, its window's start or its
// example's), and the least and greatest over its warp's 16 rows: which key tiles the warp skips
// (before every key its rows see) and which it masks (the diagonal, and those before some row's
// first key); over the block's rows, the key tile its loop starts at (firstKeyTileStart's, from
// two loads a thread). Every thread of the block constructs it (a block reduction).
struct RowFirstKeys {
  int64_t row_a, row_b, first_a, first_b, warp_least, warp_greatest, first_tile;
  __device__ RowFirstKeys(const AttentionShape& d, int64_t batch_row, int64_t row_a, int64_t row_b)
      : row_a(row_a), row_b(row_b), first_a(rowFirstKey(d, batch_row, row_a)), first_b(rowFirstKey(d, batch_row, row_b)) {
    warp_least = cuda::warpReduce(first_a < first_b ? first_a : first_b, cuda::MinOp{});
    warp_greatest = cuda::warpReduce(first_a > first_b ? first_a : first_b, cuda::MaxOp{});
    first_tile = cuda::blockReduce(warp_least, cuda::MinOp{}, int64_t{INT64_MAX}) / kRows;
  }
  __device__ bool skips(int64_t j0) const { return j0 + kRows <= warp_least; }
  __device__ bool masks(int64_t j0, bool diagonal) const { return diagonal || j0 < warp_greatest; }
  // Whether key `col` is hidden from row a (`of_row_a`) or b: after it, or before its first key.
  __device__ bool masked(bool of_row_a, int64_t col) const {
    return of_row_a ? col > row_a || col < first_a : col > row_b || col < first_b;
  }
};

// (b, head, tile) of this block in a (batch, heads, tiles) grid, heaviest causal tiles first
// when `reverse`.
struct Coords {
  int64_t b, head, tile;
};
__device__ Coords blockCoords(int64_t heads, int64_t tiles, bool reverse) {
  const int64_t block = blockIdx.x, t = block % tiles;
  return {block / (tiles * heads), (block / tiles) % heads, reverse ? tiles - 1 - t : t};
}

// Block per 64 query rows of (batch, head): the key tiles from the first any of its rows sees
// through its own, the online softmax in registers. A row sees the keys from its first visible
// one (firstVisibleKey: its window's start, or its example's in a packed row) through itself; the
// rest are masked, and a warp skips the tiles before every key its 16 rows see. Sinks (gpt-oss)
// start each row's softmax from its sink: its maximum, and exp2(0) = 1 in the sum of the row's
// first lane (the lanes' sums are added at the end).
template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    flashForward(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                 const float* __restrict__ sinks, bf16* __restrict__ out, float* __restrict__ lse, AttentionShape d) {
  constexpr int kTile = kRows * rowLd<D>();
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* q_tile = reinterpret_cast<bf16*>(smem);
  bf16* k_tiles = q_tile + kTile;      // two buffers
  bf16* v_tiles = k_tiles + 2 * kTile;  // two buffers
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r0 = warp * 16;

  const int64_t tiles = (d.seq + kRows - 1) / kRows;
  const Coords at = blockCoords(d.heads, tiles, true);
  const int64_t i0 = at.tile * kRows, kvh = at.head / (d.heads / d.kv_heads);
  const int64_t row_a = i0 + r0 + (lane >> 2), row_b = row_a + 8;  // this thread's two query rows
  const RowFirstKeys first(d, at.b, row_a, row_b);
  const int64_t first_tile = first.first_tile;  // 0 without a window or packing
  const bf16* qb = q + (at.b * d.seq) * d.q_stride + at.head * D;
  const bf16* kb = k + (at.b * d.seq) * d.kv_stride + kvh * D;
  const bf16* vb = v + (at.b * d.seq) * d.kv_stride + kvh * D;
  const int64_t j_first = first_tile * kRows;
  stageAsync<D, kRows>(q_tile, qb + i0 * d.q_stride, d.seq - i0, d.q_stride);
  stageAsync<D, kRows>(k_tiles + (first_tile & 1) * kTile, kb + j_first * d.kv_stride, d.seq - j_first, d.kv_stride);
  stageAsync<D, kRows>(v_tiles + (first_tile & 1) * kTile, vb + j_first * d.kv_stride, d.seq - j_first, d.kv_stride);
  commitCopies();

  const float scale2 = d.scale * kLog2e;
  float o[D / 8][4] = {};
  float max_a = -INFINITY, max_b = -INFINITY, sum_a = 0.0f, sum_b = 0.0f;  // sums: this thread's columns
  if (sinks) {
    max_a = max_b = sinks[at.head] * kLog2e;
    if ((lane & 3) == 0) sum_a = sum_b = 1.0f;
  }
  uint32_t qf[D / 16][4];
  for (int64_t t = first_tile; t <= at.tile; ++t) {
    const int buf = t & 1;
    if (t < at.tile) {
      const int64_t j1 = (t + 1) * kRows;
      stageAsync<D, kRows>(k_tiles + (buf ^ 1) * kTile, kb + j1 * d.kv_stride, d.seq - j1, d.kv_stride);
      stageAsync<D, kRows>(v_tiles + (buf ^ 1) * kTile, vb + j1 * d.kv_stride, d.seq - j1, d.kv_stride);
    }
    commitCopies();
    waitCopies<1>();  // this tile (and, the first time, q) has landed
    __syncthreads();
    if (t == first_tile) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) loadA<D>(qf[kk], q_tile, r0, kk * 16);
    }
    const int64_t j0 = t * kRows;
    if (first.skips(j0)) {
      __syncthreads();  // every warp is done with this buffer before the next iteration refills it
      continue;
    }
    const bf16 *kt = k_tiles + buf * kTile, *vt = v_tiles + buf * kTile;
    float s[kRows / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int np = 0; np < kRows / 16; ++np) {
        uint32_t b[4];
        loadBt<D>(b, kt, np * 16, kk * 16);
        mma(s[2 * np], qf[kk], b[0], b[1]);
        mma(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    // Scaled to base 2, the keys a row does not see masked. A row sees itself, on the diagonal
    // tile; before it, it may see none of a tile's keys (its window or example starts later) and
    // stays at -inf.
    const bool edge = first.masks(j0, t == at.tile);
    float tile_a = max_a, tile_b = max_b;
#pragma unroll
    for (int n = 0; n < kRows / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t col = j0 + n * 8 + 2 * (lane & 3) + (e & 1);
        const bool masked = edge && first.masked(e < 2, col);
        s[n][e] = masked ? -INFINITY : scoreLog2(d, s[n][e], scale2);
        if (e < 2)
          tile_a = fmaxf(tile_a, s[n][e]);
        else
          tile_b = fmaxf(tile_b, s[n][e]);
      }
    tile_a = fmaxf(tile_a, __shfl_xor_sync(0xffffffffu, tile_a, 1));
    tile_a = fmaxf(tile_a, __shfl_xor_sync(0xffffffffu, tile_a, 2));
    tile_b = fmaxf(tile_b, __shfl_xor_sync(0xffffffffu, tile_b, 1));
    tile_b = fmaxf(tile_b, __shfl_xor_sync(0xffffffffu, tile_b, 2));
    // A row still at -inf (a window that has not reached it) keeps all and adds nothing: its
    // maximum counts as 0 below (exp2 of -inf - -inf would be NaN); a row with a key, as before.
    const float keep_a = tile_a == -INFINITY ? 1.0f : exp2f(max_a - tile_a);
    const float keep_b = tile_b == -INFINITY ? 1.0f : exp2f(max_b - tile_b);
    max_a = tile_a, max_b = tile_b;
    const float base_a = max_a == -INFINITY ? 0.0f : max_a, base_b = max_b == -INFINITY ? 0.0f : max_b;
    sum_a *= keep_a, sum_b *= keep_b;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o[n][0] *= keep_a, o[n][1] *= keep_a, o[n][2] *= keep_b, o[n][3] *= keep_b;
#pragma unroll
    for (int n = 0; n < kRows / 8; ++n) {
      s[n][0] = exp2f(s[n][0] - base_a), s[n][1] = exp2f(s[n][1] - base_a);
      s[n][2] = exp2f(s[n][2] - base_b), s[n][3] = exp2f(s[n][3] - base_b);
      sum_a += s[n][0] + s[n][1], sum_b += s[n][2] + s[n][3];
    }
    accumulatePT<D, kRows>(o, s, vt);
    __syncthreads();  // every warp is done with this buffer before the next iteration refills it
  }
  sum_a += __shfl_xor_sync(0xffffffffu, sum_a, 1);
  sum_a += __shfl_xor_sync(0xffffffffu, sum_a, 2);
  sum_b += __shfl_xor_sync(0xffffffffu, sum_b, 1);
  sum_b += __shfl_xor_sync(0xffffffffu, sum_b, 2);
  storeRows<D>(o, 1.0f / sum_a, 1.0f / sum_b, out + (at.b * d.seq) * d.q_stride + at.head * D, i0 + r0, d.seq,
               d.q_stride);
  if ((lane & 3) == 0) {
    float* lse_rows = lse + (at.b * d.heads + at.head) * d.seq;
    constexpr float kLn2 = 0.6931471805599453f;
    if (row_a < d.seq) lse_rows[row_a] = (max_a + log2f(sum_a)) * kLn2;
    if (row_b < d.seq) lse_rows[row_b] = (max_b + log2f(sum_b)) * kLn2;
  }
}

// Block per 64 key rows of (batch, kv head): dv = Σ Pᵀ dout, dk = Σ dSᵀ q over the query heads of
// its group and the query tiles at or after it within the window's reach (queryReachEnd), Sᵀ and
// dPᵀ computed key-major in registers; each query's first visible key (firstVisibleKey) staged
// with its row statistics masks the keys before it, and a warp skips a query tile none of whose
// queries sees one of its 16 keys (another example's, in a packed row).
template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    flashGradKeys(const bf16* __restrict__ dout, const bf16* __restrict__ q, const bf16* __restrict__ k,
                  const bf16* __restrict__ v, const bf16* __restrict__ out, const float* __restrict__ lse,
                  bf16* __restrict__ dk, bf16* __restrict__ dv, AttentionShape d) {
  constexpr int kQ = gradQueryRows<D>(), kKeyTile = kRows * rowLd<D>(), kQueryTile = kQ * rowLd<D>();
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* k_tile = reinterpret_cast<bf16*>(smem);
  bf16* v_tile = k_tile + kKeyTile;
  bf16* q_tiles = v_tile + kKeyTile;         // two buffers
  bf16* do_tiles = q_tiles + 2 * kQueryTile;  // two buffers
  float* lse2 = reinterpret_cast<float*>(do_tiles + 2 * kQueryTile);
  float* delta = lse2 + kQ;
  int64_t* first_keys = reinterpret_cast<int64_t*>(delta + kQ);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r0 = warp * 16;

  const int64_t tiles = (d.seq + kRows - 1) / kRows;
  const Coords at = blockCoords(d.kv_heads, tiles, false);
  const int64_t j0 = at.tile * kRows, group = d.heads / d.kv_heads;
  const int64_t kv_first = (at.b * d.seq) * d.kv_stride + at.head * D;
  // The query tiles, head by head of the group: i0 = j0, j0 + kQ, ... through the last query that
  // sees a key of this tile (the window's reach; with packed examples, the end of the last key's
  // example: the block scans the positions once).
  const int64_t queries_end = cuda::blockReduce(
      queriesSeeingKeysEnd(d, at.b, j0 + kRows - 1, j0 + threadIdx.x, kThreads, j0 + 1), cuda::MaxOp{}, j0 + 1);
  const int64_t per_head = (queries_end - j0 + kQ - 1) / kQ, steps = group * per_head;
  auto queryRow0 = [&](int64_t u) {  // the first element of step u's query tile (q, dout and out alike)
    const int64_t h = at.head * group + u / per_head, i0 = j0 + (u % per_head) * kQ;
    return (at.b * d.seq + i0) * d.q_stride + h * D;
  };
  stageAsync<D, kRows>(k_tile, k + kv_first + j0 * d.kv_stride, d.seq - j0, d.kv_stride);
  stageAsync<D, kRows>(v_tile, v + kv_first + j0 * d.kv_stride, d.seq - j0, d.kv_stride);
  stageAsync<D, kQ>(q_tiles, q + queryRow0(0), d.seq - j0, d.q_stride);
  stageAsync<D, kQ>(do_tiles, dout + queryRow0(0), d.seq - j0, d.q_stride);
  commitCopies();

  const int64_t key_a = j0 + r0 + (lane >> 2), key_b = key_a + 8;  // this thread's two key rows
  const float scale2 = d.scale * kLog2e;
  float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};
  for (int64_t u = 0; u < steps; ++u) {
    const int buf = u & 1;
    const int64_t h = at.head * group + u / per_head, i0 = j0 + (u % per_head) * kQ;
    if (u + 1 < steps) {
      const int64_t next = queryRow0(u + 1), next_i0 = j0 + ((u + 1) % per_head) * kQ;
      stageAsync<D, kQ>(q_tiles + (buf ^ 1) * kQueryTile, q + next, d.seq - next_i0, d.q_stride);
      stageAsync<D, kQ>(do_tiles + (buf ^ 1) * kQueryTile, dout + next, d.seq - next_i0, d.q_stride);
    }
    commitCopies();
    const int64_t row0 = queryRow0(u);
    stageRowStats<D>(lse2, delta, kQ, lse + (at.b * d.heads + h) * d.seq + i0, dout + row0, out + row0, d.seq - i0,
                     d.q_stride);
    for (int r = threadIdx.x; r < kQ; r += kThreads) first_keys[r] = firstVisibleKey(d, at.b, i0 + r);
    waitCopies<1>();
    __syncthreads();
    // Whether a query of the tile (inside the sequence) sees one of this warp's keys.
    bool seen = false;
    for (int c = lane; c < kQ; c += 32)
      seen |= i0 + c < d.seq && i0 + c >= j0 + r0 && first_keys[c] <= j0 + r0 + 15;
    if (!__any_sync(0xffffffffu, seen)) {
      __syncthreads();  // every warp is done with this buffer and the row stats
      continue;
    }
    const bf16 *qt = q_tiles + buf * kQueryTile, *dot = do_tiles + buf * kQueryTile;
    float st[kQ / 8][4] = {}, dpt[kQ / 8][4] = {};  // Sᵀ and dPᵀ: this warp's 16 keys x kQ queries
    productABt<D, kQ>(st, k_tile, r0, qt);
    productABt<D, kQ>(dpt, v_tile, r0, dot);
    // Near the diagonal keys after a query are masked; with a window or packed examples, keys
    // before its first.
    const bool edge = i0 < j0 + kRows || d.window > 0 || d.positions;
#pragma unroll
    for (int n = 0; n < kQ / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = n * 8 + 2 * (lane & 3) + (e & 1);
        const int64_t key = e < 2 ? key_a : key_b;
        const bool masked = edge && (key > i0 + c || key < first_keys[c]);
        float slope = 1.0f;
        const float p = masked ? 0.0f : exp2f(scoreLog2(d, st[n][e], scale2, &slope) - lse2[c]);
        st[n][e] = p;
        dpt[n][e] = p * (dpt[n][e] - delta[c]) * d.scale * slope;
      }
    accumulatePT<D, kQ>(dv_acc, st, dot);
    accumulatePT<D, kQ>(dk_acc, dpt, qt);
    __syncthreads();  // every warp is done with this buffer and the row stats
  }
  storeRows<D>(dk_acc, 1.0f, 1.0f, dk + kv_first, j0 + r0, d.seq, d.kv_stride);
  storeRows<D>(dv_acc, 1.0f, 1.0f, dv + kv_first, j0 + r0, d.seq, d.kv_stride);
}

// Block per 64 query rows of (batch, head): dq = Σ dS k over the key tiles its rows see (from the
// first, as the forward, through its own; the same masks and skips).
template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    flashGradQueries(const bf16* __restrict__ dout, const bf16* __restrict__ q, const bf16* __restrict__ k,
                     const bf16* __restrict__ v, const bf16* __restrict__ out, const float* __restrict__ lse,
                     bf16* __restrict__ dq, AttentionShape d) {
  constexpr int kTile = kRows * rowLd<D>();
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* q_tile = reinterpret_cast<bf16*>(smem);
  bf16* do_tile = q_tile + kTile;
  bf16* k_tiles = do_tile + kTile;      // two buffers
  bf16* v_tiles = k_tiles + 2 * kTile;  // two buffers
  float* lse2 = reinterpret_cast<float*>(v_tiles + 2 * kTile);
  float* delta = lse2 + kRows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r0 = warp * 16;

  const int64_t tiles = (d.seq + kRows - 1) / kRows;
  const Coords at = blockCoords(d.heads, tiles, true);
  const int64_t i0 = at.tile * kRows, kvh = at.head / (d.heads / d.kv_heads);
  const int64_t row0 = (at.b * d.seq + i0) * d.q_stride + at.head * D;
  const int64_t kv_first = (at.b * d.seq) * d.kv_stride + kvh * D;
  const int64_t row_a = i0 + r0 + (lane >> 2), row_b = row_a + 8;
  const RowFirstKeys first(d, at.b, row_a, row_b);
  const int64_t first_tile = first.first_tile, j_first = first_tile * kRows;
  stageAsync<D, kRows>(q_tile, q + row0, d.seq - i0, d.q_stride);
  stageAsync<D, kRows>(do_tile, dout + row0, d.seq - i0, d.q_stride);
  stageAsync<D, kRows>(k_tiles + (first_tile & 1) * kTile, k + kv_first + j_first * d.kv_stride, d.seq - j_first,
                       d.kv_stride);
  stageAsync<D, kRows>(v_tiles + (first_tile & 1) * kTile, v + kv_first + j_first * d.kv_stride, d.seq - j_first,
                       d.kv_stride);
  commitCopies();
  stageRowStats<D>(lse2, delta, kRows, lse + (at.b * d.heads + at.head) * d.seq + i0, dout + row0, out + row0,
                   d.seq - i0, d.q_stride);

  const float scale2 = d.scale * kLog2e;
  float dq_acc[D / 8][4] = {};
  float lse_a = 0.0f, lse_b = 0.0f, delta_a = 0.0f, delta_b = 0.0f;
  for (int64_t t = first_tile; t <= at.tile; ++t) {
    const int buf = t & 1;
    if (t < at.tile) {
      const int64_t j1 = (t + 1) * kRows;
      stageAsync<D, kRows>(k_tiles + (buf ^ 1) * kTile, k + kv_first + j1 * d.kv_stride, d.seq - j1, d.kv_stride);
      stageAsync<D, kRows>(v_tiles + (buf ^ 1) * kTile, v + kv_first + j1 * d.kv_stride, d.seq - j1, d.kv_stride);
    }
    commitCopies();
    waitCopies<1>();
    __syncthreads();  // the tiles, and (the first time) the row stats, are visible to every warp
    if (t == first_tile) {
      lse_a = lse2[r0 + (lane >> 2)], lse_b = lse2[r0 + (lane >> 2) + 8];
      delta_a = delta[r0 + (lane >> 2)], delta_b = delta[r0 + (lane >> 2) + 8];
    }
    const int64_t j0 = t * kRows;
    if (first.skips(j0)) {
      __syncthreads();
      continue;
    }
    const bf16 *kt = k_tiles + buf * kTile, *vt = v_tiles + buf * kTile;
    float s[kRows / 8][4] = {}, dp[kRows / 8][4] = {};
    productABt<D, kRows>(s, q_tile, r0, kt);
    productABt<D, kRows>(dp, do_tile, r0, vt);
    const bool edge = first.masks(j0, t == at.tile);
#pragma unroll
    for (int n = 0; n < kRows / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t col = j0 + n * 8 + 2 * (lane & 3) + (e & 1);
        const bool upper = e >= 2;
        const bool masked = edge && first.masked(!upper, col);
        float slope = 1.0f;
        const float p = masked ? 0.0f : exp2f(scoreLog2(d, s[n][e], scale2, &slope) - (upper ? lse_b : lse_a));
        s[n][e] = p * (dp[n][e] - (upper ? delta_b : delta_a)) * d.scale * slope;
      }
    accumulatePT<D, kRows>(dq_acc, s, kt);
    __syncthreads();
  }
  storeRows<D>(dq_acc, 1.0f, 1.0f, dq + (at.b * d.seq) * d.q_stride + at.head * D, i0 + r0, d.seq, d.q_stride);
}

template <int D>
constexpr size_t forwardSmem() {
  return 5 * size_t(kRows) * rowLd<D>() * sizeof(bf16);
}
template <int D>
constexpr size_t gradKeysSmem() {  // the tiles, then per query row its lse, delta and first key
  return (2 * size_t(kRows) + 4 * gradQueryRows<D>()) * rowLd<D>() * sizeof(bf16) +
         gradQueryRows<D>() * (2 * sizeof(float) + sizeof(int64_t));
}
template <int D>
constexpr size_t gradQueriesSmem() {
  return 6 * size_t(kRows) * rowLd<D>() * sizeof(bf16) + 2 * kRows * sizeof(float);
}

template <typename Kernel>
void allowSmem(Kernel kernel, size_t bytes) {
  MT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <int D>
void forward(const KernelArgs& args, const AttentionShape& d, const float* sinks, cudaStream_t stream) {
  static const bool ready = (allowSmem(flashForward<D>, forwardSmem<D>()), true);
  (void)ready;
  const int64_t tiles = (d.seq + kRows - 1) / kRows;
  flashForward<D><<<cuda::gridBlocks(d.batch * d.heads * tiles, "attention"), kThreads, forwardSmem<D>(), stream>>>(
      cuda::data<const bf16>(args.in[0]), cuda::data<const bf16>(args.in[1]), cuda::data<const bf16>(args.in[2]),
      sinks, cuda::data<bf16>(args.out[0]), args.out[1].f32(), d);
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

void attentionForwardTensorCores(const KernelArgs& args, const AttentionShape& d, const float* sinks,
                                 cudaStream_t stream) {
  if (d.head_dim == 64)
    forward<64>(args, d, sinks, stream);
  else
    forward<128>(args, d, sinks, stream);
}

void attentionBackwardTensorCores(const KernelArgs& args, const AttentionShape& d, cudaStream_t stream) {
  if (d.head_dim == 64)
    backward<64>(args, d, stream);
  else
    backward<128>(args, d, stream);
}

}  // namespace mt
