// CUDA twin of mt.attention_sinks_grad; kernels/attention/attention_cpu.cc is the reference.
// A block per head sums its B*T rows' exp(sink - lse) * (dout . out): each warp a strided set of
// rows in a fixed order, a row's dot product across the lanes (coalesced), its term added by lane 0
// in double (as the CPU); then the warps' sums in warp order: deterministic.
#include "kernels/attention/attention.h"
#include "kernels/cuda_common.cuh"

namespace mt {
namespace {

constexpr int kSinkWarps = 8;

template <typename T>
__global__ void __launch_bounds__(32 * kSinkWarps)
    sinksGradKernel(const T* __restrict__ dout, const T* __restrict__ out, const float* __restrict__ lse,
                    const float* __restrict__ sinks, float* __restrict__ dsinks, int64_t rows, int64_t seq,
                    int64_t heads, int64_t head_dim) {
  const int64_t h = blockIdx.x, width = heads * head_dim;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  double sum = 0.0;  // lane 0's
  for (int64_t row = warp; row < rows; row += kSinkWarps) {  // row = b * seq + t
    const T* dy = dout + row * width + h * head_dim;
    const T* y = out + row * width + h * head_dim;
    float dot = 0.0f;
    for (int64_t c = lane; c < head_dim; c += 32) dot += cuda::toFloat(dy[c]) * cuda::toFloat(y[c]);
    dot = cuda::warpSum(dot);
    const int64_t b = row / seq, t = row % seq;
    if (lane == 0) sum += static_cast<double>(expf(sinks[h] - lse[(b * heads + h) * seq + t])) * dot;
  }
  __shared__ double warp_sums[kSinkWarps];
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kSinkWarps; ++w) total += warp_sums[w];
    dsinks[h] = static_cast<float>(-total);
  }
}

}  // namespace

void attention_sinks_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &dout = args.in[0], &sinks = args.in[3];
  const int64_t heads = sinks.dim(0), rows = dout.dim(0) * dout.dim(1);
  if (heads == 0) return;
  cuda::withFloat(dout.dtype, [&](auto tag) {
    using T = decltype(tag);
    sinksGradKernel<T><<<cuda::gridBlocks(heads, "attention_sinks_grad"), 32 * kSinkWarps, 0, launch.stream>>>(
        cuda::data<const T>(dout), cuda::data<const T>(args.in[1]), args.in[2].f32(), sinks.f32(), args.out[0].f32(),
        rows, dout.dim(1), heads, dout.dim(2) / heads);
  });
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
