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

// The layer blocks of the partitioned model (its block templates).
int64_t layerBlocks(const Trials& t) {
  auto templates = getModelFunction(t.module)->getAttrOfType<DenseI64ArrayAttr>(kTemplatesAttr);
  return templates ? templates.size() : 0;
}

// `knobs` keeping `limit` frozen weights on the device between steps (-1: all, 0: none).
Knobs keepingFrozen(Knobs knobs, int64_t limit) {
  knobs.keep_frozen = limit != 0;
  knobs.frozen_limit = limit;
  return knobs;
}

// The smallest arena of the plan under `knobs` keeping `limit` frozen weights; -1 if it fails.
int64_t arenaKeeping(const Trials& t, const Knobs& knobs, int64_t limit) {
  return trialArena(t.module, t.first, keepingFrozen(knobs, limit));
}

// The most frozen weights a streamed plan under `knobs` has room to keep, below `frozen` (all of
// them: `all_arena`, over the budget). An interpolation search over their count
// (mt-schedule-streamed keep-frozen-limit): the arena grows about linearly with the bytes kept,
// so a guess from the two ends of the bracket lands near the boundary; a guess that did not halve
// the bracket is followed by a bisection step. The arena does not grow strictly with the count
// (the placement's packing): a few more may fit above the count found.
int64_t frozenRoom(const Trials& t, const Knobs& knobs, int64_t frozen, int64_t all_arena) {
  const int64_t budget = t.options.device_mem;
  int64_t fit = 0, fail = frozen, fit_arena = arenaKeeping(t, knobs, 0), fail_arena = all_arena;
  if (fit_arena < 0 || fit_arena > budget) return 0;
  bool bisect = false;
  while (fail - fit > 1) {
    int64_t limit = fit + (fail - fit) / 2;
    if (!bisect && fail_arena > fit_arena)
      limit = std::clamp<int64_t>(
          fit + static_cast<int64_t>(double(budget - fit_arena) / double(fail_arena - fit_arena) * double(fail - fit)),
          fit + 1, fail - 1);
    const int64_t bracket = fail - fit, arena = arenaKeeping(t, knobs, limit);
    if (arena >= 0 && arena <= budget) {
      fit = limit, fit_arena = arena;
    } else {
      fail = limit;
      if (arena >= 0) fail_arena = arena;
    }
    bisect = !bisect && 2 * (fail - fit) > bracket;
  }
  return fit;
}

}  // namespace

int64_t tuneRecompute(const Trials& t, const Knobs& chosen, int64_t most) {
  const int64_t blocks = layerBlocks(t);
  const int64_t max_keep =
      most < 0 ? t.options.max_keep : t.options.max_keep < 0 ? most : std::min(most, t.options.max_keep);
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

// A plan's knobs and, once asked for, its price.
struct Try {
  Knobs knobs;
  std::optional<StepPrice> price;
  const StepPrice& priced(const Trials& t) {
    if (!price) price = pricedStep(t, knobs);
    return *price;
  }
};

// keepFrozenWherePays for the schedule `chosen` has; the plan taken, priced where a price chose it.
// `known_copying`: the plan copying them all, where known (else `chosen` with its recompute tuned).
Try keepSomeFrozen(const Trials& t, const Knobs& chosen, bool tunes_recompute, FrozenKeep& kept,
                   std::optional<Try> known_copying = std::nullopt) {
  const int64_t frozen = countFrozenParameters(getModelFunction(t.module));
  const int64_t budget = t.options.device_mem;
  const int64_t all_arena = budget > 0 ? arenaKeeping(t, chosen, -1) : 0;
  const bool priced = bool(t.options.step_price);
  // The plan copying them all, its recompute tuned: no plan keeping some keeps more blocks'
  // activations (the kept bytes take their room), so its tuned count bounds the others'.
  Try copying = known_copying ? *known_copying : Try{chosen};
  if (tunes_recompute && !known_copying) copying.knobs.keep = tuneRecompute(t, chosen);
  kept.most_kept = copying.knobs.keep;
  kept.room = -1;
  if (all_arena < 0 || all_arena > budget) {
    // Room for only some. Keeping them shortens the link's time alone: where the plan copying
    // them all is bound by compute, no plan keeping some is faster (and the search, a compile
    // per count tried, is spared).
    if (priced && copying.priced(t).computeBound()) {
      kept.room = 0;
      kept.compute_bound = true;
      return copying;
    }
    kept.room = chosen.schedule == Schedule::kResident ? 0 : frozenRoom(t, chosen, frozen, all_arena);
    if (kept.room == 0) return copying;
  }
  // The most that fit and, where blocks keep activations, half as many, each with the blocks
  // keeping their activations tuned to what is left; then the plan copying them all.
  const int64_t most = kept.room < 0 ? frozen : kept.room;
  std::vector<Try> tries{{keepingFrozen(chosen, kept.room)}};
  if (tunes_recompute && most / 2 > 0 && copying.knobs.keep > 0) tries.push_back({keepingFrozen(chosen, most / 2)});
  if (tunes_recompute) {
    int64_t bound = copying.knobs.keep;
    for (auto it = tries.rbegin(); it != tries.rend(); ++it) bound = it->knobs.keep = tuneRecompute(t, it->knobs, bound);
  }
  tries.push_back(copying);
  if (!priced) return tries.front();
  // Each priced: besides blocks keeping their activations, the kept bytes take room the memory
  // planner gives copies out to overlap the compute after them, so keeping more can be slower.
  size_t best = 0;
  for (size_t i = 1; i < tries.size(); ++i)
    if (tries[i].priced(t).step_us < tries[best].priced(t).step_us) best = i;
  kept.fewer_faster = best != 0;
  return tries[best];
}

}  // namespace

Knobs keepFrozenWherePays(const Trials& t, Knobs chosen, bool tunes_recompute, bool may_recompute, FrozenKeep& kept) {
  Try taken = keepSomeFrozen(t, chosen, tunes_recompute, kept);
  // Room for only some of the frozen weights in a resident or streamed plan: recomputing the
  // forwards frees the activations' bytes for more of them (a link-bound step: each kept weight
  // saves its copies), at the price of the forwards run twice; both priced.
  if (!may_recompute || chosen.schedule == Schedule::kStreamedRecompute || kept.room < 0 || kept.compute_bound ||
      !t.options.step_price)
    return taken.knobs;
  Knobs recomputing = chosen;
  recomputing.schedule = Schedule::kStreamedRecompute;
  // From the streamed plan: streamed-recompute with every block keeping its activations is that
  // plan (nothing recomputed), so it is the copying plan's tuning, found without a search.
  std::optional<Try> copying;
  if (chosen.schedule == Schedule::kStreamed) {
    const int64_t blocks = layerBlocks(t);
    if (t.options.max_keep < 0 || t.options.max_keep >= blocks) {
      copying = Try{recomputing};
      copying->knobs.keep = blocks;
    }
  }
  FrozenKeep recomputed;
  Try other = keepSomeFrozen(t, recomputing, /*tunes_recompute=*/true, recomputed, copying);
  if (!(other.priced(t).step_us < taken.priced(t).step_us)) return taken.knobs;
  kept = recomputed;
  kept.recompute = true;
  return other.knobs;
}

}  // namespace mt::stages
