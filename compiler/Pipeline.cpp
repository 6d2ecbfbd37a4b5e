#include "compiler/Pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <cstdio>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <optional>

#include "compiler/Emitter.h"
#include "compiler/HuggingFace.h"
#include "compiler/Stages.h"
#include "compiler/onnx/OnnxImporter.h"
#include "models/BuiltinModels.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "passes/Passes.h"
#include "runtime/error.h"
#include "runtime/checkpoint.h"
#include "runtime/host_store.h"
#include "runtime/safetensors.h"
#include "runtime/verifier.h"

using namespace mlir;

namespace mt {

int64_t parseByteSize(const std::string& text) {
  size_t end = 0;
  double value;
  try {
    value = std::stod(text, &end);
  } catch (...) {
    return -1;
  }
  const std::string unit = text.substr(end);
  double scale = 1;
  if (unit == "" || unit == "B") scale = 1;
  else if (unit == "KiB") scale = 1024.0;
  else if (unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB") scale = 1e3;
  else if (unit == "MB") scale = 1e6;
  else if (unit == "GB") scale = 1e9;
  else if (unit == "TB") scale = 1e12;
  else return -1;
  if (!(value >= 0)) return -1;
  return static_cast<int64_t>(value * scale);
}

namespace {

std::string mib(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024 * 1024) return fmt::format("{:.2f} TiB", bytes / (1024.0 * 1024 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024));
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
}

std::string millis(double us) { return fmt::format("{:.1f} ms", us / 1e3); }

// The host bytes of the plan `module` (through every stage) emits; INT64_MAX if it emits none.
int64_t moduleHostBytes(ModuleOp module) {
  EmitOptions emit;
  modelShape(module, emit.batch, emit.seq, emit.vocab);
  plan::Plan plan;
  PlanStats stats;
  if (failed(emitPlan(module, emit, plan, stats))) return std::numeric_limits<int64_t>::max();
  return planHostBytes(plan);
}

// The stages' options for `o` with AdamW run as `update`, stopping after `last` ("" = run all).
StageOptions stageOptions(const CompileOptions& o, UpdateKind update, const std::string& last,
                          bool tune_recompute) {
  StageOptions stage;
  stage.last = last;
  stage.device_mem = o.device_mem;
  stage.host_mem = o.host_mem;
  stage.host_bytes = moduleHostBytes;
  stage.schedule = o.schedule;
  stage.update = update;
  stage.tune_recompute = tune_recompute;
  stage.vocab_chunks = o.vocab_chunks;
  stage.offload = o.offload;
  stage.embedding = o.embedding;
  stage.stream_dtype = o.stream_dtype;
  stage.precision = o.precision;
  return stage;
}

// One trial compile of --batch auto's search: whether `config` at `batch` fits --device-mem and
// --host-mem together, the schedule "auto" took, the plan's host bytes, and (`tuned`: the
// recompute depth searched as the final compile searches it) its predicted tokens per second.
// What a trial learnt that holds for every larger batch (fitting and the schedule are
// monotone in the batch; the blocks that keep their activations are fewer): where the next
// trial's searches start.
struct SearchHints {
  size_t first_schedule = 0;  // index into kSchedules
  int64_t max_keep = -1;      // -1: no bound
  bool offload_first = false;  // the activations had to be offloaded (StageOptions::offload_first)
};

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
  OwningOpRef<ModuleOp> trial = buildModel(context, config, batch, seq);
  StageOptions stage = stageOptions(o, update, "", tuned);
  stage.first_schedule = o.schedule ? 0 : hints.first_schedule;
  stage.max_keep = hints.max_keep;
  stage.offload_first = hints.offload_first;
  stage.explain_failure = false;
  const StageResult stages = runStages(*trial, stage);
  BatchTrial result;
  result.smallest_arena = stages.smallest_arena;
  if (!stages.failed.empty()) {
    if (stages.smallest_arena > 0 && o.device_mem > 0) result.usage = double(stages.smallest_arena) / o.device_mem;
    return result;
  }
  if (auto arena = getModelFunction(*trial)->getAttrOfType<IntegerAttr>(kArenaBytesAttr); arena && o.device_mem > 0)
    result.usage = double(arena.getInt()) / o.device_mem;
  for (size_t i = 0; i < std::size(kSchedules); ++i)
    if (stages.schedule == kSchedules[i]) result.hints.first_schedule = i;
  if (tuned && stages.schedule == Schedule::kStreamedRecompute) result.hints.max_keep = stages.recompute_keep;
  result.hints.offload_first = stages.offload && o.offload == Offload::kAuto;
  if (!tuned && o.host_mem <= 0) return result.fits = true, result;
  EmitOptions emit;
  modelShape(*trial, emit.batch, emit.seq, emit.vocab);
  emit.hardware = hw;
  plan::Plan plan;
  PlanStats stats;
  if (failed(emitPlan(*trial, emit, plan, stats))) return result;
  result.host_bytes = planHostBytes(plan);
  result.fits = o.host_mem <= 0 || result.host_bytes <= o.host_mem;
  if (o.host_mem > 0) result.usage = std::max(result.usage, double(result.host_bytes) / o.host_mem);
  if (result.fits && stats.step_us > 0) result.tokens_per_s = double(batch * seq) / (stats.step_us * 1e-6);
  return result;
}

// The largest batch that fits both budgets (every block recomputed where the schedule
// recomputes); 0 if batch 1 does not. Fitting is monotone in the batch, and so is the schedule
// it takes: a larger batch's trial starts from the schedule the largest fitting one needed. The
// budgets' usage (BatchTrial) grows about linearly with the batch between the points where a
// choice changes (the schedule, the offload), so the next batch tried is where a line reaches 1:
// through the last two fitting trials until one fails (at most 4x the largest fitting), then
// between the bracket's ends (regula falsi). A guided step that fails to halve the bracket is
// followed by a bisection, so the search needs at most about twice bisection's trials.
int64_t largestFittingBatch(MLIRContext& context, const ModelConfig& config, int64_t seq, const CompileOptions& o,
                            UpdateKind update, const HardwareProfile& hw) {
  // At most 65,536 sequences, and within the tokens per step validateBatch allows.
  int64_t max_batch = 1 << 16;
  while (max_batch > 1 && !validateBatch(max_batch, seq).empty()) max_batch /= 2;
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
    const BatchTrial trial = tryBatch(context, config, next, seq, o, update, hw, /*tuned=*/false, hints);
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
  return good;
}

// --batch auto: the batch with the best predicted throughput among the largest that fits both
// budgets (where every block is recomputed) and eighths of it (where more blocks keep their
// activations). A larger batch amortises the weights' copies; a smaller one may recompute less.
// `chosen`: what the chosen batch's trial found (the final compile's recompute search starts there).
int64_t bestThroughputBatch(MLIRContext& context, const ModelConfig& config, int64_t seq, const CompileOptions& o,
                            UpdateKind update, const HardwareProfile& hw, int64_t largest, std::string& note,
                            SearchHints& chosen) {
  std::set<int64_t> candidates = {largest};
  for (int k = 1; k < 8; ++k) candidates.insert(std::max<int64_t>(1, largest * k / 8));
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
                           "{}, predicts {:.0f}: it recomputes more)",
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
    const int64_t arena = tryBatch(context, config, 1, seq, trial, update, hw, false).smallest_arena;
    if (arena < 0) return {-1, -1};
    trial.device_mem = arena;
    return {arena, tryBatch(context, config, 1, seq, trial, update, hw, true).host_bytes};
  };
  std::vector<std::string> parts;
  const auto [least_device, its_host] = smallest(o.offload == Offload::kOff ? Offload::kOff : Offload::kAuto);
  if (least_device > 0 && its_host > 0)
    parts.push_back(fmt::format("at least {} of device memory (with {} of host memory)", mib(least_device),
                                mib(its_host)));
  if (o.offload != Offload::kOn) {
    const auto [its_device, least_host] = smallest(Offload::kOff);
    if (least_host > 0 && least_host != its_host)
      parts.push_back(fmt::format("at least {} of host memory with nothing offloaded (then {} of device memory)",
                                  mib(least_host), mib(its_device)));
  }
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", or ") + part;
  return text.empty() ? "more memory than any plan tried" : text;
}

// When AdamW runs (--update): auto keeps the exact, deferred update unless its 16 host bytes
// per parameter exceed --host-mem; then the on-arrival update (no gradients kept) is chosen and
// `note` says why.
UpdateKind chooseUpdate(const CompileOptions& o, double num_params, std::string& note) {
  if (o.update) return *o.update;
  const double per_param = 16.0;  // bf16 streaming included: the master is then split, not copied
  const double deferred_bytes = per_param * num_params;
  if (o.host_mem <= 0 || deferred_bytes <= o.host_mem) return UpdateKind::kDeferred;
  note = fmt::format("chosen for --host-mem: the deferred update's {:.0f} bytes/param would need {}", per_param,
                     mib(deferred_bytes));
  return UpdateKind::kOnArrival;
}

double countParams(ModuleOp module) {
  double params = 0;
  if (func::FuncOp func = getModelFunction(module))
    for (BlockArgument arg : func.getArguments())
      if (!paramName(func, arg.getArgNumber()).empty())
        params += cast<RankedTensorType>(arg.getType()).getNumElements();
  return params;
}

void writeInitialWeights(const plan::Plan& plan, const std::string& path) {
  std::vector<std::vector<float>> data;
  std::vector<SafetensorsTensor> tensors;
  data.reserve(plan.host_tensors_size());
  for (const auto& t : plan.host_tensors()) {
    if (t.role() != plan::ROLE_PARAM) continue;
    const int64_t n = checkedNumel(t.shape(), t.name());
    data.emplace_back(n);
    initializeTensor(data.back().data(), n, t.init(), plan.init_seed(), t.name());
    tensors.push_back({t.name(), "F32", {t.shape().begin(), t.shape().end()}, data.back().data(),
                       n * 4});
  }
  writeSafetensors(path, tensors,
                   {{"format", "pt"}, {"producer", "megatrain mtc"}, {kPlanFingerprintKey, planFingerprint(plan)}});
}

// The imported model's initial parameters under their plan names, with the ONNX initializer
// each came from in the metadata (the way back into the ONNX file).
void writeImportedWeights(const onnximport::ImportedModel& imported, const plan::Plan& plan, const std::string& path) {
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"producer", "megatrain mtc (ONNX import)"}, {kPlanFingerprintKey, planFingerprint(plan)}};
  for (const auto& p : imported.params) {
    // Each parameter read from the model as it is written: one tensor in memory at a time.
    tensors.push_back({p.name, "F32", p.shape, nullptr, onnximport::checkedNumel(p.shape, p.name) * 4, [&imported, &p](void* out) {
                         onnximport::initialValues(p, imported.model_dir, static_cast<float*>(out));
                       }});
    metadata[std::string(kOnnxOriginKey) + p.name] = p.origin;
  }
  writeSafetensors(path, tensors, metadata);
}

}  // namespace

int compile(const CompileOptions& requested) {
  const auto start = std::chrono::steady_clock::now();
  MLIRContext context;
  context.printOpOnDiagnostic(false);  // a 100B model's function is megabytes of text
  context.getOrLoadDialect<MtDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler sourceDiagnostics(sourceMgr, &context, llvm::errs());
  // Diagnostics on built-in models have no source line to show: print them plainly.
  ScopedDiagnosticHandler plainDiagnostics(&context, [](Diagnostic& d) {
    if (isa<FileLineColLoc>(d.getLocation())) return failure();  // to the source handler
    const char* kind = d.getSeverity() == DiagnosticSeverity::Error ? "error" : "note";
    llvm::errs() << "mtc: " << kind << ": " << d.str() << "\n";
    for (Diagnostic& note : d.getNotes()) llvm::errs() << "mtc: note: " << note.str() << "\n";
    return success();
  });

  HardwareProfile profile;
  if (const std::string problem = parseHardwareSpec(requested.hardware, profile); !problem.empty()) {
    std::fprintf(stderr, "mtc: error: %s\n", problem.c_str());
    return 1;
  }
  // A GPU profile brings its device memory as the budget unless --device-mem says otherwise.
  CompileOptions o = requested;
  std::string budget_source = o.device_mem ? "--device-mem" : "";
  if (!o.device_mem && profile.device_budget_bytes) {
    o.device_mem = profile.device_budget_bytes;
    budget_source = "the " + profile.name + " profile's; --device-mem overrides";
  }
  const HardwareProfile* hw = &profile;

  OwningOpRef<ModuleOp> module;
  std::string description, batch_note, update_note;
  std::optional<UpdateKind> update;  // chosen with the batch for built-in models
  ModelConfig config;
  auto endsWith = [&](const std::string& suffix) {
    return o.model.size() > suffix.size() && o.model.compare(o.model.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  onnximport::ImportedModel imported;
  std::optional<HuggingFaceModel> hf;
  SearchHints searched;  // --batch auto: what the chosen batch's trial found
  const bool is_onnx = endsWith(".onnx");
  if (is_onnx) {
    onnximport::ImportOptions options;
    options.training = true;
    options.frozen_pattern = o.frozen;
    options.trainable_pattern = o.trainable;
    options.batch = o.batch;
    options.seq = o.seq;
    try {
      module = onnximport::importModel(context, o.model, options, &imported);
    } catch (const onnximport::ImportError& e) {
      std::fprintf(stderr, "mtc: error: %s: %s\n", o.model.c_str(), e.what());
      return 1;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "mtc: error: %s: out of memory while importing\n", o.model.c_str());
      return 1;
    }
    description = fmt::format("{} (ONNX, {} parameter tensors from its initializers)", o.model, imported.params.size());
  } else if (isHuggingFaceFolder(o.model)) {
    hf = readHuggingFaceFolder(o.model);
    if (o.overrides.layers || o.overrides.width || o.overrides.heads || o.overrides.kv_heads || o.overrides.ffn ||
        o.overrides.vocab || o.tied) {
      std::fprintf(stderr, "mtc: error: %s is a pretrained model: its shape is its config's (drop --layers, --width, "
                   "--heads, --kv-heads, --ffn, --vocab, --tied/--untied; --context may shorten it)\n", o.model.c_str());
      return 1;
    }
    config = hf->config;
    if (o.overrides.context) config.context = std::min(config.context, o.overrides.context);
    const int64_t seq = o.seq ? o.seq : config.context;
    std::string problem = validateConfig(config, seq);
    if (problem.empty() && o.batch != 0) problem = validateBatch(o.batch, seq);
    if (problem.empty() && hf->sliding_window && seq > hf->sliding_window)
      problem = "its attention slides over " + std::to_string(hf->sliding_window) + " tokens, and sliding windows "
                "are not supported: train with --seq " + std::to_string(hf->sliding_window) + " or less (exact there)";
    if (o.batch == 0) problem = "--batch auto is not yet supported for a Hugging Face folder: give --batch";
    if (!problem.empty()) {
      std::fprintf(stderr, "mtc: error: %s: %s\n", o.model.c_str(), problem.c_str());
      return 1;
    }
    module = buildModel(context, config, o.batch, seq, ParamInit::kWeightsFile);
    description = fmt::format("{} (Hugging Face {}: {} layers, width {}, {} heads / {} kv, ffn {}, vocab {}{}{})",
                              o.model, hf->architecture, config.layers, config.width, config.heads, config.kv_heads,
                              config.ffn, config.vocab, config.tied ? ", tied" : "",
                              config.qkv_bias ? ", q/k/v biases" : "");
  } else if (endsWith(".mlir")) {
    module = parseSourceFile<ModuleOp>(o.model, sourceMgr, ParserConfig(&context));
    if (!module) {
      std::fprintf(stderr, "mtc: error: cannot parse %s (see the diagnostics above)\n", o.model.c_str());
      return 1;
    }
    description = o.model;
  } else {
    const ModelPreset* preset = findModelPreset(o.model);
    if (!preset) {
      std::string known;
      for (const auto& p : modelPresets()) known += " " + p.name;
      std::fprintf(stderr,
                   "mtc: error: '%s' is not a .mlir or .onnx file, a Hugging Face folder (with config.json) or a built-in "
                   "model (built-in:%s)\n",
                   o.model.c_str(), known.c_str());
      return 1;
    }
    config = preset->config;
    const ModelConfig& v = o.overrides;
    for (auto [field, value] :
         {std::pair{&config.layers, v.layers}, {&config.width, v.width}, {&config.heads, v.heads},
          {&config.kv_heads, v.kv_heads}, {&config.ffn, v.ffn}, {&config.vocab, v.vocab},
          {&config.context, v.context}})
      if (value) *field = value;
    if (v.heads && !v.kv_heads && config.family == "gpt2") config.kv_heads = config.heads;
    if (o.tied) config.tied = *o.tied;
    const int64_t seq = o.seq ? o.seq : config.context;
    std::string problem = validateConfig(config, seq);
    if (problem.empty() && o.batch != 0) problem = validateBatch(o.batch, seq);
    if (o.batch == 0 && o.device_mem == 0) problem = "--batch auto needs --device-mem to size the batch against";
    if (!problem.empty()) {
      std::fprintf(stderr, "mtc: error: model %s: %s\n", o.model.c_str(), problem.c_str());
      return 1;
    }
    update = chooseUpdate(o, config.numParams(), update_note);
    int64_t batch = o.batch;
    if (batch == 0) {
      batch = largestFittingBatch(context, config, seq, o, *update, *hw);
      if (batch == 0) {
        std::fprintf(stderr, "mtc: error: not even batch 1 of %s fits --device-mem %s%s: it needs %s\n",
                     o.model.c_str(), mib(o.device_mem).c_str(),
                     o.host_mem > 0 ? (" and --host-mem " + mib(o.host_mem)).c_str() : "",
                     batchOneMinimums(context, config, seq, o, *update, *hw).c_str());
        return 1;
      }
      batch = bestThroughputBatch(context, config, seq, o, *update, *hw, batch, batch_note, searched);
    }
    module = buildModel(context, config, batch, seq);
    description = fmt::format("{} ({}, {} layers, width {}, {} heads / {} kv, ffn {}, vocab {}{}{})",
                              o.model, config.family, config.layers, config.width, config.heads,
                              config.kv_heads, config.ffn, config.vocab, config.tied ? ", tied" : "",
                              config.qkv_bias ? ", q/k/v biases" : "");
  }
  if (failed(verify(*module))) {
    std::fprintf(stderr, "mtc: error: the input IR does not verify\n");
    return 1;
  }

  if (!update) update = chooseUpdate(o, countParams(*module), update_note);
  StageOptions stage_options = stageOptions(o, *update, o.emit, true);
  stage_options.max_keep = searched.max_keep;  // what --batch auto's trial of this batch kept
  const StageResult stages = runStages(*module, stage_options);
  if (!stages.failed.empty()) {
    std::fprintf(stderr, "mtc: error: stage '%s' failed (see the diagnostics above)\n", stages.failed.c_str());
    return 1;
  }
  if (!o.emit.empty()) {
    // With locations: module paths (the layer blocks) survive a round trip through text.
    module->print(llvm::outs(), OpPrintingFlags().enableDebugInfo());
    llvm::outs() << "\n";
    return 0;
  }

  EmitOptions emit;
  emit.model_name = o.model;
  modelShape(*module, emit.batch, emit.seq, emit.vocab);
  emit.init_seed = o.seed;
  emit.hardware = *hw;
  emit.hf_config = hf ? hf->config_json : huggingFaceConfig(config);
  plan::Plan plan;
  PlanStats stats;
  if (failed(emitPlan(*module, emit, plan, stats))) {
    std::fprintf(stderr, "mtc: error: cannot emit the plan (see the diagnostics above)\n");
    return 1;
  }
  if (o.output.empty()) {
    std::fprintf(stderr, "mtc: error: no output: give -o model.plan (or --emit=<stage>)\n");
    return 1;
  }
  const int64_t host_bytes = planHostBytes(plan);
  const int landing = gradLandingTensor(plan);
  int64_t activation_host_bytes = 0;
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_ACTIVATION) activation_host_bytes += hostTensorBytes(t);
  const std::string host_parts =
      std::string(stats.bf16_staging ? "fp32 master weights (held as their bf16 copies + 16-bit residuals)"
                                     : "fp32 master weights") +
      (landing >= 0 ? ", two AdamW moments, a gradient landing buffer of " +
                          mib(4.0 * checkedNumel(plan.host_tensors(landing).shape(), "landing"))
                    : std::string(", gradients, two AdamW moments")) +
      (activation_host_bytes ? ", offloaded activations " + formatBytes(activation_host_bytes, /*exact=*/false) : "");
  if (o.host_mem > 0 && host_bytes > o.host_mem) {
    std::fprintf(stderr,
                 "mtc: error: the plan needs %s of host memory (%.1f bytes for each of %s parameters: %s) but "
                 "--host-mem is %s: use a machine with at least %s%s or a smaller model\n",
                 mib(host_bytes).c_str(), double(host_bytes) / stats.num_params, formatParamCount(stats.num_params).c_str(),
                 host_parts.c_str(), mib(o.host_mem).c_str(), mib(host_bytes).c_str(),
                 landing >= 0 ? "" : ", compile with --update on-arrival (about 12 bytes/param; no global-norm clipping),");
    return 1;
  }
  std::string weights = o.weights;
  const bool explicit_weights = !weights.empty() || is_onnx || hf;  // an import's weights exist only there
  if (weights.empty()) weights = weightsBesidePlan(o.output);
  // Writing the initial weights of a large model costs minutes and its full size on disk;
  // mtrun builds the same weights from the plan's seeded initializers.
  constexpr int64_t kAutoWeightsLimit = int64_t{1} << 29;  // parameters (2 GiB of fp32)
  const bool write_weights = !o.no_weights && (explicit_weights || stats.num_params <= kAutoWeightsLimit);
  // The weights first, then the plan, each atomically: a failure in either (a full disk, an
  // import's external data refused only as it is read) leaves neither, never a plan without the
  // weights it names.
  try {
    if (write_weights && is_onnx) writeImportedWeights(imported, plan, weights);
    else if (write_weights && hf) writeHuggingFaceWeights(*hf, plan, weights);
    else if (write_weights) writeInitialWeights(plan, weights);
    try {
      writePlan(plan, o.output);
    } catch (const Error&) {
      if (write_weights) std::remove(weights.c_str());
      throw;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "mtc: error: %s\n", e.what());
    return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Instructions as run (templates expanded) and as stored (a launch's waits and records count).
  int instructions = 0, stored = 0;
  for (const auto& s : plan.streams())
    for (const auto& in : s.instructions()) {
      if (!in.has_launch()) {
        ++stored, ++instructions;
        continue;
      }
      const int syncs = in.launch().waits_size() + in.launch().records_size();
      stored += 1 + syncs;
      instructions += plan.templates(in.launch().block_template()).instructions_size() + syncs;
    }
  for (const auto& t : plan.templates()) stored += t.instructions_size();
  // The bottleneck: compute when it is busy most of the step, else what it waits for most.
  const char* stream_names[] = {"the tail after the last kernel", "the host->device link", "the device->host link",
                                "the host optimizer"};
  int most_waited = 1;
  for (int s = 2; s < 4; ++s)
    if (stats.compute_wait_us[s] > stats.compute_wait_us[most_waited]) most_waited = s;
  const double compute_busy = stats.step_us > 0 ? stats.compute_us / stats.step_us : 1.0;
  std::string bottleneck = compute_busy >= 0.9 || stats.compute_wait_us[most_waited] == 0
                               ? std::string("compute")
                               : std::string(stream_names[most_waited] + 4);  // without "the "
  std::string idle;
  for (int s : {3, 1, 2, 0})
    if (stats.compute_wait_us[s] >= 0.005 * stats.step_us)
      idle += fmt::format("{}{} on {}", idle.empty() ? "" : ", ", millis(stats.compute_wait_us[s]), stream_names[s]);
  std::printf("mtc: %s\n", description.c_str());
  if (hf)
    for (const std::string& note : hf->notes) std::printf("  note           %s\n", note.c_str());
  if (!imported.kept_constant.empty()) {
    std::string kept;
    for (const auto& [name, why] : imported.kept_constant) kept += (kept.empty() ? "" : "; ") + name + " (" + why + ")";
    std::printf("  constants      initializers kept out of training: %s\n", kept.c_str());
  }
  std::printf("  batch %lld x seq %lld = %lld tokens/step, vocab %lld%s\n", (long long)emit.batch,
              (long long)emit.seq, (long long)(emit.batch * emit.seq), (long long)emit.vocab,
              batch_note.empty() ? "" : ("; " + batch_note).c_str());
  std::printf("  parameters     %s; host %s (%.1f bytes/param: %s)\n", formatParamCount(stats.num_params).c_str(),
              mib(host_bytes).c_str(), double(host_bytes) / stats.num_params, host_parts.c_str());
  if (update == UpdateKind::kOnArrival)
    std::printf("  optimizer      AdamW per parameter as its gradient lands, its norm share in the same pass, "
                "overlapped with the backward; no "
                "global-norm clipping%s\n", update_note.empty() ? "" : ("; " + update_note).c_str());
  else
    std::printf("  optimizer      AdamW one step late, per parameter before its next copy in (overlapped with the "
                "forward); exact global-norm clipping\n");
  std::string measured;
  for (const auto& [schedule, arena] : stages.arena_by_schedule)
    measured += (measured.empty() ? "" : "; ") + std::string(scheduleName(schedule)) + " " + mib(arena);
  std::printf("  device arena   %s, schedule %s%s%s\n", mib(plan.arena_bytes()).c_str(), scheduleName(stages.schedule),
              measured.empty() ? "" : (" (chosen for the budget: " + measured + ")").c_str(),
              o.device_mem ? (", budget " + mib(o.device_mem) + " (" + budget_source + ")").c_str() : ", no budget");
  std::string forward_runs = "each block's forward runs once";
  if (stages.schedule == Schedule::kStreamedRecompute) {
    auto templates = getModelFunction(*module)->getAttrOfType<DenseI64ArrayAttr>(kTemplatesAttr);
    const int64_t blocks = templates ? templates.size() : 0;
    forward_runs = stages.recompute_keep == 0
                       ? "each block's forward runs twice (recomputed in the backward)"
                       : fmt::format("the forward of {} of {} blocks runs twice (recomputed; {}: the budget has room)",
                                     blocks - stages.recompute_keep, blocks,
                                     stages.recompute_keep == 1
                                         ? std::string("the last keeps its activations")
                                         : fmt::format("the last {} keep their activations", stages.recompute_keep));
  }
  std::printf("  per step       %.3e FLOP; %s; h2d %s (weights cross the link %.2fx%s), d2h %s; activations moved %s\n",
              stats.flops, forward_runs.c_str(), mib(stats.h2d_bytes).c_str(),
              stats.num_params ? double(stats.weight_h2d_numel) / stats.num_params : 0.0,
              stats.bf16_staging ? ", as bf16" : "",
              mib(stats.d2h_bytes).c_str(),
              stats.activation_bytes
                  ? (formatBytes(stats.activation_bytes, /*exact=*/false) + " (kept ones offloaded to the host and back" +
                     (o.offload == Offload::kOn ? ")" : ": the budget needs it)"))
                        .c_str()
                  : "none (kept on the device)");
  if (auto split = getModelFunction(*module)->getAttrOfType<ArrayAttr>(kVocabSplitAttr)) {
    std::string names;
    for (Attribute name : split) names += (names.empty() ? "" : ", ") + cast<StringAttr>(name).getValue().str();
    std::printf("  vocab split    %s in %lld chunks of about %lld rows (%s): one chunk's rows, and the LM head's "
                "logits of that chunk, on the device at a time; the head's products recomputed in the backward "
                "except the last chunk's\n",
                names.c_str(), (long long)stages.vocab_chunks,
                (long long)((emit.vocab + stages.vocab_chunks - 1) / stages.vocab_chunks),
                o.vocab_chunks > 0 ? "--vocab-chunks" : "the fewest that fit --device-mem");
  }
  if (o.precision == ComputePrecision::kBf16)
    std::printf("  precision      bf16 (--precision bf16): the device holds weights and activations in bf16 (rounded to "
                "nearest even; the weights to nearest, ties away from zero, on the host: the master held exactly as its "
                "bf16 copy + a 16-bit residual, no host bytes added); products, attention, norms and reductions "
                "accumulate in f32; norms' statistics, log-sum-exps, the loss and the weights' gradients are f32; "
                "master weights and AdamW moments fp32 on the host. Lossy: every bf16 activation and weight read\n");
  else
    std::printf("  precision      fp32 (--precision fp32): everything in f32 on the device (TF32 products only with "
                "mtrun --tf32)\n");
  if (stats.bf16_staging && o.precision != ComputePrecision::kBf16)
    std::printf("  staging        the weights cross the link as bf16 copies of the fp32 master (rounded to nearest, "
                "ties away from zero; widened on the device): half the bytes, and the forward and backward see "
                "bf16-rounded weights; master, moments and gradients stay fp32, the master held exactly as its bf16 "
                "copy + a 16-bit residual, no host bytes added (--stream-dtype bf16)\n");
  if (stages.host_embedding) {
    std::string tables;
    func::FuncOp func = getModelFunction(*module);
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto table = func.getArgAttrOfType<StringAttr>(i, kEmbeddedTokensAttr))
        tables += (tables.empty() ? "" : ", ") + table.getValue().str();
    std::printf("  embedding      the tokens looked up in %s on the host, its gradient scatter-added there (%s): "
                "the tokens' rows cross the link, %s per step each way, not the table\n",
                tables.c_str(), o.embedding == EmbeddingPlace::kHost ? "--embedding host" : "the vocabulary split needs the tied "
                "head's weight read by the head alone",
                formatBytes(stats.token_row_bytes / 2, /*exact=*/false).c_str());
  }
  if (auto pinned = getModelFunction(*module)->getAttrOfType<IntegerAttr>(kPinnedBytesAttr))
    std::printf("  shared weights %s used by blocks far apart (a tied embedding and LM head) stay on the device "
                "all step: copied in once, not per block\n",
                mib(pinned.getInt()).c_str());
  // Model TFLOP/s as MegaTrain reports it: 6 * parameters * tokens over the step time.
  const double model_tflops = 6.0 * stats.num_params * emit.batch * emit.seq / (stats.step_us * 1e-6) / 1e12;
  // The floor: the busiest stream's work alone (FLOPs over the peak, bytes over the bandwidth),
  // what no schedule of this plan beats; the prediction adds the waits its dependencies cost.
  const double busy_us[] = {stats.compute_us, stats.h2d_us, stats.d2h_us, stats.host_us};
  const char* busy_names[] = {"compute", "the h2d link", "the d2h link", "the host optimizer"};
  const int busiest = static_cast<int>(std::max_element(busy_us, busy_us + 4) - busy_us);
  std::printf("  predicted step %s on %s = %.1f model TFLOP/s (compute %s, h2d %s, d2h %s, host %s); floor %s "
              "(%s alone); bottleneck: %s\n",
              millis(stats.step_us).c_str(), hw->name.c_str(), model_tflops, millis(stats.compute_us).c_str(),
              millis(stats.h2d_us).c_str(), millis(stats.d2h_us).c_str(), millis(stats.host_us).c_str(),
              millis(busy_us[busiest]).c_str(), busy_names[busiest], bottleneck.c_str());
  if (compute_busy < 0.95 && !idle.empty())
    std::printf("  compute busy   %.0f%% of the step; waits %s\n", 100 * compute_busy, idle.c_str());
  std::printf("  plan           %s (%d instructions on %d streams, %u events; %d stored: %d block templates), "
              "compiled in %.2f s\n",
              o.output.c_str(), instructions, plan.streams_size(), plan.num_events(), stored, plan.templates_size(),
              seconds);
  if (write_weights)
    std::printf("  weights        %s (seed %llu)\n", weights.c_str(), (unsigned long long)o.seed);
  else
    std::printf("  weights        not written (%s); mtrun initialises from the plan's seeded initializers\n",
                o.no_weights ? "--no-weights" : "over 2 GiB: pass --weights PATH to write them");
  return 0;
}

}  // namespace mt
