#include "compiler/Pipeline.h"

#include <sys/stat.h>

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
#include "compiler/Stages.h"
#include "compiler/Summary.h"
#include "compiler/TrainableParams.h"
#include "compiler/onnx/OnnxImporter.h"
#include "models/BuiltinModels.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/io/error.h"
#include "runtime/io/atomic_folder.h"
#include "runtime/io/format_bytes.h"
#include "runtime/io/safetensors.h"
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

// When AdamW runs (--update): auto keeps the exact, deferred update unless its host bytes (16
// per trained parameter, 4 per frozen one) exceed --host-mem; then the on-arrival update (no
// gradients kept) is chosen and `note` says why.
UpdateKind chooseUpdate(const CompileOptions& o, ParamCount params, std::string& note) {
  if (o.update) return *o.update;
  const double per_param = 16.0;  // bf16 streaming included: the master is then split, not copied
  const double deferred_bytes = per_param * (params.all - params.frozen) + 4.0 * params.frozen;
  if (o.host_mem <= 0 || deferred_bytes <= o.host_mem) return UpdateKind::kDeferred;
  note = fmt::format("chosen for --host-mem: the deferred update's {:.0f} bytes/trained param would need {}",
                     per_param, formatBytes(deferred_bytes));
  return UpdateKind::kOnArrival;
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

// What loading gives the rest of the pipeline: the module and what the summary says of it.
struct LoadedModel {
  OwningOpRef<ModuleOp> module;
  std::string description;
  ModelConfig config;                  // built-in models and Hugging Face folders
  onnximport::ImportedModel imported;  // ONNX imports
  std::optional<HuggingFaceModel> hf;
  std::optional<UpdateKind> update;    // chosen with the batch where there is a config
  std::string update_note, batch_note;
  SearchHints searched;                // --batch auto: what the chosen batch's trial found
};

// Each load phase prints its error and returns false, or fills `m`.
bool importOnnx(MLIRContext& context, const CompileOptions& o, LoadedModel& m) {
  onnximport::ImportOptions options;
  options.training = !o.forward_only;
  options.frozen_pattern = o.frozen;
  options.trainable_pattern = o.trainable;
  options.batch = o.batch;
  options.seq = o.seq;
  try {
    m.module = onnximport::importModel(context, o.model, options, &m.imported);
  } catch (const onnximport::ImportError& e) {
    std::fprintf(stderr, "mtc: error: %s: %s\n", o.model.c_str(), e.what());
    return false;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "mtc: error: %s: out of memory while importing\n", o.model.c_str());
    return false;
  }
  m.description = fmt::format("{} (ONNX, {} parameter tensors from its initializers)", o.model, m.imported.params.size());
  return true;
}

// The model's shape in the summary: "llama, 2 layers, width 64, ...".
std::string describeShape(const std::string& origin, const ModelConfig& c) {
  std::string experts;
  const bool oss = c.expert_form == ModelConfig::ExpertForm::kGptOss;
  if (c.experts) {
    const std::string routing = oss                 ? fmt::format(", softmax of the top k; gpt-oss's biased experts, "
                                                                  "SwiGLU clamped at {:g}", c.swiglu_limit)
                                : c.normalize_topk ? ", renormalised"
                                                   : "";
    experts = fmt::format(", {} experts of width {} (top {}{}) in {} of {} layers{}", c.experts, c.expert_ffn,
                          c.experts_per_token, routing, c.moeLayers(), c.layers,
                          c.router_aux_loss_coef > 0 ? fmt::format(", load-balancing loss x {:g} trained on",
                                                                   c.router_aux_loss_coef)
                                                     : "");
  }
  // The factor in effect (YaRN's from the two contexts where the config names the original).
  const std::string rope = c.rope_scaling.kind == RopeScaling::Kind::kNone
                               ? ""
                               : fmt::format(", rope scaled ({} x {:g})", ropeScalingName(c.rope_scaling.kind),
                                             ropeScalingAttrs(c).values[0]);
  int64_t sliding = 0;
  for (int64_t l = 0; l < c.layers; ++l) sliding += c.attentionWindow(l) > 0;
  const std::string window =
      sliding ? fmt::format(", {}-token windows in {} of {} layers", c.sliding_window, sliding, c.layers) : "";
  return fmt::format("{}, {} layers, width {}, {} heads / {} kv{}, ffn {}, vocab {}{}{}{}{}{}{}{}", origin, c.layers,
                     c.width, c.heads, c.kv_heads, c.head_dim ? fmt::format(" of width {}", c.head_dim) : "", c.ffn,
                     c.vocab, c.score_head == ModelConfig::ScoreHead::kNew          ? ", a new score head (seeded)"
                     : c.score_head == ModelConfig::ScoreHead::kPretrained ? ", its score head"
                     : c.tied                                              ? ", tied" : "",
                     c.o_bias ? ", q/k/v/o biases" : c.qkv_bias ? ", q/k/v biases" : "", c.qk_norm ? ", q/k norms" : "", c.attention_sinks ? ", attention sinks" : "", window, rope, experts);
}

// What --objective dpo, kto or reward cannot be combined with ("" if nothing).
std::string preferenceProblem(const CompileOptions& o) {
  const bool kto = o.loss.objective == LossObjective::kKto;
  const char* flag = kto ? "--objective kto" : o.loss.objective == LossObjective::kReward ? "--objective reward"
                                                                                        : "--objective dpo";
  const char* pairs = kto ? "(example, KL row)" : "(chosen, rejected)";
  if (o.packed_examples)
    return fmt::format("{} trains on {} rows, one reply each: drop --packed-examples", flag, pairs);
  if (o.batch % 2 != 0)
    return fmt::format("{} needs an even --batch (its rows are {} pairs), not {}", flag, pairs, o.batch);
  return "";
}

// mtc --frozen / --trainable / --lora on the loaded model: prints the problem and returns false,
// or marks (and adds the adapters).
bool markTrainable(const CompileOptions& o, LoadedModel& m) {
  const std::string problem = selectTrainable(*m.module, o);
  if (!problem.empty()) std::fprintf(stderr, "mtc: error: %s: %s\n", o.model.c_str(), problem.c_str());
  return problem.empty();
}

// A built-in model or a Hugging Face folder from its config: the shape checked, the update
// kind and the batch chosen (--batch auto: by trial compiles against both budgets), the module
// built with `init`'s parameters.
bool buildFromConfig(MLIRContext& context, const CompileOptions& o, const HardwareProfile& hw, ParamInit init,
                     LoadedModel& m) {
  const ModelConfig& config = m.config;
  const int64_t seq = o.seq ? o.seq : config.context;
  std::string problem = validateConfig(config, seq);
  if (problem.empty() && o.batch != 0) problem = validateBatch(o.batch, seq);
  if (problem.empty() && o.router_aux_loss && !std::isfinite(*o.router_aux_loss))
    problem = "--router-aux-loss must be a finite coefficient";
  if (problem.empty() && o.router_aux_loss && o.forward_only)
    problem = "--router-aux-loss is a training loss; a --forward-only plan has none (drop it)";
  if (problem.empty() && o.router_aux_loss && !config.experts)
    problem = "--router-aux-loss is the load-balancing loss of a mixture of experts' router; this model has none";
  if (problem.empty() && o.batch == 0 && o.forward_only)
    problem = "--forward-only takes a --batch of its own (the sequences sampled at once; 1 for mtgen's one sample)";
  if (problem.empty() && rowsInPairs(o.loss.objective)) problem = preferenceProblem(o);
  if (problem.empty() && o.batch == 0 && o.device_mem == 0)
    problem = "--batch auto needs --device-mem (or a GPU --hw profile) to size the batch against";
  if (!problem.empty()) {
    std::fprintf(stderr, "mtc: error: %s: %s\n", o.model.c_str(), problem.c_str());
    return false;
  }
  ParamCount params{static_cast<double>(config.numParams())};
  if (o.frozen || o.trainable || o.lora_rank) {
    // What trains, and any problem with the selection, before a batch search (the model itself,
    // where its batch is given).
    m.module = buildModel(context, config, o.batch ? o.batch : batchUnit(o), seq, init, modelForm(o));
    if (!markTrainable(o, m)) return false;
    params = countParams(*m.module);
  }
  m.update = chooseUpdate(o, params, m.update_note);
  if (o.batch != 0 && m.module) return true;
  int64_t batch = o.batch;
  if (batch == 0) {
    const BatchChoice choice = searchBatch(context, config, seq, o, *m.update, hw);
    if (choice.batch == 0) {
      std::fprintf(stderr, "mtc: error: not even batch %lld of %s fits --device-mem %s%s: it needs %s\n",
                   static_cast<long long>(batchUnit(o)), o.model.c_str(), formatBytes(o.device_mem).c_str(),
                   o.host_mem > 0 ? (" and --host-mem " + formatBytes(o.host_mem)).c_str() : "",
                   choice.note.c_str());
      return false;
    }
    batch = choice.batch, m.batch_note = choice.note, m.searched = choice.hints;
  }
  m.module = buildModel(context, config, batch, seq, init, modelForm(o));
  return markTrainable(o, m);
}

bool loadHuggingFace(MLIRContext& context, const CompileOptions& o, const HardwareProfile& hw, LoadedModel& m) {
  m.hf = readHuggingFaceFolder(o.model);
  const ModelConfig& v = o.overrides;
  if (v.layers || v.width || v.heads || v.kv_heads || v.ffn || v.vocab || v.experts || v.experts_per_token ||
      v.expert_ffn || o.tied) {
    std::fprintf(stderr, "mtc: error: %s is a pretrained model: its shape is its config's (drop --layers, --width, "
                 "--heads, --kv-heads, --ffn, --vocab, --experts, --experts-per-token, --expert-ffn, --tied/--untied; "
                 "--context may shorten it)\n", o.model.c_str());
    return false;
  }
  const bool reward = o.loss.objective == LossObjective::kReward;
  if (m.hf->config.hasScoreHead() && !reward) {
    std::fprintf(stderr, "mtc: error: %s is a reward model (%s: one score per sequence, no LM head): compile it with "
                 "--objective reward\n", o.model.c_str(), m.hf->architecture.c_str());
    return false;
  }
  m.config = m.hf->config;
  if (reward && !m.config.hasScoreHead()) m.config.score_head = ModelConfig::ScoreHead::kNew;
  CompileOptions named = o;  // --frozen / --trainable match the folder's tensor names too
  for (const auto& [ours, source] : m.hf->weights) named.param_source_names[ours] = source.place.name;
  if (v.context) m.config.context = std::min(m.config.context, v.context);
  if (o.router_aux_loss) m.config.router_aux_loss_coef = *o.router_aux_loss;
  m.description = fmt::format("{} ({})", o.model, describeShape("Hugging Face " + m.hf->architecture, m.config));
  return buildFromConfig(context, named, hw, ParamInit::kWeightsFile, m);
}

bool loadPreset(MLIRContext& context, const CompileOptions& o, const HardwareProfile& hw, LoadedModel& m) {
  const ModelPreset* preset = findModelPreset(o.model);
  struct stat st {};
  const bool exists = stat(o.model.c_str(), &st) == 0;
  if (!preset && (exists || o.model.find('/') != std::string::npos)) {
    // A path, not a preset's name: say what is wrong with the path.
    std::fprintf(stderr, "mtc: error: %s %s\n", o.model.c_str(),
                 !exists ? "does not exist"
                 : S_ISDIR(st.st_mode)
                     ? "is a folder without config.json: a Hugging Face model folder holds config.json and its weights"
                     : "is neither a .mlir nor an .onnx file");
    return false;
  }
  if (!preset) {
    std::string known;
    for (const auto& p : modelPresets()) known += " " + p.name;
    std::fprintf(stderr,
                 "mtc: error: '%s' is not a .mlir or .onnx file, a Hugging Face folder (with config.json) or a built-in "
                 "model (built-in:%s)\n",
                 o.model.c_str(), known.c_str());
    return false;
  }
  ModelConfig& config = m.config;
  config = preset->config;
  const ModelConfig& v = o.overrides;
  for (auto [field, value] :
       {std::pair{&config.layers, v.layers}, {&config.width, v.width}, {&config.heads, v.heads},
        {&config.kv_heads, v.kv_heads}, {&config.ffn, v.ffn}, {&config.vocab, v.vocab},
        {&config.context, v.context}, {&config.experts, v.experts}, {&config.experts_per_token, v.experts_per_token},
        {&config.expert_ffn, v.expert_ffn}})
    if (value) *field = value;
  // Another layer count repeats the preset's pattern of sliding layers (gpt-oss's every other one).
  if (v.layers && !preset->config.sliding_layers.empty()) {
    const auto& pattern = preset->config.sliding_layers;
    config.sliding_layers.clear();
    for (int64_t l = 0; l < config.layers; ++l)
      if (std::find(pattern.begin(), pattern.end(), l % preset->config.layers) != pattern.end())
        config.sliding_layers.push_back(l);
  }
  if (v.heads && !v.kv_heads && config.family == ModelFamily::kGpt2) config.kv_heads = config.heads;
  if (o.tied) config.tied = *o.tied;
  if (o.router_aux_loss) config.router_aux_loss_coef = *o.router_aux_loss;
  if (o.loss.objective == LossObjective::kReward) config.score_head = ModelConfig::ScoreHead::kNew;
  m.description = fmt::format("{} ({})", o.model, describeShape(familyName(config.family), config));
  return buildFromConfig(context, o, hw, ParamInit::kSeeded, m);
}

// The model `o.model` names, by its kind: an ONNX file, a Hugging Face folder, mt IR, a preset.
bool loadModel(MLIRContext& context, llvm::SourceMgr& sources, const CompileOptions& o, const HardwareProfile& hw,
               LoadedModel& m) {
  auto endsWith = [&](const std::string& suffix) {
    return o.model.size() > suffix.size() && o.model.compare(o.model.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const bool from_config = !endsWith(".onnx") && !endsWith(".mlir");
  if (o.router_aux_loss && !from_config) {
    std::fprintf(stderr, "mtc: error: %s: --router-aux-loss is for a mixture of experts built from a preset or a "
                 "Hugging Face folder\n", o.model.c_str());
    return false;
  }
  if (o.kv_cache && !from_config) {
    std::fprintf(stderr, "mtc: error: %s: --kv-cache builds the decode step of a built-in model or a Hugging Face "
                 "folder (its attention is known); for this model use --forward-only alone (mtgen then recomputes "
                 "the window for each token)\n", o.model.c_str());
    return false;
  }
  if (o.loss.objective == LossObjective::kReward && !from_config) {
    std::fprintf(stderr, "mtc: error: %s: --objective reward puts a score head on a built-in model or a Hugging Face "
                 "folder (an imported graph computes its own logits)\n", o.model.c_str());
    return false;
  }
  if (o.packed_examples && !from_config) {
    std::fprintf(stderr, "mtc: error: %s: --packed-examples builds the attention of a built-in model or a Hugging "
                 "Face folder (an imported graph computes its own); train this model with mtrun --rows examples (one "
                 "example per row) instead\n", o.model.c_str());
    return false;
  }
  if (o.lora_rank && endsWith(".onnx")) {
    std::fprintf(stderr, "mtc: error: %s: --lora adapts a built-in model, a Hugging Face folder or mt IR; an ONNX "
                 "import keeps what does not train as constants (--frozen, --trainable train part of it)\n",
                 o.model.c_str());
    return false;
  }
  if (endsWith(".onnx")) return importOnnx(context, o, m);
  if (isHuggingFaceFolder(o.model)) return loadHuggingFace(context, o, hw, m);
  if (from_config) return loadPreset(context, o, hw, m);
  m.module = parseSourceFile<ModuleOp>(o.model, sources, ParserConfig(&context));
  if (!m.module) {
    std::fprintf(stderr, "mtc: error: cannot parse %s (see the diagnostics above)\n", o.model.c_str());
    return false;
  }
  m.description = o.model;
  return markTrainable(o, m);
}

// --forward-only: the model function's one result, its logits, becomes the output "logits" (an
// ONNX evaluation import and a .mlir function with outputs are forward-only already).
bool markForwardOnly(ModuleOp module, const std::string& model) {
  func::FuncOp func = getModelFunction(module);
  if (!func) return false;
  if (isForwardOnly(func)) return true;
  if (func.getNumResults() != 1 || func.getResultAttr(0, kLossAttr)) {
    std::fprintf(stderr, "mtc: error: %s: --forward-only needs a model function returning its logits alone\n",
                 model.c_str());
    return false;
  }
  func.setResultAttr(0, kOutputAttr, StringAttr::get(module.getContext(), "logits"));
  return true;
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
  return std::string(stats.bf16_staging ? "fp32 master weights (held as their bf16 copies + 16-bit residuals)"
                                        : "fp32 master weights") +
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
                  const std::string& weights) {
  try {
    if (write_weights && !m.imported.params.empty()) writeImportedWeights(m.imported, plan, weights);
    else if (write_weights && m.hf) writeHuggingFaceWeights(*m.hf, plan, weights);
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
  report.weights_origin = m.hf ? "the folder's weights, widened to f32"
                          : !m.imported.params.empty() ? "the ONNX model's initializers"
                                                       : fmt::format("seed {}", o.seed);
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

  // Load, then compile through the stages.
  LoadedModel m;
  if (!loadModel(compiler.context(), compiler.sourceMgr(), o, hw, m)) return 1;
  if (o.forward_only && !markForwardOnly(*m.module, o.model)) return 1;
  if (failed(verify(*m.module))) {
    std::fprintf(stderr, "mtc: error: the input IR does not verify\n");
    return 1;
  }
  if (!m.update) m.update = chooseUpdate(o, countParams(*m.module), m.update_note);
  StageOptions stage_options = stageOptions(o, *m.update, o.emit, true);
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
  if (m.config.experts) emit.active_params = m.config.numActiveParams();
  if (o.lora_rank) emit.lora_alpha = o.lora_alpha;
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
  if (!writeOutputs(o, m, plan, report.write_weights, report.weights)) return 1;

  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  describeChoices(m, budget_source, report);
  printSummary(report, *m.module, stages, emit, plan, stats);
  return 0;
}

}  // namespace mt
