#include "runtime/plan/kernel_registry.h"

#include <optional>
#include <vector>

#include "kernels/activation/activation.h"
#include "kernels/activation/clamped_swiglu.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/cached_attention.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/embedding/embedding.h"
#include "kernels/loss/loss.h"
#include "kernels/matmul/matmul.h"
#include "kernels/moe/moe.h"
#include "kernels/norm/norm.h"
#include "kernels/layout/layout.h"
#include "kernels/pointwise/pointwise.h"
#include "kernels/random/dropout.h"
#include "kernels/rope/rope.h"
#include "kernels/softmax/softmax.h"

namespace mt {
namespace {

constexpr KernelCheckFn kChecks[] = {
#define MT_KERNEL(id, name, ins, outs, iattrs, fattrs, precision, check, cpu, cuda, cuda_bf16) check,
#include "runtime/plan/op_table.def"
#undef MT_KERNEL
};
constexpr KernelCpuFn kCpu[] = {
#define MT_KERNEL(id, name, ins, outs, iattrs, fattrs, precision, check, cpu, cuda, cuda_bf16) cpu,
#include "runtime/plan/op_table.def"
#undef MT_KERNEL
};
static_assert(std::size(kChecks) == kNumKernels && std::size(kCpu) == kNumKernels);

bool isFloat(DType d) { return d == DType::F32 || d == DType::BF16; }

// A bf16 tensor's f32 copy for the emulation, in `floats` (which the returned view points at).
Tensor widened(const Tensor& t, std::vector<float>& floats) {
  floats.resize(static_cast<size_t>(t.numel()));
  widen_bf16(static_cast<const uint16_t*>(t.data), floats.data(), t.numel());
  return Tensor{floats.data(), t.shape, DType::F32};
}

}  // namespace

std::string precisionProblem(const KernelPrecision& precision, const KernelArgs& args) {
  if (precision.kind == KernelPrecision::kConvert) return "";  // its check names its dtypes
  std::optional<DType> activations;
  auto check = [&](const Tensor& t, bool f32, bool any, const std::string& what) -> std::string {
    if (!isFloat(t.dtype)) return "";
    if (precision.kind == KernelPrecision::kF32Only || f32)
      return t.dtype == DType::F32 ? "" : what + " must be f32, got " + dtypeName(t.dtype);
    if (any && t.dtype == DType::F32) return "";
    if (!activations) activations = t.dtype;
    return t.dtype == *activations ? "" : what + " is " + dtypeName(t.dtype) + " but the call's activations are " +
                                              dtypeName(*activations) + " (all f32 or all bf16)";
  };
  for (size_t i = 0; i < args.in.size(); ++i)
    MT_CHECK(check(args.in[i], precision.f32Input(int(i)), false, "input " + std::to_string(i)));
  for (size_t i = 0; i < args.out.size(); ++i)
    MT_CHECK(check(args.out[i], precision.f32Output(int(i)), precision.anyOutput(int(i)), "output " + std::to_string(i)));
  return "";
}

KernelArgs f32View(const KernelArgs& args) {
  KernelArgs view = args;
  for (auto* tensors : {&view.in, &view.out})
    for (Tensor& t : *tensors)
      if (t.dtype == DType::BF16) t.dtype = DType::F32;
  return view;
}

std::string checkKernelCall(KernelId id, const KernelArgs& args) {
  const KernelInfo& info = kKernelTable[static_cast<size_t>(id)];
  MT_CHECK(precisionProblem(info.precision, args));
  return kChecks[static_cast<size_t>(id)](info.precision.kind == KernelPrecision::kMixed ? f32View(args) : args);
}

void runKernelCpu(KernelId id, const KernelArgs& args) {
  const KernelCpuFn run = kCpu[static_cast<size_t>(id)];
  bool bf16 = false;
  for (const auto* tensors : {&args.in, &args.out})
    for (const Tensor& t : *tensors) bf16 |= t.dtype == DType::BF16;
  if (!bf16 || kKernelTable[static_cast<size_t>(id)].precision.kind != KernelPrecision::kMixed) return run(args);
  KernelArgs f32 = args;
  std::vector<std::vector<float>> inputs(args.in.size()), outputs(args.out.size());
  for (size_t i = 0; i < args.in.size(); ++i)
    if (args.in[i].dtype == DType::BF16) f32.in[i] = widened(args.in[i], inputs[i]);
  for (size_t i = 0; i < args.out.size(); ++i)
    if (args.out[i].dtype == DType::BF16) f32.out[i] = widened(args.out[i], outputs[i]);
  run(f32);
  for (size_t i = 0; i < args.out.size(); ++i)
    if (args.out[i].dtype == DType::BF16)
      round_to_bf16(outputs[i].data(), static_cast<uint16_t*>(args.out[i].data), args.out[i].numel());
}

}  // namespace mt
