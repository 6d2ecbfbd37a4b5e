// What a training run prints and writes about itself: the header, the progress line and the
// log, the --report page and the --trace timeline (the Trainer's other half: trainer.cc).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>

#include "runtime/backends/cpu_libraries.h"
#include "runtime/host/host_memory.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/training/data_parallel.h"
#include "runtime/training/run_report.h"
#include "runtime/training/trainer_run.h"

namespace mt {

void Trainer::printHeader() const {
  const std::string frozen =
      store_.numFrozen() ? fmt::format(" ({} frozen)", store_.numFrozen()) : std::string();
  std::printf("mtrun: %s | %lld params%s | batch %lld x seq %lld | %s | backend %s (%s)\n",
              model_.name().c_str(), static_cast<long long>(store_.numParams()), frozen.c_str(),
              static_cast<long long>(model_.batch()), static_cast<long long>(model_.seq()),
              planPrecision(plan_) != ComputePrecision::kBf16 ? "fp32"
              : config_.eval_only                             ? "bf16 plan (fp32 master weights)"
                                                              : "bf16 plan (fp32 master weights and moments)",
              backend_->name().c_str(), blasDescription().c_str());
  const std::string held_out =
      val_data_ == &data_ ? std::string(", all of them scored (--eval-only)")
      : val_data_         ? fmt::format(", validation {} tokens ({})", val_data_->size(), config_.val_data_path)
      : val_tokens_ ? fmt::format(" (the last {} held out for validation)", val_tokens_)
                    : std::string();
  std::printf("  host %.1f MiB (%.1f bytes/param), device arena %.1f MiB, data %lld tokens%s\n",
              store_.totalBytes() / 1048576.0, double(store_.totalBytes()) / double(store_.numParams()),
              backend_->arenaBytes() / 1048576.0, static_cast<long long>(data_.size()), held_out.c_str());
  if (!config_.eval_only) printPasses();
  if (validator_) {
    const HeldOutBatches& held = validator_->batches();
    std::printf("  %s: %lld held-out sequences in %lld batches%s\n",
                config_.eval_only ? "evaluation" : "validation", static_cast<long long>(held.windows()),
                static_cast<long long>(held.allBatches()),
                held.batches() < held.allBatches() ? fmt::format(", the first {} of them (--val-batches)",
                                                                 held.batches()).c_str()
                : config_.eval_only                ? ", all of them"
                                                   : ", all of them each time");
  }
  if (config_.eval_only) {  // no step: how steps would run does not matter
    std::fflush(stdout);
    return;
  }
  if (config_.accumulate > 1)
    std::printf("  accumulating %lld micro-batches per step: %lld sequences per update, the gradients summed in "
                "%.1f MiB of host memory and their mean applied once\n",
                static_cast<long long>(config_.accumulate),
                static_cast<long long>(config_.accumulate * world_.size() * model_.batch()),
                gradientSumBytes(plan_, config_.accumulate, store_.shard()) / 1048576.0);
  if (world_.distributed()) printRanks(world_, store_, model_.batch(), config_.accumulate, config_.rank_timeout);
  if (on_arrival_)
    std::printf("  AdamW runs per parameter as its gradient lands (mtc --update on-arrival): no global-norm "
                "clipping\n");
  if (config_.lora_plus_ratio != 1.0) printLoraPlus();
  std::fflush(stdout);
}

// LoRA+ (--lora-plus-ratio): which trained parameters learn at the raised rate.
void Trainer::printLoraPlus() const {
  int64_t tensors = 0, params = 0;
  for (const int param : store_.trainedParams())
    if (takesLoraPlusRate(plan_.host_tensors(param))) ++tensors, params += store_.numel(param);
  std::printf("  LoRA+: the adapters' B and the 1-D parameters (%lld tensors, %lld parameters) learn at --lr x %g, "
              "the rest at --lr\n",
              static_cast<long long>(tensors), static_cast<long long>(params), config_.lora_plus_ratio);
}

// How often the training data is seen: the steps draw windows (or examples) at random, so a run
// of many passes over little data (a small instruction set) is said, not discovered.
void Trainer::printPasses() const {
  const bool examples = byExamples(config_.rows), packed = config_.rows == RowLayout::kPackedExamples;
  const int64_t rows = tokens_per_step_ / model_.seq();
  const int64_t train = examples ? sampler_.examples() : data_.size() - val_tokens_;
  // What one pass takes: a row per example, the rows the examples pack into, or the tokens.
  const int64_t pass = packed ? sampler_.packedRowsPerPass() : train;
  const double passes = double(config_.steps) * double(examples ? rows : tokens_per_step_) / double(pass);
  // With examples, how much of a pass's rows is padding: compute the loss never sees.
  const double padding = examples ? 100.0 * (1.0 - double(sampler_.exampleSlots()) /
                                                       (double(pass) * double(model_.seq())))
                                  : 0.0;
  const std::string what =
      !examples ? "tokens"
      : packed  ? fmt::format("examples (packed into about {} rows a pass, each once; {:.0f}% padding)", pass, padding)
      : config_.rows == RowLayout::kPairs
          ? fmt::format("{}, {} {} (one per row, padded: {:.0f}% padding)", preference_.kto() ? "rows" : "examples",
                        train / 2,
                        preference_.kto() ? "labelled examples, each beside its KL row" : "(chosen, rejected) pairs",
                        padding)
          : fmt::format("examples (one per row, padded: {:.0f}% padding)", padding);
  std::printf("  %lld steps of %lld %s: %.3g passes over the %lld training %s%s\n", static_cast<long long>(config_.steps),
              static_cast<long long>(examples ? rows : tokens_per_step_), examples ? "rows" : "tokens", passes,
              static_cast<long long>(train), what.c_str(), passes > 10 ? " (many: watch the validation loss)" : "");
  if (examples && router_.present() && !store_.tokenMask())  // a plan before 1.21
    std::printf("  note: the rows' padding is routed like any token and counted in the router's load-balancing "
                "statistics (this plan has no token mask: compile it again to leave padding out, as Hugging "
                "Face's attention mask does)\n");
  if (examples && sampler_.examplesCut())
    std::printf("  %lld of the %lld examples are longer than a row of %lld tokens: their ends are cut (mttok "
                "--max-length shapes them; a plan of a longer --seq keeps them)\n",
                static_cast<long long>(sampler_.examplesCut()), static_cast<long long>(train),
                static_cast<long long>(model_.seq() + 1));
}

// What a finished step leaves: the first step's gradients (--dump-grads), the profile, the
// progress line, the log line.
void Trainer::recordStep(int64_t step, const StepResult& result, int64_t counted, double seconds) {
  if (step == 1 && (!config_.grads_path.empty() || config_.sends_grads)) {
    // Sharded: rank 0 gathers each summed gradient from its owners as it writes.
    if (!config_.grads_path.empty()) store_.saveGrads(config_.grads_path);
    if (config_.sends_grads) store_.sendGrads();
  }
  for (const auto& [run_seconds, timeline] : plan_runs_) report_.add(run_seconds, timeline);
  const bool nothing_counted =  // no update (a reward model scores every pair, reply tokens or not)
      (masked_ || (preference_.present() && !preference_.reward())) && counted == 0;
  if (nothing_counted) {
    clearStatus();
    std::printf("step %5lld/%lld  no target counted (%s): no update\n", static_cast<long long>(step),
                static_cast<long long>(config_.steps),
                preference_.present() ? "no reply token of the step's pairs lies within the plan's --seq"
                                      : "the loss mask leaves out every target of the step's sequences");
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
    line += preference_.describeStep();
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
    preference_.addTo(line);
    if (nothing_counted) line["skipped"] = "no target counted";
    logLine(line);
  }
}

void Trainer::logLine(const nlohmann::json& line) {
  if (outputs_.log) outputs_.log.write(line);
  if (!config_.report_path.empty()) logged_.push_back(line);
}

void Trainer::writeReport() {
  if (config_.report_path.empty()) return;
  RunReport report{model_.name(), {}, logged_};
  const auto fact = [&](std::string label, std::string value) { report.facts.emplace_back(label, value); };
  fact("model", fmt::format("{}: {} parameters{}{}", model_.name(), store_.numParams(),
                            model_.active_params() ? fmt::format(" ({} active per token)", model_.active_params()) : "",
                            store_.numFrozen() ? fmt::format(", {} of them frozen", store_.numFrozen()) : ""));
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

}  // namespace mt
