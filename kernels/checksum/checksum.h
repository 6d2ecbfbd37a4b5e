// A checksum of a byte range that the host and a device compute alike, in any order: what
// `mtrun --verify-transfers` compares after each copy to the device (the host's bytes against
// the device's). The range is read as little-endian 8-byte words, the last one zero-padded;
// word i contributes splitmix64(word ^ splitmix64(i)), and the checksum is the sum of the
// contributions modulo 2^64. Each contribution is a bijection of its word, so a range that
// differs in any one word (a flipped bit, a word written elsewhere) has another checksum; many
// differences collide with probability 2^-64.
#pragma once
#include <cstdint>

#include "kernels/kernel_args.h"
#include "kernels/random/counter_rng.h"

namespace mt {

MT_HOST_DEVICE inline uint64_t checksumTerm(uint64_t word, uint64_t index) {
  return splitmix64(word ^ splitmix64(index));
}

// The checksum of `bytes` bytes at `data` (any alignment).
uint64_t checksum_cpu(const void* data, int64_t bytes);

// CUDA twin (kernels/checksum/checksum_cuda.cu): launches on `stream` the checksum of `bytes`
// device bytes at `data` (8-byte aligned) as kChecksumPartials partial sums written to
// `partials` (memory the device can write: mapped pinned host memory), whose sum modulo 2^64 is
// the checksum (checksumOfPartials). No atomics: the same bytes give the same partials.
inline constexpr int kChecksumPartials = 64;
void checksum_cuda(const void* data, int64_t bytes, uint64_t* partials, CudaStream stream);
inline uint64_t checksumOfPartials(const uint64_t* partials) {
  uint64_t sum = 0;
  for (int i = 0; i < kChecksumPartials; ++i) sum += partials[i];
  return sum;
}

}  // namespace mt
