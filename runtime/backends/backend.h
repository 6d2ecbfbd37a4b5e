// Backends execute a verified plan's per-step stream programs. A backend declares what it is;
// nothing falls back silently.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_args.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/plan_dump.h"
#include "runtime/plan/plan_format.h"
#include "runtime/host/step_options.h"

namespace mt {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Runs one training step: the host store's tokens/targets must be filled. Parameters and
  // moments are updated in place in the host store. For a forward-only plan: one evaluation,
  // inputs to outputs (the result's loss is then 0).
  virtual StepResult runStep(const StepOptions& options) = 0;
  // A plan whose AdamW runs one step late (ADAMW_PREVIOUS tasks, overlapped with the next
  // step's forward) leaves the update of a step pending after runStep: the host store's
  // weights are then those before it. This applies it now; call it before reading weights or
  // moments (checkpoint, validation, export, the end of training). A no-op if none is pending.
  virtual void applyPendingUpdate() = 0;
  // Bytes of the device arena this backend allocated (the plan's arena size).
  virtual int64_t arenaBytes() const = 0;
  // When each kernel, copy and host task of the last step ran (measured: host clocks on the
  // CPU, CUDA events on the GPU), from the step's start.
  virtual const StepTimeline& lastTimeline() const = 0;
};

// The CPU backend: the device arena is one host allocation of the planned size, each stream
// runs on its own thread, events are real synchronisation.
std::unique_ptr<Backend> createCpuBackend(const plan::Plan& plan, HostStore& store);

// Which implementation runs a plan's causal attention on the GPU (mtrun --attention): cuDNN's
// fused flash attention (attention_cudnn.cc; bf16 plans, head_dim a multiple of 8 up to 128),
// ours (kernels/attention/attention_*cuda.cu: any plan), or auto: cuDNN for every call it takes,
// ours for the rest, the split said at start. cudnn refuses a plan with a call it cannot take.
enum class AttentionEngine { kAuto, kOurs, kCudnn };

struct CudaOptions {
  // Matrix products on the tensor cores in TF32 (10-bit mantissa, ~7x the fp32 rate on an
  // H100, relative error ~1e-3) instead of exact fp32. Off: the plan's precision is kept.
  bool tf32 = false;
  AttentionEngine attention = AttentionEngine::kAuto;
  // The GPU this process runs on: 0, or a rank's by its local rank (runtime/training/data_parallel.cc).
  // Every thread of the backend that calls CUDA selects it (the current device is per thread).
  int device = 0;
};

// The CUDA backend (runtime/backends/cuda_backend.cc): one device arena of the planned size, a CUDA
// stream per device stream of the plan, the copied host tensors pinned. Throws mt::Error when
// the build has no CUDA, no GPU is usable, the arena does not fit, or a kernel has no CUDA twin.
std::unique_ptr<Backend> createCudaBackend(const plan::Plan& plan, HostStore& store, const CudaOptions& options);

}  // namespace mt
