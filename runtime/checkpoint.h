// Checkpoints: parameters and AdamW moments (safetensors, under their plan names) with the
// step, the data seed and the plan's fingerprint in the metadata. One file per checkpoint,
// `step-<N>.ckpt.safetensors` in the checkpoint directory, written to a temporary name, fsynced
// and renamed (a run killed while writing leaves the previous checkpoints intact), the oldest
// removed beyond --keep. The data order and the learning rate are functions of the step, so a
// resumed run continues bit for bit as if it had never stopped.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "runtime/host_store.h"
#include "runtime/plan_format.h"

namespace mt {

struct CheckpointState {
  int64_t step = 0;       // steps completed
  uint64_t seed = 0;      // data seed
  int64_t total_steps = 0;
};

// A digest of what the plan trains (host tensors' names, shapes, roles, and the model's
// batch/seq/vocab): a checkpoint only loads into a plan with the same fingerprint.
std::string planFingerprint(const plan::Plan& plan);

void writeCheckpoint(const std::string& dir, const plan::Plan& plan, const HostStore& store,
                     const CheckpointState& state, int keep);

// The path of the newest complete checkpoint in `dir`, if any.
std::optional<std::string> latestCheckpoint(const std::string& dir);

// Loads parameters and moments into `store`; throws mt::Error for a corrupt checkpoint or one
// written for another plan (naming both models).
CheckpointState loadCheckpoint(const std::string& path, const plan::Plan& plan, HostStore& store);

}  // namespace mt
