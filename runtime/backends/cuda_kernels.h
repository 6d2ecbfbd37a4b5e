// The op table's CUDA column (CUDA builds only): the twin of each kernel, null where the
// table names none. The CUDA backend launches through it; the twin tests look kernels up in it.
#pragma once
#include "kernels/kernel_args.h"
#include "runtime/plan/op_table.h"

namespace mt {
KernelCudaFn kernelCuda(KernelId id);
}  // namespace mt
