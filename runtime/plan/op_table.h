// Kernel ids shared by the emitter (compiler) and the runtime; generated from op_table.def.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mt {

enum class KernelId : uint32_t {
#define MT_KERNEL(id, name, ins, outs, iattrs, fattrs, precision, check, cpu, cuda, cuda_bf16) id,
#include "runtime/plan/op_table.def"
#undef MT_KERNEL
};

// The dtypes a kernel call may have (op_table.def's precision column).
struct KernelPrecision {
  enum Kind : uint8_t {
    kF32Only,  // every float tensor f32
    kMixed,    // activations all f32 or all bf16; the masked tensors below always f32
    kConvert,  // a conversion between f32 and bf16: its check names its dtypes
  };
  Kind kind;
  uint32_t f32_inputs;   // bit i: input i is f32 whatever the activations are
  uint32_t f32_outputs;  // bit i: output i is f32 whatever the activations are
  uint32_t any_outputs;  // bit i: output i is f32 or the activations' dtype

  constexpr bool f32Input(int i) const { return (f32_inputs >> i) & 1u; }
  constexpr bool f32Output(int i) const { return (f32_outputs >> i) & 1u; }
  constexpr bool anyOutput(int i) const { return (any_outputs >> i) & 1u; }
};

struct KernelInfo {
  std::string_view op_name;  // the `mt` dialect op this kernel implements
  int num_inputs;
  int num_outputs;
  int num_int_attrs;  // -1: variable, validated by the kernel's check
  int num_float_attrs;  // -1: variable, validated by the kernel's check (rope's scaling)
  KernelPrecision precision;
  bool has_cuda;   // the CUDA backend runs it (the row names a CUDA twin)
  bool cuda_bf16;  // ... and its twin takes bf16 activations
};

#define F32_ONLY KernelPrecision{KernelPrecision::kF32Only, 0, 0, 0}
#define CONVERT KernelPrecision{KernelPrecision::kConvert, 0, 0, 0}
#define MIXED(f32_inputs, f32_outputs, any_outputs) KernelPrecision{KernelPrecision::kMixed, f32_inputs, f32_outputs, any_outputs}
inline constexpr KernelInfo kKernelTable[] = {
#define MT_KERNEL(id, name, ins, outs, iattrs, fattrs, precision, check, cpu, cuda, cuda_bf16) \
  {name, ins, outs, iattrs, fattrs, precision, std::string_view(#cuda) != "nullptr", cuda_bf16},
#include "runtime/plan/op_table.def"
#undef MT_KERNEL
};
#undef F32_ONLY
#undef CONVERT
#undef MIXED

inline constexpr size_t kNumKernels = sizeof(kKernelTable) / sizeof(kKernelTable[0]);
// Adding a kernel means adding a row to op_table.def and updating this count, on purpose:
// the row order is part of the plan format.
static_assert(kNumKernels == 99, "op_table.def changed: bump the plan minor version");

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
