// CUDA twins of the lookups; kernels/embedding/embedding_cpu.cc is the reference.
#include "kernels/cuda_common.cuh"
#include "kernels/embedding/embedding.h"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::data;
using cuda::kThreads;
using cuda::toFloat;
using cuda::withFloat;

// out = the table's row ids - first where it has one, else `in`'s element (zero if null). The
// table, `in` and out share one type: rows are copied as they are.
template <typename T>
__global__ void embeddingKernel(const int32_t* __restrict__ ids, const T* __restrict__ table, const T* __restrict__ in,
                                T* __restrict__ out, int64_t n, int64_t first, int64_t rows, int64_t width) {
  MT_GRID_STRIDE(e, n * width) {
    const int64_t row = ids[e / width] - first;
    out[e] = row >= 0 && row < rows ? table[row * width + e % width] : in ? in[e] : cuda::fromFloat<T>(0.0f);
  }
}

// Scatter-add into the f32 table gradient: tokens with the same id add into one row
// (atomically, in no fixed order); the tokens of `padding` (-1: none) add nothing.
template <typename T>
__global__ void embeddingGradKernel(const int32_t* __restrict__ ids, const T* __restrict__ dout,
                                    float* __restrict__ dtable, int64_t n, int64_t first, int64_t rows,
                                    int64_t width, int64_t padding) {
  MT_GRID_STRIDE(e, n * width) {
    const int64_t id = ids[e / width], row = id - first;
    if (row >= 0 && row < rows && id != padding) atomicAdd(dtable + row * width + e % width, toFloat(dout[e]));
  }
}

__global__ void positionsKernel(int32_t* __restrict__ out, int64_t n, int64_t seq) {
  MT_GRID_STRIDE(i, n) out[i] = static_cast<int32_t>(i % seq);
}

}  // namespace

// `in`: the chunk's pass-through input (mt.embedding_chunk), or null.
static void launchLookup(const KernelArgs& args, const CudaLaunch& launch, int64_t first, const Tensor* in) {
  const Tensor &ids = args.in[0], &table = args.in[1];
  const int64_t n = ids.numel(), width = table.dim(1);
  if (n * width == 0) return;
  withFloat(table.dtype, [&](auto t) {
    using T = decltype(t);
    embeddingKernel<<<blocksFor(n * width), kThreads, 0, launch.stream>>>(
        ids.i32(), data<const T>(table), in ? data<const T>(*in) : nullptr, data<T>(args.out[0]), n, first,
        table.dim(0), width);
  });
  MT_CUDA_CHECK_LAUNCH();
}

static void launchScatter(const KernelArgs& args, const CudaLaunch& launch, int64_t first, int64_t padding) {
  const Tensor &ids = args.in[0], &dtable = args.out[0];
  const int64_t n = ids.numel(), width = dtable.dim(1);
  MT_CUDA_CHECK(cudaMemsetAsync(dtable.data, 0, dtable.bytes(), launch.stream));
  if (n * width == 0) return;
  withFloat(args.in[1].dtype, [&](auto t) {
    using T = decltype(t);
    embeddingGradKernel<<<blocksFor(n * width), kThreads, 0, launch.stream>>>(
        ids.i32(), data<const T>(args.in[1]), dtable.f32(), n, first, dtable.dim(0), width, padding);
  });
  MT_CUDA_CHECK_LAUNCH();
}

void embedding_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchLookup(args, launch, 0, nullptr); }

void embedding_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchScatter(args, launch, 0, embeddingPaddingId(args, 0));
}

void embedding_chunk_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchLookup(args, launch, args.ints[0], &args.in[2]);
}

void embedding_grad_chunk_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchScatter(args, launch, args.ints[0], embeddingPaddingId(args, 1));
}

void positions_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& out = args.out[0];
  if (out.numel() == 0) return;
  positionsKernel<<<blocksFor(out.numel()), kThreads, 0, launch.stream>>>(out.i32(), out.numel(), out.dim(1));
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
