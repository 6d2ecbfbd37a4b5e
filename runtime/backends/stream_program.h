// A plan's stream programs bound to memory: what a backend executes. Both backends build them
// here, then run each op their way (a CPU kernel or a CUDA launch, memcpy or cudaMemcpyAsync).
#pragma once
#include <cstddef>
#include <variant>
#include <vector>

#include "kernels/kernel_args.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/op_table.h"

namespace mt {

struct KernelOp {
  KernelId id;
  KernelArgs args;  // data pointers into the arena
};
struct CopyOp {
  void* dst;
  const void* src;
  int64_t bytes;
  // A copy of what no run changes — a forward-only plan's weight, a training plan's frozen
  // weight, their staging copies, a constant — into device bytes no other instruction writes
  // (keptCopies; mt-plan-memory lays them out so): after a whole run the device still holds them,
  // and a run on the same weights (StepOptions::weights_unchanged) skips the copy.
  bool kept = false;
  // A copy to the device: its place among the step's copies to the device (0, 1, ...: where
  // --verify-transfers keeps its checksums) and the host tensor it reads; -1 for a copy out.
  int transfer = -1;
  int host_tensor = -1;
};

// Whether a run may skip the kept copies (CopyOp::kept): only after a whole run that made them
// all, none of them corrupt. Both backends keep one.
class KeptCopyState {
 public:
  // At a run's start (`weights_unchanged`: StepOptions'): whether this run skips them is then
  // skipping(). Until endRun, the device is not taken to hold them (a run that throws leaves it so).
  void beginRun(bool weights_unchanged) {
    skip_ = weights_unchanged && holds_;
    holds_ = false;
  }
  // At its end: `whole` unless it ran only the loss prefixes (a validation that made the kept
  // copies made only its prefixes' of them); `clean` unless a transfer was corrupt.
  void endRun(bool whole, bool clean) { holds_ = (skip_ || whole) && clean; }
  bool skipping() const { return skip_; }

 private:
  bool holds_ = false;  // the last run left every kept copy's bytes on the device
  bool skip_ = false;   // this run skips the kept copies
};
struct RecordOp {
  uint32_t event;
};
struct WaitOp {
  uint32_t event;
};
struct HostTaskOp {
  plan::HostTask::Kind kind;
  std::vector<int> tensors;
  bool accumulate = false;  // EMBEDDING_GRAD
  int64_t padding_id = -1;  // EMBEDDING_GRAD: the id whose tokens add nothing (-1: none)
};
using Op = std::variant<KernelOp, CopyOp, RecordOp, WaitOp, HostTaskOp>;

// One program per stream, one op per instruction (same indices as the plan's). The plan must
// be verified; `arena` is the device arena's base (host memory on the CPU backend); every kernel
// call reads the step's randomness from `random` (the backend's, set before each run). Marks the
// copies a backend may skip when the weights are unchanged (CopyOp::kept).
std::vector<std::vector<Op>> bindPrograms(const plan::Plan& plan, const HostStore& store, std::byte* arena,
                                          const StepRandomness* random);

}  // namespace mt
