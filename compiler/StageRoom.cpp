// What the budget has room for once the schedule is chosen (compiler/StageTrials.h): blocks that
// keep their activations, and frozen weights kept on the device between steps, the two priced
// against each other where they compete for the same bytes.
#include <algorithm>
#include <limits>

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

// The predicted step of the plan under `knobs` (StageOptions::step_micros); infinite if it fails.
double pricedStep(const Trials& t, const Knobs& knobs) {
  OwningOpRef<ModuleOp> trial = compileTrial(t.module, t.first, knobs);
  return trial ? t.options.step_micros(*trial) : std::numeric_limits<double>::infinity();
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

Knobs keepFrozenWherePays(const Trials& t, Knobs chosen, bool tunes_recompute, bool& copying_faster,
                          int64_t& most_kept) {
  Knobs keeping = chosen;
  keeping.keep_frozen = true;
  const int64_t budget = t.options.device_mem;
  const int64_t arena = budget > 0 ? trialArena(t.module, t.first, keeping) : 0;
  if (arena < 0 || arena > budget) {
    if (tunes_recompute) chosen.keep = tuneRecompute(t, chosen);
    return chosen;
  }
  if (!tunes_recompute) return keeping;
  keeping.keep = tuneRecompute(t, keeping);
  Knobs copying = chosen;
  copying.keep = tuneRecompute(t, copying);
  most_kept = std::max(keeping.keep, copying.keep);
  if (copying.keep == keeping.keep || !t.options.step_micros) return keeping;
  copying_faster = pricedStep(t, keeping) > pricedStep(t, copying);
  return copying_faster ? copying : keeping;
}

}  // namespace mt::stages
