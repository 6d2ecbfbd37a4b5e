// mtrun --verify-transfers: after each copy to the device, the checksum of the bytes the device
// received (kernels/checksum: on the GPU by its CUDA twin) against the checksum of the host bytes
// it copied. A mismatch is a transfer corrupted on the link or on the device; the step that read
// it is not applied. Both backends keep one per plan.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/backends/stream_program.h"
#include "runtime/plan/plan_format.h"

namespace mt {

class TransferCheck {
 public:
  // The plan's copies to the device, as bindPrograms numbered them (CopyOp::transfer).
  TransferCheck(const plan::Plan& plan, const std::vector<std::vector<Op>>& programs);

  int transfers() const { return static_cast<int>(host_tensor_.size()); }
  // Before a run's streams start: whether this run checks its copies.
  void beginRun(bool enabled);
  bool enabled() const { return enabled_; }
  // Copy `transfer` moved bytes whose checksum is `host` on the host and `device` on the device.
  void compare(int transfer, uint64_t host, uint64_t device);
  // After the run: how many copies it checked and the first that differed ("" if none).
  int64_t verified() const { return verified_; }
  std::string firstMismatch() const { return mismatch_; }

  // A fault for the tests of this check (the variable MT_TEST_CORRUPT_TRANSFER=N): whether the
  // copy now being checked is the N-th checked copy of this process, whose device bytes the
  // backend then corrupts (one bit) before the check.
  bool injectFault();

 private:
  const plan::Plan& plan_;
  std::vector<int> host_tensor_;  // per transfer
  bool enabled_ = false;
  std::mutex mutex_;  // copies may run on more than one stream
  int64_t verified_ = 0, checked_ever_ = 0;
  std::string mismatch_;
  int64_t fault_at_ = 0;  // MT_TEST_CORRUPT_TRANSFER; 0: none
};

}  // namespace mt
