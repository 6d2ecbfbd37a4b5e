#include "runtime/backends/transfer_check.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace mt {

TransferCheck::TransferCheck(const plan::Plan& plan, const std::vector<std::vector<Op>>& programs) : plan_(plan) {
  for (const auto& program : programs)
    for (const Op& op : program)
      if (const auto* c = std::get_if<CopyOp>(&op); c && c->transfer >= 0) {
        if (c->transfer >= static_cast<int>(host_tensor_.size())) host_tensor_.resize(c->transfer + 1, -1);
        host_tensor_[c->transfer] = c->host_tensor;
      }
  if (const char* fault = std::getenv("MT_TEST_CORRUPT_TRANSFER")) fault_at_ = std::atoll(fault);
}

void TransferCheck::beginRun(bool enabled) {
  enabled_ = enabled;
  verified_ = 0;
  mismatch_.clear();
}

void TransferCheck::compare(int transfer, uint64_t host, uint64_t device) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++verified_;
  if (host == device || !mismatch_.empty()) return;
  char sums[96];
  std::snprintf(sums, sizeof sums, "checksum %016" PRIx64 " on the device, %016" PRIx64 " on the host", device, host);
  const int t = host_tensor_[transfer];
  mismatch_ = "'" + plan_.host_tensors(t).name() + "' (copy " + std::to_string(transfer + 1) + " of the step to the device: " +
              sums + ")";
}

bool TransferCheck::injectFault() {
  std::lock_guard<std::mutex> lock(mutex_);
  return fault_at_ > 0 && ++checked_ever_ == fault_at_;
}

}  // namespace mt
