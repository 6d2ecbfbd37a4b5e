#include "runtime/training/trainer.h"

#include <sys/ioctl.h>
#include <unistd.h>
#include <fmt/format.h>
#include <filesystem>
#include <atomic>
#include <csignal>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <memory>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <nlohmann/json.hpp>

#include "runtime/backends/backend.h"
#include "runtime/io/checksum.h"
#include "runtime/backends/cpu_libraries.h"
#include "runtime/training/checkpoint.h"
#include "runtime/backends/cuda_device.h"
#include "runtime/io/error.h"
#include "runtime/host/host_memory.h"
#include "runtime/host/host_store.h"
#include "runtime/training/run_setup.h"
#include "runtime/io/safetensors.h"
#include "runtime/training/step_report.h"
#include "runtime/data/token_data.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/plan/verifier.h"
#include "runtime/version.h"

namespace mt {

double learningRate(const TrainConfig& c, int64_t step) {
  if (step <= c.warmup) return c.lr * double(step) / double(c.warmup);
  const int64_t decay_steps = c.steps - c.warmup;
  if (decay_steps <= 1) return c.lr;
  const double progress = double(step - c.warmup - 1) / double(decay_steps - 1);
  const double min_lr = c.lr * c.min_lr_ratio;
  return min_lr + 0.5 * (c.lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

namespace {

std::atomic<int> g_stop_signal{0};

void onStopSignal(int signal) { g_stop_signal = signal; }

// The plan to train: read, verified, and a training plan.
plan::Plan readTrainingPlan(const TrainConfig& config) {
  plan::Plan plan = readPlan(config.plan_path);
  verifyPlan(plan);
  if (!isTrainingPlan(plan))
    throw Error(config.plan_path + " is a forward-only plan (inputs to outputs, no loss): it cannot be "
                "trained; compile the model without --forward-only");
  return plan;
}

// The optimizer's settings for this plan; throws for flags the plan cannot honour.
StepOptions stepOptions(const TrainConfig& config, const plan::Plan& plan) {
  const bool on_arrival = updatesOnArrival(planUpdateKind(plan));
  if (on_arrival && config.grad_clip > 0)
    throw Error("--grad-clip " + fmt::format("{}", config.grad_clip) + ": this plan updates each parameter as its "
                "gradient lands, before the global norm is known, so it cannot clip by it; pass --grad-clip 0 or "
                "compile with mtc --update deferred (16 bytes of host memory per parameter instead of ~12)");
  if (on_arrival && !config.grads_path.empty())
    throw Error("--dump-grads: this plan consumes each gradient as it lands and keeps none; compile with "
                "mtc --update deferred to dump them");
  StepOptions options;
  options.adamw.beta1 = config.beta1;
  options.adamw.beta2 = config.beta2;
  options.adamw.eps = config.eps;
  options.adamw.weight_decay = config.weight_decay;
  options.grad_clip = config.grad_clip >= 0 ? config.grad_clip : on_arrival ? 0.0 : 1.0;
  options.verify_transfers = config.verify_transfers;
  return options;
}

// A JSON-lines log whose every line is flushed and checked: a full disk ends the run with an
// error rather than an empty log and exit 0.
class JsonLog {
 public:
  JsonLog() = default;
  JsonLog(const std::string& path, bool append) : path_(path), file_(std::fopen(path.c_str(), append ? "a" : "w")) {
    if (!file_) throw Error("cannot write log " + path + ": " + std::strerror(errno));
  }
  explicit operator bool() const { return file_ != nullptr; }
  void write(const nlohmann::json& line) {
    const std::string text = line.dump() + "\n";
    if (std::fwrite(text.data(), 1, text.size(), file_.get()) != text.size() || std::fflush(file_.get()) != 0)
      throw Error("cannot write log " + path_ + ": " + std::strerror(errno));
  }

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, Close> file_;
};

// What the run writes, checked or taken before its first step, so that a bad path fails at once
// rather than after the training it was to keep: the export, trace and gradient paths writable,
// the checkpoint directory created and locked, the log opened.
struct RunOutputs {
  std::unique_ptr<CheckpointDir> checkpoints;
  JsonLog log;
};

RunOutputs openOutputs(const TrainConfig& config, const plan::Plan& plan) {
  for (auto [path, flag] : {std::pair{&config.export_path, "--export"}, {&config.trace_path, "--trace"},
                            {&config.grads_path, "--dump-grads"}})
    if (!path->empty()) checkWritable(*path, flag);
  if (!config.export_hf_dir.empty()) {
    checkHuggingFaceExport(plan);
    std::error_code error;
    std::filesystem::create_directories(config.export_hf_dir, error);
    if (error) throw Error("--export-hf: cannot create " + config.export_hf_dir + ": " + error.message());
    checkWritable(config.export_hf_dir + "/config.json", "--export-hf");
  }
  RunOutputs outputs;
  const std::string& dir = config.checkpoint_dir.empty() ? config.resume_dir : config.checkpoint_dir;
  if (!dir.empty()) {
    outputs.checkpoints = std::make_unique<CheckpointDir>(dir);
    if (outputs.checkpoints->removedLeftovers())
      std::printf("removed %d temporary file(s) of checkpoints interrupted while written in %s\n",
                  outputs.checkpoints->removedLeftovers(), dir.c_str());
  }
  if (!config.log_path.empty()) outputs.log = JsonLog(config.log_path, /*append=*/!config.resume_dir.empty());
  return outputs;
}

// Where this run's weights come from: recorded in every checkpoint and export, and carried over
// from the checkpoint a run resumes (with a note where the code or the data changed).
std::map<std::string, std::string> provenance(const TrainConfig& config, const plan::Plan& plan,
                                              const TokenFile& data, const std::string& initial_weights,
                                              const CheckpointState& resumed) {
  const std::string p = kProvenancePrefix;
  const std::string code = std::string("MegaTrain ") + kVersion;
  const std::string data_now = data.path() + ": " + std::to_string(data.size()) + " tokens, crc32c " +
                               hex32(data.checksum());
  if (resumed.provenance.empty())
    return {{p + "code", code},
            {p + "plan", config.plan_path + ": model " + plan.model().name() + ", fingerprint " + planFingerprint(plan)},
            {p + "data", data_now},
            {p + "initial_weights", initial_weights}};
  std::map<std::string, std::string> kept = resumed.provenance;
  const std::string since = "; from step " + std::to_string(resumed.step + 1) + ": ";
  if (kept[p + "code"].find(code) == std::string::npos) kept[p + "code"] += since + code;
  const std::string& data_then = kept[p + "data"];
  if (data_then.find("crc32c " + hex32(data.checksum())) == std::string::npos) {
    std::printf("note: the data differs from the checkpointed run's (%s; now %s)\n", data_then.c_str(),
                data_now.c_str());
    kept[p + "data"] += since + data_now;
  }
  return kept;
}

// The initial weights (`path`, from initialWeightsPath; "" for the seeded initializers), then
// the checkpoint to resume from; the state's provenance is this run's.
CheckpointState loadStartingState(const TrainConfig& config, const plan::Plan& plan, const TokenFile& data,
                                  const std::string& path, HostStore& store) {
  store.initialize(plan.init_seed());
  std::string initial_weights =
      "the plan's seeded initializers (seed " + std::to_string(plan.init_seed()) + ")";
  if (!path.empty()) {
    const SafetensorsFile weights(path);
    store.loadParams(weights);
    uint32_t crc = 0;  // of the parameters' bytes in plan order
    std::set<std::string> used;
    for (int p : store.params()) {
      const SafetensorsEntry& e = weights.entries().at(plan.host_tensors(p).name());
      crc = crc32c(e.data, static_cast<size_t>(e.bytes), crc);
      used.insert(plan.host_tensors(p).name());
    }
    initial_weights = path + " (crc32c " + hex32(crc) + " of its parameters' bytes in plan order)";
    std::string unused;
    int unused_count = 0;
    for (const auto& entry : weights.entries())
      if (!used.count(entry.first) && ++unused_count <= 3) unused += (unused.empty() ? "" : ", ") + entry.first;
    if (unused_count)
      std::printf("note: %s holds %d tensor%s the plan does not use (%s%s): not loaded\n", path.c_str(), unused_count,
                  unused_count == 1 ? "" : "s", unused.c_str(), unused_count > 3 ? ", ..." : "");
    std::printf("initial weights: %s\n", path.c_str());
  }
  CheckpointState resumed;
  resumed.seed = config.seed;
  if (config.resume_dir.empty()) {
    resumed.provenance = provenance(config, plan, data, initial_weights, resumed);
    return resumed;
  }
  const std::optional<std::string> latest = latestCheckpoint(config.resume_dir);
  if (!latest) throw Error("no checkpoint in " + config.resume_dir + " to resume from (write them with --checkpoint-dir)");
  resumed = loadCheckpoint(*latest, plan, store);
  std::printf("resuming from %s: step %lld done, data seed %llu\n", latest->c_str(),
              static_cast<long long>(resumed.step), static_cast<unsigned long long>(resumed.seed));
  if (resumed.total_steps != config.steps)
    std::printf("note: the checkpointed run had --steps %lld, this one %lld: the learning-rate schedule "
                "differs from the uninterrupted run's\n",
                static_cast<long long>(resumed.total_steps), static_cast<long long>(config.steps));
  resumed.provenance = provenance(config, plan, data, initial_weights, resumed);
  return resumed;
}

// "m:ss", or "h:mm:ss" from an hour.
std::string formatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

// The width of the terminal on stdout (80 if it does not say).
size_t terminalColumns() {
  struct winsize size {};
  if (ioctl(fileno(stdout), TIOCGWINSZ, &size) == 0 && size.ws_col > 1) return size.ws_col;
  return 80;
}

// What went wrong in a step whose loss or a gradient is not finite.
std::string nonfiniteProblem(const StepResult& result) {
  if (std::isfinite(result.loss)) return "the gradient '" + result.nonfinite_grad + "' holds NaN or Inf";
  return "the loss is " + std::to_string(result.loss) +
         (result.nonfinite_grad.empty() ? "" : " (first non-finite gradient: '" + result.nonfinite_grad + "')");
}

// Host bytes of --accumulate's running gradient sums: one f32 per gradient element, none
// without accumulation.
int64_t gradientSumBytes(const plan::Plan& plan, int64_t accumulate) {
  if (accumulate == 1) return 0;
  int64_t bytes = 0;
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_GRAD) bytes += hostTensorBytes(t);
  return bytes;
}

}  // namespace

// The sequences one optimizer step may draw (the sampler keys a row by 20 bits).
constexpr int64_t kMaxStepRows = int64_t{1} << 20;

// Every hyperparameter is checked before anything runs: none may crash the run (a zero
// interval) or reach the weights as NaN (issue 18). Throws naming the flag and what it takes.
void validateConfig(const TrainConfig& c) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw Error(what);
  };
  // Far beyond any run, and small enough that steps x tokens cannot overflow.
  constexpr int64_t kMaxSteps = int64_t{1} << 40;
  require(c.steps > 0, "--steps must be positive");
  require(c.steps <= kMaxSteps, "--steps " + std::to_string(c.steps) + " is beyond any run: give at most 2^40");
  require(c.accumulate >= 1 && c.accumulate <= kMaxStepRows,
          "--accumulate must be between 1 (no accumulation) and " + std::to_string(kMaxStepRows));
  require(std::isfinite(c.lr) && c.lr >= 0.0, "--lr must be a finite number >= 0");
  require(std::isfinite(c.min_lr_ratio) && c.min_lr_ratio >= 0.0 && c.min_lr_ratio <= 1.0,
          "--min-lr-ratio must be between 0 and 1");
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0, "--weight-decay must be a finite number >= 0");
  require(c.beta1 >= 0.0 && c.beta1 < 1.0, "--beta1 must be in [0, 1)");
  require(c.beta2 >= 0.0 && c.beta2 < 1.0, "--beta2 must be in [0, 1)");
  require(std::isfinite(c.eps) && c.eps > 0.0, "--eps must be a finite number > 0");
  require(!std::isnan(c.grad_clip) && std::isfinite(c.grad_clip),
          "--grad-clip must be a finite number (0: no clipping)");
  require(c.val_fraction >= 0.0 && c.val_fraction < 1.0, "--val-fraction must be in [0, 1)");
  require(c.val_data_path.empty() || c.val_fraction == 0.0,
          "--val-data and --val-fraction both name held-out tokens: give one of them");
  require(c.val_batches >= 1, "--val-batches must be at least 1");
  require(c.val_every >= 0, "--val-every must be 0 (at the end only) or positive");
  require(c.print_every >= 1, "--print-every must be at least 1");
  require(c.checkpoint_every >= 0, "--checkpoint-every must be 0 (at the end and on signals only) or positive");
  require(c.keep >= 1, "--keep must be at least 1");
  require(c.warmup >= 0 && c.warmup <= c.steps,
          "--warmup " + std::to_string(c.warmup) + " with --steps " + std::to_string(c.steps) +
              ": the warmup must be between 0 and the number of steps; pass a --warmup of at most " +
              std::to_string(c.steps));
}

int train(const TrainConfig& config) {
  validateConfig(config);
  const plan::Plan plan = readTrainingPlan(config);
  const auto& model = plan.model();
  StepOptions options = stepOptions(config, plan);
  const bool on_arrival = updatesOnArrival(planUpdateKind(plan));
  const std::string initial_weights = initialWeightsPath(config.weights_path, config.plan_path, plan);
  // The training tokens, and the held-out ones of --val-data: ids the model's vocabulary holds.
  auto openTokens = [&](const std::string& path) {
    auto file = std::make_unique<TokenFile>(path);
    if (file->vocabSize() > model.vocab())
      throw Error("token file " + path + " has vocab size " + std::to_string(file->vocabSize()) +
                  " but the model's vocabulary is " + std::to_string(model.vocab()) + ": tokenise with the model's " +
                  (isImported(plan) ? std::string("own tokenizer (an imported model's vocabulary is fixed)")
                                    : "tokenizer, or compile with --vocab " + std::to_string(file->vocabSize())));
    return file;
  };
  const std::unique_ptr<TokenFile> data_file = openTokens(config.data_path);
  const TokenFile& data = *data_file;
  const std::unique_ptr<TokenFile> val_data = config.val_data_path.empty() ? nullptr : openTokens(config.val_data_path);
  if (config.accumulate * model.batch() > kMaxStepRows)
    throw Error("--accumulate " + std::to_string(config.accumulate) + " at the plan's batch " +
                std::to_string(model.batch()) + " draws " + std::to_string(config.accumulate * model.batch()) +
                " sequences per step; at most " + std::to_string(kMaxStepRows) + " can be: accumulate fewer");
  const BackendKind backend_kind = chooseBackend(config.backend, config.tf32, plan);
  checkHostMemory(plan, HostExtras{backend_kind == BackendKind::kCpu, gradientSumBytes(plan, config.accumulate)});
  RunOutputs outputs = openOutputs(config, plan);

  HostStore store(plan);
  const CheckpointState resumed = loadStartingState(config, plan, data, initial_weights, store);
  const int64_t val_tokens = static_cast<int64_t>(config.val_fraction * data.size());
  BatchSampler sampler(data, model.batch(), model.seq(), resumed.seed, 0, data.size() - val_tokens);
  std::optional<BatchSampler> val_sampler;
  if (val_tokens > 0) val_sampler.emplace(data, model.batch(), model.seq(), resumed.seed ^ 0x7a1,
                                       data.size() - val_tokens);
  if (val_data) val_sampler.emplace(*val_data, model.batch(), model.seq(), resumed.seed ^ 0x7a1);
  std::unique_ptr<Backend> backend = createBackend(backend_kind, config.tf32, plan, store);

  const int64_t tokens_per_step = config.accumulate * model.batch() * model.seq();
  std::printf("mtrun: %s | %lld params | batch %lld x seq %lld | %s | backend %s (%s)\n",
              model.name().c_str(), static_cast<long long>(store.numParams()),
              static_cast<long long>(model.batch()), static_cast<long long>(model.seq()),
              model.precision() == "bf16" ? "bf16 plan (fp32 master weights and moments)" : "fp32",
              backend->name().c_str(), blasDescription().c_str());
  const std::string held_out =
      val_data ? fmt::format(", validation {} tokens ({})", val_data->size(), config.val_data_path)
      : val_tokens ? fmt::format(" (the last {} held out for validation)", val_tokens)
                   : std::string();
  std::printf("  host %.1f MiB (%.1f bytes/param), device arena %.1f MiB, data %lld tokens%s\n",
              store.totalBytes() / 1048576.0, double(store.totalBytes()) / double(store.numParams()),
              backend->arenaBytes() / 1048576.0, static_cast<long long>(data.size()), held_out.c_str());
  if (config.accumulate > 1)
    std::printf("  accumulating %lld micro-batches per step: %lld sequences per update, the gradients summed in "
                "%.1f MiB of host memory and their mean applied once\n",
                static_cast<long long>(config.accumulate), static_cast<long long>(config.accumulate * model.batch()),
                gradientSumBytes(plan, config.accumulate) / 1048576.0);
  if (on_arrival)
    std::printf("  AdamW runs per parameter as its gradient lands (mtc --update on-arrival): no global-norm "
                "clipping\n");
  std::fflush(stdout);

  // On a terminal the progress line is redrawn in place: other messages clear it first.
  const bool on_terminal = isatty(fileno(stdout));
  auto clear_status = [&] {
    if (on_terminal) std::printf("\r\033[K");
  };
  auto checkpoint = [&](int64_t step) {
    if (!outputs.checkpoints) return;
    backend->applyPendingUpdate();
    clear_status();
    outputs.checkpoints->write(plan, store, {step, resumed.seed, config.steps, resumed.provenance}, config.keep);
    std::printf("checkpoint: step %lld -> %s\n", static_cast<long long>(step), outputs.checkpoints->path().c_str());
  };
  // The mean loss over the same validation batches every time: no update, and only what the
  // loss needs runs (the plan's loss prefixes: no backward, no gradients).
  auto validate = [&](int64_t step) {
    if (!val_sampler) return;
    backend->applyPendingUpdate();  // validate the weights after this step's update
    StepOptions eval = options;
    eval.update = false;
    eval.loss_only = true;
    eval.micro_step = 0, eval.micro_steps = 1;  // one batch each, nothing accumulated
    eval.random.training = false;                // dropout off, as PyTorch's eval()
    // Each batch's loss is the mean over its counted targets: weighted by them (all of a batch's
    // without a loss mask), the validation loss is the mean over every counted target.
    double total = 0.0;
    int64_t counted = 0;
    for (int64_t i = 0; i < config.val_batches; ++i) {
      const int64_t c = val_sampler->fill(i, store.i32(store.tokens()), store.i32(store.targets()));
      const StepResult result = backend->runStep(eval);
      if (!result.corrupt_transfer.empty())  // a validation updates nothing: only its loss is wrong
        throw Error("validation after step " + std::to_string(step) + ": --verify-transfers: the bytes of " +
                    result.corrupt_transfer + " differ from the host's: the link or the device corrupted the copy. "
                    "Check the GPU (nvidia-smi -q: ECC errors; dmesg: Xid errors) and its link, then resume");
      total += static_cast<double>(c) * result.loss;
      counted += c;
    }
    if (counted == 0) {
      clear_status();
      std::printf("step %5lld/%lld  validation: the loss mask leaves out every target of the %lld held-out "
                  "batches: no loss\n", static_cast<long long>(step), static_cast<long long>(config.steps),
                  static_cast<long long>(config.val_batches));
      return;
    }
    const double val_loss = total / static_cast<double>(counted);
    clear_status();
    std::printf("step %5lld/%lld  validation loss %.4f (%lld held-out batches)\n", static_cast<long long>(step),
                static_cast<long long>(config.steps), val_loss, static_cast<long long>(config.val_batches));
    if (outputs.log) outputs.log.write({{"step", step}, {"val_loss", val_loss}});
  };
  auto exportWeights = [&](int64_t steps_done) {
    std::map<std::string, std::string> metadata = resumed.provenance;
    metadata[std::string(kProvenancePrefix) + "step"] = std::to_string(steps_done);
    if (!config.export_path.empty()) {
      store.saveParams(config.export_path, metadata);
      std::printf("weights written to %s\n", config.export_path.c_str());
    }
    if (!config.export_hf_dir.empty()) {
      exportHuggingFace(plan, store, config.export_hf_dir, config.export_dtype, metadata);
      std::printf("Hugging Face folder written to %s (%s)\n", config.export_hf_dir.c_str(),
                  config.export_dtype == ExportDtype::kBf16 ? "bf16" : "f32");
    }
  };
  g_stop_signal = 0;
  std::signal(SIGINT, onStopSignal);
  std::signal(SIGTERM, onStopSignal);

  double total_seconds = 0.0;
  int64_t steps_run = 0;
  StepReport report(plan, store);
  // --trace: the last training step's timeline (not a validation step's), written at the end.
  StepTimeline traced;
  auto writeTrace = [&] {
    if (config.trace_path.empty() || traced.empty()) return;
    std::ostringstream trace;
    writeMeasuredTrace(plan, traced, backend->name(), trace);
    writeFileAtomically(config.trace_path, trace.str());
  };
  // One optimizer step: --accumulate runs of the plan, micro-batch m holding rows
  // [m * batch, (m + 1) * batch) of the step's sequences (those a plan of the whole batch would
  // draw); the loss reported is the mean over the step's counted targets (every target without
  // a loss mask; with one, each micro-batch weighs by its counted targets). A step whose loss
  // mask leaves out every target updates nothing. `plan_runs`: each run's time and measured
  // timeline; `counted`: the step's counted targets.
  std::vector<std::pair<double, StepTimeline>> plan_runs;
  const bool masked = data.hasLossMask();
  int64_t transfers_verified = 0;  // --verify-transfers: copies to the device checked so far
  auto runOptimizerStep = [&](int64_t step, int64_t& counted) {
    StepResult result;
    double loss_sum = 0.0;
    counted = 0;
    plan_runs.clear();
    options.micro_steps = config.accumulate;
    for (int64_t m = 0; m < config.accumulate; ++m) {
      const int64_t c = sampler.fill(step - 1, store.i32(store.tokens()), store.i32(store.targets()), m * model.batch());
      counted += c;
      const bool last = m + 1 == config.accumulate;
      options.micro_step = m;
      options.micro_weight = masked ? static_cast<float>(c) : 1.0f;
      options.step_divisor = masked ? static_cast<float>(std::max<int64_t>(counted, 1))
                                    : static_cast<float>(config.accumulate);
      options.update = !(last && counted == 0);
      // Dropout's masks: keyed by the seed and this run's index, so a resumed run draws the same.
      options.random = {resumed.seed, static_cast<uint64_t>((step - 1) * config.accumulate + m), true};
      const auto start = std::chrono::steady_clock::now();
      result = backend->runStep(options);
      plan_runs.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                             backend->lastTimeline());
      loss_sum += masked ? static_cast<double>(c) * result.loss : result.loss;
      transfers_verified += result.transfers_verified;
      if (!result.corrupt_transfer.empty()) return result;  // the step is lost: nothing more to run
    }
    options.update = true;
    if (masked) result.loss = counted ? static_cast<float>(loss_sum / static_cast<double>(counted)) : 0.0f;
    else if (config.accumulate > 1) result.loss = static_cast<float>(loss_sum / static_cast<double>(config.accumulate));
    return result;
  };
  for (int64_t step = resumed.step + 1; step <= config.steps; ++step) {
    options.adamw.step = step;
    options.adamw.lr = learningRate(config, step);
    int64_t counted = 0;
    const StepResult result = runOptimizerStep(step, counted);
    double seconds = 0.0;
    for (const auto& run : plan_runs) seconds += run.first;
    total_seconds += seconds;
    if (!result.corrupt_transfer.empty()) {
      // The step computed with other weights than the host's: its update was not applied.
      const bool kept = step - 1 > resumed.step && !result.partially_updated;
      if (kept) checkpoint(step - 1);
      throw Error("step " + std::to_string(step) + ": --verify-transfers: the bytes of " + result.corrupt_transfer +
                  " differ from the host's: the link or the device corrupted the copy, and the step computed with "
                  "weights the host does not hold; " +
                  (result.partially_updated ? "parameters were updated as their gradients landed (this plan updates "
                                              "as gradients land), so no checkpoint was written"
                                            : std::string("its update was not applied") +
                                                  (kept ? ", the weights before it are checkpointed" : "")) +
                  ". Check the GPU (nvidia-smi -q: ECC errors; dmesg: Xid errors) and its link, then resume from the "
                  "last checkpoint");
    }
    if (!std::isfinite(result.loss) || !result.nonfinite_grad.empty()) {
      // The update was not applied: the weights are still those before this step.
      const std::string what = nonfiniteProblem(result);
      // An on-arrival plan has updated the parameters whose gradients landed before.
      const std::string applied = result.partially_updated
                                      ? "parameters were updated as their gradients landed, up to it (this plan "
                                        "updates as gradients land)"
                                      : "the update was not applied";
      if (!config.skip_nonfinite) {
        if (step - 1 > resumed.step && !result.partially_updated) checkpoint(step - 1);
        throw Error("step " + std::to_string(step) + ": " + what + "; " + applied +
                    (result.partially_updated ? ", so no checkpoint was written: resume from the last one" : "") +
                    ". Lower --lr, " +
                    (on_arrival ? std::string("compile with mtc --update deferred to clip the gradient norm")
                         : std::string("keep --grad-clip on")) +
                    ", check the data, or pass --on-nonfinite skip to skip such steps");
      }
      clear_status();
      std::printf("step %5lld/%lld  skipped: %s%s\n", static_cast<long long>(step),
                  static_cast<long long>(config.steps), what.c_str(),
                  result.partially_updated ? (" (" + applied + ")").c_str() : "");
      continue;
    }
    if (step == 1 && !config.grads_path.empty()) store.saveGrads(config.grads_path);
    for (const auto& [run_seconds, timeline] : plan_runs) report.add(run_seconds, timeline);
    const bool nothing_counted = masked && counted == 0;
    if (nothing_counted) {
      clear_status();
      std::printf("step %5lld/%lld  no target counted (the loss mask leaves out every target of the step's "
                  "sequences): no update\n", static_cast<long long>(step), static_cast<long long>(config.steps));
    }
    if (!config.trace_path.empty()) traced = backend->lastTimeline();
    const double tok_s = tokens_per_step / seconds;
    const bool line_due = step % config.print_every == 0 || step == config.steps;
    if ((line_due || on_terminal) && !nothing_counted) {
      // On a terminal every step redraws one status line, cut to the terminal's width (a wrapped
      // one cannot be redrawn in place); the periodic lines stay. Both end with the time left.
      const double eta = total_seconds / static_cast<double>(steps_run + 1) * (config.steps - step);
      std::string line = fmt::format("step {:5}/{}  loss {:.4f}  lr {:.3e}  norm {:.3f}  {:.0f} tok/s  {:.1f} ms", step,
                                     config.steps, result.loss, options.adamw.lr, result.grad_norm, tok_s, seconds * 1e3);
      if (masked) line += fmt::format("  {} counted", counted);
      if (step < config.steps) line += "  ETA " + formatDuration(eta);
      if (!line_due) line.resize(std::min(line.size(), terminalColumns() - 1));
      clear_status();
      std::printf("%s%s", line.c_str(), line_due ? "\n" : "");
      std::fflush(stdout);
    }
    if (outputs.log) {
      nlohmann::json line = {{"step", step},         {"loss", result.loss},
                             {"lr", options.adamw.lr}, {"grad_norm", result.grad_norm},
                             {"tokens_per_s", tok_s}, {"step_ms", seconds * 1e3}};
      if (masked) line["tokens_counted"] = counted;
      if (nothing_counted) line["skipped"] = "no target counted";
      outputs.log.write(line);
    }
    ++steps_run;
    if (step == config.steps || (config.val_every > 0 && step % config.val_every == 0)) validate(step);
    if (step == config.steps || (config.checkpoint_every > 0 && step % config.checkpoint_every == 0) ||
        g_stop_signal)
      checkpoint(step);
    if (g_stop_signal && step < config.steps) {
      // Stopped early: the progress is kept by the checkpoint above and/or the export; with
      // neither it is lost, and the exit code says so.
      backend->applyPendingUpdate();
      clear_status();
      const bool saved = outputs.checkpoints || !config.export_path.empty() || !config.export_hf_dir.empty();
      std::printf("stopped by %s after step %lld%s\n", g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM",
                  static_cast<long long>(step),
                  outputs.checkpoints ? "; resume with --resume"
                  : saved             ? ""
                                      : " (no --checkpoint-dir or --export: progress is lost)");
      writeTrace();
      exportWeights(step);
      return saved ? 0 : 128 + g_stop_signal;
    }
  }
  backend->applyPendingUpdate();  // the last step's update
  clear_status();
  std::printf("done: %lld steps, %.1f s, %.0f tok/s average\n", static_cast<long long>(steps_run),
              total_seconds, steps_run ? tokens_per_step * steps_run / total_seconds : 0.0);
  report.print(config.profile, /*micro_batches=*/config.accumulate > 1);
  if (config.verify_transfers)
    std::printf("transfers verified: %lld copies to the device, each the host's bytes (checksums compared)\n",
                static_cast<long long>(transfers_verified));
  writeTrace();
  exportWeights(config.steps);
  return 0;
}

}  // namespace mt
