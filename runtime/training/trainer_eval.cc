// The held-out side of a run: the validations, --eval-only's one, and the reference of a
// preference plan (its examples' log-probabilities under the reference model) they and the steps
// compare with.
#include "runtime/training/trainer_run.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <cmath>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/io/error.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/run_files.h"
#include "runtime/training/validation.h"

namespace mt {

// --eval-only: the starting weights scored as a validation after the resumed step (0 from the
// start) scores them; a preference plan's reference for the held-out examples alone.
int Trainer::evaluate() {
  if (!validator_)
    throw Error("--eval-only: --val-fraction " + fmt::format("{}", config_.val_fraction) + " holds out no whole row "
                "of " + config_.data_path + ": nothing to score; raise it, or give --val-data");
  if (config_.scores_texts) return scoreEachText();
  prepareReference();
  validate(resumed_.step);
  return 0;
}

int Trainer::scoreEachText() {
  prepareReference();  // a reward model's: where each text ends
  // (The held-out batches hold a text at least: the token file and its held-out tail refuse none.)
  const std::vector<ExampleScore> scores =
      validator_->textRewards(*backend_, store_, evalOptions(), world_, preference_);
  std::vector<double> rewards;
  for (const ExampleScore& s : scores) rewards.push_back(s.reward[0]);
  const auto [low, high] = std::minmax_element(rewards.begin(), rewards.end());
  const double mean = std::accumulate(rewards.begin(), rewards.end(), 0.0) / static_cast<double>(rewards.size());
  const HeldOutBatches& held = validator_->batches();
  clearStatus();
  const std::string some = held.batches() < held.allBatches() ? fmt::format(
      " (the first {} of {} batches, --val-batches)", held.batches(), held.allBatches()) : "";
  std::printf("scored %zu texts, each alone%s: reward mean %.4f, lowest %.4f, highest %.4f\n", scores.size(),
              some.c_str(), mean, *low, *high);
  logLine({{"step", resumed_.step}, {"texts", scores.size()}, {"reward_mean", mean}, {"reward_min", *low},
           {"reward_max", *high}});
  writeScores(scores, /*texts=*/true);
  return 0;
}

void Trainer::writeScores(const std::vector<ExampleScore>& scores, bool texts) const {
  if (world_.rank() != 0) return;
  // Pairs are two rows of the file's examples; KTO's an example and its KL row.
  const size_t first = texts ? validator_->batches().firstExample() : validator_->batches().firstExample() / 2;
  std::string lines;
  for (size_t k = 0; k < scores.size(); ++k) lines += preference_.scoreLine(scores[k], first + k, texts).dump() + "\n";
  writeFileAtomically(config_.scores_path, lines);
  std::printf("scores: %zu %s, one line each, in %s\n", scores.size(),
              texts ? "texts" : preference_.kto() ? "examples" : "pairs", config_.scores_path.c_str());
}

// The reference model of a preference plan is the one training starts from, or the weights of
// --reference-weights: each training (and held-out) example's log-probability under it, from
// loss-only runs before the first step shared among the ranks (kept beside the checkpoints), or,
// resuming, read back from the checkpoints' folder.
void Trainer::prepareReference() {
  if (!preference_.present()) return;
  preference_.useData(data_, val_data_ ? *val_data_ : data_);
  if (preference_.reward()) return;  // a reward model scores each reply with its own head: no reference
  if (preference_.referenceFree()) {
    std::printf("reference: none (the loss, SimPO's or ORPO's, scores each reply by its own mean log-probability per "
                "token)\n");
    return;
  }
  const bool resuming = resumed_.step > 0, other_model = !config_.reference_weights.empty();
  if (other_model && resuming)
    std::printf("note: --reference-weights is not read again: resuming, the reference log-probabilities the run "
                "computed at its start are read back\n");
  if (other_model && !resuming)
    provenance_[std::string(kProvenancePrefix) + "reference_weights"] =
        swapWeights(config_.reference_weights, "reference weights");
  const auto start = std::chrono::steady_clock::now();
  const StepOptions eval = evalOptions();  // the reference without dropout, as TRL's evaluates it
  auto reference = [&](const HeldOutBatches& in_order, const TokenFile& data, bool held_out) {
    ReferenceTable table;
    try {
      table = resumed_.step > 0 ? preference_.load(referenceFile(config_.resume_dir, held_out), data, in_order)
                                : preference_.computeReference(*backend_, store_, in_order, eval, world_);
    } catch (const Error& e) {
      if (!config_.eval_only || resumed_.step == 0) throw;
      throw Error(std::string(e.what()) + ". --eval-only --resume scores with the reference its run kept for the "
                  "held-out examples it validated on; to score other data, give the checkpoint as --weights and the "
                  "model it started from as --reference-weights");
    }
    if (outputs_.checkpoints) preference_.save(referenceFile(outputs_.checkpoints->path(), held_out), table, data);
    return table;
  };
  int64_t examples = 0;
  if (!config_.eval_only) {  // --eval-only scores the held-out examples alone
    const HeldOutBatches training(data_, model_.batch(), model_.seq(), 0, data_.size() - val_tokens_, 0,
                                  RowLayout::kPairs);
    preference_.useReference(reference(training, data_, false));
    examples += training.windows();
  }
  if (validator_) {
    preference_.useHeldOutReference(reference(validator_->batches(), val_data_ ? *val_data_ : data_, true));
    examples += validator_->batches().windows();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (other_model && !resuming) {
    const std::string initial = provenance_[std::string(kProvenancePrefix) + "initial_weights"];
    const std::string again = swapWeights(config_.weights_path, "back to the initial weights");
    if (again != initial)
      throw Error("the initial weights changed while the reference was computed: they were " + initial + ", now " +
                  again + "; start the run again with files that stay as they are");
  }
  const std::string source = resuming      ? "read from " + config_.resume_dir
                             : other_model ? "under " + config_.reference_weights + " (loss-only runs)"
                                           : "under the starting weights (loss-only runs)";
  std::printf("reference: the log-probabilities of the %lld examples' replies%s %s (%.1f s)%s\n",
              static_cast<long long>(examples),
              config_.eval_only ? " (held-out)" : validator_ ? " (training and held-out)" : "", source.c_str(), seconds,
              outputs_.checkpoints ? (", kept in " + outputs_.checkpoints->path()).c_str() : "");
  if (config_.eval_only && !other_model && !resuming)
    std::printf("note: the reference is the weights scored (no --reference-weights): every reward is 0; to score a "
                "preference-trained model, give --reference-weights with the model it started from\n");
}

// The held-out loss after `step`: one pass over the held-out tokens (or --val-batches of it),
// no update, and only what the loss needs runs (the plan's loss prefixes: no backward). With
// --keep-best a new lowest loss checkpoints its weights; a loss above the best for
// kRisesBeforeWarning validations in a row is said.
void Trainer::validate(int64_t step) {
  if (!validator_) return;
  backend_->applyPendingUpdate();  // validate the weights after this step's update
  const StepOptions eval = evalOptions();
  std::vector<ExampleScore> scores;
  const bool keep_scores = config_.eval_only && config_.scores;
  const Validation v = validator_->run(step, *backend_, store_, eval, world_,
                                       preference_.present() ? &preference_ : nullptr, keep_scores ? &scores : nullptr,
                                       config_.eval_only);
  const HeldOutBatches& held = validator_->batches();
  clearStatus();
  const std::string at = config_.eval_only ? std::string("evaluation")
                                           : fmt::format("step {:5}/{}  validation", step, config_.steps);
  if (v.counted == 0) {
    if (config_.eval_only)
      throw Error(preference_.present() ? "--eval-only: no held-out reply token lies within the plan's --seq: nothing "
                                          "scored"
                                        : "--eval-only: the loss mask leaves out every held-out target: nothing scored");
    std::printf("%s: the loss mask leaves out every held-out target: no loss\n", at.c_str());
    return;
  }
  const char* what = preference_.kto() ? "examples" : preference_.present() ? "pairs" : "targets";
  const std::string scope = held.batches() == held.allBatches()
                                ? fmt::format("{} held-out {}", v.counted, what)
                                : fmt::format("{} {} of the first {} of {} held-out batches (--val-batches)",
                                              v.counted, what, held.batches(), held.allBatches());
  nlohmann::json line = {{"step", step}, {"val_loss", v.loss}};
  if (preference_.present()) {  // a DPO loss has no perplexity
    std::printf("%s loss %.4f (%s)%s%s\n", at.c_str(), v.loss, scope.c_str(), preference_.describe(v.pairs).c_str(),
                config_.keep_best && v.best ? "  best so far: kept" : "");
    line[preference_.kto() ? "val_examples" : "val_pairs"] = v.counted;
    preference_.addTo(v.pairs, line, "val_");
  } else {
    std::printf("%s loss %.4f  perplexity %.2f (%s)%s\n", at.c_str(), v.loss, std::exp(v.loss), scope.c_str(),
                config_.keep_best && v.best ? "  best so far: kept" : "");
    line["val_ppl"] = std::exp(v.loss), line["val_targets"] = v.counted;
  }
  logLine(line);
  if (keep_scores) writeScores(scores, /*texts=*/false);
  if (config_.keep_best && v.best)
    writeState([&] {
      outputs_.checkpoints->writeBest(plan_, store_, {step, resumed_.seed, config_.steps, provenance_}, v.loss);
    });
  if (v.since_best == kRisesBeforeWarning)
    std::printf("warning: the validation loss has stayed above its best (%.4f after step %lld) for %d validations: "
                "the model may be overfitting%s\n",
                v.best_loss, static_cast<long long>(v.best_step), kRisesBeforeWarning,
                config_.keep_best ? " (--keep-best exports the best weights)"
                                  : "; --keep-best keeps and exports the weights of the best");
}

}  // namespace mt
