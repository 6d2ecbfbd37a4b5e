// Validation: one pass over the held-out tokens (HeldOutBatches: consecutive windows, each
// token a target once), the loss the mean over every counted target, and the history a run
// needs from it: the lowest loss so far (--keep-best) and how many validations have passed
// since (the overfitting warning).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include <optional>

#include "runtime/backends/backend.h"
#include "runtime/distributed/world.h"
#include "runtime/data/token_data.h"
#include "runtime/host/host_store.h"
#include "runtime/training/preference.h"

namespace mt {

struct Validation {
  double loss = 0.0;      // mean over the counted targets (0 when none counted); DPO: over the pairs
  int64_t counted = 0;    // targets; DPO: pairs
  PairScores pairs;       // DPO: the held-out pairs scored
  bool best = false;      // lower than every earlier validation's loss
  int since_best = 0;     // validations since the best (0: this one is the best)
  double best_loss = 0.0;
  int64_t best_step = 0;
};

// Validations since the best after which the run warns that it may be overfitting.
inline constexpr int kRisesBeforeWarning = 3;

class Validator {
 public:
  explicit Validator(HeldOutBatches batches) : batches_(batches) {}
  const HeldOutBatches& batches() const { return batches_; }
  // An earlier best (a resumed run's --keep-best checkpoint): later validations must beat it.
  void rememberBest(int64_t step, double loss) { best_ = {step, loss}, since_best_ = 0; }
  // The held-out loss of the weights in `store` after `step`: every batch run with `eval`
  // (loss only, no update). With several ranks, rank r runs batches r, r + N, ... and every rank
  // sums all of them in batch order: one process's loss, bit for bit. With `preference` (a DPO
  // plan), the loss is the mean over the held-out pairs (plus an NLL term's, Preference::meanLoss),
  // scored on the host (padding rows left out). With `each` too, every rank gets each held-out
  // pair's scores in it, in order (--scores). Throws mt::Error if --verify-transfers finds a copy
  // corrupted (`evaluation`: of --eval-only, which is run again, not resumed).
  Validation run(int64_t step, Backend& backend, HostStore& store, const StepOptions& eval, const World& world,
                 const Preference* preference = nullptr, std::vector<ExampleScore>* each = nullptr,
                 bool evaluation = false);
  // A reward model's reward of each held-out example (rows of examples, each scored alone: no
  // pairs, no loss), every rank getting them all in order (--eval-only --scores on texts). Throws
  // mt::Error as run does.
  std::vector<ExampleScore> textRewards(Backend& backend, HostStore& store, const StepOptions& eval,
                                        const World& world, const Preference& preference) const;

 private:
  // The best so far and the validations since it, updated by `v`.
  void track(int64_t step, Validation& v);
  // Batch i filled into `store` and run with `eval`: its targets counted, and its loss (0 where it
  // did not run: a batch whose mask leaves out every target runs only where `always`). `what`
  // names the pass in the error for a corrupted copy, `then` what to do after checking the GPU.
  struct BatchRun {
    int64_t counted;
    float loss;
  };
  BatchRun runBatch(int64_t i, Backend& backend, HostStore& store, const StepOptions& eval,
                    const Preference* preference, bool always, const std::string& what, const char* then) const;
  // Each rank's `mine` (a record of `width` doubles for each of `records(i)` of the batches it
  // ran), every rank's gathered in batch order.
  std::vector<double> inBatchOrder(const World& world, const std::vector<double>& mine, size_t width,
                                   const std::function<int64_t(int64_t)>& records) const;
  // Each rank's scores (flat, ExampleScore::appendTo) of `records(i)` records per batch it ran,
  // every rank's in batch order.
  std::vector<ExampleScore> scoresInBatchOrder(const World& world, const std::vector<double>& mine,
                                               const std::function<int64_t(int64_t)>& records) const;
  HeldOutBatches batches_;
  struct Best {
    int64_t step;
    double loss;
  };
  std::optional<Best> best_;
  int since_best_ = 0;
};

}  // namespace mt
