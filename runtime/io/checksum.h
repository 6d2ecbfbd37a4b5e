// CRC-32C (Castagnoli, the iSCSI/ext4 polynomial): the checksum every file MegaTrain writes
// carries per tensor (docs/inputs.md). The SSE4.2 instruction computes it at ~10 GB/s per core
// where the CPU has it; a table gives the same values everywhere else.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mt {

// The CRC-32C of `bytes` bytes at `data`, continuing from `crc` (0 to start):
// crc32c(ab) == crc32c(b, crc32c(a)).
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);
// The table implementation alone (tests compare the two).
uint32_t crc32cPortable(const void* data, size_t bytes, uint32_t crc = 0);

// 8 lower-case hex digits.
std::string hex32(uint32_t value);

}  // namespace mt
