#include "compiler/Stages.h"

#include "compiler/StageTrials.h"

#include <algorithm>
#include <fmt/format.h>
#include "mlir/Pass/PassManager.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
using namespace stages;
namespace {


// Whether the LM head's weight is the table the tokens are looked up in (tied).
bool tiedHead(func::FuncOp func) {
  Value head;
  func.walk([&](Operation* op) {
    if (!isa<SoftmaxXentOp, SequenceLogprobOp>(op)) return;  // the loss (next-token, DPO)
    if (auto product = uncappedLogits(op->getOperand(0)).getDefiningOp<MatmulOp>()) head = product.getRhs();
  });
  bool tied = false;
  const BlockArgument tokens = tokensArgument(func);
  func.walk([&](EmbeddingOp lookup) { tied |= head && tokens && lookup.getTable() == head && lookup.getIds() == tokens; });
  return tied;
}

// A stage's place in the pipeline (Stage's order).
constexpr size_t indexOf(Stage stage) { return static_cast<size_t>(stage); }

// The passes of stage `stage` under `knobs` (possibly none).
void addStagePasses(mlir::PassManager& pm, Stage stage, const Knobs& knobs) {
  switch (stage) {
    case Stage::kInput:
      return;
    case Stage::kFuse:
      return pm.addPass(createFusePass());
    case Stage::kAttachLoss: {
      AttachLossPassOptions options;
      options.objective = knobs.loss.objective;
      options.beta = knobs.loss.dpo_beta;
      options.dpoLoss = knobs.loss.dpo_loss;
      options.labelSmoothing = knobs.loss.dpo_label_smoothing;
      options.simpoGamma = knobs.loss.simpo_gamma.value_or(kDefaultSimpoGamma);
      options.discopopTau = knobs.loss.discopop_tau.value_or(kDefaultDiscopopTau);
      options.rpoAlpha = knobs.loss.nllWeight();
      options.desirableWeight = knobs.loss.desirable_weight;
      options.undesirableWeight = knobs.loss.undesirable_weight;
      options.centerRewards = knobs.loss.center_rewards;
      return pm.addPass(createAttachLossPass(options));
    }
    case Stage::kTileTokens: {
      if (knobs.token_tiles <= 1) return;
      TileTokensPassOptions options;
      options.tiles = knobs.token_tiles;
      options.head = knobs.vocab_chunks <= 1;  // a head split by vocabulary (--vocab-chunks) is not tiled
      return pm.addPass(createTileTokensPass(options));
    }
    case Stage::kAutodiff:
      return pm.addPass(createAutodiffPass());
    case Stage::kPartition:
      return pm.addPass(createPartitionPass());
    case Stage::kHostEmbedding:
      if (knobs.hostEmbedding()) pm.addPass(createHostEmbeddingPass());
      return;
    case Stage::kSplitVocab: {
      if (knobs.vocab_chunks <= 1) return;
      SplitVocabPassOptions options;
      options.chunks = knobs.vocab_chunks;
      return pm.addPass(createSplitVocabPass(options));
    }
    case Stage::kSplitExperts: {
      if (knobs.expert_groups <= 1) return;
      SplitExpertsPassOptions options;
      options.groups = knobs.expert_groups;
      return pm.addPass(createSplitExpertsPass(options));
    }
    case Stage::kRecompute: {
      if (knobs.schedule != Schedule::kStreamedRecompute) return;
      RecomputePassOptions options;
      options.keep = knobs.keep;
      return pm.addPass(createRecomputePass(options));
    }
    case Stage::kSchedule: {
      ScheduleStreamedPassOptions options;
      options.update = knobs.update;
      options.pinShared = knobs.pin_shared;
      options.keepFrozen = knobs.keep_frozen;
      options.keepFrozenLimit = knobs.frozen_limit;
      ScheduleResidentPassOptions resident;
      resident.keepFrozen = knobs.keep_frozen;
      pm.addPass(knobs.schedule == Schedule::kResident ? createScheduleResidentPass(resident)
                                                       : createScheduleStreamedPass(options));
      if (knobs.offload) pm.addPass(createOffloadActivationsPass());
      if (knobs.bf16_staging) pm.addPass(createStageBf16Pass());
      if (knobs.precision == ComputePrecision::kBf16) pm.addPass(createMixedPrecisionPass());
      return;
    }
    case Stage::kMemory: {
      PlanMemoryPassOptions options;
      options.budget = knobs.budget;
      options.landDeferred = knobs.land_gradients && knobs.schedule != Schedule::kResident;
      return pm.addPass(createPlanMemoryPass(options));
    }
  }
}

// Runs the stages from index `first` (inclusive) to `last` (unset: to the end).
bool runFrom(ModuleOp module, size_t first, std::optional<Stage> last, const Knobs& knobs,
             std::optional<Stage>& failed_stage) {
  for (size_t i = first; i < kStageCount; ++i) {
    const Stage stage = static_cast<Stage>(i);
    PassManager pm(module.getContext());
    addStagePasses(pm, stage, knobs);
    if (mlir::failed(pm.run(module))) {
      failed_stage = stage;
      return false;
    }
    if (last == stage) return true;
  }
  return true;
}


}  // namespace

namespace stages {

// The stages after partition run on a copy of `module` under `knobs` (without a budget); null
// if they fail.
OwningOpRef<ModuleOp> compileTrial(ModuleOp module, size_t first, const Knobs& knobs) {
  OwningOpRef<ModuleOp> trial = module.clone();
  std::optional<Stage> ignored;
  if (!runFrom(*trial, first, std::nullopt, knobs, ignored)) return nullptr;
  return trial;
}

// The smallest arena that works for a compiled trial.
int64_t minimumArena(ModuleOp trial) {
  return getModelFunction(trial)->getAttrOfType<IntegerAttr>(kArenaMinBytesAttr).getInt();
}

// The smallest arena the stages after partition give `module` under `knobs`, or -1 if they fail.
int64_t trialArena(ModuleOp module, size_t first, const Knobs& knobs) {
  OwningOpRef<ModuleOp> trial = compileTrial(module, first, knobs);
  return trial ? minimumArena(*trial) : -1;
}

}  // namespace stages

namespace {

// Whether --expert-groups suits the model (0, 1, or at most its experts); else diagnosed, and
// result.failed set.
bool expertGroupsValid(ModuleOp module, const StageOptions& options, StageResult& result) {
  if (options.expert_groups < 0) {
    getModelFunction(module).emitError("--expert-groups must not be negative (0: as the budget needs), not ")
        << options.expert_groups;
    result.failed = Stage::kSplitExperts;
    return false;
  }
  if (const int64_t experts = mostExperts(module); options.expert_groups > 1 && options.expert_groups > experts) {
    if (experts == 0)
      getModelFunction(module).emitError("--expert-groups ") << options.expert_groups
          << ": the model has no mixture of experts to split; drop the flag";
    else
      getModelFunction(module).emitError("--expert-groups must be between 0 (as the budget needs) and the experts of a "
                                         "layer (")
          << experts << "), not " << options.expert_groups;
    result.failed = Stage::kSplitExperts;
    return false;
  }
  return true;
}

// A forward-only function (mtgen's plans, an ONNX evaluation): resident where the device budget
// holds all the weights (then kept on the device between runs), else streamed — partitioned
// into layer blocks, the weights copied in per block, the experts in groups where even that does
// not fit (or --expert-groups says) — or as --schedule says. No backward: nothing to recompute.
void runForwardOnly(ModuleOp module, const StageOptions& options, StageResult& result) {
  if (result.schedule == Schedule::kStreamedRecompute) {
    getModelFunction(module).emitError("a forward-only plan has no backward to recompute for: use --schedule "
                                       "streamed (or resident)");
    result.failed = Stage::kSchedule;
    return;
  }
  Knobs knobs{Schedule::kResident, 0, UpdateKind::kDeferred};
  knobs.precision = options.precision;
  knobs.bf16_staging = options.stream_dtype == StreamDtype::kBf16 || knobs.precision == ComputePrecision::kBf16;
  const size_t schedule = indexOf(Stage::kSchedule);
  if (!options.schedule && options.device_mem > 0) {
    const int64_t resident = trialArena(module, schedule, knobs);
    result.arena_by_schedule.push_back({Schedule::kResident, resident});
    if (resident < 0 || resident > options.device_mem) result.schedule = Schedule::kStreamed;
  }
  if (!expertGroupsValid(module, options, result)) return;
  if (options.expert_groups > 1) {  // the experts stream in groups: a streamed schedule
    if (options.schedule == Schedule::kResident) {
      getModelFunction(module).emitError("--expert-groups streams the experts in groups: it needs --schedule "
                                         "streamed, not resident");
      result.failed = Stage::kSchedule;
      return;
    }
    result.schedule = Schedule::kStreamed;
  }
  knobs.schedule = result.schedule;
  if (result.schedule == Schedule::kStreamed) {
    // Weights too large for the device even streamed: the experts in groups, the fewest that fit.
    knobs.expert_groups = std::max<int64_t>(options.expert_groups, 1);
    const int64_t experts = options.expert_groups == 0 && options.device_mem > 0 ? mostExperts(module) : 0;
    const size_t partition = indexOf(Stage::kPartition);
    int64_t streamed = -1;
    if (experts > 1) {  // a trial that fails says so in the compile that follows
      ScopedDiagnosticHandler quiet(module.getContext(), [](Diagnostic&) { return success(); });
      streamed = trialArena(module, partition, knobs);
    }
    if (streamed > options.device_mem) {
      const ChunkSearch search = searchSplit(module, partition, knobs, &Knobs::expert_groups,
                                             std::min(experts, kMaxExpertGroups), options.device_mem);
      if (search.fitting || (search.smallest_arena >= 0 && search.smallest_arena < streamed))
        knobs.expert_groups = search.chosen();
    }
    result.expert_groups = knobs.expert_groups;
  }
  knobs.budget = options.device_mem;
  // Streaming needs the layer blocks; a resident plan runs as one.
  const size_t first = result.schedule == Schedule::kStreamed ? indexOf(Stage::kPartition) : schedule;
  if (options.last && indexOf(*options.last) < first) return;
  runFrom(module, first, options.last, knobs, result.failed);
}

// The error for a budget no plan fits: the most frugal plan (`frugal`, `arena` bytes) compiled
// once more against the budget, its memory planner's notes saying what fills the device.
void explainNoFit(const Trials& t, Knobs frugal, int64_t arena, Schedule schedule) {
  frugal.budget = t.options.device_mem;
  std::vector<std::string> notes;
  {
    ScopedDiagnosticHandler collect(t.module.getContext(), [&](Diagnostic& d) {
      for (Diagnostic& note : d.getNotes()) notes.push_back(note.str());
      return success();
    });
    OwningOpRef<ModuleOp> trial = t.module.clone();
    std::optional<Stage> ignored;
    runFrom(*trial, t.first, std::nullopt, frugal, ignored);
  }
  InFlightDiagnostic diag = getModelFunction(t.module).emitError("the model needs at least ")
      << formatBytesExact(arena) << " of device memory even with the " << scheduleName(schedule)
      << " schedule (weights streamed per block, activations recomputed"
      << (frugal.expert_groups > 1 ? fmt::format(", the experts in {} groups", frugal.expert_groups) : "")
      << (frugal.vocab_chunks > 1 ? fmt::format(", the vocabulary in {} chunks", frugal.vocab_chunks) : "")
      << (frugal.offload ? ", kept activations offloaded to the host" : "")
      << (frugal.token_tiles > 1 ? fmt::format(", each layer block in {} token tiles", frugal.token_tiles) : "")
      << "); the budget is "
      << formatBytesExact(t.options.device_mem) << ": raise --device-mem to at least " << arena
      << " bytes or make the batch or sequence smaller";
  for (const std::string& note : notes) diag.attachNote() << note;
}

// An unset schedule under a budget: the first of kSchedules whose plan fits, else the most
// frugal one with the vocabulary split, the activations offloaded and/or the experts in groups.
// Sets result.failed (diagnosed unless the options say not to explain) when none fits.
void chooseSchedule(const Trials& t, StageResult& result) {
  const StageOptions& options = t.options;
  for (size_t i = options.first_schedule; i < std::size(kSchedules); ++i) {
    const Schedule schedule = kSchedules[i];
    // The resident schedule keeps everything on the device: no update on arrival, nothing offloaded.
    if ((options.update == UpdateKind::kOnArrival || options.offload == Offload::kOn) && schedule == Schedule::kResident)
      continue;
    Knobs knobs = t.defaults;
    knobs.schedule = schedule;
    knobs.offload = options.offload == Offload::kOn && schedule != Schedule::kResident;
    const int64_t arena = trialArena(t.module, t.first, knobs);
    if (arena < 0) continue;
    result.arena_by_schedule.emplace_back(schedule, arena);
    if (arena <= options.device_mem) {
      result.schedule = schedule;
      result.offload = knobs.offload;
      return;
    }
  }
  if (result.arena_by_schedule.empty()) {  // every trial failed: its diagnostics say why
    result.failed = Stage::kSchedule;
    return;
  }
  const auto [frugalest, arena] = result.arena_by_schedule.back();
  Knobs base = t.defaults;
  base.schedule = frugalest;
  base.offload = options.offload == Offload::kOn;
  const FrugalFit fit =
      fitFrugal(t.module, t.first, base, arena, options.device_mem, t.vocab, t.split_if_needed, t.experts_if_needed,
                options.offload == Offload::kAuto && frugalest != Schedule::kResident, options.offload_first);
  if (fit.fits) {
    result.schedule = frugalest;
    result.vocab_chunks = fit.chosen.vocab_chunks;
    result.expert_groups = fit.chosen.expert_groups;
    result.offload = fit.chosen.offload;
    return;
  }
  result.arena_by_schedule.back().second = result.smallest_arena = fit.smallest_arena;
  result.failed = Stage::kMemory;
  if (options.explain_failure) explainNoFit(t, fit.smallest, fit.smallest_arena, frugalest);
}

// A streamed schedule the user chose, under a budget: the vocabulary split, the offload and the
// experts in groups if it needs them.
void fitChosenSchedule(const Trials& t, StageResult& result) {
  Knobs base = t.defaults;
  base.schedule = result.schedule;
  base.offload = result.offload;
  const int64_t arena = trialArena(t.module, t.first, base);
  if (arena <= t.options.device_mem) return;
  const FrugalFit fit = fitFrugal(t.module, t.first, base, arena, t.options.device_mem, t.vocab, t.split_if_needed,
                                  t.experts_if_needed, t.options.offload == Offload::kAuto);
  if (fit.fits)
    result.vocab_chunks = fit.chosen.vocab_chunks, result.expert_groups = fit.chosen.expert_groups,
    result.offload = fit.chosen.offload;
}

// The stages from tile-tokens on, the token-wise work in `tiles` tiles: the schedule, the
// vocabulary split and the offload chosen by trial compiles for the budget, then what the budget
// has room for (pinned shared weights, blocks that keep their activations).
StageResult compileTiled(ModuleOp module, const StageOptions& options, int64_t tiles) {
  StageResult result;
  result.schedule = options.schedule.value_or(Schedule::kResident);
  result.token_tiles = std::max<int64_t>(tiles, 1);
  const size_t partition = indexOf(Stage::kPartition);
  const bool stops_early = options.last && indexOf(*options.last) <= partition;
  // No budget to choose by: a streamed schedule where the resident one cannot serve.
  if ((options.update == UpdateKind::kOnArrival || options.offload == Offload::kOn) && !options.schedule)
    result.schedule = Schedule::kStreamed;
  Knobs early{result.schedule, 0, options.update};
  early.token_tiles = result.token_tiles;
  early.vocab_chunks = std::max<int64_t>(options.vocab_chunks, 1);
  const std::optional<Stage> until = stops_early ? options.last : Stage::kPartition;
  if (!runFrom(module, indexOf(Stage::kTileTokens), until, early, result.failed) ||
      stops_early)
    return result;
  int64_t batch = 0, seq = 0, vocab = 0;
  modelShape(module, batch, seq, vocab);
  if (options.vocab_chunks < 0 || (options.vocab_chunks > 1 && options.vocab_chunks > vocab)) {
    getModelFunction(module).emitError("--vocab-chunks must be between 0 (as the budget needs) and the vocabulary (")
        << vocab << "), not " << options.vocab_chunks;
    result.failed = Stage::kSplitVocab;
    return result;
  }
  result.vocab_chunks = std::max<int64_t>(options.vocab_chunks, 1);
  if (!expertGroupsValid(module, options, result)) return result;
  result.expert_groups = std::max<int64_t>(options.expert_groups, 1);
  result.offload = options.offload == Offload::kOn && result.schedule != Schedule::kResident;

  // The schedule, the vocabulary split, the offload and the expert groups: chosen by trial
  // compiles for the budget.
  // (A reward model's head has one output: nothing to split.)
  const bool may_split =
      options.vocab_chunks == 0 && options.device_mem > 0 && options.loss.objective != LossObjective::kReward;
  Trials trials{module, partition + 1, options, {}, vocab, may_split,
                options.expert_groups == 0 && options.device_mem > 0 ? mostExperts(module) : 0};
  Knobs& defaults = trials.defaults;
  defaults.update = options.update;
  defaults.vocab_chunks = result.vocab_chunks;
  defaults.expert_groups = result.expert_groups;
  defaults.embedding = options.embedding;
  defaults.tied_head = tiedHead(getModelFunction(module));
  defaults.precision = options.precision;
  defaults.bf16_staging = options.stream_dtype == StreamDtype::kBf16 || defaults.precision == ComputePrecision::kBf16;
  defaults.token_tiles = result.token_tiles;  // applied before partition; named in the errors
  defaults.land_gradients = options.land_gradients;
  if (!options.schedule && options.device_mem > 0) chooseSchedule(trials, result);
  else if (result.schedule != Schedule::kResident && options.device_mem > 0) fitChosenSchedule(trials, result);
  if (result.failed) return result;
  if (options.offload == Offload::kOn && result.schedule == Schedule::kResident) {  // asked for, or what fits
    getModelFunction(module).emitError("offloading activations needs a streamed schedule, not the resident one "
                                       "(which keeps everything on the device): give --schedule streamed-recompute "
                                       "(or drop --offload-activations on)");
    result.failed = Stage::kSchedule;
    return result;
  }

  // Then what the budget has room for: shared weights pinned, blocks that keep their activations.
  Knobs chosen = defaults;
  chosen.schedule = result.schedule;
  chosen.vocab_chunks = result.vocab_chunks;
  chosen.expert_groups = result.expert_groups;
  chosen.offload = result.offload;
  result.host_embedding = chosen.hostEmbedding();
  // Weights shared by blocks far apart (a tied embedding and LM head) stay on the device when
  // the budget has room: copied once per step instead of once per block region.
  if (result.schedule != Schedule::kResident && !sharedParameters(getModelFunction(module)).empty()) {
    Knobs pinned = chosen;
    pinned.pin_shared = true;
    const int64_t arena = options.device_mem > 0 ? trialArena(module, partition + 1, pinned) : 0;
    result.pin_shared = chosen.pin_shared = arena >= 0 && arena <= options.device_mem;
  }
  const bool tunes_recompute =
      result.schedule == Schedule::kStreamedRecompute && options.device_mem > 0 && options.tune_recompute;
  result.frozen_weights = countFrozenParameters(getModelFunction(module));
  if (options.keep_frozen == KeepFrozen::kAuto && result.frozen_weights > 0) {
    FrozenKeep kept;
    const bool may_recompute = !options.schedule && options.device_mem > 0 && options.tune_recompute;
    chosen = keepFrozenWherePays(trials, chosen, tunes_recompute, may_recompute, kept);
    if (kept.recompute) result.switched_from = result.schedule;
    result.schedule = chosen.schedule;
    result.keeping_fewer_faster = kept.fewer_faster;
    result.frozen_compute_bound = kept.compute_bound;
    result.recompute_keep_most = kept.most_kept;
  } else if (tunes_recompute) {
    chosen.keep = tuneRecompute(trials, chosen);
  }
  result.keep_frozen = chosen.keep_frozen;
  result.recompute_keep = chosen.keep;
  result.recompute_keep_most = std::max(result.recompute_keep_most, chosen.keep);
  chosen.budget = options.device_mem;
  if (!runFrom(module, partition + 1, options.last, chosen, result.failed) && result.failed == Stage::kMemory)
    if (auto arena = getModelFunction(module)->getAttrOfType<IntegerAttr>(kArenaMinBytesAttr))
      result.smallest_arena = arena.getInt();
  if (result.keep_frozen) result.frozen_kept = countKeptFrozenParameters(getModelFunction(module));
  return result;
}

// The module's contents replaced by `source`'s (moved).
void replaceModule(ModuleOp module, ModuleOp source) {
  module.getBody()->clear();
  module.getBody()->getOperations().splice(module.getBody()->end(), source.getBody()->getOperations());
}

// The tile counts mt-tile-tokens takes for (batch, seq), increasing, each at least twice the one
// before: tiles of a multiple of 32 tokens, inside one sequence or whole sequences.
std::vector<int64_t> tileCounts(int64_t batch, int64_t seq) {
  std::vector<int64_t> counts;
  const int64_t rows = batch * seq;
  for (int64_t n = 2; n <= rows / 32; ++n) {
    const int64_t tile = rows % n == 0 ? rows / n : 0;
    if (tile > 0 && tile % 32 == 0 && (seq % tile == 0 || tile % seq == 0) && (counts.empty() || n >= 2 * counts.back()))
      counts.push_back(n);
  }
  return counts;
}

// --token-tiles auto under a budget: untiled when that fits; else the fewest tiles (doubling)
// whose plan fits, searched while more tiles still shrink the smallest arena; else the error of
// the most frugal one tried. `module` has its loss attached; with StageOptions::last (mtc
// --emit), the trials still compile to the end, and the count found compiles to that stage.
StageResult searchTokenTiles(ModuleOp module, const StageOptions& options) {
  OwningOpRef<ModuleOp> untiled = module.clone();
  // Untiled as asked (kept if it fits); the tile counts only to see whether they fit. Tiles save
  // memory only where they are recomputed, so their trials start at streamed-recompute, and try
  // the offload before the vocabulary split alone (what long contexts need); the final compile
  // searches as asked.
  StageOptions quiet = options, trial = options, tiled = options;
  quiet.last = trial.last = std::nullopt;
  quiet.explain_failure = trial.explain_failure = false;
  trial.tune_recompute = false;
  trial.offload_first = true;
  const size_t recomputing = static_cast<size_t>(
      std::find(std::begin(kSchedules), std::end(kSchedules), Schedule::kStreamedRecompute) - std::begin(kSchedules));
  trial.first_schedule = tiled.first_schedule = std::max(options.first_schedule, recomputing);
  auto attempt = [&](ModuleOp m, int64_t tiles) {
    ScopedDiagnosticHandler silent(m.getContext(), [](Diagnostic&) { return success(); });
    return compileTiled(m, tiles == 1 ? quiet : trial, tiles);
  };
  OwningOpRef<ModuleOp> whole = options.last ? untiled->clone() : OwningOpRef<ModuleOp>();
  StageResult result = attempt(whole ? *whole : module, 1);
  if (result.failed != Stage::kMemory) {
    if (!result.failed && !options.last) return result;
    replaceModule(module, *untiled);  // another failure: once more, saying why (or to options.last)
    return compileTiled(module, options, 1);
  }
  int64_t batch = 0, seq = 0, vocab = 0;
  modelShape(*untiled, batch, seq, vocab);
  int64_t frugal = 1, frugal_arena = result.smallest_arena;
  for (int64_t tiles : tileCounts(batch, seq)) {
    OwningOpRef<ModuleOp> trial = untiled->clone();
    const StageResult tried = attempt(*trial, tiles);
    if (!tried.failed) {
      frugal = tiles;
      break;
    }
    if (tried.failed != Stage::kMemory || tried.smallest_arena < 0 ||
        (frugal_arena >= 0 && tried.smallest_arena >= frugal_arena))
      break;
    frugal = tiles, frugal_arena = tried.smallest_arena;
  }
  // The fitting tile count compiled as asked (or the most frugal one, failing with its reasons).
  replaceModule(module, *untiled);
  return compileTiled(module, frugal > 1 ? tiled : options, frugal);
}

}  // namespace

StageResult runStages(ModuleOp module, const StageOptions& options) {
  StageResult result;
  result.schedule = options.schedule.value_or(Schedule::kResident);
  if (options.last == Stage::kInput) return result;
  func::FuncOp func = getModelFunction(module);
  if (func && isForwardOnly(func)) {
    if (options.token_tiles > 1) {
      func.emitError("--token-tiles is for training plans: a forward-only plan keeps no activations for a backward "
                     "(drop --token-tiles)");
      result.failed = Stage::kTileTokens;
      return result;
    }
    runForwardOnly(module, options, result);
    return result;
  }
  if (options.update == UpdateKind::kOnArrival && options.schedule == Schedule::kResident) {
    if (func) func.emitError("the on-arrival update needs a streamed schedule (the resident one copies every "
                             "gradient out at the end of the step): use --schedule streamed or streamed-recompute");
    result.failed = Stage::kSchedule;
    return result;
  }
  if (options.token_tiles < 0) {
    if (func) func.emitError("--token-tiles must be 0 (as the budget needs), 1 (never) or a tile count, not ")
                  << options.token_tiles;
    result.failed = Stage::kTileTokens;
    return result;
  }
  // fuse and attach-loss, whatever the tiles.
  const size_t tiling = indexOf(Stage::kTileTokens);
  const bool stops_early = options.last && indexOf(*options.last) < tiling;
  const std::optional<Stage> until = stops_early ? options.last : Stage::kAttachLoss;
  Knobs attach{result.schedule, 0, options.update};
  attach.loss = options.loss;
  if (!runFrom(module, indexOf(Stage::kFuse), until, attach, result.failed) || stops_early)
    return result;
  // Tiles where asked, or searched where the budget may need them (--emit of a stage after the
  // tiles shows the count the plan would take).
  const bool search = options.token_tiles == 0 && options.device_mem > 0;
  return search ? searchTokenTiles(module, options) : compileTiled(module, options, std::max<int64_t>(options.token_tiles, 1));
}

const char* scheduleName(Schedule schedule) {
  switch (schedule) {
    case Schedule::kResident: return "resident";
    case Schedule::kStreamed: return "streamed";
    case Schedule::kStreamedRecompute: return "streamed-recompute";
  }
  return "?";
}


void modelShape(ModuleOp module, int64_t& batch, int64_t& seq, int64_t& vocab) {
  bool scored = false;  // a reward model's: one score per token
  module.walk([&](Operation* op) {
    if (!isa<SoftmaxXentOp, SequenceLogprobOp, RowScoreOp>(op)) return;  // the loss (next-token, DPO, reward)
    auto logits = cast<RankedTensorType>(op->getOperand(0).getType()).getShape();
    vocab = logits.back();
    batch = logits.size() >= 3 ? logits[0] : 1;
    seq = logits.size() >= 2 ? logits[logits.size() - 2] : 1;
    scored = isa<RowScoreOp>(op);
  });
  // A reward model's vocabulary is its token embedding's rows: the table its tokens are looked up
  // in (not GPT-2's table of positions), or, on the host, the one its tokens' rows come from.
  if (func::FuncOp func = getModelFunction(module); scored && func) {
    const BlockArgument tokens = tokensArgument(func);
    func.walk([&](EmbeddingOp op) {
      Value ids = op.getIds();
      if (auto copy = ids.getDefiningOp<H2DOp>()) ids = copy.getInput();  // the tokens' copy to the device
      if (tokens && ids == tokens) vocab = cast<RankedTensorType>(op.getTable().getType()).getDimSize(0);
    });
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto table = func.getArgAttrOfType<StringAttr>(i, kEmbeddedTokensAttr))
        if (BlockArgument param = parameterNamed(func, table.getValue()))
          vocab = cast<RankedTensorType>(param.getType()).getDimSize(0);
  }
  module.walk([&](XentTileOp op) { vocab = op.getLogits().getType().getShape().back(); });  // a tiled head
  // The loss over vocabulary chunks (mt-split-vocab): next-token, DPO.
  auto chunked = [&](Value targets_value, int64_t chunked_vocab) {
    auto targets = cast<RankedTensorType>(targets_value.getType()).getShape();
    vocab = chunked_vocab;
    batch = targets.size() >= 2 ? targets[0] : 1;
    seq = targets.empty() ? 1 : targets.back();
  };
  module.walk([&](XentFinishOp op) { chunked(op.getTargets(), op.getVocab()); });
  module.walk([&](SequenceLogprobFinishOp op) { chunked(op.getTargets(), op.getVocab()); });
  // A forward-only model's vocabulary: the last dimension of its output "logits".
  if (func::FuncOp func = getModelFunction(module); func && isForwardOnly(func))
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, kOutputAttr); name && name.getValue() == "logits")
        if (auto type = dyn_cast<RankedTensorType>(func.getResultTypes()[i]); type && type.getRank() >= 1)
          vocab = type.getShape().back();
  // The token ids' (batch, seq) where the model has them: logits may be flattened.
  if (func::FuncOp func = getModelFunction(module))
    if (BlockArgument tokens = tokensArgument(func))
      if (auto type = dyn_cast<RankedTensorType>(tokens.getType()); type && type.getRank() == 2)
        batch = type.getDimSize(0), seq = type.getDimSize(1);
}

}  // namespace mt
