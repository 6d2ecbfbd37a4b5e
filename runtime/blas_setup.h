// OpenBLAS (DYNAMIC_ARCH) picks its kernels from the CPU's family/model; virtual machines often
// hide them and get the oldest x86-64 kernels (Prescott, SSE3): sgemm ran 6.5x slower on the
// development machine (32 vs 210 GFLOP/s, docs/perf.md). OpenBLAS reads OPENBLAS_CORETYPE only
// when it loads, so the fix has to happen before main: mtrun re-executes itself once with the
// core type chosen from the CPU's feature flags, unless the user set OPENBLAS_CORETYPE.
#pragma once
#include <string>

namespace mt {

// Call first thing in main. Returns normally when nothing needs to change (or exec failed).
void selectBlasKernels(char** argv);

// "OpenBLAS <core>", for the progress header.
std::string blasDescription();

}  // namespace mt
