#include "runtime/training/trainer.h"
#include "runtime/training/trainer_run.h"

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
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/backends/backend.h"
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
#include "runtime/training/run_setup.h"
#include "runtime/training/step_report.h"
#include "runtime/training/train_config.h"
#include "runtime/training/validation.h"

namespace mt {

double learningRate(const TrainConfig& c, int64_t step) {
  if (step <= c.warmup) return c.lr * double(step) / double(c.warmup);
  const int64_t decay_steps = c.steps - c.warmup;
  if (decay_steps <= 1 || c.lr_schedule == LrSchedule::kConstant) return c.lr;
  // 0 at the first step after the warmup, 1 at the last.
  const double progress = double(step - c.warmup - 1) / double(decay_steps - 1);
  const double min_lr = c.lr * c.min_lr_ratio;
  if (c.lr_schedule == LrSchedule::kLinear) return c.lr - (c.lr - min_lr) * progress;
  return min_lr + 0.5 * (c.lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

namespace {

std::atomic<int> g_stop_signal{0};

void onStopSignal(int signal) { g_stop_signal = signal; }

// SIGUSR1 too: mpirun forwards it to the ranks as it is (SIGTERM and SIGINT it follows with
// SIGKILL after odls_base_sigkill_timeout, 1 s by default, too soon for a checkpoint), and
// Slurm's --signal=USR1@T sends it before a job's time runs out.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};

const char* signalName(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : signal == SIGUSR1 ? "SIGUSR1" : "a signal";
}

// What went wrong in a step whose loss or a gradient is not finite.
std::string nonfiniteProblem(const StepResult& result) {
  if (std::isfinite(result.loss)) return "the gradient '" + result.nonfinite_grad + "' holds NaN or Inf";
  return "the loss is " + std::to_string(result.loss) +
         (result.nonfinite_grad.empty() ? "" : " (first non-finite gradient: '" + result.nonfinite_grad + "')");
}

}  // namespace


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
      provenance_(resumed.provenance),
      outputs_(outputs),
      options_(options),
      on_arrival_(updatesOnArrival(planUpdateKind(plan))),
      masked_((data.hasLossMask() || byExamples(config.rows)) && config.rows != RowLayout::kPairs),
      // mpirun hands its ranks a pseudo-terminal even when its own output goes to a file: no
      // redrawn status line there.
      on_terminal_(isatty(fileno(stdout)) && !World::get().distributed()),
      val_tokens_(heldOutTokens(config, data)),
      tokens_per_step_(config.accumulate * World::get().size() * model_.batch() * model_.seq()),
      sampler_(data, model_.batch(), model_.seq(), resumed.seed, 0, data.size() - val_tokens_, config.rows,
               config.accumulate * World::get().size() * model_.batch()),
      report_(plan, store),
      router_(plan, store),
      preference_(plan, store),
      world_(World::get()),
      exchange_(exchange) {
  if (val_tokens_ > 0)
    validator_.emplace(HeldOutBatches(data, model_.batch(), model_.seq(), data.size() - val_tokens_, data.size(),
                                      config.val_batches, config.rows));
  if (val_data)
    validator_.emplace(HeldOutBatches(*val_data, model_.batch(), model_.seq(), 0, val_data->size(), config.val_batches,
                                      config.rows));
  // A resumed run keeps the best it had: later validations must beat it to replace it.
  if (validator_ && config.keep_best && resumed.step > 0)
    if (const auto best = bestCheckpoint(config.checkpoint_dir); best && best->step <= resumed.step)
      validator_->rememberBest(best->step, best->val_loss);
  backend_ = createBackend(backend_kind, CudaOptions{config.tf32, config.attention, config.cuda_device}, plan, store);
  options_.exchange = exchange_;
}


int Trainer::run() {
  if (config_.eval_only) return evaluate();
  prepareReference();
  g_stop_signal = 0;
  for (int signal : kStopSignals) std::signal(signal, onStopSignal);
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
    if (world_.distributed() && !config_.rank_timeout) {  // auto: the waits follow the slowest step
      slowest_step_s_ = std::max(slowest_step_s_, seconds);
      world_.setWaitBound(kRankWaitBase + kRankWaitPerStep * slowest_step_s_);
    }
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
    const int stop = world_.distributed() ? stopSignalOfRanks(world_, g_stop_signal) : g_stop_signal.load();
    if (step == config_.steps || (config_.checkpoint_every > 0 && step % config_.checkpoint_every == 0) || stop)
      checkpoint(step);
    if (stop && step < config_.steps) return stopEarly(step, stop);
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
  preference_.startStep();
  options_.micro_steps = config_.accumulate;
  for (int64_t m = 0; m < config_.accumulate; ++m) {
    const int64_t c = fillRows(step, m * model_.batch());
    counted += c;
    const bool last = m + 1 == config_.accumulate;
    options_.micro_step = m;
    options_.micro_weight = masked_ ? static_cast<float>(c) : 1.0f;
    options_.step_divisor = masked_ ? static_cast<float>(std::max<int64_t>(counted, 1))
                                    : static_cast<float>(config_.accumulate);
    options_.update = !(last && counted == 0 && !preference_.reward());  // a reward model scores any pair
    // Dropout's masks: keyed by the seed and this run's index, so a resumed run draws the same.
    options_.random = {resumed_.seed, static_cast<uint64_t>((step - 1) * config_.accumulate + m), true};
    result = runPlan();
    router_.addRun();
    if (preference_.present()) preference_.addRun();
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
  preference_.startStep();  // this rank's pairs
  const int64_t ranks = world_.size(), micro_steps = config_.accumulate;
  StepResult result;
  double loss_sum = 0.0;
  counted = 0;
  options_.micro_steps = micro_steps;
  for (int64_t k = 0; k < micro_steps; ++k) {
    const int64_t m = k * ranks + world_.rank();
    const int64_t mine = fillRows(step, m * model_.batch());
    const RankShares shares = shareStep(world_, mine, masked_);
    counted += shares.total;
    exchange_->setStep(k, micro_steps, shares.weights,
                       masked_ ? static_cast<float>(std::max<int64_t>(counted, 1)) : static_cast<float>(ranks * micro_steps));
    options_.micro_step = k;
    options_.update = !(k + 1 == micro_steps && counted == 0);
    options_.random = {resumed_.seed, static_cast<uint64_t>((step - 1) * ranks * micro_steps + m), true};
    result = runPlan();
    router_.addRun();
    if (preference_.present()) preference_.addRun();
    addLosses(world_, shares, result.loss, masked_, loss_sum);
  }
  router_.addRanks(world_);
  if (preference_.present()) preference_.addRanks(world_);
  options_.update = true;
  result.loss = masked_ ? (counted ? static_cast<float>(loss_sum / static_cast<double>(counted)) : 0.0f)
                        : static_cast<float>(loss_sum / static_cast<double>(ranks * micro_steps));
  return result;
}

// A run for the loss alone (a validation, a preference plan's reference pass): no update, one
// batch, nothing accumulated, dropout off as PyTorch's eval().
StepOptions Trainer::evalOptions() const {
  StepOptions eval = options_;
  eval.update = false;
  eval.loss_only = true;
  eval.micro_step = 0, eval.micro_steps = 1;
  eval.random.training = false;
  return eval;
}

int64_t Trainer::fillRows(int64_t step, int64_t first_row) {
  const int64_t counted = sampler_.fill(step - 1, store_.i32(store_.tokens()), store_.i32(store_.targets()), first_row,
                                        store_.tokenMask(), store_.positions());
  if (preference_.present()) preference_.fillReference(sampler_, step - 1, first_row);
  return counted;
}

// The host's parameters replaced by the weights at `path` (the reference model's, or back to the
// starting ones: "" for the seeded initializers) by the host's writer, no rank of the host reading
// them meanwhile; returns their description (loadWeights').
std::string Trainer::swapWeights(const std::string& path, const char* what) {
  if (exchange_) exchange_->hostCopyWritten();
  const std::string loaded =
      path.empty() ? loadWeights(plan_, path, store_, what) : loadParamsFrom(plan_, path, store_, what);
  if (exchange_) exchange_->hostCopyWritten();
  return loaded;
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
    outputs_.checkpoints->write(plan_, store_, {step, resumed_.seed, config_.steps, provenance_}, config_.keep);
    std::printf("checkpoint: step %lld -> %s\n", static_cast<long long>(step), outputs_.checkpoints->path().c_str());
  });
}

// The other ranks wait for rank 0's file (as it gathers their moments, then until it is
// published): the rank's wait bound, and the time its bytes (weights and two moments, fp32, or
// an export beside them) take at 10 MB/s — a disk slower than that is a fault, and a rank 0 hung
// in the write then ends the job instead of leaving it waiting forever.
double Trainer::rankZeroWriteBound() const {
  constexpr double kSlowestDiskBps = 10e6;
  return world_.waitBound() + 16.0 * static_cast<double>(store_.numParams()) / kSlowestDiskBps;
}

void Trainer::writeState(const std::function<void()>& write) {
  const World::LongerWaits longer(world_, rankZeroWriteBound());
  if (outputs_.checkpoints)
    write();
  else if (!checkpointFolder(config_).empty())
    store_.sendState();  // rank 0 writes: it gathers this rank's moments
  world_.barrier();
}

// What rank 0 alone does at a run's end (the trace, the report, the best weights restored, the
// exports): the other ranks wait for it here, as for a checkpoint, so that MPI_Finalize (whose
// wait is watched with the steps' bound) waits for the teardown only.
void Trainer::finishOnRankZero(int64_t steps_done, bool restore_best) {
  const World::LongerWaits longer(world_, rankZeroWriteBound());
  writeTrace();
  writeReport();
  try {
    if (restore_best) restoreBest();
    exportWeights(steps_done);
  } catch (const Error& fault) {
    stopOnFault(fault, steps_done);
  }
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
      CheckpointDir(dir).write(plan_, store_, {step, resumed_.seed, config_.steps, provenance_}, 1);
      return after + " (and the optimizer's state) were written to the checkpoint folder " + dir +
             ": fix the fault, then resume with --resume " + dir;
    } catch (const Error&) {
    }
  }
  return after + " could not be written anywhere (no --checkpoint-dir; the current folder and TMPDIR refused a "
         "rescue checkpoint): they are lost";
}

void Trainer::exportWeights(int64_t steps_done) { exportStore(config_, plan_, store_, provenance_, steps_done); }




// Stopped by a signal before the last step: the progress is kept by the checkpoint written
// after the step and/or the export; with neither it is lost, and the exit code says so.
int Trainer::stopEarly(int64_t step, int signal) {
  backend_->applyPendingUpdate();
  clearStatus();
  bool saved = outputs_.checkpoints || !config_.export_path.empty() || !config_.export_hf_dir.empty() ||
               !config_.export_peft_dir.empty();
  // Rank 0 writes the job's checkpoint and export: every rank exits as it does (another rank's
  // 128 + signal would fail the job mpirun reports).
  if (world_.distributed()) saved = world_.allgather(static_cast<int64_t>(saved))[0] != 0;
  std::printf("stopped by %s after step %lld%s\n", signalName(signal),
              static_cast<long long>(step),
              outputs_.checkpoints ? "; resume with --resume"
              : saved              ? ""
                                   : " (no --checkpoint-dir or --export: progress is lost)");
  finishOnRankZero(step, /*restore_best=*/false);
  return saved ? 0 : 128 + signal;
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
  finishOnRankZero(config_.steps, /*restore_best=*/true);
  return 0;
}

int train(const TrainConfig& given) {
  validateConfig(given);
  World& world = World::get();
  TrainConfig config = forRank(resolveResume(given), world.rank());
  config.scores = !given.scores_path.empty();  // every rank scores its batches; rank 0 gathers and writes them
  // --eval-only --val-data FILE alone scores FILE, as --data FILE would: no training data to hold.
  if (config.eval_only && config.data_path.empty())
    std::swap(config.data_path, config.val_data_path), config.data_flag = "--val-data";
  const plan::Plan plan = readTrainingPlan(config);
  if (config.export_only) return exportCheckpoint(config, plan);  // rank 0's file alone: no collective to watch
  World::get().boundWaits(config.rank_timeout.value_or(kRankWaitAtStart));
  checkReferenceWeights(config, plan);
  config.weights_path = initialWeightsPath(config.weights_path, config.plan_path, plan);
  const std::unique_ptr<TokenFile> data = openTokens(config.data_path, plan);
  const std::unique_ptr<TokenFile> val_data =
      config.val_data_path.empty() ? nullptr : openTokens(config.val_data_path, plan);
  // --eval-only without held-out tokens scores the whole of --data; nothing is checkpointed.
  const TokenFile* held_out =
      val_data ? val_data.get() : config.eval_only && config.val_fraction == 0.0 ? data.get() : nullptr;
  if (config.eval_only) config.writes_checkpoints = false;
  config = resolveRows(config, plan, *data, val_data.get());
  config = resolveLearningRate(config, plan);
  checkEnoughTokens(config, plan, *data, val_data.get());
  checkRanksAgree(world, config, plan, *data);
  config = resolveWarmup(resolveEpochs(config, plan, *data));
  const StepOptions options = stepOptions(config, plan);
  if (!config.other_tokenizer) {
    checkModelTokenizer(plan, data->tokenizerFingerprint(), std::string(config.data_flag) + " " + config.data_path,
                        "--other-tokenizer");
    if (val_data) checkModelTokenizer(plan, val_data->tokenizerFingerprint(), "--val-data " + config.val_data_path, "--other-tokenizer");
  }
  const int64_t batch = plan.model().batch(), micro_batches = config.accumulate * world.size();
  if (micro_batches * batch > kMaxStepRows)
    throw Error("--accumulate " + std::to_string(config.accumulate) + " on " + std::to_string(world.size()) +
                " rank(s) at the plan's batch " + std::to_string(batch) + " draws " +
                std::to_string(micro_batches * batch) + " sequences per step; at most " +
                std::to_string(kMaxStepRows) + " can be: accumulate fewer");
  const BackendKind backend_kind = chooseBackend(config.backend, config.tf32, plan);
  // A rank's GPU by its local rank (every rank on the same backend; rank 0 says where each runs).
  config.cuda_device = rankDevice(world, backend_kind == BackendKind::kCuda);
  // Several ranks: the optimizer sharded over them (each holds its slice of the moments).
  const std::unique_ptr<MpiRankExchange> exchange = world.distributed() ? std::make_unique<MpiRankExchange>(world) : nullptr;
  const Shard shard = exchange ? exchange->shard() : Shard{};
  // (The exchange's buffers carry gradients: an evaluation never allocates them.)
  HostExtras extras{backend_kind == BackendKind::kCpu, gradientSumBytes(plan, config.accumulate, shard), shard,
                    exchange && !config.eval_only ? exchange->bufferBytes(plan) : 0};
  // A plan whose loss-only run would touch them (one from before 1.9 runs whole) keeps them.
  extras.use = config.eval_only && lossRunSparesOptimizer(plan) ? HostUse::kEvaluation : HostUse::kTraining;
  if (config.eval_only && extras.use == HostUse::kTraining)
    std::printf("note: %s has no loss-only run that spares the optimizer (compiled before plan 1.9?): --eval-only "
                "runs its whole step without an update, and holds what training holds; compile it again to score it "
                "at 4 bytes per parameter\n", config.plan_path.c_str());
  // The ranks of a host share its memory: each checks the host's total.
  const int64_t mine = hostBytesNeeded(plan, extras);
  extras.host_peers_bytes = world.sumOnHost(mine) - mine;
  extras.host_peers = world.localSize() - 1;
  checkHostMemory(plan, extras);
  RunOutputs outputs = openOutputs(config, plan);
  HostStore store(plan, exchange.get(), extras.use);
  const CheckpointState resumed = loadStartingState(config, plan, *data, config.weights_path, store);
  if (exchange) exchange->hostCopyWritten();  // one host copy: its writer has set it
  Trainer trainer(config, plan, options, *data, held_out, backend_kind, store, resumed, outputs, exchange.get());
  trainer.printHeader();
  return trainer.run();
}

}  // namespace mt
