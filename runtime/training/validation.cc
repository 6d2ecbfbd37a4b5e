#include "runtime/training/validation.h"

#include <string>

#include "runtime/io/error.h"

namespace mt {

Validation Validator::run(int64_t step, Backend& backend, HostStore& store, const StepOptions& eval,
                          const World& world) {
  // This rank's share of the batches: (counted targets, loss) of each, in order.
  std::vector<double> mine;
  for (int64_t i = world.rank(); i < batches_.batches(); i += world.size()) {
    const int64_t c =
        batches_.fill(i, store.i32(store.tokens()), store.i32(store.targets()), store.tokenMask(), store.positions());
    float loss = 0.0f;
    if (c > 0) {  // a batch whose mask leaves out every target has no loss (0/0)
      const StepResult result = backend.runStep(eval);
      if (!result.corrupt_transfer.empty())  // a validation updates nothing: only its loss is wrong
        throw Error("validation after step " + std::to_string(step) + ": --verify-transfers: the bytes of " +
                    result.corrupt_transfer + " differ from the host's: the link or the device corrupted the copy. "
                    "Check the GPU (nvidia-smi -q: ECC errors; dmesg: Xid errors) and its link, then resume");
      loss = result.loss;
    }
    mine.push_back(static_cast<double>(c));
    mine.push_back(loss);
  }
  // Each batch's loss is the mean over its counted targets: weighted by them, the validation
  // loss is the mean over every counted target of the pass (padding rows count none), summed in
  // batch order whichever rank ran each.
  const std::vector<std::vector<double>> shares = world.allgather(mine);
  double total = 0.0;
  Validation v;
  for (int64_t i = 0; i < batches_.batches(); ++i) {
    const std::vector<double>& share = shares[static_cast<size_t>(i % world.size())];
    const size_t at = static_cast<size_t>(i / world.size()) * 2;
    const int64_t c = static_cast<int64_t>(share[at]);
    if (c == 0) continue;
    total += static_cast<double>(c) * static_cast<float>(share[at + 1]);
    v.counted += c;
  }
  if (v.counted == 0) return v;
  v.loss = total / static_cast<double>(v.counted);
  if (!best_ || v.loss < best_->loss) {
    best_ = Best{step, v.loss};
    since_best_ = 0;
    v.best = true;
  } else {
    ++since_best_;
  }
  v.since_best = since_best_;
  v.best_loss = best_->loss;
  v.best_step = best_->step;
  return v;
}

}  // namespace mt
