// Settings OpenBLAS and OpenMP read only when they load, so they have to be made before main:
// the program re-executes itself once with them in its environment (a user's own settings win).
// - OpenBLAS (DYNAMIC_ARCH) picks its kernels from the CPU's family/model; virtual machines
//   often hide them and get the oldest x86-64 kernels (Prescott, SSE3): sgemm ran 6.5x slower on
//   the development machine (32 vs 210 GFLOP/s, docs/perf.md). OPENBLAS_CORETYPE is chosen from
//   the CPU's feature flags.
// - OpenMP threads spin while they wait for work by default. The CPU backend runs a team per
//   stream at once, beside OpenBLAS's pool: spinning teams starve each other (gpt2-tiny: 350 ms
//   per step instead of 7 ms on a 16-core machine). OMP_WAIT_POLICY=passive.
// - OpenBLAS's worker threads spin (sched_yield) for 2^28 cycles after each product before they
//   sleep, so every OpenMP kernel between two products shared its cores with them: attention,
//   GELU and the adds ran ~2x slower (gpt2-bench 1,062 -> 913 ms per step, docs/perf.md).
//   OPENBLAS_THREAD_TIMEOUT=4 (2^4 cycles, its minimum): they sleep at once and are woken for
//   the next product (microseconds, against products of milliseconds).
#pragma once
#include <string>

namespace mt {

// Call first thing in main. Returns normally when nothing needs to change (or exec failed).
void configureCpuLibraries(char** argv);

// "OpenBLAS <core>", for the progress header.
std::string blasDescription();

}  // namespace mt
