// CUDA twin of checksum_cpu (kernels/checksum/checksum.h): the same terms, summed per block
// into partials instead of one total (a sum modulo 2^64 in any order is the same).
#include "kernels/checksum/checksum.h"
#include "kernels/cuda_common.cuh"

namespace mt {
namespace {

__global__ void checksumKernel(const unsigned char* __restrict__ data, int64_t bytes, uint64_t* __restrict__ partials) {
  __shared__ uint64_t sums[cuda::kThreads];
  const int64_t words = bytes / 8, tail = bytes % 8;
  uint64_t sum = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < words; i += int64_t{gridDim.x} * blockDim.x)
    sum += checksumTerm(reinterpret_cast<const uint64_t*>(data)[i], static_cast<uint64_t>(i));
  if (tail && blockIdx.x == 0 && threadIdx.x == 0) {
    uint64_t word = 0;
    for (int64_t b = 0; b < tail; ++b) word |= uint64_t{data[8 * words + b]} << (8 * b);
    sum += checksumTerm(word, static_cast<uint64_t>(words));
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) sums[threadIdx.x] += sums[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

}  // namespace

void checksum_cuda(const void* data, int64_t bytes, uint64_t* partials, CudaStream stream) {
  checksumKernel<<<kChecksumPartials, cuda::kThreads, 0, stream>>>(static_cast<const unsigned char*>(data), bytes,
                                                                   partials);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
