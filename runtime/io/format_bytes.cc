#include "runtime/io/format_bytes.h"

#include <fmt/format.h>

namespace mt {

std::string formatBytes(double bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024.0) return fmt::format("{:.0f} bytes", bytes);
  double value = bytes;
  int unit = -1;
  while (value >= 1024.0 && unit < 3) value /= 1024.0, ++unit;
  return unit >= 2 ? fmt::format("{:.2f} {}", value, kUnits[unit]) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string formatBytesExact(int64_t bytes) {
  const std::string exact = std::to_string(bytes) + " bytes";
  return bytes < 1024 ? exact : exact + " (" + formatBytes(static_cast<double>(bytes)) + ")";
}

}  // namespace mt
