#include "runtime/io/checksum.h"

#include <array>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace mt {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78;  // reflected Castagnoli

constexpr std::array<uint32_t, 256> makeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (c & 1 ? kPolynomial : 0);
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = makeTable();

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32cSse42(const unsigned char* p, size_t n, uint32_t crc) {
  uint64_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

uint32_t crc32cPortable(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < bytes; ++i) c = kTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
#if defined(__x86_64__)
  if (kHaveSse42) return crc32cSse42(static_cast<const unsigned char*>(data), bytes, crc);
#endif
  return crc32cPortable(data, bytes, crc);
}

std::string hex32(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

}  // namespace mt
