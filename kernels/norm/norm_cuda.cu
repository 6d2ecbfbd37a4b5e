// CUDA twins of the normalisations; kernels/norm/norm_cpu.cc is the reference. One block per
// row; the weight gradients are column sums over the rows. Activations (x, gamma, beta, y, dy,
// dx) are f32 or bf16 (T); the statistics and the weight gradients are f32, and so is the math.
#include "kernels/cuda_common.cuh"
#include "kernels/norm/norm.h"

namespace mt {
namespace {

using cuda::blockSum;
using cuda::data;
using cuda::fromFloat;
using cuda::kThreads;
using cuda::toFloat;
using cuda::withFloat;

template <typename T>
__global__ void layernormKernel(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                                T* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ rstd_out,
                                int64_t width, float eps) {
  const int64_t r = blockIdx.x;
  const T* xr = x + r * width;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) sum += toFloat(xr[c]);
  const float mean = blockSum(sum) / width;
  float var = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    const float d = toFloat(xr[c]) - mean;
    var += d * d;
  }
  const float rstd = 1.0f / sqrtf(blockSum(var) / width + eps);
  T* yr = y + r * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    yr[c] = fromFloat<T>((toFloat(xr[c]) - mean) * rstd * toFloat(gamma[c]) + toFloat(beta[c]));
  if (threadIdx.x == 0) {
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}

template <typename T>
__global__ void layernormGradKernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ gamma,
                                    const float* __restrict__ mean, const float* __restrict__ rstd, T* __restrict__ dx,
                                    int64_t width) {
  const int64_t r = blockIdx.x;
  const T *xr = x + r * width, *dyr = dy + r * width;
  const float mu = mean[r], rs = rstd[r];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    const float g = toFloat(dyr[c]) * toFloat(gamma[c]);
    sum_g += g;
    sum_gx += g * ((toFloat(xr[c]) - mu) * rs);
  }
  const float mean_g = blockSum(sum_g) / width;
  const float mean_gx = blockSum(sum_gx) / width;
  T* dxr = dx + r * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    const float xhat = (toFloat(xr[c]) - mu) * rs;
    dxr[c] = fromFloat<T>(rs * (toFloat(dyr[c]) * toFloat(gamma[c]) - mean_g - xhat * mean_gx));
  }
}

template <typename T>
__global__ void rmsnormKernel(const T* __restrict__ x, const T* __restrict__ gamma, T* __restrict__ y,
                              float* __restrict__ rstd_out, int64_t width, float eps, float offset) {
  const int64_t r = blockIdx.x;
  const T* xr = x + r * width;
  float sum_sq = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) sum_sq += toFloat(xr[c]) * toFloat(xr[c]);
  const float rstd = 1.0f / sqrtf(blockSum(sum_sq) / width + eps);
  T* yr = y + r * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    yr[c] = fromFloat<T>(toFloat(xr[c]) * rstd * (toFloat(gamma[c]) + offset));
  if (threadIdx.x == 0) rstd_out[r] = rstd;
}

template <typename T>
__global__ void rmsnormGradKernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ gamma,
                                  const float* __restrict__ rstd, T* __restrict__ dx, int64_t width, float offset) {
  const int64_t r = blockIdx.x;
  const T *xr = x + r * width, *dyr = dy + r * width;
  const float rs = rstd[r];
  float sum_gx = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    sum_gx += toFloat(dyr[c]) * (toFloat(gamma[c]) + offset) * (toFloat(xr[c]) * rs);
  const float mean_gx = blockSum(sum_gx) / width;
  T* dxr = dx + r * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    dxr[c] = fromFloat<T>(rs * (toFloat(dyr[c]) * (toFloat(gamma[c]) + offset) - toFloat(xr[c]) * rs * mean_gx));
}

// The column-sum terms of the weight gradients, element (r, c): dy * xhat (dgamma) and dy (dbeta).
template <typename T>
struct LayernormGammaTerm {
  const T *dy, *x;
  const float *mean, *rstd;
  int64_t width;
  __device__ float operator()(int64_t r, int64_t c) const {
    return toFloat(dy[r * width + c]) * ((toFloat(x[r * width + c]) - mean[r]) * rstd[r]);
  }
};
template <typename T>
struct RmsnormGammaTerm {
  const T *dy, *x;
  const float* rstd;
  int64_t width;
  __device__ float operator()(int64_t r, int64_t c) const {
    return toFloat(dy[r * width + c]) * (toFloat(x[r * width + c]) * rstd[r]);
  }
};
template <typename T>
struct Element {
  const T* x;
  int64_t width;
  __device__ float operator()(int64_t r, int64_t c) const { return toFloat(x[r * width + c]); }
};

unsigned rowGrid(int64_t rows) { return cuda::gridBlocks(rows, "normalisation"); }  // a block per row

template <typename T>
void layernormGrad(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& x = args.in[1];
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  const T *dy = data<const T>(args.in[0]), *xp = data<const T>(x);
  const float *mean = args.in[3].f32(), *rstd = args.in[4].f32();
  if (rows > 0) {
    layernormGradKernel<<<rowGrid(rows), kThreads, 0, launch.stream>>>(dy, xp, data<const T>(args.in[2]), mean, rstd,
                                                                       data<T>(args.out[0]), width);
    MT_CUDA_CHECK_LAUNCH();
  }
  cuda::columnSums(rows, width, LayernormGammaTerm<T>{dy, xp, mean, rstd, width}, args.out[1].f32(), launch.stream);
  cuda::columnSums(rows, width, Element<T>{dy, width}, args.out[2].f32(), launch.stream);
}

template <typename T>
void rmsnormGrad(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& x = args.in[1];
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  const T *dy = data<const T>(args.in[0]), *xp = data<const T>(x);
  const float* rstd = args.in[3].f32();
  if (rows > 0) {
    const float offset = args.floats.empty() ? 0.0f : args.floats[0];
    rmsnormGradKernel<<<rowGrid(rows), kThreads, 0, launch.stream>>>(dy, xp, data<const T>(args.in[2]), rstd,
                                                                     data<T>(args.out[0]), width, offset);
    MT_CUDA_CHECK_LAUNCH();
  }
  cuda::columnSums(rows, width, RmsnormGammaTerm<T>{dy, xp, rstd, width}, args.out[1].f32(), launch.stream);
}

}  // namespace

void layernorm_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& x = args.in[0];
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  if (rows == 0 || width == 0) return;
  withFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    layernormKernel<<<rowGrid(rows), kThreads, 0, launch.stream>>>(
        data<const T>(x), data<const T>(args.in[1]), data<const T>(args.in[2]), data<T>(args.out[0]),
        args.out[1].f32(), args.out[2].f32(), width, args.floats[0]);
  });
  MT_CUDA_CHECK_LAUNCH();
}

void layernorm_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  if (args.in[1].dim(-1) == 0) return;
  if (args.in[1].dtype == DType::BF16)
    layernormGrad<cuda::bf16>(args, launch);
  else
    layernormGrad<float>(args, launch);
}

void rmsnorm_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& x = args.in[0];
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  if (rows == 0 || width == 0) return;
  withFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    rmsnormKernel<<<rowGrid(rows), kThreads, 0, launch.stream>>>(data<const T>(x), data<const T>(args.in[1]),
                                                                 data<T>(args.out[0]), args.out[1].f32(), width,
                                                                 args.floats[0],
                                                                 args.floats.size() > 1 ? args.floats[1] : 0.0f);
  });
  MT_CUDA_CHECK_LAUNCH();
}

void rmsnorm_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  if (args.in[1].dim(-1) == 0) return;
  if (args.in[1].dtype == DType::BF16)
    rmsnormGrad<cuda::bf16>(args, launch);
  else
    rmsnormGrad<float>(args, launch);
}

}  // namespace mt
