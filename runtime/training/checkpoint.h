// Checkpoints: parameters and AdamW moments (safetensors, under their plan names) with the
// step, the data seed and the plan's fingerprint in the metadata. One file per checkpoint,
// `step-<N>.ckpt.safetensors` in the checkpoint directory, written to a temporary name, fsynced
// and renamed (a run killed while writing leaves the previous checkpoints intact), the oldest
// removed beyond --keep. The data order and the learning rate are functions of the step, so a
// resumed run continues bit for bit as if it had never stopped.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "runtime/host/host_store.h"
#include "runtime/io/file_lock.h"
#include "runtime/plan/plan_format.h"
#include "runtime/plan/plan_queries.h"  // planFingerprint

namespace mt {

// Metadata key prefix of a run's provenance in checkpoints and exports: where the weights come
// from (code version, plan, data file and its checksum, initial weights, start time).
inline constexpr char kProvenancePrefix[] = "provenance.";

struct CheckpointState {
  int64_t step = 0;       // steps completed
  uint64_t seed = 0;      // data seed
  int64_t total_steps = 0;
  std::map<std::string, std::string> provenance;  // keys under kProvenancePrefix
};

// A checkpoint directory held by one run from its start: created if missing (a bad path fails
// before any training, not after it) and locked (flock on .mtrun.lock, released however the
// process ends), so a second run on it is refused, naming the holder, instead of the two
// interleaving checkpoints and pruning each other's. Temporary files of checkpoints whose writer
// was killed are removed.
class CheckpointDir {
 public:
  // Throws mt::Error if the directory cannot be created or written, or another process holds it.
  explicit CheckpointDir(const std::string& dir);
  CheckpointDir(const CheckpointDir&) = delete;
  CheckpointDir& operator=(const CheckpointDir&) = delete;

  const std::string& path() const { return dir_; }
  // Temporary files of killed writers removed when the directory was taken.
  int removedLeftovers() const { return removed_; }

  // Writes step-<N>.ckpt.safetensors atomically, then removes the oldest beyond `keep`.
  void write(const plan::Plan& plan, const HostStore& store, const CheckpointState& state, int keep) const;
  // Writes best.ckpt.safetensors atomically (--keep-best: the weights of the lowest validation
  // loss so far, `val_loss` in its metadata); the step-<N> checkpoints' pruning leaves it.
  void writeBest(const plan::Plan& plan, const HostStore& store, const CheckpointState& state, double val_loss) const;

 private:
  std::string dir_;
  std::unique_ptr<FileLock> lock_;
  int removed_ = 0;
};

// --keep-best's checkpoint in `dir`, if any: where, its step and validation loss. Throws
// mt::Error if its metadata is corrupt.
struct BestCheckpoint {
  std::string path;
  int64_t step = 0;
  double val_loss = 0.0;
};
std::optional<BestCheckpoint> bestCheckpoint(const std::string& dir);

// The path of the newest complete checkpoint in `dir`, if any.
std::optional<std::string> latestCheckpoint(const std::string& dir);

// Loads parameters and moments into `store`; throws mt::Error for a corrupt checkpoint or one
// written for another plan (naming both models).
CheckpointState loadCheckpoint(const std::string& path, const plan::Plan& plan, HostStore& store);

}  // namespace mt
