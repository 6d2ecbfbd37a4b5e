// Kernel ids shared by the emitter (compiler) and the runtime; generated from op_table.def.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mt {

enum class KernelId : uint32_t {
#define MT_KERNEL(id, name, ins, outs, iattrs, fattrs, check, cpu, cuda) id,
#include "runtime/op_table.def"
#undef MT_KERNEL
};

struct KernelInfo {
  std::string_view op_name;  // the `mt` dialect op this kernel implements
  int num_inputs;
  int num_outputs;
  int num_int_attrs;  // -1: variable, validated by the kernel's check
  int num_float_attrs;
  bool has_cuda;  // the CUDA backend runs it (the row names a CUDA twin)
};

inline constexpr KernelInfo kKernelTable[] = {
#define MT_KERNEL(id, name, ins, outs, iattrs, fattrs, check, cpu, cuda) \
  {name, ins, outs, iattrs, fattrs, std::string_view(#cuda) != "nullptr"},
#include "runtime/op_table.def"
#undef MT_KERNEL
};

inline constexpr size_t kNumKernels = sizeof(kKernelTable) / sizeof(kKernelTable[0]);
// Adding a kernel means adding a row to op_table.def and updating this count, on purpose:
// the row order is part of the plan format.
static_assert(kNumKernels == 46, "op_table.def changed: bump the plan minor version");

// Returns the kernel implementing `op_name`, or false if no kernel does.
inline bool findKernel(std::string_view op_name, KernelId* id) {
  for (size_t i = 0; i < kNumKernels; ++i) {
    if (kKernelTable[i].op_name == op_name) {
      *id = static_cast<KernelId>(i);
      return true;
    }
  }
  return false;
}

}  // namespace mt
