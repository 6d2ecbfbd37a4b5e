#include <cstring>

#include "kernels/checksum/checksum.h"

namespace mt {

uint64_t checksum_cpu(const void* data, int64_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  const int64_t words = bytes / 8, tail = bytes % 8;
  uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, p + 8 * i, 8);
    sum += checksumTerm(word, static_cast<uint64_t>(i));
  }
  if (tail) {
    uint64_t word = 0;
    std::memcpy(&word, p + 8 * words, static_cast<size_t>(tail));
    sum += checksumTerm(word, static_cast<uint64_t>(words));
  }
  return sum;
}

}  // namespace mt
