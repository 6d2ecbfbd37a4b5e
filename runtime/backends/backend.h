// Backends execute a verified plan's per-step stream programs. A backend declares what it is;
// nothing falls back silently.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/adamw/adamw.h"
#include "kernels/kernel_args.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/plan_dump.h"
#include "runtime/plan/plan_format.h"

namespace mt {

struct StepOptions {
  AdamWParams adamw;       // lr, betas, eps, weight decay (for tensors that take it), step
  double grad_clip = 1.0;  // global gradient-norm bound; 0 disables clipping
  bool update = true;      // false: run the step for its loss only (validation), no AdamW
  // With update false: run only each stream's loss prefix (plan 1.9: what the loss depends on),
  // no backward. A plan without loss prefixes runs its whole step.
  bool loss_only = false;
  // Gradient accumulation (mtrun --accumulate): this step is micro-batch `micro_step` (0-based)
  // of `micro_steps`. The host folds each gradient into a running sum as it lands; the last
  // micro-batch's gradients become the mean of all, and only then are the norm taken and AdamW
  // run. Earlier micro-batches take no norm and update nothing.
  int64_t micro_step = 0;
  int64_t micro_steps = 1;
  // The sum weighs this micro-batch's gradient by `micro_weight` and the last divides it by
  // `step_divisor`: 1 and micro_steps, or, with a loss mask, the micro-batch's counted targets
  // and the step's (each micro-batch's loss is the mean over its own counted targets).
  float micro_weight = 1.0f;
  float step_divisor = 1.0f;
  // What the plan's random kernels (dropout) draw from in this run; training false for a
  // validation or an evaluation (dropout is then the identity).
  StepRandomness random;
  // The host's weights (and their bf16 staging copies) are what this backend's previous run
  // copied to the device: the copies the device keeps (CopyOp::kept: a forward-only plan's
  // weights) are skipped, as mtgen does after its first token. Ignored on a backend's first run
  // and after a run that failed.
  bool weights_unchanged = false;
  // mtrun --verify-transfers: after each copy to the device, the checksum of the bytes the
  // device received is compared with the host's (runtime/backends/transfer_check.h).
  bool verify_transfers = false;
};

struct StepResult {
  float loss = 0.0f;
  double grad_norm = 0.0;      // before clipping
  // The first gradient (host tensor name) holding NaN or Inf, in the order the host took the
  // norm; "" if all are finite. The AdamW update of such a step is not applied — except, in a
  // plan that updates as gradients land (updatesOnArrival), to the parameters updated before
  // that gradient landed (and, NORM_AND_ADAMW_ON_ARRIVAL, to that gradient's finite chunks):
  // then `partially_updated`.
  std::string nonfinite_grad;
  bool partially_updated = false;
  // With verify_transfers: the copies to the device checked this run, and the first whose bytes
  // on the device differ from the host's ("" if none). A step with such a copy computed with
  // other weights than the host's: its update is not applied (as for NaN gradients; on arrival,
  // `partially_updated` says what already was).
  int64_t transfers_verified = 0;
  std::string corrupt_transfer;
};

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

struct CudaOptions {
  // Matrix products on the tensor cores in TF32 (10-bit mantissa, ~7x the fp32 rate on an
  // H100, relative error ~1e-3) instead of exact fp32. Off: the plan's precision is kept.
  bool tf32 = false;
};

// The CUDA backend (runtime/backends/cuda_backend.cc): one device arena of the planned size, a CUDA
// stream per device stream of the plan, the copied host tensors pinned. Throws mt::Error when
// the build has no CUDA, no GPU is usable, the arena does not fit, or a kernel has no CUDA twin.
std::unique_ptr<Backend> createCudaBackend(const plan::Plan& plan, HostStore& store, const CudaOptions& options);

}  // namespace mt
