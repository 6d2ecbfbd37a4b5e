// Preference training (mtc --objective dpo; plan 1.23): a plan whose rows are (chosen, rejected)
// pairs of a prompt's replies reads the reference model's log-probability of each row's reply
// (its input reference_logps) and gives the policy's (its output policy_logps). The reference
// model is the one training starts from: before the first step, loss-only runs over every
// training (and held-out) example in order give each its reference log-probability, kept for the
// whole run (and beside its checkpoints, for a resumed run). Each step's implicit rewards, beta
// times the policy's log-probability over the reference's, go into the log: how often the chosen
// reply's beats the rejected one's, and by how much; a validation scores the held-out pairs so.
// A SimPO plan (plan 1.24) or an ORPO one (1.25) has no reference: its input is absent, the
// policy's alone is scored. A KTO plan (1.26) pairs each example with its KL row and reads the
// examples' labels (its input kto_labels), filled from the token file's beside the reference. A
// reward model's plan (1.26) has no reference either: its input reward_positions says where each
// row's example ends, its output policy_rewards gives each row's reward.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/loss/loss.h"
#include "runtime/backends/backend.h"
#include "runtime/data/token_data.h"
#include "runtime/host/step_options.h"
#include "runtime/plan.pb.h"

namespace mt {

class HostStore;
class World;

// The reference log-probabilities of examples [first, first + values.size()) of a token file.
struct ReferenceTable {
  size_t first = 0;
  std::vector<float> values;
  float of(size_t example) const { return values.at(example - first); }
};

// A run's pairs scored: their DPO loss summed, how many, how many the chosen reply won, the
// implicit rewards and the policy's log-probabilities of the replies (sums, or means per token)
// summed; with an NLL term (mt.pair_nll), the chosen replies' negative log-likelihood summed and
// their tokens; for ORPO, the pairs' log odds ratios summed and how many. For KTO, `pairs` counts
// the examples (each with its KL row), `chosen` and `logp_chosen` sum over the desirable ones
// (`chosen_count`), `rejected` and `logp_rejected` over the undesirable ones, and `kl` the runs'
// KL estimates (`kl_runs`). For a reward model, `chosen` and `rejected` sum the replies' rewards.
struct PairScores {
  double loss = 0.0;
  int64_t pairs = 0, right = 0;
  double chosen = 0.0, rejected = 0.0;
  double logp_chosen = 0.0, logp_rejected = 0.0;
  double nll = 0.0;
  int64_t nll_tokens = 0;
  double log_odds = 0.0;
  int64_t odds_pairs = 0;
  int64_t chosen_count = 0, rejected_count = 0;
  double kl = 0.0;
  int64_t kl_runs = 0;
  void add(const PairScores& other);
  std::vector<double> flat() const {
    return {loss,          double(pairs),        double(right),          chosen,   rejected,
            logp_chosen,   logp_rejected,        nll,                    double(nll_tokens), log_odds,
            double(odds_pairs), double(chosen_count), double(rejected_count), kl, double(kl_runs)};
  }
  static PairScores unflat(const double* v) {
    return {v[0], int64_t(v[1]), int64_t(v[2]), v[3], v[4], v[5], v[6], v[7], int64_t(v[8]), v[9], int64_t(v[10]),
            int64_t(v[11]), int64_t(v[12]), v[13], int64_t(v[14])};
  }
};

// One held-out pair scored, for --scores: its loss, each reply's reward (DPO's implicit one: beta
// times the policy's log-probability over the reference's; a reward model's own) and the policy's
// log-probability of it (none for a reward model). A KTO example's are the first side's, its label
// `desirable`; a text a reward model scores alone (mtrun --eval-only --scores on a file of
// examples) has its reward alone, the first. A reward model's pair's margin is its data's (0 where
// the data has none).
struct ExampleScore {
  double loss = 0.0;
  double reward[2] = {0.0, 0.0};  // the chosen reply's, the rejected one's
  double logp[2] = {0.0, 0.0};
  bool desirable = false;
  double margin = 0.0;
  static constexpr size_t kWidth = 7;  // the doubles of one in flat form (what ranks exchange)
  void appendTo(std::vector<double>& flat) const {
    flat.insert(flat.end(), {loss, reward[0], reward[1], logp[0], logp[1], desirable ? 1.0 : 0.0, margin});
  }
  static ExampleScore unflat(const double* v) { return {v[0], {v[1], v[2]}, {v[3], v[4]}, v[5] != 0.0, v[6]}; }
};

class Preference {
 public:
  // Finds the input, the output and the loss's attributes in `store`'s `plan`; present() is false
  // for a plan without them. Throws mt::Error for a plan with the output but not the input (save
  // SimPO's and ORPO's, which have no input), or of other shapes.
  Preference(const plan::Plan& plan, const HostStore& store);
  bool present() const { return policy_ >= 0; }
  bool referenceFree() const { return present() && reference_ < 0; }  // SimPO's, ORPO's
  bool kto() const { return kind_ == PairLoss::kKto; }
  bool reward() const { return kind_ == PairLoss::kReward; }
  // The files the rows come from, the training data's and the held-out one's (the same file where
  // --val-fraction holds out its tail): a KTO plan's labels (throws mt::Error naming the file and
  // the fix where one has none), a reward model's examples' ends. Kept: they outlive the run.
  void useData(const TokenFile& training, const TokenFile& held_out);

  // The policy log-probabilities of every example of `in_order` (rows of whole pairs, in order;
  // --rows pairs), by loss-only runs of `eval` with the reference input 0: rank r of `world`
  // runs batches r, r + N, ..., and every rank gets every value. Throws mt::Error if
  // --verify-transfers finds a copy corrupted, or a value is not finite.
  ReferenceTable computeReference(Backend& backend, HostStore& store, const HeldOutBatches& in_order,
                                  const StepOptions& eval, const World& world) const;
  // `table` written to / read from `path` (binary: magic, the data's checksum, the plan's
  // sequence length, the first example and the count, the floats), for `data`; load throws
  // mt::Error naming the file and the fix if it is missing, malformed, or made for other data or
  // another --seq.
  void save(const std::string& path, const ReferenceTable& table, const TokenFile& data) const;
  ReferenceTable load(const std::string& path, const TokenFile& data, const HeldOutBatches& in_order) const;

  void useReference(ReferenceTable training) { training_ = std::move(training); }
  void useHeldOutReference(ReferenceTable held_out) { held_out_ = std::move(held_out); }
  // The plan's reference input for the rows [first_row, first_row + batch) of step `step` (none
  // where the plan is reference-free), and a KTO plan's labels of their examples or a reward
  // model's positions of their ends.
  void fillReference(const BatchSampler& sampler, int64_t step, int64_t first_row) const;
  // ... for batch `i` of the held-out pairs (padding rows 0, labelled 0).
  void fillHeldOutReference(const HeldOutBatches& held, int64_t i) const;
  // The pairs of the last run's first `rows` rows, scored from the store's input and output; with
  // `each`, each pair's scores appended to it too.
  PairScores scoreRun(int64_t rows, std::vector<ExampleScore>* each = nullptr) const;
  // A reward model's rewards of the last run's first `rows` rows, each a text of its own (its
  // reward the first), appended to `each`.
  void rowRewards(int64_t rows, std::vector<ExampleScore>& each) const;
  // One line of --scores: pair `index` of its token file (KTO: example `index`; `text`: text
  // `index`, scored alone) and its scores, in the names the log gives their means.
  nlohmann::ordered_json scoreLine(const ExampleScore& score, size_t index, bool text = false) const;
  // The loss `scores` give, as the plan's: the mean DPO loss of the pairs, plus the NLL term's
  // alpha times the chosen replies' NLL per token.
  double meanLoss(const PairScores& scores) const;

  void startStep() { step_ = {}; }
  void addRun() { step_.add(scoreRun(rows_)); }  // after each run of a step
  // A data-parallel step: every rank's pairs added, in rank order (each rank gets the total).
  void addRanks(const World& world);
  // "pairs_right" (the share of pairs whose chosen reply's reward beats the rejected one's),
  // "reward_margin", "reward_chosen", "reward_rejected", "logps_chosen", "logps_rejected" (the
  // policy's log-probabilities of the replies, TRL's logps/chosen and logps/rejected; means over the
  // pairs), with an NLL term "nll" (the chosen replies' per token) and for ORPO "log_odds" (the mean
  // log odds ratio) into a log line, each name after `prefix` ("val_" for a validation). For KTO,
  // "kl" (the runs' mean KL estimate) and the rewards and log-probabilities as means over the
  // desirable examples (chosen) and the undesirable ones (rejected), each where there are some, the
  // margin where there are both; no pairs_right. For a reward model, "accuracy" (TRL's: the share
  // of pairs whose chosen reply's reward is the higher) and the rewards and their margin.
  void addTo(const PairScores& scores, nlohmann::json& line, const std::string& prefix = "") const;
  void addTo(nlohmann::json& line) const { addTo(step_, line); }
  // For a progress line: "chosen beats rejected 62%  margin 0.120" (KTO's: "kl 0.012  reward
  // desirable 0.031  undesirable -0.020").
  std::string describe(const PairScores& scores) const;
  std::string describeStep() const { return describe(step_); }

 private:
  const HostStore& store_;
  int reference_ = -1, policy_ = -1;
  int64_t rows_ = 0, seq_ = 0;
  DpoLossParams loss_;  // the plan's mt.dpo_loss's
  std::vector<float> zeros_;  // a reference-free plan's reference
  struct NllTerm {  // the plan's mt.pair_nll's, if it has one
    double alpha = 0.0;
    int64_t vocab = 0;
    bool average = false;
  };
  std::optional<NllTerm> nll_;
  enum class PairLoss { kDpo, kKto, kReward };
  PairLoss kind_ = PairLoss::kDpo;
  int labels_ = -1;     // a KTO plan's input
  int positions_ = -1;  // a reward model's input
  int margins_ = -1;    // a reward model's input (plan 1.27)
  KtoParams kto_;       // a KTO plan's mt.kto_loss's
  double center_ = 0.0;  // a reward model's mt.reward_loss's
  const TokenFile* training_data_ = nullptr;
  const TokenFile* held_out_data_ = nullptr;
  ReferenceTable training_, held_out_;
  // A KTO plan's loss and its labels' input, a reward model's loss and its positions' input,
  // checked (the constructor's).
  void readKto(const plan::Plan& plan, const plan::KernelCall& loss);
  void readReward(const plan::Plan& plan);
  // A reward model's positions of the examples `example(b)` of the rows from `data` (each row's
  // last token before its end-of-text token, or the row's last where the example is cut), and
  // its pairs' margins (plan 1.27: the data's, or 0).
  void fillRewardInputs(const TokenFile& data, const std::function<int64_t(int64_t)>& example) const;
  PairScores scoreKtoRun(int64_t rows, std::vector<ExampleScore>* each) const;
  PairScores scoreRewardRun(int64_t rows, std::vector<ExampleScore>* each) const;
  PairScores step_;
};

// Where a run keeps its reference log-probabilities: beside its checkpoints in `folder`, the
// training examples' and the held-out ones'.
std::string referenceFile(const std::string& folder, bool held_out = false);

}  // namespace mt
