// CUDA twins of the layout kernels (what an ONNX import leaves unfused); kernels/layout/layout_cpu.cc
// is the reference they are tested against (tests/kernels/cuda_twin_test.cc). f32 and i32 move as
// 4-byte words; one thread per output element.
#include "kernels/cuda_common.cuh"
#include "kernels/layout/layout.h"

namespace mt {
namespace {

using cuda::blocksFor;
using cuda::Dims;
using cuda::kThreads;

// out element (o, j, c) of (outer, n indices, inner) = data (o, indices[j], c), 0 out of range.
__global__ void gatherKernel(const uint32_t* __restrict__ data, const int32_t* __restrict__ indices,
                             uint32_t* __restrict__ out, int64_t total, int64_t n, int64_t axis, int64_t inner) {
  MT_GRID_STRIDE(e, total) {
    const int64_t c = e % inner, j = (e / inner) % n, o = e / (inner * n);
    const int64_t i = normalisedIndex(indices[j], axis);
    out[e] = i < 0 ? 0u : data[(o * axis + i) * inner + c];
  }
}

// ddata (zeroed) += dy at the indices; repeated indices add atomically (in no fixed order).
__global__ void gatherGradKernel(const int32_t* __restrict__ indices, const float* __restrict__ dy,
                                 float* __restrict__ ddata, int64_t total, int64_t n, int64_t axis, int64_t inner) {
  MT_GRID_STRIDE(e, total) {
    const int64_t c = e % inner, j = (e / inner) % n, o = e / (inner * n);
    const int64_t i = normalisedIndex(indices[j], axis);
    if (i >= 0) atomicAdd(ddata + (o * axis + i) * inner + c, dy[e]);
  }
}

// Rows of a (ra words) then b (rb words) per outer index.
__global__ void concatKernel(const uint32_t* __restrict__ a, const uint32_t* __restrict__ b,
                             uint32_t* __restrict__ out, int64_t total, int64_t ra, int64_t rb) {
  MT_GRID_STRIDE(e, total) {
    const int64_t o = e / (ra + rb), k = e % (ra + rb);
    out[e] = k < ra ? a[o * ra + k] : b[o * rb + (k - ra)];
  }
}

// The x offset the slice reads for its element o: per dimension start + index * step.
__device__ int64_t sliceOffset(int64_t o, int rank, const Dims& out_dims, const Dims& x_strides, const Dims& starts,
                               const Dims& steps) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (starts.v[d] + (o % out_dims.v[d]) * steps.v[d]) * x_strides.v[d];
    o /= out_dims.v[d];
  }
  return offset;
}

__global__ void sliceKernel(const uint32_t* __restrict__ x, uint32_t* __restrict__ out, int64_t total, int rank,
                            Dims out_dims, Dims x_strides, Dims starts, Dims steps) {
  MT_GRID_STRIDE(o, total) out[o] = x[sliceOffset(o, rank, out_dims, x_strides, starts, steps)];
}

// dx (zeroed) at what the slice read = dy: distinct elements read distinct places (no adds).
__global__ void sliceGradKernel(const float* __restrict__ dy, float* __restrict__ dx, int64_t total, int rank,
                                Dims dy_dims, Dims x_strides, Dims starts, Dims steps) {
  MT_GRID_STRIDE(o, total) dx[sliceOffset(o, rank, dy_dims, x_strides, starts, steps)] = dy[o];
}

__global__ void triluKernel(const uint32_t* __restrict__ x, uint32_t* __restrict__ out, int64_t total, int64_t rows,
                            int64_t cols, bool upper, int64_t k) {
  MT_GRID_STRIDE(e, total) {
    const int64_t j = e % cols, i = (e / cols) % rows;
    out[e] = (upper ? j - i >= k : j - i <= k) ? x[e] : 0u;
  }
}

// The slice's geometry: `sliced` is the shape the slice reads from, `picked` the one it makes.
void sliceGeometry(const std::vector<int64_t>& sliced, const std::vector<int64_t>& picked,
                   const std::vector<int64_t>& ints, Dims& picked_dims, Dims& strides, Dims& starts, Dims& steps,
                   const char* op) {
  const int rank = static_cast<int>(sliced.size());
  cuda::requireRank(rank, op);
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    picked_dims.v[d] = picked[d];
    strides.v[d] = stride;
    stride *= sliced[d];
    starts.v[d] = ints[d];
    steps.v[d] = ints[rank + d];
  }
}

}  // namespace

void gather_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &data = args.in[0], &indices = args.in[1], &out = args.out[0];
  const int64_t total = out.numel();
  if (total == 0) return;
  const AxisExtents s = extentsAround(data.shape, args.ints[0]);
  gatherKernel<<<blocksFor(total), kThreads, 0, launch.stream>>>(static_cast<const uint32_t*>(data.data),
                                                                 indices.i32(), static_cast<uint32_t*>(out.data),
                                                                 total, indices.numel(), s.axis, s.inner);
  MT_CUDA_CHECK_LAUNCH();
}

void gather_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &indices = args.in[0], &dy = args.in[1], &ddata = args.out[0];
  MT_CUDA_CHECK(cudaMemsetAsync(ddata.data, 0, ddata.bytes(), launch.stream));
  const int64_t total = dy.numel();
  if (total == 0) return;
  const AxisExtents s = extentsAround(ddata.shape, args.ints[0]);
  gatherGradKernel<<<blocksFor(total), kThreads, 0, launch.stream>>>(indices.i32(), dy.f32(), ddata.f32(), total,
                                                                     indices.numel(), s.axis, s.inner);
  MT_CUDA_CHECK_LAUNCH();
}

void concat_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &a = args.in[0], &b = args.in[1], &out = args.out[0];
  const int64_t total = out.numel();
  if (total == 0) return;
  const AxisExtents sa = extentsAround(a.shape, args.ints[0]), sb = extentsAround(b.shape, args.ints[0]);
  concatKernel<<<blocksFor(total), kThreads, 0, launch.stream>>>(
      static_cast<const uint32_t*>(a.data), static_cast<const uint32_t*>(b.data), static_cast<uint32_t*>(out.data),
      total, sa.axis * sa.inner, sb.axis * sb.inner);
  MT_CUDA_CHECK_LAUNCH();
}

void slice_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int64_t total = out.numel();
  if (total == 0) return;
  Dims out_dims{}, strides{}, starts{}, steps{};
  sliceGeometry(x.shape, out.shape, args.ints, out_dims, strides, starts, steps, "slice");
  sliceKernel<<<blocksFor(total), kThreads, 0, launch.stream>>>(static_cast<const uint32_t*>(x.data),
                                                                static_cast<uint32_t*>(out.data), total, x.rank(),
                                                                out_dims, strides, starts, steps);
  MT_CUDA_CHECK_LAUNCH();
}

void slice_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &dy = args.in[0], &dx = args.out[0];
  MT_CUDA_CHECK(cudaMemsetAsync(dx.data, 0, dx.bytes(), launch.stream));
  const int64_t total = dy.numel();
  if (total == 0) return;
  Dims dy_dims{}, strides{}, starts{}, steps{};
  sliceGeometry(dx.shape, dy.shape, args.ints, dy_dims, strides, starts, steps, "slice_grad");
  sliceGradKernel<<<blocksFor(total), kThreads, 0, launch.stream>>>(dy.f32(), dx.f32(), total, dx.rank(), dy_dims,
                                                                    strides, starts, steps);
  MT_CUDA_CHECK_LAUNCH();
}

void trilu_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int64_t total = x.numel();
  if (total == 0) return;
  triluKernel<<<blocksFor(total), kThreads, 0, launch.stream>>>(static_cast<const uint32_t*>(x.data),
                                                                static_cast<uint32_t*>(out.data), total, x.dim(-2),
                                                                x.dim(-1), args.ints[0] != 0, args.ints[1]);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
