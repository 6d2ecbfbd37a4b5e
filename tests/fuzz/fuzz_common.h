// What the libFuzzer harnesses share. The readers take paths, so each input is written to a
// scratch file first (in /dev/shm where there is one). mt::Error is the expected refusal of a
// bad input; anything else — a sanitizer report, a crash, another exception escaping — is a
// finding: libFuzzer stops and keeps the input.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "runtime/io/error.h"

namespace mt::fuzz {

inline std::string scratchDir() {
  if (access("/dev/shm", W_OK) == 0) return "/dev/shm";
  const char* tmp = std::getenv("TMPDIR");
  return tmp ? tmp : "/tmp";
}

// Writes the input to this process's scratch file `name` and returns its path.
inline std::string asFile(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = scratchDir() + "/mt_fuzz_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  return path;
}

template <typename F>
void refusalIsFine(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

}  // namespace mt::fuzz
