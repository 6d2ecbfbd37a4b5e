// The op table bound to the kernels' check and CPU functions, with the table's precision rules:
// a call's dtypes are checked against its kernel's precision column, the kernel's own check
// sees the call's f32 view, and the CPU runs a bf16 call of a MIXED kernel by emulating bf16
// storage around the f32 kernel.
#pragma once
#include "kernels/kernel_args.h"
#include "runtime/plan/op_table.h"

namespace mt {

// "" when the call is well-formed: its dtypes are what kernel `id`'s precision allows and the
// kernel's check accepts its f32 view; else what is wrong.
std::string checkKernelCall(KernelId id, const KernelArgs& args);
// Runs a checked call on the CPU. A MIXED kernel's bf16 call: its bf16 inputs (and outputs,
// for kernels that read them) widened to f32 copies, the f32 kernel run on those, its bf16
// outputs rounded back to nearest even: bf16 storage, f32 arithmetic.
void runKernelCpu(KernelId id, const KernelArgs& args);

// "" if the call's dtypes fit `precision`, else a message naming the first tensor that does not.
std::string precisionProblem(const KernelPrecision& precision, const KernelArgs& args);
// The call with every bf16 tensor typed f32 (same shapes and pointers): what an f32 check sees.
KernelArgs f32View(const KernelArgs& args);

}  // namespace mt
