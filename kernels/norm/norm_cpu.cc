#include <algorithm>
#include <cmath>

#include "kernels/norm/norm.h"

namespace mt {
namespace {

std::vector<int64_t> rowShape(const Tensor& x) {
  return std::vector<int64_t>(x.shape.begin(), x.shape.end() - 1);
}

// Checks x (..., C), gamma (C), and that every tensor is f32.
std::string checkNormOperands(const KernelArgs& args, const Tensor& x, const Tensor& gamma,
                              const char* op) {
  for (const Tensor& t : args.in) MT_CHECK(expectDType(t, DType::F32, op));
  for (const Tensor& t : args.out) MT_CHECK(expectDType(t, DType::F32, op));
  MT_CHECK(expectRankAtLeast(x, 1, op));
  return expectShape(gamma, {x.dim(-1)}, op);
}

// Column sums for the weight gradients, in a fixed row order (deterministic):
//   dgamma[c] = sum_r dy[r,c] * xhat(r,c),  dbeta[c] = sum_r dy[r,c] (if dbeta != null).
template <typename XHat>
void weightGrads(const float* dy, int64_t rows, int64_t width, XHat xhat, float* dgamma,
                 float* dbeta) {
  constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < width; c0 += kBlock) {
    const int64_t c1 = std::min(width, c0 + kBlock);
    for (int64_t c = c0; c < c1; ++c) {
      dgamma[c] = 0.0f;
      if (dbeta) dbeta[c] = 0.0f;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float* dyr = dy + r * width;
      for (int64_t c = c0; c < c1; ++c) {
        dgamma[c] += dyr[c] * xhat(r, c);
        if (dbeta) dbeta[c] += dyr[c];
      }
    }
  }
}

}  // namespace

std::string layernorm_check(const KernelArgs& args) {
  const Tensor& x = args.in[0];
  MT_CHECK(checkNormOperands(args, x, args.in[1], "layernorm"));
  MT_CHECK(expectShape(args.in[2], {x.dim(-1)}, "layernorm beta"));
  MT_CHECK(expectShape(args.out[0], x.shape, "layernorm y"));
  MT_CHECK(expectShape(args.out[1], rowShape(x), "layernorm mean"));
  return expectShape(args.out[2], rowShape(x), "layernorm rstd");
}

void layernorm_cpu(const KernelArgs& args) {
  const Tensor& x = args.in[0];
  const float *gamma = args.in[1].f32(), *beta = args.in[2].f32();
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  const float eps = args.floats[0];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.f32() + r * width;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < width; ++c) sum += xr[c];
    const float mean = static_cast<float>(sum / width);
    double var = 0.0;
#pragma omp simd reduction(+ : var)
    for (int64_t c = 0; c < width; ++c) var += double(xr[c] - mean) * (xr[c] - mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(var / width + eps));
    float* yr = args.out[0].f32() + r * width;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    args.out[1].f32()[r] = mean;
    args.out[2].f32()[r] = rstd;
  }
}

std::string layernorm_grad_check(const KernelArgs& args) {
  const Tensor& x = args.in[1];
  MT_CHECK(checkNormOperands(args, x, args.in[2], "layernorm_grad"));
  MT_CHECK(expectShape(args.in[0], x.shape, "layernorm_grad dy"));
  MT_CHECK(expectShape(args.in[3], rowShape(x), "layernorm_grad mean"));
  MT_CHECK(expectShape(args.in[4], rowShape(x), "layernorm_grad rstd"));
  MT_CHECK(expectShape(args.out[0], x.shape, "layernorm_grad dx"));
  MT_CHECK(expectShape(args.out[1], {x.dim(-1)}, "layernorm_grad dgamma"));
  return expectShape(args.out[2], {x.dim(-1)}, "layernorm_grad dbeta");
}

void layernorm_grad_cpu(const KernelArgs& args) {
  const Tensor& x = args.in[1];
  const float *dy = args.in[0].f32(), *gamma = args.in[2].f32();
  const float *mean = args.in[3].f32(), *rstd = args.in[4].f32();
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  float* dx = args.out[0].f32();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.f32() + r * width;
    const float* dyr = dy + r * width;
    const float mu = mean[r], rs = rstd[r];
    double sum_g = 0.0, sum_gx = 0.0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (int64_t c = 0; c < width; ++c) {
      const float g = dyr[c] * gamma[c];
      sum_g += g;
      sum_gx += double(g) * ((xr[c] - mu) * rs);
    }
    const float mean_g = static_cast<float>(sum_g / width);
    const float mean_gx = static_cast<float>(sum_gx / width);
    float* dxr = dx + r * width;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) {
      const float xhat = (xr[c] - mu) * rs;
      dxr[c] = rs * (dyr[c] * gamma[c] - mean_g - xhat * mean_gx);
    }
  }
  const float* xp = x.f32();
  weightGrads(
      dy, rows, width,
      [&](int64_t r, int64_t c) { return (xp[r * width + c] - mean[r]) * rstd[r]; },
      args.out[1].f32(), args.out[2].f32());
}

// The weights offset + gamma where the call has an offset (`floats[index]`), else gamma itself
// (the hot loops read one pointer either way). `shifted` holds them.
const float* offsetGamma(const KernelArgs& args, const float* gamma, int64_t width, size_t index,
                         std::vector<float>& shifted) {
  if (args.floats.size() <= index || args.floats[index] == 0.0f) return gamma;
  shifted.assign(gamma, gamma + width);
  for (float& g : shifted) g += args.floats[index];
  return shifted.data();
}

std::string rmsnorm_check(const KernelArgs& args) {
  const Tensor& x = args.in[0];
  if (args.floats.size() != 1 && args.floats.size() != 2)
    return "rmsnorm takes float[eps(, offset)], got " + std::to_string(args.floats.size()) + " floats";
  MT_CHECK(checkNormOperands(args, x, args.in[1], "rmsnorm"));
  MT_CHECK(expectShape(args.out[0], x.shape, "rmsnorm y"));
  return expectShape(args.out[1], rowShape(x), "rmsnorm rstd");
}

void rmsnorm_cpu(const KernelArgs& args) {
  const Tensor& x = args.in[0];
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  std::vector<float> shifted;
  const float* gamma = offsetGamma(args, args.in[1].f32(), width, 1, shifted);
  const float eps = args.floats[0];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.f32() + r * width;
    double sum_sq = 0.0;
#pragma omp simd reduction(+ : sum_sq)
    for (int64_t c = 0; c < width; ++c) sum_sq += double(xr[c]) * xr[c];
    const float rstd = static_cast<float>(1.0 / std::sqrt(sum_sq / width + eps));
    float* yr = args.out[0].f32() + r * width;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) yr[c] = xr[c] * rstd * gamma[c];
    args.out[1].f32()[r] = rstd;
  }
}

std::string rmsnorm_grad_check(const KernelArgs& args) {
  const Tensor& x = args.in[1];
  if (args.floats.size() > 1)
    return "rmsnorm_grad takes float[(offset)], got " + std::to_string(args.floats.size()) + " floats";
  MT_CHECK(checkNormOperands(args, x, args.in[2], "rmsnorm_grad"));
  MT_CHECK(expectShape(args.in[0], x.shape, "rmsnorm_grad dy"));
  MT_CHECK(expectShape(args.in[3], rowShape(x), "rmsnorm_grad rstd"));
  MT_CHECK(expectShape(args.out[0], x.shape, "rmsnorm_grad dx"));
  return expectShape(args.out[1], {x.dim(-1)}, "rmsnorm_grad dgamma");
}

void rmsnorm_grad_cpu(const KernelArgs& args) {
  const Tensor& x = args.in[1];
  const int64_t width = x.dim(-1), rows = leadingRows(x);
  std::vector<float> shifted;
  const float *dy = args.in[0].f32(), *gamma = offsetGamma(args, args.in[2].f32(), width, 0, shifted),
              *rstd = args.in[3].f32();
  float* dx = args.out[0].f32();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.f32() + r * width;
    const float* dyr = dy + r * width;
    const float rs = rstd[r];
    double sum_gx = 0.0;
#pragma omp simd reduction(+ : sum_gx)
    for (int64_t c = 0; c < width; ++c) sum_gx += double(dyr[c] * gamma[c]) * (xr[c] * rs);
    const float mean_gx = static_cast<float>(sum_gx / width);
    float* dxr = dx + r * width;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c)
      dxr[c] = rs * (dyr[c] * gamma[c] - xr[c] * rs * mean_gx);
  }
  const float* xp = x.f32();
  weightGrads(
      dy, rows, width, [&](int64_t r, int64_t c) { return xp[r * width + c] * rstd[r]; },
      args.out[1].f32(), nullptr);
}

}  // namespace mt
