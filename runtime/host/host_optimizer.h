// The host side of a training step, the same for every backend: the host stream's tasks
// (each gradient's share of the global norm, AdamW now, one step late, or as gradients land;
// the token embedding's lookup and gradient) and the step's result.
#pragma once
#include <vector>

#include "kernels/kernel_args.h"
#include "runtime/host/host_store.h"
#include "runtime/host/step_options.h"

namespace mt {

class HostOptimizer {
 public:
  // Reads from the plan which update its host tasks make (ADAMW, ADAMW_PREVIOUS or
  // ADAMW_ON_ARRIVAL).
  HostOptimizer(const plan::Plan& plan, HostStore& store);

  // Before the streams run: throws if the options ask for what the plan cannot do.
  void beginStep(const StepOptions& options);
  // One host task, on the host stream (`accumulate`: HostTask.accumulate; `padding_id`:
  // HostTask.padding_id, -1 where it has none).
  void run(plan::HostTask::Kind kind, const std::vector<int>& tensors, bool accumulate = false,
           int64_t padding_id = -1);
  // After every stream finished: the step's loss, norm and NaN report; leaves this step's
  // update pending if the plan defers it — unless `discard` (the step read corrupted weights:
  // mtrun --verify-transfers), which applies it never (on arrival: what it applied is reported).
  StepResult endStep(bool discard = false);
  // Backend::applyPendingUpdate.
  void applyPending();

 private:
  // This step's AdamW settings: the options' with the clipping coefficient of its norm.
  AdamWParams stepAdamW() const;
  void update(const std::vector<int>& params, const AdamWParams& adamw);
  // `adamw` for one parameter: without weight decay where the plan says it takes none.
  AdamWParams forParam(int param, const AdamWParams& adamw) const;
  // Gradient `grad`'s share of the norm; the first non-finite one is remembered.
  void addNorm(int grad, double sum_squares);
  // A GRAD_NORM task: each gradient folded (summed over micro-batches or ranks, kept apart), then
  // their shares of the norm, in one parallel pass over all their chunks where no ranks exchange.
  void addNorms(const std::vector<int>& grads);
  // Gradient `grad`'s sum of squares: of all of it in one process; sharded, of this rank's slice
  // by chunk, the ranks' chunks gathered and added in order (the same sum, bit for bit).
  double gradSumSquares(int grad);
  // Sharded: the chunk sums in chunk_sums_ (this rank's slice of parameter `param`'s n elements)
  // gathered from every rank and added in order.
  double gatheredSum(int64_t n, int param);
  // The elements of parameter `param` (n of them) this process updates: all, or its rank's slice.
  ShardRange owned(int64_t n, int param) const;
  // NORM_AND_ADAMW_ON_ARRIVAL: each gradient's norm share and its update in one pass.
  void normAndUpdate(const std::vector<int>& params);
  // Host tensor `index` as a kernel operand (a gradient: where it lands).
  Tensor hostTensor(int index) const;
  // Whether this step's gradients are the ones to update with: not an earlier micro-batch of an
  // accumulated step.
  bool gradientsComplete() const { return options_.micro_step + 1 == options_.micro_steps; }
  // Folds the just landed gradient `grad` into its running sum over the micro-batches (--accumulate)
  // or the ranks (the last micro-batch: turns it into the mean); where the plan keeps gradients
  // apart, the complete sum (this rank's slice) goes into the gradient's own tensor. Returns
  // gradientsComplete().
  bool foldGradient(int grad);

  const plan::Plan& plan_;
  HostStore& store_;
  StepOptions options_;       // of the current step
  // This step's gradients' sums of squares by host tensor index (written by the single host
  // stream), added in that order (gradSqSum): the norm's bits whatever order a schedule lands the
  // gradients in (streamed, resident, experts in groups).
  std::vector<double> grad_sq_sums_;
  double gradSqSum() const;
  int first_nonfinite_ = -1;  // host tensor; written by the host stream
  const bool deferred_;    // the plan's update kind is ADAMW_PREVIOUS
  const bool on_arrival_;  // ... or one that updates on arrival
  // The deferred update: set between steps, read by the host stream.
  bool pending_ = false;
  AdamWParams pending_adamw_;
  bool updated_ = false;  // on arrival: whether this step updated anything yet (host stream)
  // A gradient no GRAD_NORM or NORM_AND_ADAMW_ON_ARRIVAL task takes (host tensor; -1: none):
  // the host never sees it land, so it cannot be accumulated.
  int unseen_grad_ = -1;
  // Gradient accumulation's running sums, by host tensor index (allocated on first use).
  std::vector<std::vector<float>> grad_sums_;
  // Sharded: this rank's chunk sums of squares of a gradient's slice, and every rank's.
  std::vector<double> chunk_sums_, all_chunk_sums_;
};

}  // namespace mt
