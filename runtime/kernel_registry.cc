#include "runtime/kernel_registry.h"

#include "kernels/activation/activation.h"
#include "kernels/attention/attention.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/embedding/embedding.h"
#include "kernels/loss/loss.h"
#include "kernels/matmul/matmul.h"
#include "kernels/norm/norm.h"
#include "kernels/layout/layout.h"
#include "kernels/pointwise/pointwise.h"
#include "kernels/rope/rope.h"
#include "kernels/softmax/softmax.h"

namespace mt {
namespace {

constexpr KernelCheckFn kChecks[] = {
#define MT_KERNEL(id, name, ins, outs, iattrs, fattrs, check, cpu, cuda) check,
#include "runtime/op_table.def"
#undef MT_KERNEL
};
constexpr KernelCpuFn kCpu[] = {
#define MT_KERNEL(id, name, ins, outs, iattrs, fattrs, check, cpu, cuda) cpu,
#include "runtime/op_table.def"
#undef MT_KERNEL
};
static_assert(std::size(kChecks) == kNumKernels && std::size(kCpu) == kNumKernels);

}  // namespace

KernelCheckFn kernelCheck(KernelId id) { return kChecks[static_cast<size_t>(id)]; }
KernelCpuFn kernelCpu(KernelId id) { return kCpu[static_cast<size_t>(id)]; }

}  // namespace mt
