// Preference training (mtc --objective dpo; plan 1.23): a plan whose rows are (chosen, rejected)
// pairs of a prompt's replies reads the reference model's log-probability of each row's reply
// (its input reference_logps) and gives the policy's (its output policy_logps). The reference
// model is the one training starts from: before the first step, loss-only runs over every
// training example in order give each its reference log-probability, kept for the whole run
// (and beside its checkpoints, for a resumed run). Each step's implicit rewards, beta times the
// policy's log-probability over the reference's, go into the log: how often the chosen reply's
// beats the rejected one's, and by how much.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/backends/backend.h"
#include "runtime/data/token_data.h"
#include "runtime/host/step_options.h"
#include "runtime/plan.pb.h"

namespace mt {

class HostStore;
class World;

class Preference {
 public:
  // Finds the input, the output and beta in `store`'s `plan`; present() is false for a plan
  // without them. Throws mt::Error for a plan with one but not the other, or of other shapes.
  Preference(const plan::Plan& plan, const HostStore& store);
  bool present() const { return reference_ >= 0; }
  double beta() const { return beta_; }

  // Every example of `sampler`'s pairs run in order, its rows at a time (loss-only runs of
  // `eval`, the reference input 0): their policy log-probabilities become the reference's.
  // Throws mt::Error if --verify-transfers finds a copy corrupted.
  void computeReference(Backend& backend, HostStore& store, const BatchSampler& sampler, const StepOptions& eval,
                        int64_t examples);
  // The reference log-probabilities written to / read from `path` (binary: magic, the data's
  // checksum, the count, the floats); load throws mt::Error naming the file and the fix if it is
  // missing, malformed or made for other data.
  void save(const std::string& path, uint32_t data_checksum) const;
  void load(const std::string& path, uint32_t data_checksum, int64_t examples);

  // The plan's reference input for the rows [first_row, first_row + batch) of step `step`.
  void fillReference(const BatchSampler& sampler, int64_t step, int64_t first_row) const;

  void startStep();
  // After each run: its pairs' implicit rewards added to the step's.
  void addRun();
  // "pairs_right" (the share of pairs whose chosen reply's reward beats the rejected one's),
  // "reward_margin", "reward_chosen", "reward_rejected" (means over the step's pairs) into a
  // step's log line.
  void addTo(nlohmann::json& line) const;
  // The same for the progress line: "chosen beats rejected 62%  margin 0.120".
  std::string describeStep() const;

 private:
  const HostStore& store_;
  int reference_ = -1, policy_ = -1;
  int64_t rows_ = 0;
  double beta_ = 0.0;
  std::vector<float> by_example_;  // the reference log-probability of each example of the file
  int64_t pairs_ = 0, right_ = 0;
  double chosen_sum_ = 0.0, rejected_sum_ = 0.0;
};

// Where a run keeps its reference log-probabilities: beside its checkpoints in `folder`.
std::string referenceFile(const std::string& folder);

}  // namespace mt
