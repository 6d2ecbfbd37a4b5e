#include "runtime/backends/cpu_libraries.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace mt {

namespace {

// The OpenBLAS core type to ask for instead of the one it picked, or null.
const char* betterBlasCore() {
  if (std::getenv("OPENBLAS_CORETYPE")) return nullptr;
#if defined(__x86_64__)
  const std::string core = openblas_get_corename();
  static const char* kPreAvx2[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                                   "Sandybridge", "Barcelona", "Bobcat", "Katmai", "Coppermine",
                                   "Northwood", "Banias", "Opteron", "Unknown"};
  bool outdated = false;
  for (const char* name : kPreAvx2) outdated |= core == name;
  if (!outdated) return nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;
}

}  // namespace

void configureCpuLibraries(char** argv) {
  bool changed = false;
  if (const char* core = betterBlasCore()) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    changed = true;
  }
  // A user's own settings win; see cpu_libraries.h for why each is set.
  static const char* kDefaults[][2] = {{"OMP_WAIT_POLICY", "passive"}, {"OPENBLAS_THREAD_TIMEOUT", "4"}};
  for (const auto& [name, value] : kDefaults) {
    if (std::getenv(name)) continue;
    setenv(name, value, 1);
    changed = true;
  }
  // execv returns only on failure: carry on as loaded.
  if (changed) execv("/proc/self/exe", argv);
}

std::string blasDescription() { return std::string("OpenBLAS ") + openblas_get_corename(); }

}  // namespace mt
