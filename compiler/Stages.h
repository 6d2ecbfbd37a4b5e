// The pipeline's stages as a library: mtc runs them, and so do tests that compile IR in-process.
#pragma once
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "compiler/CompileOptions.h"
#include "mlir/IR/BuiltinOps.h"

namespace mt {

// The schedules the compiler can emit, from the most device memory to the least.
inline constexpr Schedule kSchedules[] = {Schedule::kResident, Schedule::kStreamed, Schedule::kStreamedRecompute};

// The cost model's prediction for a compiled module's plan (StageOptions::step_price).
struct StepPrice {
  double step_us = std::numeric_limits<double>::infinity();  // the step (with ranks: their exchange too)
  double compute_us = 0, h2d_us = 0;  // the compute's and the host-to-device link's busy time
  // Whether the step is within 2 % of its compute: fewer copies could shorten it by no more (a
  // step waiting on the link longer is not, though the link may be busy less than the compute).
  bool computeBound() const { return step_us <= compute_us * 1.02; }
};

struct StageOptions {
  std::optional<Stage> last;  // stop after this stage (unset: run all)
  int64_t device_mem = 0;    // bytes; 0 = no budget
  std::optional<Schedule> schedule;  // unset: the first of kSchedules that fits the budget
  UpdateKind update = UpdateKind::kDeferred;
  // streamed-recompute under a budget: search how many blocks can keep their activations (one
  // compile per try). Off where a caller only asks whether anything fits.
  bool tune_recompute = true;
  // For searches over many trial compiles (mtc --batch auto): an unset schedule starts from
  // kSchedules[first_schedule] (a smaller batch already needed it), and a budget no plan fits
  // fails without compiling the most frugal plan once more for notes on what fills the device.
  size_t first_schedule = 0;
  bool explain_failure = true;
  // A smaller batch fitted only with its activations offloaded (Offload::kAuto): fitting tries
  // that before the vocabulary split alone, which cannot fit a larger batch either.
  bool offload_first = false;
  // --host-mem (0: none), and the host bytes of a compiled module's plan (the emitter's count):
  // with the activations offloaded, each block that keeps its activations keeps them on the
  // host, so the recompute tuning keeps no more blocks than both budgets allow.
  int64_t host_mem = 0;
  std::function<int64_t(mlir::ModuleOp)> host_bytes;
  // The predicted step of a compiled module's plan on the target (the emitter's cost model):
  // where set, a choice that trades one cost for another — frozen weights kept on the device
  // against more blocks keeping their activations — takes the faster plan.
  std::function<StepPrice(mlir::ModuleOp)> step_price;
  // The most last blocks the recompute tuning tries to keep (-1: all): a smaller batch of the
  // same model kept this many, and a larger one keeps no more.
  int64_t max_keep = -1;
  // The LM head and its loss over this many vocabulary chunks (mt-split-vocab); 0: as few as
  // the budget needs (none when the whole head fits), 1: never split.
  int64_t vocab_chunks = 0;
  // Each stacked expert weight in this many groups of consecutive experts (mt-split-experts);
  // 0: as few as the budget needs (none when whole layers fit), 1: never split.
  int64_t expert_groups = 0;
  // Each layer block's token-wise work in this many tiles along the tokens (mt-tile-tokens); 0:
  // as few as the budget needs (none when an untiled plan fits), 1: never tiled.
  int64_t token_tiles = 0;
  // The activations the backward reads kept on the host in between (mt-offload-activations).
  Offload offload = Offload::kAuto;
  // A training plan's frozen weights kept on the device between steps where the budget has room
  // (the schedules' keep-frozen: all, or in a streamed plan as many as fit).
  KeepFrozen keep_frozen = KeepFrozen::kAuto;
  // The lookup of the tokens in their embedding table and its gradient's scatter (on the host:
  // mt-host-embedding; auto: there when the vocabulary is split and the table is tied to the LM
  // head, as the split needs the head's weight read by the head alone).
  EmbeddingPlace embedding = EmbeddingPlace::kAuto;
  // What the parameters cross the link as (mt-stage-bf16 for bf16) and what the device computes
  // in (mt-mixed-precision for bf16, which streams bf16 whatever stream_dtype says).
  StreamDtype stream_dtype = StreamDtype::kF32;
  ComputePrecision precision = ComputePrecision::kFp32;
  // A streamed plan with the deferred update lands its gradients in a host buffer of a few
  // blocks' and keeps them apart (plan 1.17): each data-parallel rank then holds only its slice
  // of each summed gradient (a plan for ranks: mtc --ranks).
  bool land_gradients = false;
  // What the loss trains (mt-attach-loss): the next token, or preferences over row pairs (DPO).
  LossSpec loss;
};

struct StageResult {
  std::optional<Stage> failed;  // the stage that failed (diagnostics emitted), if one did
  Schedule schedule = Schedule::kResident;  // the schedule used
  std::vector<std::pair<Schedule, int64_t>> arena_by_schedule;  // what an unset schedule measured
  int64_t recompute_keep = 0;  // streamed-recompute: the last blocks not recomputed
  // The most such blocks a plan tried kept (more than recompute_keep where the frozen weights'
  // bytes took the room of some): the bound a larger batch's search starts from.
  int64_t recompute_keep_most = 0;
  bool pin_shared = false;     // streamed: weights shared across blocks stay on the device
  // Frozen weights kept on the device between steps (copied in the first step only): with
  // keep_frozen, frozen_kept of the frozen_weights (those the plan keeps, a pinned one included);
  // keeping_fewer_faster where fewer were kept than the budget had room for (or none), because
  // that was predicted faster.
  bool keep_frozen = false;
  int64_t frozen_kept = 0;
  int64_t frozen_weights = 0;
  bool keeping_fewer_faster = false;
  bool frozen_compute_bound = false;  // room for only some, but the step copying them is compute-bound
  // The schedule the budget chose where streamed-recompute was taken over it (a resident or
  // streamed plan that fits): its smaller activations leave room for more frozen weights kept,
  // predicted faster.
  std::optional<Schedule> switched_from;
  int64_t vocab_chunks = 1;    // the LM head's vocabulary chunks (1: not split)
  int64_t expert_groups = 1;   // the groups each stacked expert weight is in (1: not split)
  int64_t token_tiles = 1;     // each layer block's token tiles (1: not tiled)
  bool offload = false;        // the kept activations offloaded to the host
  bool host_embedding = false;  // the token embedding looked up on the host
  int64_t smallest_arena = -1;  // failed kMemory: the least device memory any plan tried needs
};

// Runs the stages after "input" on `module`: fuse, attach-loss, tile-tokens (when the token-wise
// work is tiled: asked for, or the only way to fit the budget), autodiff, partition,
// host-embedding (when the token embedding runs on the host), split-vocab (when the vocabulary
// is split), split-experts (when the experts stream in groups), recompute (when the schedule recomputes),
// schedule (with the activation offload when chosen), memory. A forward-only function (named
// outputs, no loss) runs only schedule and memory, resident — or, where the budget does not
// hold its weights (or --schedule says so), partition, then schedule and memory, streamed.
StageResult runStages(mlir::ModuleOp module, const StageOptions& options);

// Batch, sequence and vocabulary of a module that has its loss attached.
void modelShape(mlir::ModuleOp module, int64_t& batch, int64_t& seq, int64_t& vocab);

}  // namespace mt
