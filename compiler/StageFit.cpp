// The splits a budget may need (the LM head's vocabulary, the activations offloaded, the experts
// in groups), searched by trial compiles (compiler/StageTrials.h).
#include <algorithm>

#include "compiler/StageTrials.h"
#include "mlir/IR/Diagnostics.h"
#include "passes/PassUtils.h"

using namespace mlir;

namespace mt::stages {

ChunkSearch searchSplit(ModuleOp module, size_t first, Knobs knobs, int64_t Knobs::*knob, int64_t most,
                        int64_t budget) {
  ScopedDiagnosticHandler quiet(module.getContext(), [](Diagnostic&) { return success(); });
  ChunkSearch found;
  for (int64_t pieces = 2; pieces <= most; pieces *= 2) {
    knobs.*knob = pieces;
    const int64_t arena = trialArena(module, first, knobs);
    if (arena < 0 || (found.smallest_arena >= 0 && arena >= found.smallest_arena)) break;
    if (found.smallest_arena < 0 || arena < found.smallest_arena)
      found.smallest_arena = arena, found.smallest_chunks = pieces;
    if (arena <= budget) {
      found.fitting = pieces, found.fitting_arena = arena;
      break;
    }
  }
  return found;
}


int64_t mostExperts(ModuleOp module) {
  int64_t most = 0;
  module.walk([&](GroupedMatmulOp op) {
    most = std::max(most, cast<RankedTensorType>(op.getWeight().getType()).getDimSize(0));
  });
  return most;
}

FrugalFit fitFrugal(ModuleOp module, size_t first, Knobs base, int64_t base_arena, int64_t budget, int64_t vocab,
                    bool split, int64_t experts, bool offload, bool offload_first) {
  constexpr int64_t kMaxChunks = 1024;  // vocabulary chunks: each a block of the plan
  FrugalFit fit;
  fit.smallest = base, fit.smallest_arena = base_arena;
  auto consider = [&](const Knobs& knobs, int64_t arena) {
    if (arena >= 0 && (fit.smallest_arena < 0 || arena < fit.smallest_arena))
      fit.smallest = knobs, fit.smallest_arena = arena;
    if (arena >= 0 && arena <= budget && !fit.fits) fit.fits = true, fit.chosen = knobs;
    return fit.fits;
  };
  // Tries the split by `knob` on `knobs`: the fewest pieces that fit, else the smallest arena's.
  auto trySplit = [&](Knobs knobs, int64_t Knobs::*knob, int64_t most) {
    const ChunkSearch search = searchSplit(module, first, knobs, knob, most, budget);
    if (search.smallest_arena < 0 || (fit.smallest_arena >= 0 && search.smallest_arena >= fit.smallest_arena &&
                                      !search.fitting))
      return false;
    knobs.*knob = search.chosen();
    return consider(knobs, search.chosenArena());
  };
  auto trySplitVocab = [&](Knobs knobs) { return trySplit(knobs, &Knobs::vocab_chunks, std::min(vocab, kMaxChunks)); };
  if (split && !(offload && offload_first) && trySplitVocab(base)) return fit;
  if (offload) {
    Knobs offloaded = base;
    offloaded.offload = true;
    if (consider(offloaded, trialArena(module, first, offloaded))) return fit;
    if (split && trySplitVocab(offloaded)) return fit;
  }
  // Last the experts in groups (with recompute their weights cross the link once more a step), on
  // top of what shrank the arena most.
  if (experts > 1) trySplit(fit.smallest, &Knobs::expert_groups, std::min(experts, kMaxExpertGroups));
  return fit;
}

}  // namespace mt::stages
