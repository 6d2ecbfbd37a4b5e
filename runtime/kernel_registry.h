// The op table bound to the kernels' check and CPU functions.
#pragma once
#include "kernels/kernel_args.h"
#include "runtime/op_table.h"

namespace mt {

KernelCheckFn kernelCheck(KernelId id);
KernelCpuFn kernelCpu(KernelId id);

}  // namespace mt
