// Errors that reach the user: one message naming the problem and, where there is one, the fix.
#pragma once
#include <stdexcept>
#include <string>

namespace mt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Writes `bytes` to `path` through a temporary file in the same directory, fsynced and
// renamed into place: readers see the old file or the whole new one, never a half.
void writeFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace mt
