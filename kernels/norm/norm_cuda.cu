// CUDA twins of the normalisations; kernels/norm/norm_cpu.cc is the reference. One block per
// row; the weight gradients are column sums over the rows.
#include "kernels/cuda_common.cuh"
#include "kernels/norm/norm.h"

namespace mt {
namespace {

using cuda::blockSum;
using cuda::kThreads;

__global__ void layernormKernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                const float* __restrict__ beta, float* __restrict__ y, float* __restrict__ mean_out,
                                float* __restrict__ rstd_out, int64_t width, float eps) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * width;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) sum += xr[c];
  const float mean = blockSum(sum) / width;
  float var = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) var += (xr[c] - mean) * (xr[c] - mean);
  const float rstd = 1.0f / sqrtf(blockSum(var) / width + eps);
  float* yr = y + r * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
  if (threadIdx.x == 0) {
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}

__global__ void layernormGradKernel(const float* __restrict__ dy, const float* __restrict__ x,
                                    const float* __restrict__ gamma, const float* __restrict__ mean,
                                    const float* __restrict__ rstd, float* __restrict__ dx, int64_t width) {
  const int64_t r = blockIdx.x;
  const float *xr = x + r * width, *dyr = dy + r * width;
  const float mu = mean[r], rs = rstd[r];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    const float g = dyr[c] * gamma[c];
    sum_g += g;
    sum_gx += g * ((xr[c] - mu) * rs);
  }
  const float mean_g = blockSum(sum_g) / width;
  const float mean_gx = blockSum(sum_gx) / width;
  float* dxr = dx + r * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    const float xhat = (xr[c] - mu) * rs;
    dxr[c] = rs * (dyr[c] * gamma[c] - mean_g - xhat * mean_gx);
  }
}

__global__ void rmsnormKernel(const float* __restrict__ x, const float* __restrict__ gamma, float* __restrict__ y,
                              float* __restrict__ rstd_out, int64_t width, float eps) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * width;
  float sum_sq = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) sum_sq += xr[c] * xr[c];
  const float rstd = 1.0f / sqrtf(blockSum(sum_sq) / width + eps);
  float* yr = y + r * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) yr[c] = xr[c] * rstd * gamma[c];
  if (threadIdx.x == 0) rstd_out[r] = rstd;
}

__global__ void rmsnormGradKernel(const float* __restrict__ dy, const float* __restrict__ x,
                                  const float* __restrict__ gamma, const float* __restrict__ rstd,
                                  float* __restrict__ dx, int64_t width) {
  const int64_t r = blockIdx.x;
  const float *xr = x + r * width, *dyr = dy + r * width;
  const float rs = rstd[r];
  float sum_gx = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) sum_gx += dyr[c] * gamma[c] * (xr[c] * rs);
  const float mean_gx = blockSum(sum_gx) / width;
  float* dxr = dx + r * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) dxr[c] = rs * (dyr[c] * gamma[c] - xr[c] * rs * mean_gx);
}

unsigned rowGrid(int64_t rows) { return cuda::gridBlocks(rows, "normalisation"); }  // a block per row

}  // namespace

void layernorm_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& x = args.in[0];
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  if (rows == 0 || width == 0) return;
  layernormKernel<<<rowGrid(rows), kThreads, 0, launch.stream>>>(x.f32(), args.in[1].f32(), args.in[2].f32(),
                                                                 args.out[0].f32(), args.out[1].f32(),
                                                                 args.out[2].f32(), width, args.floats[0]);
  MT_CUDA_CHECK_LAUNCH();
}

void layernorm_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& x = args.in[1];
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  if (width == 0) return;
  const float *dy = args.in[0].f32(), *xp = x.f32(), *mean = args.in[3].f32(), *rstd = args.in[4].f32();
  if (rows > 0) {
    layernormGradKernel<<<rowGrid(rows), kThreads, 0, launch.stream>>>(dy, xp, args.in[2].f32(), mean, rstd,
                                                                       args.out[0].f32(), width);
    MT_CUDA_CHECK_LAUNCH();
  }
  cuda::columnSums(
      rows, width,
      [=] __device__(int64_t r, int64_t c) { return dy[r * width + c] * ((xp[r * width + c] - mean[r]) * rstd[r]); },
      args.out[1].f32(), launch.stream);
  cuda::columnSums(
      rows, width, [=] __device__(int64_t r, int64_t c) { return dy[r * width + c]; }, args.out[2].f32(),
      launch.stream);
}

void rmsnorm_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& x = args.in[0];
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  if (rows == 0 || width == 0) return;
  rmsnormKernel<<<rowGrid(rows), kThreads, 0, launch.stream>>>(x.f32(), args.in[1].f32(), args.out[0].f32(),
                                                               args.out[1].f32(), width, args.floats[0]);
  MT_CUDA_CHECK_LAUNCH();
}

void rmsnorm_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& x = args.in[1];
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  if (width == 0) return;
  const float *dy = args.in[0].f32(), *xp = x.f32(), *rstd = args.in[3].f32();
  if (rows > 0) {
    rmsnormGradKernel<<<rowGrid(rows), kThreads, 0, launch.stream>>>(dy, xp, args.in[2].f32(), rstd,
                                                                     args.out[0].f32(), width);
    MT_CUDA_CHECK_LAUNCH();
  }
  cuda::columnSums(
      rows, width, [=] __device__(int64_t r, int64_t c) { return dy[r * width + c] * (xp[r * width + c] * rstd[r]); },
      args.out[1].f32(), launch.stream);
}

}  // namespace mt
