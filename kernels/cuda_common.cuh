// Launch geometry and reductions shared by the CUDA twins.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/kernel_args.h"

namespace mt::cuda {

constexpr int kThreads = 256;

// Activations are f32, or bf16 in a bf16 plan: loads widen to f32 (the math is f32), stores
// round to nearest even, as the CPU backend's emulation of bf16 storage does
// (runtime/plan/kernel_registry.cc).
using bf16 = __nv_bfloat16;
__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(bf16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T fromFloat(float x);
template <>
__device__ __forceinline__ float fromFloat<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 fromFloat<bf16>(float x) { return __float2bfloat16_rn(x); }

// Calls f(T{}) with T the element type of `dtype`: float or bf16 (the kernel's checks admitted
// no other for a float operand).
template <typename F>
void withFloat(DType dtype, F&& f) {
  if (dtype == DType::BF16)
    f(bf16{});
  else
    f(0.0f);
}
// Tensor `t`'s data as T.
template <typename T>
T* data(const Tensor& t) { return static_cast<T*>(t.data); }

// Shapes and strides passed by value to a kernel: up to kMaxRank dimensions.
constexpr int kMaxRank = 8;
struct Dims {
  int64_t v[kMaxRank];
};
// Throws, naming `op`, for a rank the kernels' Dims cannot hold.
inline void requireRank(int rank, const char* op) {
  if (rank > kMaxRank)
    throw std::runtime_error(std::string(op) + " on CUDA supports rank <= " + std::to_string(kMaxRank) +
                             ", got rank " + std::to_string(rank));
}

// Blocks for a grid-stride loop over n elements (at least 1, capped: the loop covers the rest).
inline unsigned blocksFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  constexpr int64_t kMaxBlocks = 65535 * 32;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// A grid of `blocks` blocks along x (one per row, say), at most CUDA's 2^31 - 1.
inline unsigned gridBlocks(int64_t blocks, const char* op) {
  if (blocks > 0x7fffffff)
    throw std::runtime_error(std::string(op) + " on CUDA: more than 2^31 - 1 blocks of work");
  return static_cast<unsigned>(blocks);
}

// for (i = this thread's first; i < n; i += the grid's width)
#define MT_GRID_STRIDE(i, n)                                                     \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// A launch's configuration errors surface at the launch, not at the next synchronisation.
#define MT_CUDA_CHECK_LAUNCH() MT_CUDA_CHECK(cudaGetLastError())

// Elementwise work on bf16 tensors eight values a thread: one 16-byte load per input and one
// store per output (scalar bf16 loads leave a memory-bound kernel at a fraction of the GPU's
// bandwidth). f(const float (&in)[In], float (&out)[Out]) is the per-element math, in f32 as the
// scalar kernels do it: the results are the same bits.
template <int N>
struct Pointers {
  const void* p[N];
};
template <int In, int Out, typename F>
__global__ void elementwiseBf16x8(Pointers<In> in, Pointers<Out> out, int64_t words, F f) {
  MT_GRID_STRIDE(w, words) {
    uint4 x[In], y[Out];
#pragma unroll
    for (int a = 0; a < In; ++a) x[a] = static_cast<const uint4*>(in.p[a])[w];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float args[In], results[Out];
#pragma unroll
      for (int a = 0; a < In; ++a) args[a] = toFloat(reinterpret_cast<const bf16*>(&x[a])[k]);
      f(args, results);
#pragma unroll
      for (int o = 0; o < Out; ++o) reinterpret_cast<bf16*>(&y[o])[k] = fromFloat<bf16>(results[o]);
    }
#pragma unroll
    for (int o = 0; o < Out; ++o) static_cast<uint4*>(const_cast<void*>(out.p[o]))[w] = y[o];
  }
}
// A binary functor's math (float, float) -> float as elementwiseBf16x8 takes it.
template <typename F>
struct BinaryOnArrays {
  F f;
  __device__ void operator()(const float (&in)[2], float (&out)[1]) const { out[0] = f(in[0], in[1]); }
};
// Whether the tensors are bf16 with 16-byte aligned data: what the eight-wide kernels read.
inline bool bf16x8Aligned(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (t->dtype != DType::BF16 || reinterpret_cast<uintptr_t>(t->data) % 16 != 0) return false;
  return true;
}
// Runs f over n bf16 elements of the tensors eight at a time and returns true, or returns false
// (the caller runs its scalar kernel) unless n is a multiple of 8 and every tensor bf16x8Aligned.
template <int In, int Out, typename F>
bool launchBf16x8(const Tensor* const (&in)[In], const Tensor* const (&out)[Out], int64_t n, F f, CudaStream stream) {
  Pointers<In> ins;
  Pointers<Out> outs;
  bool aligned = n % 8 == 0;
  for (int a = 0; a < In; ++a) {
    aligned = aligned && bf16x8Aligned({in[a]});
    ins.p[a] = in[a]->data;
  }
  for (int o = 0; o < Out; ++o) {
    aligned = aligned && bf16x8Aligned({out[o]});
    outs.p[o] = out[o]->data;
  }
  if (!aligned) return false;
  elementwiseBf16x8<In, Out><<<blocksFor(n / 8), kThreads, 0, stream>>>(ins, outs, n / 8, f);
  MT_CUDA_CHECK_LAUNCH();
  return true;
}

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct MinOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a < b ? a : b; }
};

// Every lane of the warp gets op over the warp's values.
template <typename T, typename Op>
__device__ T warpReduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
template <typename T>
__device__ T warpSum(T v) { return warpReduce(v, SumOp{}); }

// Every thread of the block gets op over the block's values (blockDim.x a multiple of 32).
// Safe to call repeatedly: the first barrier keeps a previous call's readers ahead of this
// call's writers.
template <typename T, typename Op>
__device__ T blockReduce(T v, Op op, T identity) {
  __shared__ T partial[32];
  v = warpReduce(v, op);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x >> 5) ? partial[lane] : identity;
    v = warpReduce(v, op);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}
template <typename T>
__device__ T blockSum(T v) { return blockReduce(v, SumOp{}, T(0)); }
__device__ inline float blockMax(float v) { return blockReduce(v, MaxOp{}, -INFINITY); }

// out[c] = sum over rows r of f(r, c), for c < cols. Rows are split into chunks summed in
// parallel and added atomically, so the order of the additions (not their set) varies run to
// run: results agree to rounding, not bit for bit.
template <typename F>
__global__ void columnSumsKernel(int64_t rows, int64_t cols, int64_t rows_per_chunk, F f, float* __restrict__ out) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float sum = 0.0f;
  for (int64_t r = r0; r < r1; ++r) sum += f(r, c);
  atomicAdd(out + c, sum);
}

template <typename F>
void columnSums(int64_t rows, int64_t cols, F f, float* out, cudaStream_t stream) {
  if (cols == 0) return;
  MT_CUDA_CHECK(cudaMemsetAsync(out, 0, cols * sizeof(float), stream));
  if (rows == 0) return;
  // About 32 rows per thread: enough chunks to fill the GPU when cols is a model width.
  const int64_t chunks = (rows + 31) / 32 < 1024 ? (rows + 31) / 32 : 1024;
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>((rows + per_chunk - 1) / per_chunk));
  columnSumsKernel<<<grid, kThreads, 0, stream>>>(rows, cols, per_chunk, f, out);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
