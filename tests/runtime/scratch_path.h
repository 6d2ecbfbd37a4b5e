// A scratch file path of this process. ctest runs the mutation tests in three executables at
// once (plan_mutation, its ASan build, the on-arrival variant): with a shared path one process
// truncated a file another had mapped (SIGBUS under ASan).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace mt::test {
inline std::string scratchPath(const std::string& name) {
  return ::testing::TempDir() + "/mt_" + std::to_string(getpid()) + "_" + name;
}
}  // namespace mt::test
