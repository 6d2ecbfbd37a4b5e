#include "compiler/Pipeline.h"

#include <filesystem>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "compiler/BatchSearch.h"
#include "compiler/Emitter.h"
#include "compiler/HuggingFace.h"
#include "compiler/LoadModel.h"
#include "compiler/PeftAdapter.h"
#include "compiler/Stages.h"
#include "compiler/Summary.h"
#include "compiler/TrainableParams.h"
#include "compiler/onnx/OnnxImporter.h"
#include "models/BuiltinModels.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/io/error.h"
#include "runtime/io/atomic_folder.h"
#include "runtime/io/format_bytes.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/huggingface_names.h"
#include "runtime/plan/initializer.h"
#include "runtime/plan/plan_queries.h"

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

void writeInitialWeights(const plan::Plan& plan, const std::string& path) {
  std::vector<std::vector<float>> data(plan.host_tensors_size());
  std::vector<SafetensorsTensor> tensors;
  for (int i = 0; i < plan.host_tensors_size(); ++i) {
    const auto& t = plan.host_tensors(i);
    if (t.role() != plan::ROLE_PARAM) continue;
    const int64_t n = checkedNumel(t.shape(), t.name());
    data[i].resize(n);
    if (t.init().kind() != plan::Initializer::ROW_NORMS)
      initializeTensor(data[i].data(), n, t.init(), plan.init_seed(), t.name());
    tensors.push_back({t.name(), "F32", {t.shape().begin(), t.shape().end()}, data[i].data(), n * 4});
  }
  for (int i = 0; i < plan.host_tensors_size(); ++i)  // from their sources' values, now set
    if (const int source = rowNormSource(plan, plan.host_tensors(i)); source >= 0)
      initializeRowNorms(plan.host_tensors(i), plan.host_tensors(source), data[source].data(), data[i].data());
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

// What the host holds for the plan, in words, for the summary and the --host-mem error.
std::string hostParts(const plan::Plan& plan, const PlanStats& stats) {
  if (!isTrainingPlan(plan))
    return std::any_of(plan.host_tensors().begin(), plan.host_tensors().end(),
                       [](const plan::HostTensor& t) { return t.name() == "cache.0.key"; })
               ? "fp32 weights, the tokens, the key/value cache and the outputs"
               : "fp32 weights, the tokens and the outputs";
  const int landing = gradLandingTensor(plan);
  int64_t activation_host_bytes = 0;
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_ACTIVATION) activation_host_bytes += hostTensorBytes(t);
  const std::string moments = stats.frozen_params ? "two AdamW moments (of the trained parameters)" : "two AdamW moments";
  const bool bf16_alone = std::any_of(plan.host_tensors().begin(), plan.host_tensors().end(),
                                      [](const plan::HostTensor& t) { return t.bf16_only(); });
  return std::string(!stats.bf16_staging ? "fp32 master weights"
                     : bf16_alone ? "fp32 master weights (held as their bf16 copies + 16-bit residuals; the frozen "
                                    "ones of bf16 values as their bf16 copies alone)"
                                  : "fp32 master weights (held as their bf16 copies + 16-bit residuals)") +
         (landing < 0 ? ", gradients, " + moments
                      : std::string(gradientsKeptApart(plan) ? ", gradients (each rank of a data-parallel job its "
                                                               "slice), "
                                                             : ", ") + moments +
                            ", a gradient landing buffer of " +
                            formatBytes(4.0 * checkedNumel(plan.host_tensors(landing).shape(), "landing"))) +
         (activation_host_bytes ? ", offloaded activations " + formatBytes(activation_host_bytes)
                                : "");
}

// The initial weights, then the plan, each atomically: a failure in either (a full disk, an
// import's external data refused only as it is read) leaves neither, never a plan without the
// weights it names. Returns false after printing the error.
bool writeOutputs(const CompileOptions& o, const LoadedModel& m, const plan::Plan& plan, bool write_weights,
                  const std::string& weights, const std::optional<PeftAdapter>& adapter) {
  try {
    // --lora-from: the adapter's tensors checked against the plan before anything is written.
    const WeightOverrides overrides = adapter ? peftWeights(*adapter, plan, *m.hf, o.forward_only) : WeightOverrides{};
    if (write_weights && !m.imported.params.empty()) writeImportedWeights(m.imported, plan, weights);
    else if (write_weights && m.hf) writeHuggingFaceWeights(*m.hf, plan, weights, overrides);
    else if (write_weights) writeInitialWeights(plan, weights);
    try {
      writePlan(plan, o.output);
    } catch (const Error&) {
      if (write_weights) std::remove(weights.c_str());
      throw;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "mtc: error: %s\n", e.what());
    return false;
  }
  return true;
}

// The MLIR context a compile runs in, and where its diagnostics go: with the source line for a
// model read from a file, plainly ("mtc: error: ...") for built-in models.
class CompilerContext {
 public:
  CompilerContext()
      : source_diagnostics_(source_mgr_, &context_, llvm::errs()),
        plain_diagnostics_(&context_, [](Diagnostic& d) {
          if (isa<FileLineColLoc>(d.getLocation())) return failure();  // to the source handler
          const char* kind = d.getSeverity() == DiagnosticSeverity::Error ? "error" : "note";
          llvm::errs() << "mtc: " << kind << ": " << d.str() << "\n";
          for (Diagnostic& note : d.getNotes()) llvm::errs() << "mtc: note: " << note.str() << "\n";
          return success();
        }) {
    context_.printOpOnDiagnostic(false);  // a 100B model's function is megabytes of text
    context_.getOrLoadDialect<MtDialect>();
    context_.getOrLoadDialect<func::FuncDialect>();
  }
  MLIRContext& context() { return context_; }
  llvm::SourceMgr& sourceMgr() { return source_mgr_; }

 private:
  MLIRContext context_;
  llvm::SourceMgr source_mgr_;
  SourceMgrDiagnosticHandler source_diagnostics_;
  ScopedDiagnosticHandler plain_diagnostics_;
};

// mtc --lora-from: the adapter folder's config read and, for a training plan, its settings put in
// `o` (a forward-only plan has the adapters merged into its weights as they are written). False
// after printing the problem.
bool readLoraFrom(CompileOptions& o, std::optional<PeftAdapter>& adapter, LoadedModel& m) {
  if (o.lora_from.empty()) return true;
  try {
    if (!isHuggingFaceFolder(o.model))
      throw Error("--lora-from puts a PEFT adapter on the Hugging Face folder it was trained from; " + o.model +
                  " is not one (a folder with config.json)");
    adapter = readPeftAdapter(o.lora_from);
    const bool reward = o.loss.objective == LossObjective::kReward;
    if (adapter->sequence_classifier && o.forward_only)
      throw Error(o.lora_from + "'s adapter is a reward model's (task_type SEQ_CLS), which has no forward-only plan: "
                  "compile it with --objective reward and score with mtrun --eval-only");
    if (adapter->sequence_classifier != reward)
      throw Error(o.lora_from + "'s adapter is " +
                  (reward ? "a causal LM's (task_type CAUSAL_LM or none), not the sequence classifier's (SEQ_CLS) a "
                            "reward model's score head needs"
                          : "a reward model's (task_type SEQ_CLS): compile it with --objective reward"));
    m.hf = readHuggingFaceFolder(o.model);  // read once: loadHuggingFace takes it as read
    if (!o.forward_only) applyPeftAdapter(*adapter, *m.hf, o);
  } catch (const Error& e) {
    std::fprintf(stderr, "mtc: error: %s\n", e.what());
    return false;
  }
  return true;
}

// The hardware and its budget: a GPU profile brings its device memory unless --device-mem says
// otherwise. False (with the message printed) for a bad --hw.
bool chooseHardware(const CompileOptions& requested, HardwareProfile& hw, CompileOptions& o,
                    std::string& budget_source) {
  if (const std::string problem = parseHardwareSpec(requested.hardware, hw); !problem.empty()) {
    std::fprintf(stderr, "mtc: error: %s\n", problem.c_str());
    return false;
  }
  o = requested;
  budget_source = o.device_mem ? "--device-mem" : "";
  if (!o.device_mem && hw.device_budget_bytes) {
    o.device_mem = hw.device_budget_bytes;
    budget_source = "the " + hw.name + " profile's; --device-mem overrides";
  }
  return true;
}

// The plan's host bytes against --host-mem: false (with the message printed) when they do not fit.
bool checkHostBudget(const CompileOptions& o, const plan::Plan& plan, const PlanStats& stats, CompileReport& report) {
  report.host_bytes = planHostBytes(plan);
  report.host_parts = hostParts(plan, stats);
  if (o.ranks > 1) {  // a host of the job: its ranks share the master weights and shard the optimizer
    const double host = hostBytesPerHost(plan, o.ranks, o.ranks_per_host);
    if (o.host_mem <= 0 || host <= o.host_mem) return true;
    std::fprintf(stderr,
                 "mtc: error: each host of the %lld-rank job needs %s of host memory (%lld ranks on it: the master "
                 "weights once, each rank its share of the moments and gradients and its own buffers) but --host-mem "
                 "is %s: use hosts with at least %s, fewer ranks per "
                 "host (--ranks-per-host), or a smaller model\n",
                 (long long)o.ranks, formatBytes(host).c_str(), (long long)o.ranks_per_host,
                 formatBytes(o.host_mem).c_str(), formatBytes(host).c_str());
    return false;
  }
  if (o.host_mem <= 0 || report.host_bytes <= o.host_mem) return true;
  std::fprintf(stderr,
               "mtc: error: the plan needs %s of host memory (%.1f bytes for each of %s parameters: %s) but "
               "--host-mem is %s: use a machine with at least %s%s or a smaller model\n",
               formatBytes(report.host_bytes).c_str(), double(report.host_bytes) / stats.num_params,
               formatParamCount(stats.num_params).c_str(), report.host_parts.c_str(), formatBytes(o.host_mem).c_str(),
               formatBytes(report.host_bytes).c_str(),
               updatesOnArrival(planUpdateKind(plan))
                   ? ""
                   : ", compile with --update on-arrival (about 12 bytes/param; no global-norm clipping),");
  return false;
}

// Whether mtc writes the initial weights, and where. Writing a large model's costs minutes and
// its full size on disk; mtrun builds the same weights from the plan's seeded initializers.
void chooseWeightsOutput(const CompileOptions& o, const LoadedModel& m, const PlanStats& stats, CompileReport& report) {
  report.weights = o.weights;
  const bool imported = !m.imported.params.empty() || m.hf;  // an import's weights exist only there
  const bool explicit_weights = !report.weights.empty() || imported;
  if (report.weights.empty()) report.weights = weightsBesidePlan(o.output);
  constexpr int64_t kAutoWeightsLimit = int64_t{1} << 29;  // parameters (2 GiB of fp32)
  report.write_weights = !o.no_weights && (explicit_weights || stats.num_params <= kAutoWeightsLimit);
  report.weights_origin = m.hf && !o.lora_from.empty()
                              ? (o.forward_only ? "the folder's weights with --lora-from's adapters merged in, f32"
                                                : "the folder's weights and --lora-from's adapters, widened to f32")
                          : m.hf ? "the folder's weights, widened to f32"
                          : !m.imported.params.empty() ? "the ONNX model's initializers"
                                                       : fmt::format("seed {}", o.seed);
  if (m.hf && m.hf->weightless)
    report.weights_needed = "the folder holds config.json alone: the plan sizes and predicts the model; to train, "
                            "compile the folder with its weights";
  else if (imported)
    report.weights_needed = "the plan's parameters are the model's own weights: compile without --no-weights to "
                            "write them, or pass mtrun --weights FILE";
}

// What the summary says of the model and the choices made for it.
void describeChoices(const LoadedModel& m, const std::string& budget_source, CompileReport& report) {
  report.description = m.description;
  if (m.hf) report.notes = m.hf->notes;
  report.kept_constant = m.imported.kept_constant;
  for (const auto& p : m.imported.params)
    if (p.name != p.initializer) report.path_names.push_back({p.name, p.initializer, p.transposed});
  report.batch_note = m.batch_note;
  report.update = *m.update;
  report.update_note = m.update_note;
  report.budget_source = budget_source;
}

}  // namespace

int compile(const CompileOptions& requested) {
  const auto start = std::chrono::steady_clock::now();
  CompilerContext compiler;
  HardwareProfile hw;
  CompileOptions o;
  std::string budget_source;
  if (!chooseHardware(requested, hw, o, budget_source)) return 1;
  LoadedModel m;
  std::optional<PeftAdapter> adapter;
  if (!readLoraFrom(o, adapter, m)) return 1;

  // Load, then compile through the stages.
  if (!loadModel(compiler.context(), compiler.sourceMgr(), o, hw, m)) return 1;
  if (o.forward_only && !markForwardOnly(*m.module, o.model)) return 1;
  if (failed(verify(*m.module))) {
    std::fprintf(stderr, "mtc: error: the input IR does not verify\n");
    return 1;
  }
  if (!m.update) m.update = chooseUpdate(o, countParams(*m.module), m.update_note);
  StageOptions stage_options = stageOptions(o, hw, *m.update, o.emit, true);
  stage_options.max_keep = m.searched.max_keep;  // what --batch auto's trial of this batch kept
  const StageResult stages = runStages(*m.module, stage_options);
  if (stages.failed) {
    std::fprintf(stderr, "mtc: error: stage '%s' failed (see the diagnostics above)\n", stageName(*stages.failed));
    return 1;
  }
  if (o.emit) {
    // With locations: module paths (the layer blocks) survive a round trip through text.
    m.module->print(llvm::outs(), OpPrintingFlags().enableDebugInfo());
    llvm::outs() << "\n";
    return 0;
  }

  // Emit the plan, check it against the host, write it and its weights.
  EmitOptions emit;
  emit.model_name = o.model;
  modelShape(*m.module, emit.batch, emit.seq, emit.vocab);
  emit.init_seed = o.seed;
  emit.hardware = hw;
  // A reward model's config is its ...ForSequenceClassification's, as --export-hf writes it.
  emit.hf_config = !m.hf                     ? huggingFaceConfig(m.config)
                   : m.config.hasScoreHead() ? sequenceClassifierConfig(m.hf->config_json)
                                             : m.hf->config_json;
  if (m.hf) emit.hf_source = withoutTrailingSlashes(std::filesystem::absolute(o.model).lexically_normal().string());
  if (m.hf && !m.hf->multimodal.empty()) emit.hf_module_prefix = kMultimodalLanguageModel;
  if (m.config.experts) emit.active_params = m.config.numActiveParams();
  if (o.lora_rank) {
    emit.lora_alpha = o.lora_alpha;
    emit.lora_rslora = o.lora_rslora;
    emit.lora_dropout = o.lora_dropout;
  }
  plan::Plan plan;
  PlanStats stats;
  if (failed(emitPlan(*m.module, emit, plan, stats))) {
    std::fprintf(stderr, "mtc: error: cannot emit the plan (see the diagnostics above)\n");
    return 1;
  }
  if (o.output.empty()) {
    std::fprintf(stderr, "mtc: error: no output: give -o model.plan (or --emit=<stage>)\n");
    return 1;
  }
  CompileReport report{o};
  if (!checkHostBudget(o, plan, stats, report)) return 1;
  chooseWeightsOutput(o, m, stats, report);
  if (!writeOutputs(o, m, plan, report.write_weights, report.weights, adapter)) return 1;

  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  describeChoices(m, budget_source, report);
  printSummary(report, *m.module, stages, emit, plan, stats);
  return 0;
}

}  // namespace mt
