// Sizes for people, by one rule everywhere (mtc's summary and errors, the passes' diagnostics,
// mtdump, mtrun's memory messages).
#pragma once
#include <cstdint>
#include <string>

namespace mt {

// The largest binary unit in which the size is at least 1: "512 bytes", "12.3 KiB",
// "12.3 MiB", "1.50 GiB", "1.33 TiB" (two decimals from GiB up, where a tenth is much memory).
std::string formatBytes(double bytes);

// The exact count, then the readable size, for a number a user copies into a flag:
// "1289216 bytes (1.2 MiB)"; "512 bytes" below 1 KiB.
std::string formatBytesExact(int64_t bytes);

}  // namespace mt
