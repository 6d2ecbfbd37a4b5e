// What one run of a plan is asked to do (StepOptions) and what it reports (StepResult): shared by
// the backends that run it, the host optimizer that updates during it, and the trainer that
// sets it up — without the backends' own header.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/adamw/adamw.h"
#include "kernels/kernel_args.h"
#include "runtime/host/rank_exchange.h"

namespace mt {

struct StepOptions {
  AdamWParams adamw;       // lr, betas, eps, weight decay (for tensors that take it), step
  // LoRA+ (mtrun --lora-plus-ratio): the parameters takesLoraPlusRate names learn at adamw.lr x this.
  double lora_plus_ratio = 1.0;
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
  // Several ranks (mpirun): each gradient is summed across them into its owner's slice as it
  // lands, each rank updates its slices and the updated weights are gathered (rank_exchange.h;
  // micro-step k of rank r is the step's micro-batch k·N + r). Null: one process.
  RankExchange* exchange = nullptr;
  // What the plan's random kernels (dropout) draw from in this run; training false for a
  // validation or an evaluation (dropout is then the identity).
  StepRandomness random;
  // The host tensors the device keeps copies of (CopyOp::kept: a forward-only plan's weights, a
  // training plan's frozen weights, their bf16 staging copies and constants) are what this
  // backend's previous run copied: those copies are skipped, as mtgen does after its first token
  // and mtrun after its first step. Ignored on a backend's first whole run (a loss-only one
  // before it made only its prefixes' copies) and after a run that failed.
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

}  // namespace mt
