#include "compiler/BatchSearch.h"
#include "compiler/Summary.h"
#include "compiler/TrainableParams.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <set>
#include <vector>

#include "compiler/EmitHostTensors.h"
#include "compiler/Emitter.h"
#include "mlir/IR/Diagnostics.h"
#include "models/BuiltinModels.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/plan_queries.h"

using namespace mlir;

namespace mt {
namespace {

// The host bytes of the plan `module` (through every stage) emits — its host tensors, built as
// the emitter builds them, without the instructions (the costly part of an emit); INT64_MAX if
// they cannot be placed.
int64_t moduleHostBytes(ModuleOp module, int64_t ranks, int64_t ranks_per_host) {
  plan::Plan plan;
  PlanStats stats;
  HostTensors hosts;
  func::FuncOp func = getModelFunction(module);
  if (!func || failed(addHostTensors(func, plan, stats, hosts))) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(hostBytesPerHost(plan, ranks, ranks_per_host));
}

// Whether `o` keeps some parameters out of training (mtc --frozen, --trainable, LoRA's base).
bool freezesWeights(const CompileOptions& o) {
  return o.frozen || o.trainable || o.lora_rank > 0 || !o.lora_from.empty();
}

// The plan a compiled trial `module` emits on `hw` (its shape and hardware in `emit`).
LogicalResult emitTrial(ModuleOp module, const HardwareProfile& hw, EmitOptions& emit, plan::Plan& plan,
                        PlanStats& stats) {
  modelShape(module, emit.batch, emit.seq, emit.vocab);
  emit.hardware = hw;
  return emitPlan(module, emit, plan, stats);
}

// The predicted step of the plan `module` (through every stage) emits on `hw`, as --batch auto
// prices a batch; infinite if it cannot be emitted.
StepPrice modulePredictedStep(ModuleOp module, const CompileOptions& o, const HardwareProfile& hw) {
  ScopedDiagnosticHandler quiet(module.getContext(), [](Diagnostic&) { return success(); });
  EmitOptions emit;
  plan::Plan plan;
  PlanStats stats;
  if (failed(emitTrial(module, hw, emit, plan, stats))) return {};
  return {dataParallelStepMicros(o, emit, plan, stats), stats.compute_us, stats.h2d_us};
}

// One trial compile of --batch auto's search: whether `config` at `batch` fits --device-mem and
// --host-mem together, the schedule "auto" took, the plan's host bytes, and (`tuned`: the
// recompute depth searched as the final compile searches it) its predicted tokens per second.
struct BatchTrial {
  bool fits = false;
  SearchHints hints;           // for larger batches (fitting trials)
  int64_t host_bytes = -1;     // -1: not emitted (no --host-mem to check, or it failed first)
  int64_t smallest_arena = -1;  // not fitting --device-mem: the least any plan tried needs
  double tokens_per_s = 0.0;   // tuned trials that fit
  // How full the fuller budget is: the larger of arena / --device-mem and host bytes /
  // --host-mem (fits: at most 1); -1 where unknown.
  double usage = -1.0;
};

BatchTrial tryBatch(MLIRContext& context, const ModelConfig& config, int64_t batch, int64_t seq,
                    const CompileOptions& o, UpdateKind update, const HardwareProfile& hw, bool tuned,
                    const SearchHints& hints = {}) {
  ScopedDiagnosticHandler quiet(&context, [](Diagnostic&) { return success(); });
  OwningOpRef<ModuleOp> trial = buildModel(context, config, batch, seq, ParamInit::kSeeded, modelForm(o));
  selectTrainable(*trial, o);  // as the chosen batch's model will be (its problems said there)
  StageOptions stage = stageOptions(o, hw, update, std::nullopt, tuned);
  stage.first_schedule = o.schedule ? 0 : hints.first_schedule;
  stage.max_keep = hints.max_keep;
  stage.offload_first = hints.offload_first;
  stage.explain_failure = false;
  // Token tiles are for what no batch fits untiled (long contexts at batch 1), not searched here.
  if (stage.token_tiles == 0) stage.token_tiles = 1;
  // Experts in groups likewise (each group a parameter per stack: trials grow with them): larger
  // batches are sized with whole experts unless --expert-groups gives the groups.
  if (stage.expert_groups == 0 && batch > 1) stage.expert_groups = 1;
  const StageResult stages = runStages(*trial, stage);
  BatchTrial result;
  result.smallest_arena = stages.smallest_arena;
  if (stages.failed) {
    if (stages.smallest_arena > 0 && o.device_mem > 0) result.usage = double(stages.smallest_arena) / o.device_mem;
    return result;
  }
  if (auto arena = getModelFunction(*trial)->getAttrOfType<IntegerAttr>(kArenaBytesAttr); arena && o.device_mem > 0)
    result.usage = double(arena.getInt()) / o.device_mem;
  for (size_t i = 0; i < std::size(kSchedules); ++i)
    if (stages.switched_from.value_or(stages.schedule) == kSchedules[i]) result.hints.first_schedule = i;
  if (tuned && stages.schedule == Schedule::kStreamedRecompute) result.hints.max_keep = stages.recompute_keep_most;
  result.hints.offload_first = stages.offload && o.offload == Offload::kAuto;
  if (!tuned && o.host_mem <= 0) return result.fits = true, result;
  EmitOptions emit;
  plan::Plan plan;
  PlanStats stats;
  if (failed(emitTrial(*trial, hw, emit, plan, stats))) return result;
  // --ranks: a host's bytes (its ranks share it), the job's step (a host's link or memory may
  // bound a small batch).
  result.host_bytes = static_cast<int64_t>(hostBytesPerHost(plan, o.ranks, o.ranks_per_host));
  result.fits = o.host_mem <= 0 || result.host_bytes <= o.host_mem;
  if (o.host_mem > 0) result.usage = std::max(result.usage, double(result.host_bytes) / o.host_mem);
  const double step_us = dataParallelStepMicros(o, emit, plan, stats);
  if (result.fits && step_us > 0) result.tokens_per_s = double(batch * seq) / (step_us * 1e-6);
  return result;
}

// The largest batch that fits both budgets (every block recomputed where the schedule
// recomputes), a multiple of batchUnit; 0 if one unit does not. Fitting is monotone in the batch, and so is the schedule
// it takes: a larger batch's trial starts from the schedule the largest fitting one needed. The
// budgets' usage (BatchTrial) grows about linearly with the batch between the points where a
// choice changes (the schedule, the offload), so the next batch tried is where a line reaches 1:
// through the last two fitting trials until one fails (at most 4x the largest fitting), then
// between the bracket's ends (regula falsi). A guided step that fails to halve the bracket is
// followed by a bisection, so the search needs at most about twice bisection's trials.
int64_t largestFittingBatch(MLIRContext& context, const ModelConfig& config, int64_t seq, const CompileOptions& o,
                            UpdateKind update, const HardwareProfile& hw) {
  // At most 65,536 sequences, and within the tokens per step validateBatch allows. Searched in
  // batch units (batchUnit): `good`, `bad` and `next` count units.
  const int64_t unit = batchUnit(o);
  int64_t max_batch = (1 << 16) / unit;
  while (max_batch > 1 && !validateBatch(max_batch * unit, seq).empty()) max_batch /= 2;
  SearchHints hints;
  int64_t good = 0, bad = max_batch + 1;
  double good_usage = -1.0, bad_usage = -1.0;
  std::vector<std::pair<int64_t, double>> fitted;  // (batch, usage) of the fitting trials
  bool bisect = false;
  // Where the line through (b0, u0) and (b1, u1) reaches usage 1; -1 if it does not rise.
  auto crossing = [](int64_t b0, double u0, int64_t b1, double u1) -> int64_t {
    if (u0 < 0 || u1 < 0 || u1 <= u0 || b1 == b0) return -1;
    return b0 + static_cast<int64_t>(std::floor((1.0 - u0) * double(b1 - b0) / (u1 - u0)));
  };
  for (int64_t next = 1; bad - good > 1;) {
    const int64_t bracket = bad - good;
    const BatchTrial trial = tryBatch(context, config, next * unit, seq, o, update, hw, /*tuned=*/false, hints);
    if (trial.fits) {
      good = next, good_usage = trial.usage, hints = trial.hints;
      fitted.emplace_back(next, trial.usage);
    } else {
      bad = next, bad_usage = trial.usage;
    }
    if (good == 0) break;  // batch 1 does not fit
    const bool top_known = bad <= max_batch;
    int64_t guess = -1;
    if (!top_known && fitted.size() >= 2)
      guess = crossing(fitted[fitted.size() - 2].first, fitted[fitted.size() - 2].second, good, good_usage);
    if (top_known) guess = crossing(good, good_usage, bad, bad_usage);
    if (guess < 0) guess = top_known ? good + (bad - good) / 2 : 2 * good;
    // A guided step that fits lands just below the boundary: the one above it settles it.
    if (top_known && trial.fits && guess <= good) guess = good + 1;
    bisect = top_known && !bisect && 2 * (bad - good) > bracket;
    if (bisect) guess = good + (bad - good) / 2;
    next = std::clamp<int64_t>(guess, good + 1, std::min(bad - 1, 4 * good));
  }
  return good * unit;
}

// --batch auto: the batch with the best predicted throughput among the largest that fits both
// budgets (where every block is recomputed) and eighths of it (where more blocks keep their
// activations). A larger batch amortises the weights' copies; a smaller one may recompute less.
// Where frozen weights may stay on the device between steps (then copied in no later step),
// also the largest batch a resident plan fits and its half: no copies to amortise, nothing
// recomputed. `chosen`: what the chosen batch's trial found (the final compile's recompute
// search starts there).
int64_t bestThroughputBatch(MLIRContext& context, const ModelConfig& config, int64_t seq, const CompileOptions& o,
                            UpdateKind update, const HardwareProfile& hw, int64_t largest, std::string& note,
                            SearchHints& chosen) {
  std::set<int64_t> candidates = {largest};
  const int64_t unit = batchUnit(o);
  for (int k = 1; k < 8; ++k) candidates.insert(std::max<int64_t>(unit, largest * k / 8 / unit * unit));
  if (freezesWeights(o) && o.keep_frozen == KeepFrozen::kAuto && !o.schedule) {
    CompileOptions resident = o;
    resident.schedule = Schedule::kResident;
    if (const int64_t most = largestFittingBatch(context, config, seq, resident, update, hw); most > 0 && most < largest)
      candidates.insert({most, std::max<int64_t>(unit, most / 2 / unit * unit)});
  }
  int64_t best = largest;
  double best_rate = 0.0, largest_rate = 0.0;
  SearchHints hints;
  for (int64_t batch : candidates) {  // ascending: each trial's hints hold for the next
    const BatchTrial trial = tryBatch(context, config, batch, seq, o, update, hw, /*tuned=*/true, hints);
    if (trial.fits) hints = trial.hints;
    const double rate = trial.tokens_per_s;
    if (batch == largest) largest_rate = rate;
    if (rate > best_rate) best = batch, best_rate = rate, chosen = trial.hints;
  }
  const std::string budgets = o.host_mem > 0 ? "--device-mem and --host-mem" : "--device-mem";
  note = best == largest
             ? fmt::format("batch {}: the largest that fits {}, also the best predicted throughput of {} "
                           "batches tried on {}",
                           best, budgets, candidates.size(), hw.name)
             : fmt::format("batch {}: the best predicted throughput on {} ({:.0f} tokens/s; the largest that fits {}, "
                           "{}, predicts {:.0f}: it recomputes or copies more)",
                           best, hw.name, best_rate, budgets, largest, largest_rate);
  return best;
}

// What batch 1 needs at the least, for the error when nothing fits both budgets: the smallest
// device arena (the most frugal plan: activations recomputed, the vocabulary split, the kept
// ones offloaded where allowed) with the host memory that plan takes, and the smallest host
// memory (nothing offloaded) with the device memory that plan takes.
std::string batchOneMinimums(MLIRContext& context, const ModelConfig& config, int64_t seq, const CompileOptions& o,
                             UpdateKind update, const HardwareProfile& hw) {
  // The smallest plan under `offload`: its arena (a trial against a 1-byte budget reports it),
  // then its host bytes (the plan compiled for exactly that arena).
  auto smallest = [&](Offload offload) -> std::pair<int64_t, int64_t> {
    CompileOptions trial = o;
    trial.offload = offload;
    trial.host_mem = 0;
    trial.device_mem = 1;
    const int64_t arena = tryBatch(context, config, batchUnit(o), seq, trial, update, hw, false).smallest_arena;
    if (arena < 0) return {-1, -1};
    trial.device_mem = arena;
    return {arena, tryBatch(context, config, batchUnit(o), seq, trial, update, hw, true).host_bytes};
  };
  // With --ranks, a host's bytes: its ranks share the master weights, each holds its slices.
  const std::string per_host = o.ranks <= 1            ? ""
                               : o.ranks_per_host == 1 ? " per host"
                                                       : fmt::format(" per host, its {} ranks together", o.ranks_per_host);
  std::vector<std::string> parts;
  const auto [least_device, its_host] = smallest(o.offload == Offload::kOff ? Offload::kOff : Offload::kAuto);
  if (least_device > 0 && its_host > 0)
    parts.push_back(fmt::format("at least {} of device memory (with {} of host memory{})", formatBytes(least_device),
                                formatBytes(its_host), per_host));
  if (o.offload != Offload::kOn) {
    const auto [its_device, least_host] = smallest(Offload::kOff);
    if (least_host > 0 && least_host != its_host)
      parts.push_back(fmt::format("at least {} of host memory{} with nothing offloaded (then {} of device memory)",
                                  formatBytes(least_host), per_host, formatBytes(its_device)));
  }
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", or ") + part;
  return text.empty() ? "more memory than any plan tried" : text;
}

}  // namespace

ModelForm modelForm(const CompileOptions& o) {
  if (o.kv_cache) return ModelForm::kDecodeStep;
  if (o.forward_only) return ModelForm::kSequence;
  return o.packed_examples ? ModelForm::kPackedTraining : ModelForm::kTraining;
}

int64_t batchUnit(const CompileOptions& o) { return rowsInPairs(o.loss.objective) ? 2 : 1; }

// The stages' options for `o` with AdamW run as `update`, stopping after `last` (unset: run all).
StageOptions stageOptions(const CompileOptions& o, const HardwareProfile& hw, UpdateKind update,
                          std::optional<Stage> last, bool tune_recompute) {
  StageOptions stage;
  stage.last = last;
  stage.device_mem = o.device_mem;
  stage.host_mem = o.host_mem;
  stage.host_bytes = [ranks = o.ranks, per_host = o.ranks_per_host](ModuleOp module) {
    return moduleHostBytes(module, ranks, per_host);
  };
  stage.step_price = [o, hw](ModuleOp module) { return modulePredictedStep(module, o, hw); };
  stage.schedule = o.schedule;
  stage.update = update;
  stage.tune_recompute = tune_recompute;
  stage.vocab_chunks = o.vocab_chunks;
  stage.expert_groups = o.expert_groups;
  stage.token_tiles = o.token_tiles;
  stage.offload = o.offload;
  stage.keep_frozen = o.keep_frozen;
  stage.embedding = o.embedding;
  stage.stream_dtype = o.stream_dtype;
  stage.precision = o.precision;
  stage.land_gradients = o.ranks > 1;
  stage.loss = o.loss;
  return stage;
}

BatchChoice searchBatch(MLIRContext& context, const ModelConfig& config, int64_t seq, const CompileOptions& o,
                        UpdateKind update, const HardwareProfile& hw) {
  BatchChoice choice;
  const int64_t largest = largestFittingBatch(context, config, seq, o, update, hw);
  if (largest == 0) {
    choice.note = batchOneMinimums(context, config, seq, o, update, hw);
    return choice;
  }
  choice.batch = bestThroughputBatch(context, config, seq, o, update, hw, largest, choice.note, choice.hints);
  return choice;
}

}  // namespace mt
