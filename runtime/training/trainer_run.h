// The Trainer: one training run once its plan, data, outputs and starting weights are in place.
// Its steps, validation and checkpoints are in trainer.cc; what the run prints and writes about
// itself (the header, the progress line and log, the report, the trace) in trainer_output.cc.
// Internal to runtime/training (trainer.h's train() is the way in).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/backends/backend.h"
#include "runtime/data/token_data.h"
#include "runtime/distributed/rank_exchange.h"
#include "runtime/distributed/world.h"
#include "runtime/host/host_store.h"
#include "runtime/host/step_options.h"
#include "runtime/io/error.h"
#include "runtime/plan/plan_dump.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/preference.h"
#include "runtime/training/router_stats.h"
#include "runtime/training/run_files.h"
#include "runtime/training/run_setup.h"
#include "runtime/training/step_report.h"
#include "runtime/training/trainer.h"
#include "runtime/training/validation.h"

namespace mt {

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
  // A preference plan: its reference log-probabilities before the first step.
  void prepareReference();
  std::string swapWeights(const std::string& path, const char* what);
  StepOptions evalOptions() const;  // a loss-only run's options
  // The step's rows [first_row, first_row + batch): tokens, targets and what the plan takes
  // beside them (the token mask, positions, the reference log-probabilities); the targets counted.
  int64_t fillRows(int64_t step, int64_t first_row);
  [[noreturn]] void failCorruptTransfer(int64_t step, const StepResult& result);
  void skipNonfinite(int64_t step, const StepResult& result);  // throws unless --on-nonfinite skip
  void recordStep(int64_t step, const StepResult& result, int64_t counted, double seconds);
  void printPasses() const;
  void printLoraPlus() const;
  void validate(int64_t step);
  int evaluate();  // --eval-only: one validation of the starting weights; the exit code
  int scoreEachText();  // --eval-only --scores of a reward model on texts: each one's reward; the exit code
  // --scores: rank 0 writes `scores` (of the held-out examples from the first, in order) as JSON lines.
  void writeScores(const std::vector<ExampleScore>& scores, bool texts) const;
  void restoreBest();
  void checkpoint(int64_t step);
  // Rank 0 writes a checkpoint file with `write`; the other ranks of a sharded optimizer send it
  // their slices of the moments meanwhile (where rank 0 writes one: --checkpoint-dir).
  void writeState(const std::function<void()>& write);
  double rankZeroWriteBound() const;  // how long the other ranks wait for what rank 0 writes
  void finishOnRankZero(int64_t steps_done, bool restore_best);
  // A fault of a file (IoFault) or of an export after `step`'s update: the weights saved where
  // they still can be (saveAfterFault), then an error saying where.
  [[noreturn]] void stopOnFault(const Error& fault, int64_t step);
  std::string saveAfterFault(int64_t step);
  void exportWeights(int64_t steps_done);
  void writeTrace();
  // A log line: into --log, and kept for --report.
  void logLine(const nlohmann::json& line);
  void writeReport();  // --report
  int stopEarly(int64_t step, int signal);  // `signal` stopped the run after `step`
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
  // Where the run's weights come from (recorded in checkpoints and exports): resumed_'s, and the
  // reference model's weights where --reference-weights gives them.
  std::map<std::string, std::string> provenance_;
  RunOutputs& outputs_;
  StepOptions options_;
  const bool on_arrival_;
  // Targets may be left out (the data has a loss mask, or rows are padded: rows of examples), and
  // each micro-batch's loss is the mean over its counted targets. Not for preferences: each
  // micro-batch's loss is the mean over its pairs.
  const bool masked_;
  const bool on_terminal_;
  const int64_t val_tokens_;  // --val-fraction's held-out tail of the data
  const int64_t tokens_per_step_;
  BatchSampler sampler_;
  std::optional<Validator> validator_;
  std::unique_ptr<Backend> backend_;
  StepReport report_;
  RouterStats router_;   // a mixture of experts: the step's routing, for the log
  Preference preference_;  // a preference plan: the reference, the step's rewards for the log
  StepTimeline traced_;  // --trace: the last training step's timeline (not a validation step's)
  const World& world_;   // the ranks of a data-parallel job (mpirun), or one
  MpiRankExchange* exchange_;  // with several ranks: the sharded optimizer's exchanges; else null
  // The last optimizer step's runs of the plan: each one's time and measured timeline.
  std::vector<std::pair<double, StepTimeline>> plan_runs_;
  std::vector<nlohmann::json> logged_;  // --report: the run's log lines
  double total_seconds_ = 0.0;
  double slowest_step_s_ = 0.0;  // --rank-timeout auto's measure
  int64_t steps_run_ = 0;
  int64_t transfers_verified_ = 0;  // --verify-transfers: copies to the device checked so far
};

}  // namespace mt
