#include "runtime/training/validation.h"

#include <string>
#include <vector>

#include "runtime/io/error.h"

namespace mt {

Validator::BatchRun Validator::runBatch(int64_t i, Backend& backend, HostStore& store, const StepOptions& eval,
                                        const Preference* preference, bool always, const std::string& what,
                                        const char* then) const {
  const int64_t c =
      batches_.fill(i, store.i32(store.tokens()), store.i32(store.targets()), store.tokenMask(), store.positions());
  if (preference) preference->fillHeldOutReference(batches_, i);
  if (c == 0 && !always) return {c, 0.0f};  // a batch whose mask leaves out every target has no loss (0/0)
  const StepResult result = backend.runStep(eval);
  if (!result.corrupt_transfer.empty())  // a validation updates nothing: only its loss is wrong
    throw Error(what + ": --verify-transfers: the bytes of " + result.corrupt_transfer + " differ from the host's: "
                "the link or the device corrupted the copy. Check the GPU (nvidia-smi -q: ECC errors; dmesg: Xid "
                "errors) and its link, then " + then);
  return {c, result.loss};
}

std::vector<double> Validator::inBatchOrder(const World& world, const std::vector<double>& mine, size_t width,
                                            const std::function<int64_t(int64_t)>& records) const {
  const std::vector<std::vector<double>> shares = world.allgather(mine);
  std::vector<size_t> read(shares.size(), 0);  // how far into each rank's share
  std::vector<double> all;
  for (int64_t i = 0; i < batches_.batches(); ++i) {
    const size_t rank = static_cast<size_t>(i % world.size()), n = static_cast<size_t>(records(i)) * width;
    if (read[rank] + n > shares[rank].size())
      throw Error("the held-out batches' scores: rank " + std::to_string(rank) + " sent too few for batch " +
                  std::to_string(i) + " (" + std::to_string(shares[rank].size() - read[rank]) + " values left, the "
                  "batch needs " + std::to_string(n) + "; the ranks disagree on the held-out data: give every rank the "
                  "same files)");
    all.insert(all.end(), shares[rank].begin() + static_cast<std::ptrdiff_t>(read[rank]),
               shares[rank].begin() + static_cast<std::ptrdiff_t>(read[rank] + n));
    read[rank] += n;
  }
  for (size_t rank = 0; rank < shares.size(); ++rank)
    if (read[rank] != shares[rank].size())
      throw Error("the held-out batches' scores: rank " + std::to_string(rank) + " sent " +
                  std::to_string(shares[rank].size()) + " values, more than its " + std::to_string(read[rank]) +
                  " for its batches (the ranks disagree on the held-out data: give every rank the same files)");
  return all;
}

std::vector<ExampleScore> Validator::scoresInBatchOrder(const World& world, const std::vector<double>& mine,
                                                        const std::function<int64_t(int64_t)>& records) const {
  const std::vector<double> all = inBatchOrder(world, mine, ExampleScore::kWidth, records);
  std::vector<ExampleScore> scores;
  for (size_t k = 0; k < all.size(); k += ExampleScore::kWidth) scores.push_back(ExampleScore::unflat(&all[k]));
  return scores;
}

Validation Validator::run(int64_t step, Backend& backend, HostStore& store, const StepOptions& eval,
                          const World& world, const Preference* preference, std::vector<ExampleScore>* each,
                          bool evaluation) {
  // This rank's share of the batches, in order: (counted targets, loss) of each, or a DPO plan's
  // scored pairs (PairScores::flat); with `each`, its pairs' scores (ExampleScore's flat form).
  std::vector<double> mine, mine_each;
  std::vector<ExampleScore> batch_each;
  const size_t width = preference ? PairScores{}.flat().size() : 2;
  const std::string what = evaluation ? std::string("--eval-only") : "validation after step " + std::to_string(step);
  for (int64_t i = world.rank(); i < batches_.batches(); i += world.size()) {
    const BatchRun ran = runBatch(i, backend, store, eval, preference, preference != nullptr, what,
                                  evaluation ? "run again" : "resume");
    if (preference) {
      batch_each.clear();
      const std::vector<double> scored =
          preference->scoreRun(batches_.dataRows(i), each ? &batch_each : nullptr).flat();
      mine.insert(mine.end(), scored.begin(), scored.end());
      for (const ExampleScore& score : batch_each) score.appendTo(mine_each);
      continue;
    }
    mine.push_back(static_cast<double>(ran.counted));
    mine.push_back(ran.loss);
  }
  if (each) *each = scoresInBatchOrder(world, mine_each, [&](int64_t i) { return batches_.dataRows(i) / 2; });
  // Each batch's loss is the mean over its counted targets: weighted by them, the validation
  // loss is the mean over every counted target of the pass (padding rows count none), summed in
  // batch order whichever rank ran each. A DPO plan's: the pairs' losses summed, over the pairs
  // (with an NLL term, plus its alpha times the chosen replies' NLL per token over the whole set).
  const std::vector<double> batches = inBatchOrder(world, mine, width, [](int64_t) { return 1; });
  double total = 0.0;
  Validation v;
  for (int64_t i = 0; i < batches_.batches(); ++i) {
    const double* at = batches.data() + static_cast<size_t>(i) * width;
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

std::vector<ExampleScore> Validator::textRewards(Backend& backend, HostStore& store, const StepOptions& eval,
                                                 const World& world, const Preference& preference) const {
  std::vector<double> mine;
  std::vector<ExampleScore> batch;
  for (int64_t i = world.rank(); i < batches_.batches(); i += world.size()) {
    runBatch(i, backend, store, eval, &preference, /*always=*/true, "--eval-only", "run again");  // no loss: texts
    batch.clear();
    preference.rowRewards(batches_.dataRows(i), batch);
    for (const ExampleScore& score : batch) score.appendTo(mine);
  }
  return scoresInBatchOrder(world, mine, [&](int64_t i) { return batches_.dataRows(i); });
}

}  // namespace mt
