#include "runtime/training/validation.h"

#include <string>

#include "runtime/io/error.h"

namespace mt {

Validation Validator::run(int64_t step, Backend& backend, HostStore& store, const StepOptions& eval,
                          const World& world, const Preference* preference) {
  // This rank's share of the batches, in order: (counted targets, loss) of each, or a DPO plan's
  // scored pairs (PairScores::flat).
  std::vector<double> mine;
  const size_t width = preference ? PairScores{}.flat().size() : 2;
  for (int64_t i = world.rank(); i < batches_.batches(); i += world.size()) {
    const int64_t c =
        batches_.fill(i, store.i32(store.tokens()), store.i32(store.targets()), store.tokenMask(), store.positions());
    if (preference) preference->fillHeldOutReference(batches_, i);
    float loss = 0.0f;
    if (c > 0 || preference) {  // a batch whose mask leaves out every target has no loss (0/0)
      const StepResult result = backend.runStep(eval);
      if (!result.corrupt_transfer.empty())  // a validation updates nothing: only its loss is wrong
        throw Error("validation after step " + std::to_string(step) + ": --verify-transfers: the bytes of " +
                    result.corrupt_transfer + " differ from the host's: the link or the device corrupted the copy. "
                    "Check the GPU (nvidia-smi -q: ECC errors; dmesg: Xid errors) and its link, then resume");
      loss = result.loss;
    }
    if (preference) {
      const std::vector<double> scored = preference->scoreRun(batches_.dataRows(i)).flat();
      mine.insert(mine.end(), scored.begin(), scored.end());
      continue;
    }
    mine.push_back(static_cast<double>(c));
    mine.push_back(loss);
  }
  // Each batch's loss is the mean over its counted targets: weighted by them, the validation
  // loss is the mean over every counted target of the pass (padding rows count none), summed in
  // batch order whichever rank ran each. A DPO plan's: the pairs' losses summed, over the pairs
  // (with an NLL term, plus its alpha times the chosen replies' NLL per token over the whole set).
  const std::vector<std::vector<double>> shares = world.allgather(mine);
  double total = 0.0;
  Validation v;
  for (int64_t i = 0; i < batches_.batches(); ++i) {
    const std::vector<double>& share = shares[static_cast<size_t>(i % world.size())];
    const double* at = share.data() + static_cast<size_t>(i / world.size()) * width;
    if (preference) {
      v.pairs.add(PairScores::unflat(at));
      continue;
    }
    const int64_t c = static_cast<int64_t>(at[0]);
    if (c == 0) continue;
    total += static_cast<double>(c) * static_cast<float>(at[1]);
    v.counted += c;
  }
  if (preference) v.counted = v.pairs.pairs;
  if (v.counted == 0) return v;
  v.loss = preference ? preference->meanLoss(v.pairs) : total / static_cast<double>(v.counted);
  track(step, v);
  return v;
}

void Validator::track(int64_t step, Validation& v) {
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
}

}  // namespace mt
