#include "runtime/blas_setup.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace mt {

void selectBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
#if defined(__x86_64__)
  const std::string core = openblas_get_corename();
  static const char* kPreAvx2[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                                   "Sandybridge", "Barcelona", "Bobcat", "Katmai", "Coppermine",
                                   "Northwood", "Banias", "Opteron", "Unknown"};
  bool outdated = false;
  for (const char* name : kPreAvx2) outdated |= core == name;
  if (!outdated) return;
  const char* wanted = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw"))
    wanted = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    wanted = "Haswell";
  if (!wanted) return;
  setenv("OPENBLAS_CORETYPE", wanted, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the slow kernels
#else
  (void)argv;
#endif
}

std::string blasDescription() { return std::string("OpenBLAS ") + openblas_get_corename(); }

}  // namespace mt
