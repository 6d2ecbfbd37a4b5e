// CUDA twins of the lookups; kernels/embedding/embedding_cpu.cc is the reference.
#include "kernels/cuda_common.cuh"
#include "kernels/embedding/embedding.h"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::kThreads;

__global__ void embeddingKernel(const int32_t* __restrict__ ids, const float* __restrict__ table,
                                float* __restrict__ out, int64_t n, int64_t vocab, int64_t width) {
  MT_GRID_STRIDE(e, n * width) {
    const int64_t id = ids[e / width];
    out[e] = id >= 0 && id < vocab ? table[id * width + e % width] : 0.0f;
  }
}

// Scatter-add: tokens with the same id add into one row (atomically, in no fixed order).
__global__ void embeddingGradKernel(const int32_t* __restrict__ ids, const float* __restrict__ dout,
                                    float* __restrict__ dtable, int64_t n, int64_t vocab, int64_t width) {
  MT_GRID_STRIDE(e, n * width) {
    const int64_t id = ids[e / width];
    if (id >= 0 && id < vocab) atomicAdd(dtable + id * width + e % width, dout[e]);
  }
}

__global__ void positionsKernel(int32_t* __restrict__ out, int64_t n, int64_t seq) {
  MT_GRID_STRIDE(i, n) out[i] = static_cast<int32_t>(i % seq);
}

}  // namespace

void embedding_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &ids = args.in[0], &table = args.in[1];
  const int64_t n = ids.numel(), width = table.dim(1);
  if (n * width == 0) return;
  embeddingKernel<<<blocksFor(n * width), kThreads, 0, launch.stream>>>(ids.i32(), table.f32(), args.out[0].f32(), n,
                                                                        table.dim(0), width);
  MT_CUDA_CHECK_LAUNCH();
}

void embedding_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &ids = args.in[0], &dtable = args.out[0];
  const int64_t n = ids.numel(), width = dtable.dim(1);
  MT_CUDA_CHECK(cudaMemsetAsync(dtable.data, 0, dtable.bytes(), launch.stream));
  if (n * width == 0) return;
  embeddingGradKernel<<<blocksFor(n * width), kThreads, 0, launch.stream>>>(ids.i32(), args.in[1].f32(), dtable.f32(),
                                                                            n, dtable.dim(0), width);
  MT_CUDA_CHECK_LAUNCH();
}

void positions_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& out = args.out[0];
  if (out.numel() == 0) return;
  positionsKernel<<<blocksFor(out.numel()), kThreads, 0, launch.stream>>>(out.i32(), out.numel(), out.dim(1));
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
