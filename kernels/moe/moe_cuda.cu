// CUDA twins of the mixture-of-experts kernels; kernels/moe/moe_cpu.cc is the reference (f32:
// the op table runs them F32_ONLY, a bf16 plan widening around them). The router and the
// combine run a thread per token or element (the router's per-token code is the CPU's,
// kernels/moe/routing.h); the counting sort a block per expert (a block-wide
// scan keeps each expert's rows in token order, as the CPU's stable sort; no scratch memory: the
// arena is the plan's); the grouped products
// one cuBLAS product per expert, for which the experts' row counts are read back to the host
// (the one synchronisation these kernels make: the split of the rows is data).
#include <cublas_v2.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <algorithm>
#include <vector>

#include "kernels/cuda_common.cuh"
#include "kernels/moe/moe.h"

namespace mt {

cudaDataType_t blasType(const Tensor& t);  // kernels/matmul/matmul_cuda.cu

namespace {

using cuda::blocksFor;
using cuda::kThreads;

void cublasCheck(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error: ") + cublasGetStatusString(status) + " in " + call);
}
#define MT_CUBLAS_CHECK(call) cublasCheck((call), #call)

// The most experts a token may choose on the GPU (its choices live in registers).
constexpr int64_t kMaxTopK = 32;

using routing::RouteSettings;
using routing::RowScores;
using routing::RowSoftmax;
using routing::validExpert;

// A thread per token: routing::routeToken with the row's softmax evaluated on demand (the chosen
// experts in registers: at most kMaxTopK).
__global__ void routeKernel(const float* __restrict__ logits, float* __restrict__ weights,
                            int32_t* __restrict__ experts, int64_t tokens, int64_t num_experts,
                            RouteSettings settings) {
  const int64_t k = settings.top_k;
  MT_GRID_STRIDE(t, tokens) {
    const float* l = logits + t * num_experts;
    int32_t chosen[kMaxTopK];
    routing::routeToken(l, RowScores(l, num_experts, settings.sigmoid()), num_experts, settings, weights + t * k,
                        chosen);
    for (int64_t j = 0; j < k; ++j) experts[t * k + j] = chosen[j];
  }
}

__global__ void routeGradKernel(const float* __restrict__ dweights, const float* __restrict__ logits,
                                const int32_t* __restrict__ experts, float* __restrict__ dlogits, int64_t tokens,
                                int64_t num_experts, RouteSettings settings) {
  const int64_t k = settings.top_k;
  MT_GRID_STRIDE(t, tokens) {
    const float* l = logits + t * num_experts;
    routing::routeGradToken(l, RowScores(l, num_experts, settings.sigmoid()), dweights + t * k, experts + t * k,
                            num_experts, settings, dlogits + t * num_experts);
  }
}

// Block b places the slots of bucket b (experts 0..E-1; bucket E: indices out of range) in slot
// order after every slot of the buckets before it: a count of those, then a block-wide scan of
// its own (each block reads every slot: E is small, and no scratch memory is needed). The
// experts' counts as i32 for the products.
__global__ void dispatchPositionsKernel(const int32_t* __restrict__ experts, int64_t slots, int64_t num_experts,
                                        int32_t* __restrict__ positions, int32_t* __restrict__ counts) {
  using Reduce = cub::BlockReduce<int64_t, kThreads>;
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } storage;
  __shared__ int64_t base;
  const int64_t bucket = blockIdx.x;
  auto bucketOf = [&](int64_t s) {
    const int32_t e = experts[s];
    return validExpert(e, num_experts) ? static_cast<int64_t>(e) : num_experts;
  };
  int64_t before = 0, mine = 0;
  for (int64_t s = threadIdx.x; s < slots; s += blockDim.x) {
    const int64_t b = bucketOf(s);
    before += b < bucket;
    mine += b == bucket;
  }
  const int64_t total_before = Reduce(storage.reduce).Sum(before);
  __syncthreads();
  const int64_t total_mine = Reduce(storage.reduce).Sum(mine);
  if (threadIdx.x == 0) {
    base = total_before;
    if (bucket < num_experts) counts[bucket] = static_cast<int32_t>(total_mine);
  }
  __syncthreads();
  for (int64_t first = 0; first < slots; first += blockDim.x) {
    const int64_t s = first + threadIdx.x;
    const int64_t here = s < slots && bucketOf(s) == bucket;
    int64_t rank = 0, run = 0;
    Scan(storage.scan).ExclusiveSum(here, rank, run);
    if (here) positions[s] = static_cast<int32_t>(base + rank);
    __syncthreads();
    if (threadIdx.x == 0) base += run;
    __syncthreads();
  }
}

__global__ void copyRowsKernel(const float* __restrict__ input, const int32_t* __restrict__ positions,
                               float* __restrict__ routed, int64_t slots, int64_t k, int64_t width) {
  MT_GRID_STRIDE(e, slots * width) {
    const int64_t s = e / width, c = e % width;
    routed[positions[s] * width + c] = input[(s / k) * width + c];
  }
}

// dinput[t] = the sum over j, in order, of drouted[positions[t, j]] (positions out of range skipped).
__global__ void gatherSumKernel(const float* __restrict__ drouted, const int32_t* __restrict__ positions,
                                float* __restrict__ dinput, int64_t tokens, int64_t k, int64_t rows, int64_t width) {
  MT_GRID_STRIDE(e, tokens * width) {
    const int64_t t = e / width, c = e % width;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = positions[t * k + j];
      if (r >= 0 && r < rows) sum += drouted[r * width + c];
    }
    dinput[e] = sum;
  }
}

__global__ void combineKernel(const float* __restrict__ routed, const int32_t* __restrict__ positions,
                              const float* __restrict__ weights, float* __restrict__ out, int64_t tokens, int64_t k,
                              int64_t rows, int64_t width) {
  MT_GRID_STRIDE(e, tokens * width) {
    const int64_t t = e / width, c = e % width;
    float y = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = positions[t * k + j];
      if (r >= 0 && r < rows) y += weights[t * k + j] * routed[r * width + c];
    }
    out[e] = y;
  }
}

// drouted[positions[s]] = weights[s] * dout[token of s].
__global__ void combineGradRowsKernel(const float* __restrict__ dout, const int32_t* __restrict__ positions,
                                      const float* __restrict__ weights, float* __restrict__ drouted, int64_t slots,
                                      int64_t k, int64_t rows, int64_t width) {
  MT_GRID_STRIDE(e, slots * width) {
    const int64_t s = e / width, c = e % width, r = positions[s];
    if (r >= 0 && r < rows) drouted[r * width + c] = weights[s] * dout[(s / k) * width + c];
  }
}

// dweights[s] = dout[token of s] . routed[positions[s]]: a block per slot.
__global__ void combineGradWeightsKernel(const float* __restrict__ dout, const float* __restrict__ routed,
                                         const int32_t* __restrict__ positions, float* __restrict__ dweights,
                                         int64_t k, int64_t rows, int64_t width) {
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const int64_t s = blockIdx.x, r = positions[s];
  float dot = 0.0f;
  if (r >= 0 && r < rows)
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) dot += dout[(s / k) * width + c] * routed[r * width + c];
  const float total = Reduce(storage).Sum(dot);
  if (threadIdx.x == 0) dweights[s] = total;
}

// The experts' row ranges (ExpertRanges) from their counts read back to the host.
ExpertRanges hostRanges(const Tensor& counts, int64_t rows, cudaStream_t stream) {
  std::vector<int32_t> host(static_cast<size_t>(counts.numel()));
  MT_CUDA_CHECK(cudaMemcpyAsync(host.data(), counts.data, counts.bytes(), cudaMemcpyDeviceToHost, stream));
  MT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ExpertRanges(host.data(), counts.numel(), rows);
}

void requireTopK(int64_t k) {
  if (k > kMaxTopK)
    throw std::runtime_error("moe_route on CUDA takes at most " + std::to_string(kMaxTopK) + " experts per token, got " +
                             std::to_string(k));
}


// The experts mt.moe_balance_stats sums at once on the GPU (a warp's lanes hold E / 32 each in
// registers); more are taken in chunks of this many, each chunk a pass over the tokens.
constexpr int64_t kBalanceChunk = 512;
constexpr int kBalanceLanes = 32, kBalancePerLane = kBalanceChunk / kBalanceLanes;
constexpr int kBalanceThreads = 1024;

// One block: warp w takes tokens w, w + warps, ... (a lane per E/32 experts: the row's max and
// sum by warp shuffles), each lane summing its experts' probabilities; the warps' sums then add
// in warp order in shared memory, and the choices are counted with shared integer atomics
// (exact in any order). Deterministic; one block, so one SM (N*E exps a layer, small beside
// the layer's products). With a mask (null: none), the tokens it keeps (not 0) only.
__global__ void __launch_bounds__(kBalanceThreads)
    balanceStatsKernel(const float* __restrict__ logits, const int32_t* __restrict__ experts,
                       const float* __restrict__ total, const float* __restrict__ mask, float* __restrict__ out,
                       int64_t tokens, int64_t num_experts, int64_t choices, int64_t k) {
  __shared__ float prob[kBalanceChunk];
  __shared__ int count[kBalanceChunk];
  const int lane = threadIdx.x % kBalanceLanes, warp = threadIdx.x / kBalanceLanes;
  const int warps = blockDim.x / kBalanceLanes;
  for (int64_t first = 0; first < num_experts; first += kBalanceChunk) {
    const int64_t chunk = min(kBalanceChunk, num_experts - first);
    __syncthreads();  // the previous chunk's results are written
    for (int64_t e = threadIdx.x; e < chunk; e += blockDim.x) prob[e] = 0.0f, count[e] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < choices; i += blockDim.x)
      if (validExpert(experts[i], num_experts) && experts[i] >= first && experts[i] < first + chunk &&
          (!mask || mask[i / k] != 0.0f))
        atomicAdd(&count[experts[i] - first], 1);
    float sum[kBalancePerLane] = {};
    for (int64_t t = warp; t < tokens; t += warps) {
      if (mask && mask[t] == 0.0f) continue;  // the whole warp: t is the warp's
      const float* l = logits + t * num_experts;
      float max = -INFINITY;
      for (int64_t e = lane; e < num_experts; e += kBalanceLanes) max = fmaxf(max, l[e]);
      for (int o = kBalanceLanes / 2; o > 0; o /= 2) max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, o));
      float z = 0.0f;
      for (int64_t e = lane; e < num_experts; e += kBalanceLanes) z += expf(l[e] - max);
      for (int o = kBalanceLanes / 2; o > 0; o /= 2) z += __shfl_xor_sync(0xffffffffu, z, o);
#pragma unroll
      for (int j = 0; j < kBalancePerLane; ++j) {
        const int64_t e = lane + j * kBalanceLanes;
        if (e < chunk) sum[j] += expf(l[first + e] - max) / z;
      }
    }
    for (int w = 0; w < warps; ++w) {
      __syncthreads();
      if (warp == w)
#pragma unroll
        for (int j = 0; j < kBalancePerLane; ++j) {
          const int64_t e = lane + j * kBalanceLanes;
          if (e < chunk) prob[e] += sum[j];
        }
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < chunk; e += blockDim.x) {
      out[first + e] = total[first + e] + static_cast<float>(count[e]);
      out[num_experts + first + e] = total[num_experts + first + e] + prob[e];
    }
  }
}

// dlogits[t] = p_t * (g - <g, p_t>), g = dtotal[1]; a thread per token; zero for one a mask (null:
// none) leaves out.
__global__ void balanceStatsGradKernel(const float* __restrict__ dtotal, const float* __restrict__ logits,
                                       const float* __restrict__ mask, float* __restrict__ dlogits, int64_t tokens,
                                       int64_t num_experts) {
  const float* g = dtotal + num_experts;
  MT_GRID_STRIDE(t, tokens) {
    if (mask && mask[t] == 0.0f) {
      for (int64_t e = 0; e < num_experts; ++e) dlogits[t * num_experts + e] = 0.0f;
      continue;
    }
    routing::balanceGradToken(RowSoftmax(logits + t * num_experts, num_experts), g, num_experts,
                              dlogits + t * num_experts);
  }
}

// mt.moe_balance_loss: one thread (routing::balanceLoss, as the CPU).
__global__ void balanceLossKernel(const float* __restrict__ stats, float* __restrict__ loss, int64_t num_experts,
                                  int64_t rows, int64_t top_k) {
  loss[0] = routing::balanceLoss(stats, num_experts, routing::balanceRows(stats, num_experts, rows, top_k));
}

// Each thread sums the counts for the rows itself (E adds, in the CPU's order).
__global__ void balanceLossGradKernel(const float* __restrict__ dloss, const float* __restrict__ stats,
                                      float* __restrict__ dstats, int64_t num_experts, int64_t rows, int64_t top_k) {
  MT_GRID_STRIDE(e, num_experts) {
    dstats[e] = 0.0f;
    dstats[num_experts + e] = routing::balanceLossGrad(
        dloss[0], stats, num_experts, routing::balanceRows(stats, num_experts, rows, top_k), e);
  }
}

}  // namespace

// mt.moe_route and mt.moe_route_biased (its bias the second input, in device memory).
void moe_route_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& logits = args.in[0];
  const RouteSettings settings = routing::routeSettings(args, 1);
  const int64_t tokens = leadingRows(logits);
  requireTopK(settings.top_k);
  if (tokens == 0) return;
  routeKernel<<<blocksFor(tokens), kThreads, 0, launch.stream>>>(logits.f32(), args.out[0].f32(), args.out[1].i32(),
                                                                 tokens, logits.dim(-1), settings);
  MT_CUDA_CHECK_LAUNCH();
}

void moe_route_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& logits = args.in[1];
  const RouteSettings settings = routing::routeSettings(args, 3);
  const int64_t tokens = leadingRows(logits);
  requireTopK(settings.top_k);
  if (tokens == 0) return;
  routeGradKernel<<<blocksFor(tokens), kThreads, 0, launch.stream>>>(
      args.in[0].f32(), logits.f32(), args.in[2].i32(), args.out[0].f32(), tokens, logits.dim(-1), settings);
  MT_CUDA_CHECK_LAUNCH();
}

void moe_dispatch_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &input = args.in[0], &experts = args.in[1];
  const int64_t slots = experts.numel(), num_experts = args.out[2].dim(0), width = input.dim(-1);
  dispatchPositionsKernel<<<static_cast<unsigned>(num_experts + 1), kThreads, 0, launch.stream>>>(
      experts.i32(), slots, num_experts, args.out[1].i32(), args.out[2].i32());
  MT_CUDA_CHECK_LAUNCH();
  if (slots * width == 0) return;
  copyRowsKernel<<<blocksFor(slots * width), kThreads, 0, launch.stream>>>(input.f32(), args.out[1].i32(),
                                                                          args.out[0].f32(), slots, experts.dim(-1),
                                                                          width);
  MT_CUDA_CHECK_LAUNCH();
}

void moe_dispatch_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &drouted = args.in[0], &positions = args.in[1];
  const int64_t tokens = leadingRows(positions), width = drouted.dim(1);
  if (tokens * width == 0) return;
  gatherSumKernel<<<blocksFor(tokens * width), kThreads, 0, launch.stream>>>(
      drouted.f32(), positions.i32(), args.out[0].f32(), tokens, positions.dim(-1), drouted.dim(0), width);
  MT_CUDA_CHECK_LAUNCH();
}

namespace {

// A block per row: its expert found from the counts (ExpertRanges' clipping), its bias added.
__global__ void groupedAddBiasKernel(const float* __restrict__ input, const float* __restrict__ bias,
                                     const int32_t* __restrict__ counts, float* __restrict__ out, int64_t rows,
                                     int64_t experts, int64_t c) {
  __shared__ int64_t expert;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (threadIdx.x == 0) {
      expert = -1;
      int64_t total = 0;
      for (int64_t e = 0; e < experts && expert < 0; ++e) {
        total += clippedCount(counts[e], rows, total);
        if (r < total) expert = e;
      }
    }
    __syncthreads();
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      out[r * c + j] = input[r * c + j] + (expert >= 0 ? bias[expert * c + j] : 0.0f);
    __syncthreads();
  }
}

// A block per (expert, column block of blockDim.x): a thread per column sums the expert's rows
// in row order.
__global__ void groupedBiasGradKernel(const float* __restrict__ dout, const int32_t* __restrict__ counts,
                                      float* __restrict__ dbias, int64_t rows, int64_t c, int64_t column_blocks) {
  const int64_t e = blockIdx.x / column_blocks;
  const int64_t j = (blockIdx.x % column_blocks) * blockDim.x + threadIdx.x;
  if (j >= c) return;
  int64_t first = 0, count = 0;
  expertRange(counts, e, rows, &first, &count);
  float sum = 0.0f;
  for (int64_t r = first; r < first + count; ++r) sum += dout[r * c + j];
  dbias[e * c + j] = sum;
}

}  // namespace

void grouped_add_bias_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &input = args.in[0], &bias = args.in[1], &counts = args.in[2];
  const int64_t rows = input.dim(0), c = input.dim(1);
  if (rows == 0 || c == 0) return;
  groupedAddBiasKernel<<<cuda::gridBlocks(rows, "grouped_add_bias"), kThreads, 0, launch.stream>>>(
      input.f32(), bias.f32(), counts.i32(), args.out[0].f32(), rows, counts.numel(), c);
  MT_CUDA_CHECK_LAUNCH();
}

void grouped_bias_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &dout = args.in[0], &counts = args.in[1];
  const int64_t experts = counts.numel(), c = dout.dim(1);
  if (experts == 0 || c == 0) return;
  const int64_t column_blocks = (c + kThreads - 1) / kThreads;
  groupedBiasGradKernel<<<cuda::gridBlocks(experts * column_blocks, "grouped_bias_grad"), kThreads, 0,
                          launch.stream>>>(dout.f32(), counts.i32(), args.out[0].f32(), dout.dim(0), c, column_blocks);
  MT_CUDA_CHECK_LAUNCH();
}

namespace {

// One cuBLAS product per expert of [first, first + weight's experts) over its row range, into
// out's rows (the twin of the CPU's expertProducts). Row-major Y (m, n) = X (m, k) · op(W) as
// column-major Yᵀ = op(W)ᵀ Xᵀ (matmul_cuda's rule).
void expertProducts(const Tensor& input, const Tensor& weight, const ExpertRanges& ranges, int64_t first, bool tb,
                    const Tensor& out, const CudaLaunch& launch) {
  const int64_t k = input.dim(1), n = out.dim(1);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t g = 0; g < weight.dim(0); ++g) {
    const int64_t e = first + g;
    if (ranges.count[e] == 0) continue;
    MT_CUBLAS_CHECK(cublasGemmEx(launch.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n),
                                 static_cast<int>(ranges.count[e]), static_cast<int>(k), &one,
                                 weight.f32() + g * k * n, blasType(weight), static_cast<int>(tb ? k : n),
                                 input.f32() + ranges.first[e] * k, blasType(input), static_cast<int>(k), &zero,
                                 out.f32() + ranges.first[e] * n, blasType(out), static_cast<int>(n),
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace

void grouped_matmul_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &input = args.in[0], &out = args.out[0];
  const int64_t rows = input.dim(0), n = out.dim(1);
  const ExpertRanges ranges = hostRanges(args.in[2], rows, launch.stream);
  expertProducts(input, args.in[1], ranges, 0, args.ints[0], out, launch);
  if (ranges.total < rows)
    MT_CUDA_CHECK(cudaMemsetAsync(out.f32() + ranges.total * n, 0, (rows - ranges.total) * n * sizeof(float),
                                  launch.stream));
}

// A group's products written over `into` (in place where the plan gave the result its bytes).
void grouped_matmul_into_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &input = args.in[0], &into = args.in[3], &out = args.out[0];
  if (out.data != into.data)
    MT_CUDA_CHECK(cudaMemcpyAsync(out.data, into.data, into.bytes(), cudaMemcpyDeviceToDevice, launch.stream));
  const ExpertRanges ranges = hostRanges(args.in[2], input.dim(0), launch.stream);
  expertProducts(input, args.in[1], ranges, args.ints[1], args.ints[0], out, launch);
}

// dW_e = dY_eᵀ X_e (N, K) with transpose_b, else X_eᵀ dY_e (K, N), for the experts [first, first +
// dweight's experts); zero for an expert without rows.
void grouped_matmul_weight_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &input = args.in[0], &dout = args.in[1], &counts = args.in[2], &dweight = args.out[0];
  const bool tb = args.ints[0];
  const int64_t first = args.intOrZero(1);
  const int64_t k = input.dim(1), n = dout.dim(1);
  const ExpertRanges ranges = hostRanges(counts, input.dim(0), launch.stream);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t g = 0; g < dweight.dim(0); ++g) {
    const int64_t e = first + g;
    float* dw = dweight.f32() + g * k * n;
    const int m = static_cast<int>(ranges.count[e]);
    if (m == 0) {
      MT_CUDA_CHECK(cudaMemsetAsync(dw, 0, k * n * sizeof(float), launch.stream));
      continue;
    }
    const float* x = input.f32() + ranges.first[e] * k;
    const float* dy = dout.f32() + ranges.first[e] * n;
    // Row-major (N, K) = dYᵀ X is column-major (K, N) = Xᵀ dY: A = X (K x m, ld K), B = dY (N x m, ld N).
    if (tb)
      MT_CUBLAS_CHECK(cublasGemmEx(launch.blas, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(k), static_cast<int>(n), m,
                                   &one, x, blasType(input), static_cast<int>(k), dy, blasType(dout),
                                   static_cast<int>(n), &zero, dw, CUDA_R_32F, static_cast<int>(k), CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
    else  // row-major (K, N) = Xᵀ dY is column-major (N, K) = dYᵀ X
      MT_CUBLAS_CHECK(cublasGemmEx(launch.blas, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(n), static_cast<int>(k), m,
                                   &one, dy, blasType(dout), static_cast<int>(n), x, blasType(input),
                                   static_cast<int>(k), &zero, dw, CUDA_R_32F, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
  }
}

void moe_combine_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &routed = args.in[0], &positions = args.in[1];
  const int64_t tokens = leadingRows(positions), width = routed.dim(1);
  if (tokens * width == 0) return;
  combineKernel<<<blocksFor(tokens * width), kThreads, 0, launch.stream>>>(
      routed.f32(), positions.i32(), args.in[2].f32(), args.out[0].f32(), tokens, positions.dim(-1), routed.dim(0),
      width);
  MT_CUDA_CHECK_LAUNCH();
}

void moe_combine_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &dout = args.in[0], &routed = args.in[1], &positions = args.in[2], &weights = args.in[3];
  const int64_t slots = positions.numel(), rows = routed.dim(0), width = routed.dim(1), k = positions.dim(-1);
  MT_CUDA_CHECK(cudaMemsetAsync(args.out[0].data, 0, args.out[0].bytes(), launch.stream));
  if (slots == 0) return;
  if (width > 0) {
    combineGradRowsKernel<<<blocksFor(slots * width), kThreads, 0, launch.stream>>>(
        dout.f32(), positions.i32(), weights.f32(), args.out[0].f32(), slots, k, rows, width);
    MT_CUDA_CHECK_LAUNCH();
  }
  combineGradWeightsKernel<<<static_cast<unsigned>(slots), kThreads, 0, launch.stream>>>(
      dout.f32(), routed.f32(), positions.i32(), args.out[1].f32(), k, rows, width);
  MT_CUDA_CHECK_LAUNCH();
}

void moe_balance_stats_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &logits = args.in[0], &experts = args.in[1];
  const int64_t num_experts = logits.dim(-1);
  const float* mask = args.optionalF32(3);
  balanceStatsKernel<<<1, kBalanceThreads, 0, launch.stream>>>(logits.f32(), experts.i32(), args.in[2].f32(), mask,
                                                               args.out[0].f32(), leadingRows(logits), num_experts,
                                                               experts.numel(), experts.dim(-1));
  MT_CUDA_CHECK_LAUNCH();
}

void moe_balance_stats_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& logits = args.in[1];
  const int64_t tokens = leadingRows(logits);
  if (tokens == 0) return;
  const float* mask = args.optionalF32(2);
  balanceStatsGradKernel<<<blocksFor(tokens), kThreads, 0, launch.stream>>>(args.in[0].f32(), logits.f32(), mask,
                                                                            args.out[0].f32(), tokens, logits.dim(-1));
  MT_CUDA_CHECK_LAUNCH();
}

void moe_balance_loss_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  balanceLossKernel<<<1, 1, 0, launch.stream>>>(args.in[0].f32(), args.out[0].f32(), args.in[0].dim(1),
                                                args.ints[0], args.intOrZero(1));
  MT_CUDA_CHECK_LAUNCH();
}

void moe_balance_loss_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t num_experts = args.in[1].dim(1);
  balanceLossGradKernel<<<blocksFor(num_experts), kThreads, 0, launch.stream>>>(
      args.in[0].f32(), args.in[1].f32(), args.out[0].f32(), num_experts, args.ints[0], args.intOrZero(1));
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
