#include "runtime/training/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/backends/backend.h"
#include "runtime/backends/cpu_libraries.h"
#include "runtime/data/token_data.h"
#include "runtime/host/host_memory.h"
#include "runtime/host/host_store.h"
#include "runtime/io/error.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/plan/verifier.h"
#include "runtime/distributed/rank_exchange.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/data_parallel.h"
#include "runtime/training/run_files.h"
#include "runtime/training/router_stats.h"
#include "runtime/training/run_report.h"
#include "runtime/training/run_setup.h"
#include "runtime/training/step_report.h"
#include "runtime/training/train_config.h"
#include "runtime/training/validation.h"

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

// What went wrong in a step whose loss or a gradient is not finite.
std::string nonfiniteProblem(const StepResult& result) {
  if (std::isfinite(result.loss)) return "the gradient '" + result.nonfinite_grad + "' holds NaN or Inf";
  return "the loss is " + std::to_string(result.loss) +
         (result.nonfinite_grad.empty() ? "" : " (first non-finite gradient: '" + result.nonfinite_grad + "')");
}

// One training run once its plan, data, outputs and starting weights are in place: the backend,
// the samplers, then the steps, each phase of a step a method.
class Trainer {
 public:
  Trainer(const TrainConfig& config, const plan::Plan& plan, StepOptions options, const TokenFile& data,
          const TokenFile* val_data, BackendKind backend_kind, HostStore& store, const CheckpointState& resumed,
          RunOutputs& outputs, MpiRankExchange* exchange);
  void printHeader() const;
  int run();  // the steps, then the end; the exit code

 private:
  StepResult runOptimizerStep(int64_t step, int64_t& counted);
  StepResult runDataParallelStep(int64_t step, int64_t& counted);
  StepResult runPlan();
  [[noreturn]] void failCorruptTransfer(int64_t step, const StepResult& result);
  void skipNonfinite(int64_t step, const StepResult& result);  // throws unless --on-nonfinite skip
  void recordStep(int64_t step, const StepResult& result, int64_t counted, double seconds);
  void printPasses() const;
  void validate(int64_t step);
  void restoreBest();
  void checkpoint(int64_t step);
  // Rank 0 writes a checkpoint file with `write`; the other ranks of a sharded optimizer send it
  // their slices of the moments meanwhile (where rank 0 writes one: --checkpoint-dir).
  void writeState(const std::function<void()>& write);
  // A fault of a file (IoFault) or of an export after `step`'s update: the weights saved where
  // they still can be (saveAfterFault), then an error saying where.
  [[noreturn]] void stopOnFault(const Error& fault, int64_t step);
  std::string saveAfterFault(int64_t step);
  void exportWeights(int64_t steps_done);
  void writeTrace();
  // A log line: into --log, and kept for --report.
  void logLine(const nlohmann::json& line);
  void writeReport();  // --report
  int stopEarly(int64_t step);
  int finish();
  // On a terminal the progress line is redrawn in place: other messages clear it first.
  void clearStatus() const {
    if (on_terminal_) std::printf("\r\033[K");
  }

  const TrainConfig& config_;
  const plan::Plan& plan_;
  const plan::ModelInfo& model_;
  const TokenFile& data_;
  const TokenFile* val_data_;  // --val-data's tokens, or null
  HostStore& store_;
  const CheckpointState& resumed_;
  RunOutputs& outputs_;
  StepOptions options_;
  const bool on_arrival_;
  const bool masked_;  // the data has a loss mask
  const bool on_terminal_;
  const int64_t val_tokens_;  // --val-fraction's held-out tail of the data
  const int64_t tokens_per_step_;
  BatchSampler sampler_;
  std::optional<Validator> validator_;
  std::unique_ptr<Backend> backend_;
  StepReport report_;
  RouterStats router_;   // a mixture of experts: the step's routing, for the log
  StepTimeline traced_;  // --trace: the last training step's timeline (not a validation step's)
  const World& world_;   // the ranks of a data-parallel job (mpirun), or one
  MpiRankExchange* exchange_;  // with several ranks: the sharded optimizer's exchanges; else null
  // The last optimizer step's runs of the plan: each one's time and measured timeline.
  std::vector<std::pair<double, StepTimeline>> plan_runs_;
  std::vector<nlohmann::json> logged_;  // --report: the run's log lines
  double total_seconds_ = 0.0;
  int64_t steps_run_ = 0;
  int64_t transfers_verified_ = 0;  // --verify-transfers: copies to the device checked so far
};

Trainer::Trainer(const TrainConfig& config, const plan::Plan& plan, StepOptions options, const TokenFile& data,
                 const TokenFile* val_data, BackendKind backend_kind, HostStore& store,
                 const CheckpointState& resumed, RunOutputs& outputs, MpiRankExchange* exchange)
    : config_(config),
      plan_(plan),
      model_(plan.model()),
      data_(data),
      val_data_(val_data),
      store_(store),
      resumed_(resumed),
      outputs_(outputs),
      options_(options),
      on_arrival_(updatesOnArrival(planUpdateKind(plan))),
      masked_(data.hasLossMask() || config.rows == RowLayout::kExamples),  // padding counts for nothing
      // mpirun hands its ranks a pseudo-terminal even when its own output goes to a file: no
      // redrawn status line there.
      on_terminal_(isatty(fileno(stdout)) && !World::get().distributed()),
      val_tokens_(heldOutTokens(config, data)),
      tokens_per_step_(config.accumulate * World::get().size() * model_.batch() * model_.seq()),
      sampler_(data, model_.batch(), model_.seq(), resumed.seed, 0, data.size() - val_tokens_, config.rows),
      report_(plan, store),
      router_(store),
      world_(World::get()),
      exchange_(exchange) {
  if (val_tokens_ > 0 || (config.val_fraction > 0 && config.rows == RowLayout::kExamples))
    validator_.emplace(HeldOutBatches(data, model_.batch(), model_.seq(), data.size() - val_tokens_, data.size(),
                                      config.val_batches, config.rows));
  if (val_data)
    validator_.emplace(HeldOutBatches(*val_data, model_.batch(), model_.seq(), 0, val_data->size(), config.val_batches,
                                      config.rows));
  // A resumed run keeps the best it had: later validations must beat it to replace it.
  if (validator_ && config.keep_best && resumed.step > 0)
    if (const auto best = bestCheckpoint(config.checkpoint_dir); best && best->step <= resumed.step)
      validator_->rememberBest(best->step, best->val_loss);
  backend_ = createBackend(backend_kind, config.tf32, plan, store);
  options_.exchange = exchange_;
}

void Trainer::printHeader() const {
  std::printf("mtrun: %s | %lld params | batch %lld x seq %lld | %s | backend %s (%s)\n",
              model_.name().c_str(), static_cast<long long>(store_.numParams()),
              static_cast<long long>(model_.batch()), static_cast<long long>(model_.seq()),
              planPrecision(plan_) == ComputePrecision::kBf16 ? "bf16 plan (fp32 master weights and moments)" : "fp32",
              backend_->name().c_str(), blasDescription().c_str());
  const std::string held_out =
      val_data_ ? fmt::format(", validation {} tokens ({})", val_data_->size(), config_.val_data_path)
      : val_tokens_ ? fmt::format(" (the last {} held out for validation)", val_tokens_)
                    : std::string();
  std::printf("  host %.1f MiB (%.1f bytes/param), device arena %.1f MiB, data %lld tokens%s\n",
              store_.totalBytes() / 1048576.0, double(store_.totalBytes()) / double(store_.numParams()),
              backend_->arenaBytes() / 1048576.0, static_cast<long long>(data_.size()), held_out.c_str());
  printPasses();
  if (validator_) {
    const HeldOutBatches& held = validator_->batches();
    std::printf("  validation: %lld held-out sequences in %lld batches%s\n", static_cast<long long>(held.windows()),
                static_cast<long long>(held.allBatches()),
                held.batches() < held.allBatches() ? fmt::format(", the first {} of them (--val-batches)",
                                                                 held.batches()).c_str()
                                                   : ", all of them each time");
  }
  if (config_.accumulate > 1)
    std::printf("  accumulating %lld micro-batches per step: %lld sequences per update, the gradients summed in "
                "%.1f MiB of host memory and their mean applied once\n",
                static_cast<long long>(config_.accumulate),
                static_cast<long long>(config_.accumulate * world_.size() * model_.batch()),
                gradientSumBytes(plan_, config_.accumulate, store_.shard()) / 1048576.0);
  if (world_.distributed()) printRanks(world_, store_, model_.batch(), config_.accumulate);
  if (on_arrival_)
    std::printf("  AdamW runs per parameter as its gradient lands (mtc --update on-arrival): no global-norm "
                "clipping\n");
  std::fflush(stdout);
}

int Trainer::run() {
  g_stop_signal = 0;
  std::signal(SIGINT, onStopSignal);
  std::signal(SIGTERM, onStopSignal);
  for (int64_t step = resumed_.step + 1; step <= config_.steps; ++step) {
    options_.adamw.step = step;
    options_.adamw.lr = learningRate(config_, step);
    int64_t counted = 0;
    StepResult result;
    try {
      result = runOptimizerStep(step, counted);
    } catch (const IoFault& fault) {
      stopOnFault(fault, step - 1);  // the data, read before this step's update: the weights are step - 1's
    }
    double seconds = 0.0;
    for (const auto& plan_run : plan_runs_) seconds += plan_run.first;
    total_seconds_ += seconds;
    if (!result.corrupt_transfer.empty()) failCorruptTransfer(step, result);
    if (!std::isfinite(result.loss) || !result.nonfinite_grad.empty()) {
      skipNonfinite(step, result);
      continue;
    }
    ++steps_run_;
    try {
      recordStep(step, result, counted, seconds);
      if (step == config_.steps || (config_.val_every > 0 && step % config_.val_every == 0)) validate(step);
    } catch (const IoFault& fault) {
      stopOnFault(fault, step);
    }
    const bool stop = world_.distributed() ? anyRankStops(world_, g_stop_signal != 0) : g_stop_signal != 0;
    if (step == config_.steps || (config_.checkpoint_every > 0 && step % config_.checkpoint_every == 0) || stop)
      checkpoint(step);
    if (stop && step < config_.steps) return stopEarly(step);
  }
  return finish();
}

// One optimizer step: --accumulate runs of the plan, micro-batch m holding rows
// [m * batch, (m + 1) * batch) of the step's sequences (those a plan of the whole batch would
// draw); the loss reported is the mean over the step's counted targets (every target without
// a loss mask; with one, each micro-batch weighs by its counted targets). A step whose loss
// mask leaves out every target updates nothing. `counted`: the step's counted targets.
StepResult Trainer::runOptimizerStep(int64_t step, int64_t& counted) {
  if (exchange_) return runDataParallelStep(step, counted);
  StepResult result;
  double loss_sum = 0.0;
  counted = 0;
  plan_runs_.clear();
  router_.startStep();
  options_.micro_steps = config_.accumulate;
  for (int64_t m = 0; m < config_.accumulate; ++m) {
    const int64_t c =
        sampler_.fill(step - 1, store_.i32(store_.tokens()), store_.i32(store_.targets()), m * model_.batch());
    counted += c;
    const bool last = m + 1 == config_.accumulate;
    options_.micro_step = m;
    options_.micro_weight = masked_ ? static_cast<float>(c) : 1.0f;
    options_.step_divisor = masked_ ? static_cast<float>(std::max<int64_t>(counted, 1))
                                    : static_cast<float>(config_.accumulate);
    options_.update = !(last && counted == 0);
    // Dropout's masks: keyed by the seed and this run's index, so a resumed run draws the same.
    options_.random = {resumed_.seed, static_cast<uint64_t>((step - 1) * config_.accumulate + m), true};
    result = runPlan();
    router_.addRun();
    loss_sum += masked_ ? static_cast<double>(c) * result.loss : result.loss;
    if (!result.corrupt_transfer.empty()) return result;  // the step is lost: nothing more to run
  }
  options_.update = true;
  if (masked_) result.loss = counted ? static_cast<float>(loss_sum / static_cast<double>(counted)) : 0.0f;
  else if (config_.accumulate > 1) result.loss = static_cast<float>(loss_sum / static_cast<double>(config_.accumulate));
  return result;
}

// One optimizer step of a data-parallel job, N ranks, --accumulate K: micro-step k of this rank
// runs the step's micro-batch k·N + rank (the rows one process with --accumulate N·K gives it),
// its gradients summed with the other ranks' into their owners' slices as they land, in that
// micro-batch order and weighed as --accumulate weighs its micro-batches; the loss from every
// rank's, added in the same order.
StepResult Trainer::runDataParallelStep(int64_t step, int64_t& counted) {
  plan_runs_.clear();
  router_.startStep();
  const int64_t ranks = world_.size(), micro_steps = config_.accumulate;
  StepResult result;
  double loss_sum = 0.0;
  counted = 0;
  options_.micro_steps = micro_steps;
  for (int64_t k = 0; k < micro_steps; ++k) {
    const int64_t m = k * ranks + world_.rank();
    const int64_t mine =
        sampler_.fill(step - 1, store_.i32(store_.tokens()), store_.i32(store_.targets()), m * model_.batch());
    const RankShares shares = shareStep(world_, mine, masked_);
    counted += shares.total;
    exchange_->setStep(k, micro_steps, shares.weights,
                       masked_ ? static_cast<float>(std::max<int64_t>(counted, 1)) : static_cast<float>(ranks * micro_steps));
    options_.micro_step = k;
    options_.update = !(k + 1 == micro_steps && counted == 0);
    options_.random = {resumed_.seed, static_cast<uint64_t>((step - 1) * ranks * micro_steps + m), true};
    result = runPlan();
    router_.addRun();
    addLosses(world_, shares, result.loss, masked_, loss_sum);
  }
  router_.addRanks(world_);
  options_.update = true;
  result.loss = masked_ ? (counted ? static_cast<float>(loss_sum / static_cast<double>(counted)) : 0.0f)
                        : static_cast<float>(loss_sum / static_cast<double>(ranks * micro_steps));
  return result;
}

// One run of the plan with options_: its time and timeline kept for the step's report, its
// verified copies counted.
StepResult Trainer::runPlan() {
  const auto start = std::chrono::steady_clock::now();
  StepResult result = backend_->runStep(options_);
  plan_runs_.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                          backend_->lastTimeline());
  transfers_verified_ += result.transfers_verified;
  return result;
}

// The step computed with other weights than the host's: its update was not applied (unless the
// plan updates as gradients land); the weights before it are checkpointed where they can be.
void Trainer::failCorruptTransfer(int64_t step, const StepResult& result) {
  const bool kept = step - 1 > resumed_.step && !result.partially_updated;
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

// A step whose loss or a gradient is not finite: its update was not applied (the weights are
// those before it) unless an on-arrival plan updated parameters as their gradients landed.
void Trainer::skipNonfinite(int64_t step, const StepResult& result) {
  const std::string what = nonfiniteProblem(result);
  const std::string applied = result.partially_updated
                                  ? "parameters were updated as their gradients landed, up to it (this plan "
                                    "updates as gradients land)"
                                  : "the update was not applied";
  if (!config_.skip_nonfinite) {
    if (step - 1 > resumed_.step && !result.partially_updated) checkpoint(step - 1);
    throw Error("step " + std::to_string(step) + ": " + what + "; " + applied +
                (result.partially_updated ? ", so no checkpoint was written: resume from the last one" : "") +
                ". Lower --lr, " +
                (on_arrival_ ? std::string("compile with mtc --update deferred to clip the gradient norm")
                             : std::string("keep --grad-clip on")) +
                ", check the data, or pass --on-nonfinite skip to skip such steps");
  }
  clearStatus();
  std::printf("step %5lld/%lld  skipped: %s%s\n", static_cast<long long>(step), static_cast<long long>(config_.steps),
              what.c_str(), result.partially_updated ? (" (" + applied + ")").c_str() : "");
}

// What a finished step leaves: the first step's gradients (--dump-grads), the profile, the
// progress line, the log line.
// How often the training data is seen: the steps draw windows (or examples) at random, so a run
// of many passes over little data (a small instruction set) is said, not discovered.
void Trainer::printPasses() const {
  const bool examples = config_.rows == RowLayout::kExamples;
  const int64_t rows = tokens_per_step_ / model_.seq();
  const int64_t train = examples ? sampler_.examples() : data_.size() - val_tokens_;
  const double passes = double(config_.steps) * double(examples ? rows : tokens_per_step_) / double(train);
  std::printf("  %lld steps of %lld %s: %.3g passes over the %lld training %s%s\n", static_cast<long long>(config_.steps),
              static_cast<long long>(examples ? rows : tokens_per_step_), examples ? "rows" : "tokens", passes,
              static_cast<long long>(train), examples ? "examples (one per row, padded)" : "tokens",
              passes > 10 ? " (many: watch the validation loss)" : "");
  if (examples && sampler_.examplesCut())
    std::printf("  %lld of the %lld examples are longer than a row of %lld tokens: their ends are cut (mttok "
                "--max-length shapes them; a plan of a longer --seq keeps them)\n",
                static_cast<long long>(sampler_.examplesCut()), static_cast<long long>(train),
                static_cast<long long>(model_.seq() + 1));
}

void Trainer::recordStep(int64_t step, const StepResult& result, int64_t counted, double seconds) {
  if (step == 1 && (!config_.grads_path.empty() || config_.sends_grads)) {
    if (exchange_) gatherGradients(*exchange_, store_);
    if (!config_.grads_path.empty()) store_.saveGrads(config_.grads_path);
  }
  for (const auto& [run_seconds, timeline] : plan_runs_) report_.add(run_seconds, timeline);
  const bool nothing_counted = masked_ && counted == 0;
  if (nothing_counted) {
    clearStatus();
    std::printf("step %5lld/%lld  no target counted (the loss mask leaves out every target of the step's "
                "sequences): no update\n", static_cast<long long>(step), static_cast<long long>(config_.steps));
  }
  if (!config_.trace_path.empty()) traced_ = backend_->lastTimeline();
  const double tok_s = tokens_per_step_ / seconds;
  const bool line_due = step % config_.print_every == 0 || step == config_.steps;
  if ((line_due || on_terminal_) && !nothing_counted) {
    // On a terminal every step redraws one status line, cut to the terminal's width (a wrapped
    // one cannot be redrawn in place); the periodic lines stay. Both end with the time left.
    const double eta = total_seconds_ / static_cast<double>(steps_run_ + 1) * (config_.steps - step);
    std::string line = fmt::format("step {:5}/{}  loss {:.4f}  lr {:.3e}  norm {:.3f}  {:.0f} tok/s  {:.1f} ms", step,
                                   config_.steps, result.loss, options_.adamw.lr, result.grad_norm, tok_s,
                                   seconds * 1e3);
    if (masked_) line += fmt::format("  {} counted", counted);
    if (router_.present())
      line += fmt::format("  aux {:.4f}  load max/mean {:.2f}", router_.auxLoss(), router_.imbalance());
    if (step < config_.steps) line += "  ETA " + formatDuration(eta);
    if (!line_due) line.resize(std::min(line.size(), terminalColumns() - 1));
    clearStatus();
    std::printf("%s%s", line.c_str(), line_due ? "\n" : "");
    std::fflush(stdout);
  }
  if (outputs_.log || !config_.report_path.empty()) {
    nlohmann::json line = {{"step", step},           {"loss", result.loss},
                           {"lr", options_.adamw.lr}, {"grad_norm", result.grad_norm},
                           {"tokens_per_s", tok_s},  {"step_ms", seconds * 1e3}};
    if (masked_) line["tokens_counted"] = counted;
    router_.addTo(line);
    if (nothing_counted) line["skipped"] = "no target counted";
    logLine(line);
  }
}

// The held-out loss after `step`: one pass over the held-out tokens (or --val-batches of it),
// no update, and only what the loss needs runs (the plan's loss prefixes: no backward). With
// --keep-best a new lowest loss checkpoints its weights; a loss above the best for
// kRisesBeforeWarning validations in a row is said.
void Trainer::validate(int64_t step) {
  if (!validator_) return;
  backend_->applyPendingUpdate();  // validate the weights after this step's update
  StepOptions eval = options_;
  eval.update = false;
  eval.loss_only = true;
  eval.micro_step = 0, eval.micro_steps = 1;  // one batch each, nothing accumulated
  eval.random.training = false;                // dropout off, as PyTorch's eval()
  const Validation v = validator_->run(step, *backend_, store_, eval, world_);
  const HeldOutBatches& held = validator_->batches();
  clearStatus();
  const std::string at = fmt::format("step {:5}/{}  validation", step, config_.steps);
  if (v.counted == 0) {
    std::printf("%s: the loss mask leaves out every held-out target: no loss\n", at.c_str());
    return;
  }
  const std::string scope = held.batches() == held.allBatches()
                                ? fmt::format("{} held-out targets", v.counted)
                                : fmt::format("{} targets of the first {} of {} held-out batches (--val-batches)",
                                              v.counted, held.batches(), held.allBatches());
  std::printf("%s loss %.4f  perplexity %.2f (%s)%s\n", at.c_str(), v.loss, std::exp(v.loss), scope.c_str(),
              config_.keep_best && v.best ? "  best so far: kept" : "");
  logLine({{"step", step}, {"val_loss", v.loss}, {"val_ppl", std::exp(v.loss)}, {"val_targets", v.counted}});
  if (config_.keep_best && v.best)
    writeState([&] {
      outputs_.checkpoints->writeBest(plan_, store_, {step, resumed_.seed, config_.steps, resumed_.provenance}, v.loss);
    });
  if (v.since_best == kRisesBeforeWarning)
    std::printf("warning: the validation loss has stayed above its best (%.4f after step %lld) for %d validations: "
                "the model may be overfitting%s\n",
                v.best_loss, static_cast<long long>(v.best_step), kRisesBeforeWarning,
                config_.keep_best ? " (--keep-best exports the best weights)"
                                  : "; --keep-best keeps and exports the weights of the best");
}

// --keep-best at the end: the exports hold the best validation's weights, loaded back from its
// checkpoint, where a later step's were worse.
void Trainer::restoreBest() {
  if (!config_.keep_best || !outputs_.checkpoints) return;
  const std::optional<BestCheckpoint> best = bestCheckpoint(config_.checkpoint_dir);
  if (!best || best->step == config_.steps) return;
  loadCheckpoint(best->path, plan_, store_);
  std::printf("--keep-best: the exports hold the weights after step %lld (validation loss %.4f, the lowest), "
              "from %s\n", static_cast<long long>(best->step), best->val_loss, best->path.c_str());
}

void Trainer::checkpoint(int64_t step) {
  backend_->applyPendingUpdate();  // on every rank: a sharded update gathers the weights
  writeState([&] {
    clearStatus();
    outputs_.checkpoints->write(plan_, store_, {step, resumed_.seed, config_.steps, resumed_.provenance}, config_.keep);
    std::printf("checkpoint: step %lld -> %s\n", static_cast<long long>(step), outputs_.checkpoints->path().c_str());
  });
}

// The other ranks wait for rank 0's file, unbounded (its time grows with the model).
void Trainer::writeState(const std::function<void()>& write) {
  if (outputs_.checkpoints)
    write();
  else if (!checkpointFolder(config_).empty())
    store_.sendState();  // rank 0 writes: it gathers this rank's moments
  world_.barrier();
}

void Trainer::stopOnFault(const Error& fault, int64_t step) {
  clearStatus();
  throw Error(std::string(fault.what()) + "; " +
              (step > resumed_.step ? saveAfterFault(step)
                                    : std::string("no step had been trained in this run: nothing is lost")));
}

// Where the weights after `step` could still be written: the checkpoint folder, else a rescue
// checkpoint folder in the current folder or TMPDIR. What the error says of them.
std::string Trainer::saveAfterFault(int64_t step) {
  const std::string after = "the weights after step " + std::to_string(step);
  if (world_.distributed())  // one rank cannot gather the others' moments
    return "the optimizer's state is sharded over the ranks: resume from the job's last checkpoint";
  if (outputs_.checkpoints) {
    try {
      checkpoint(step);
      return after + " are checkpointed in " + outputs_.checkpoints->path() +
             ": fix the fault, then resume with --resume " + outputs_.checkpoints->path();
    } catch (const Error&) {
    }
  }
  const char* tmp = std::getenv("TMPDIR");
  for (const std::string& base : {std::string("."), std::string(tmp && *tmp ? tmp : "/tmp")}) {
    const std::string dir = base + "/mtrun-rescue-" + std::to_string(getpid());
    try {
      backend_->applyPendingUpdate();
      CheckpointDir(dir).write(plan_, store_, {step, resumed_.seed, config_.steps, resumed_.provenance}, 1);
      return after + " (and the optimizer's state) were written to the checkpoint folder " + dir +
             ": fix the fault, then resume with --resume " + dir;
    } catch (const Error&) {
    }
  }
  return after + " could not be written anywhere (no --checkpoint-dir; the current folder and TMPDIR refused a "
         "rescue checkpoint): they are lost";
}

void Trainer::exportWeights(int64_t steps_done) { exportStore(config_, plan_, store_, resumed_.provenance, steps_done); }

void Trainer::logLine(const nlohmann::json& line) {
  if (outputs_.log) outputs_.log.write(line);
  if (!config_.report_path.empty()) logged_.push_back(line);
}

void Trainer::writeReport() {
  if (config_.report_path.empty()) return;
  RunReport report{model_.name(), {}, logged_};
  const auto fact = [&](std::string label, std::string value) { report.facts.emplace_back(label, value); };
  fact("model", fmt::format("{}: {} parameters{}", model_.name(), store_.numParams(),
                            model_.active_params() ? fmt::format(" ({} active per token)", model_.active_params()) : ""));
  fact("batch", fmt::format("{} sequences x {} tokens per run of the plan; {} tokens per step", model_.batch(),
                            model_.seq(), tokens_per_step_));
  fact("steps", fmt::format("{} of {}{}", steps_run_, config_.steps,
                            resumed_.step > 0 ? fmt::format(" (resumed after step {})", resumed_.step) : ""));
  fact("precision", planPrecision(plan_) == ComputePrecision::kBf16 ? "bf16 plan (fp32 master weights and moments)"
                                                                     : "fp32");
  fact("backend", backend_->name() + " (" + blasDescription() + ")");
  fact("memory", fmt::format("host {:.1f} MiB ({:.1f} bytes/param), device arena {:.1f} MiB",
                             store_.totalBytes() / 1048576.0, double(store_.totalBytes()) / double(store_.numParams()),
                             backend_->arenaBytes() / 1048576.0));
  const StepReport::Measured m = report_.measured();
  if (m.steps > 0) {
    fact("measured step", fmt::format("{:.1f} ms (mean of {} step{}{}), {:.3g} model TFLOP/s, compute busy {:.0f}%",
                                      m.step_s * 1e3, m.steps, m.steps == 1 ? "" : "s",
                                      steps_run_ > m.steps ? " after the first" : "", m.model_tflops, 100 * m.compute_busy));
    if (m.predicted_s > 0)
      fact("predicted step", fmt::format("{:.1f} ms on {} (measured/predicted {:.2f})", m.predicted_s * 1e3,
                                         model_.hardware(), m.step_s / m.predicted_s));
  }
  fact("command", "mtrun " + config_.command_line);
  writeFileAtomically(config_.report_path, renderRunReport(report));
  std::printf("report written to %s\n", config_.report_path.c_str());
}

void Trainer::writeTrace() {
  if (config_.trace_path.empty() || traced_.empty()) return;
  std::ostringstream trace;
  writeMeasuredTrace(plan_, traced_, backend_->name(), trace);
  writeFileAtomically(config_.trace_path, trace.str());
}

// Stopped by a signal before the last step: the progress is kept by the checkpoint written
// after the step and/or the export; with neither it is lost, and the exit code says so.
int Trainer::stopEarly(int64_t step) {
  backend_->applyPendingUpdate();
  clearStatus();
  const bool saved = outputs_.checkpoints || !config_.export_path.empty() || !config_.export_hf_dir.empty();
  std::printf("stopped by %s after step %lld%s\n", g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM",
              static_cast<long long>(step),
              outputs_.checkpoints ? "; resume with --resume"
              : saved              ? ""
                                   : " (no --checkpoint-dir or --export: progress is lost)");
  writeTrace();
  writeReport();
  try {
    exportWeights(step);
  } catch (const Error& fault) {
    stopOnFault(fault, step);
  }
  return saved ? 0 : 128 + g_stop_signal;
}

int Trainer::finish() {
  backend_->applyPendingUpdate();  // the last step's update
  clearStatus();
  std::printf("done: %lld steps, %.1f s, %.0f tok/s average\n", static_cast<long long>(steps_run_), total_seconds_,
              steps_run_ ? tokens_per_step_ * steps_run_ / total_seconds_ : 0.0);
  report_.print(config_.profile, /*micro_batches=*/config_.accumulate > 1);
  if (config_.verify_transfers)
    std::printf("transfers verified: %lld copies to the device, each the host's bytes (checksums compared)\n",
                static_cast<long long>(transfers_verified_));
  writeTrace();
  writeReport();
  try {
    restoreBest();
    exportWeights(config_.steps);
  } catch (const Error& fault) {
    stopOnFault(fault, config_.steps);
  }
  return 0;
}

}  // namespace

int train(const TrainConfig& given) {
  validateConfig(given);
  World& world = World::get();
  TrainConfig config = forRank(resolveResume(given), world.rank());
  World::get().boundWaits(config.rank_timeout);
  const plan::Plan plan = readTrainingPlan(config);
  if (config.export_only) return exportCheckpoint(config, plan);
  const std::string initial_weights = initialWeightsPath(config.weights_path, config.plan_path, plan);
  const std::unique_ptr<TokenFile> data = openTokens(config.data_path, plan);
  const std::unique_ptr<TokenFile> val_data =
      config.val_data_path.empty() ? nullptr : openTokens(config.val_data_path, plan);
  checkEnoughTokens(config, plan, *data, val_data.get());
  checkRanksAgree(world, config, plan, *data);
  config = resolveEpochs(config, plan, *data);
  const StepOptions options = stepOptions(config, plan);
  if (!config.other_tokenizer) {
    checkModelTokenizer(plan, data->tokenizerFingerprint(), "--data " + config.data_path, "--other-tokenizer");
    if (val_data) checkModelTokenizer(plan, val_data->tokenizerFingerprint(), "--val-data " + config.val_data_path, "--other-tokenizer");
  }
  const int64_t batch = plan.model().batch(), micro_batches = config.accumulate * world.size();
  if (micro_batches * batch > kMaxStepRows)
    throw Error("--accumulate " + std::to_string(config.accumulate) + " on " + std::to_string(world.size()) +
                " rank(s) at the plan's batch " + std::to_string(batch) + " draws " +
                std::to_string(micro_batches * batch) + " sequences per step; at most " +
                std::to_string(kMaxStepRows) + " can be: accumulate fewer");
  if (world.distributed() && config.backend != BackendChoice::kCpu) {
    // Each rank would take GPU 0: a rank's GPU by its local rank comes with a machine of several
    // GPUs to test it on (docs/distributed.md).
    if (config.backend == BackendChoice::kCuda)
      throw Error("--backend cuda with several ranks is not supported yet (every rank would run on GPU 0): use "
                  "--backend cpu, or one process");
    config.backend = BackendChoice::kCpu;
  }
  const BackendKind backend_kind = chooseBackend(config.backend, config.tf32, plan);
  // Several ranks: the optimizer sharded over them (each holds its slice of the moments).
  const std::unique_ptr<MpiRankExchange> exchange = world.distributed() ? std::make_unique<MpiRankExchange>(world) : nullptr;
  const Shard shard = exchange ? exchange->shard() : Shard{};
  HostExtras extras{backend_kind == BackendKind::kCpu, gradientSumBytes(plan, config.accumulate, shard), shard,
                    exchange ? exchange->bufferBytes(plan) : 0};
  // The ranks of a host share its memory: each checks the host's total.
  const int64_t mine = hostBytesNeeded(plan, extras);
  extras.host_peers_bytes = world.sumOnHost(mine) - mine;
  extras.host_peers = world.localSize() - 1;
  checkHostMemory(plan, extras);
  RunOutputs outputs = openOutputs(config, plan);
  HostStore store(plan, exchange.get());
  const CheckpointState resumed = loadStartingState(config, plan, *data, initial_weights, store);
  if (exchange) exchange->hostCopyWritten();  // one host copy: its writer has set it
  Trainer trainer(config, plan, options, *data, val_data.get(), backend_kind, store, resumed, outputs, exchange.get());
  trainer.printHeader();
  return trainer.run();
}

}  // namespace mt
