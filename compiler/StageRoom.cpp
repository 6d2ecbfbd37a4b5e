// What the budget has room for once the schedule is chosen (compiler/StageTrials.h): blocks that
// keep their activations, and frozen weights kept on the device between steps, the two priced
// against each other where they compete for the same bytes: all frozen weights kept, some, none.
#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "compiler/StageTrials.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/PassUtils.h"

using namespace mlir;

namespace mt::stages {

namespace {

// Whether the stages after partition under `knobs` (a number of blocks keeping their
// activations) give a plan within the device budget and, with the activations offloaded (the
// kept ones then wait on the host), the host budget.
bool keepFits(ModuleOp module, size_t first, const Knobs& knobs, const StageOptions& options) {
  OwningOpRef<ModuleOp> trial = compileTrial(module, first, knobs);
  if (!trial || minimumArena(*trial) > options.device_mem) return false;
  return !knobs.offload || options.host_mem <= 0 || !options.host_bytes ||
         options.host_bytes(*trial) <= options.host_mem;
}

// The predicted step of the plan under `knobs` (StageOptions::step_price); infinite if it fails.
StepPrice pricedStep(const Trials& t, const Knobs& knobs) {
  OwningOpRef<ModuleOp> trial = compileTrial(t.module, t.first, knobs);
  return trial ? t.options.step_price(*trial) : StepPrice{};
}

// `knobs` keeping `limit` frozen weights on the device between steps (-1: all, 0: none).
Knobs keepingFrozen(Knobs knobs, int64_t limit) {
  knobs.keep_frozen = limit != 0;
  knobs.frozen_limit = limit;
  return knobs;
}

// Whether the plan under `knobs` keeping `limit` frozen weights fits the device budget.
bool fitsKeeping(const Trials& t, const Knobs& knobs, int64_t limit) {
  const int64_t arena = trialArena(t.module, t.first, keepingFrozen(knobs, limit));
  return arena >= 0 && arena <= t.options.device_mem;
}

// The most frozen weights a streamed plan under `knobs` has room to keep, by bisection over
// their count (mt-schedule-streamed keep-frozen-limit) below `frozen`, which does not fit.
int64_t frozenRoom(const Trials& t, const Knobs& knobs, int64_t frozen) {
  int64_t fit = 0, fail = frozen;
  while (fail - fit > 1) {
    const int64_t limit = (fit + fail) / 2;
    (fitsKeeping(t, knobs, limit) ? fit : fail) = limit;
  }
  return fit;
}

}  // namespace

int64_t tuneRecompute(const Trials& t, const Knobs& chosen) {
  auto templates = getModelFunction(t.module)->getAttrOfType<DenseI64ArrayAttr>(kTemplatesAttr);
  const int64_t blocks = templates ? templates.size() : 0;
  const int64_t max_keep = t.options.max_keep;
  int64_t fits = 0, fails = (max_keep >= 0 ? std::min(max_keep, blocks) : blocks) + 1;
  // Token-tiled blocks (long contexts) seldom have room to keep one block's activations: one
  // trial says so, instead of a bisection's worth of larger ones.
  if (getModelFunction(t.module)->hasAttr(kTokenTilesAttr) && fails > 1) {
    Knobs one = chosen;
    one.keep = 1;
    if (!keepFits(t.module, t.first, one, t.options)) return 0;
    fits = 1;
  }
  while (fails - fits > 1) {
    Knobs keeping = chosen;
    keeping.keep = (fits + fails) / 2;
    (keepFits(t.module, t.first, keeping, t.options) ? fits : fails) = keeping.keep;
  }
  return fits;
}

namespace {

// keepFrozenWherePays for the schedule `chosen` has.
Knobs keepSomeFrozen(const Trials& t, Knobs chosen, bool tunes_recompute, FrozenKeep& kept) {
  const int64_t frozen = countFrozenParameters(getModelFunction(t.module));
  std::optional<Knobs> copying;  // tuned, where already known
  if (t.options.device_mem <= 0 || fitsKeeping(t, chosen, -1)) {
    kept.room = -1;
  } else if (chosen.schedule == Schedule::kResident) {
    kept.room = 0;
  } else {
    // Room for only some. Keeping them shortens the link's time alone: where the plan copying
    // them all is not bound by the link, no plan keeping some is faster (and the search, a
    // compile per count tried, is spared).
    copying = chosen;
    if (tunes_recompute) copying->keep = tuneRecompute(t, *copying);
    kept.most_kept = copying->keep;
    if (t.options.step_price && !pricedStep(t, *copying).linkBound()) {
      kept.room = 0;
      kept.compute_bound = true;
      return *copying;
    }
    kept.room = frozenRoom(t, chosen, frozen);
  }
  if (kept.room == 0) {
    if (copying) return *copying;
    if (tunes_recompute) chosen.keep = tuneRecompute(t, chosen);
    return chosen;
  }
  if (!tunes_recompute) return keepingFrozen(chosen, kept.room);
  // The frozen weights the budget has room for, half as many, none: each with the blocks that
  // keep their activations tuned to what is left.
  const int64_t most = kept.room < 0 ? frozen : kept.room;
  std::vector<Knobs> tries{keepingFrozen(chosen, kept.room)};
  if (most / 2 > 0) tries.push_back(keepingFrozen(chosen, most / 2));
  tries.push_back(copying ? *copying : keepingFrozen(chosen, 0));
  for (Knobs& knobs : tries) {
    if (!knobs.keep_frozen && copying) continue;  // tuned above
    knobs.keep = tuneRecompute(t, knobs);
    kept.most_kept = std::max(kept.most_kept, knobs.keep);
  }
  if (tries.back().keep == tries.front().keep || !t.options.step_price) return tries.front();
  // Priced where fewer frozen weights kept let more blocks keep their activations (else the
  // plan keeping more is as fast or faster: the same recompute, fewer copies).
  size_t best = 0;
  double best_us = pricedStep(t, tries[0]).step_us;
  for (size_t i = 1; i < tries.size(); ++i) {
    if (tries[i].keep == tries[i - 1].keep) continue;
    const double step_us = pricedStep(t, tries[i]).step_us;
    if (step_us < best_us) best = i, best_us = step_us;
  }
  kept.fewer_faster = best != 0;
  return tries[best];
}

}  // namespace

Knobs keepFrozenWherePays(const Trials& t, Knobs chosen, bool tunes_recompute, bool may_recompute, FrozenKeep& kept) {
  Knobs streamed = keepSomeFrozen(t, chosen, tunes_recompute, kept);
  // Room for only some of the frozen weights in a streamed plan: recomputing the forwards frees
  // the activations' bytes for more of them (a link-bound step: each kept weight saves its two
  // copies), at the price of the forwards run twice; both priced.
  if (!may_recompute || chosen.schedule != Schedule::kStreamed || kept.room < 0 || kept.compute_bound ||
      !t.options.step_price)
    return streamed;
  Knobs recomputing = chosen;
  recomputing.schedule = Schedule::kStreamedRecompute;
  FrozenKeep recomputed;
  Knobs other = keepSomeFrozen(t, recomputing, /*tunes_recompute=*/true, recomputed);
  if (!(pricedStep(t, other).step_us < pricedStep(t, streamed).step_us)) return streamed;
  kept = recomputed;
  kept.recompute = true;
  return other;
}

}  // namespace mt::stages
