// A mixture of experts' routing in the step log (DESIGN.md §14): what each run of a training
// plan leaves in its outputs expert_load (2, experts; row 0: the choices of each expert over the
// MoE layers) and router_aux_loss (the router's load-balancing loss, models/BuiltinModels.h),
// gathered over a step's micro-batches and ranks.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/plan.pb.h"

namespace mt {

class HostStore;
class World;

class RouterStats {
 public:
  // Finds the outputs in `store`'s `plan`; present() is false for a plan without them. Throws
  // mt::Error for outputs of those names but not their shapes (a hostile plan).
  RouterStats(const plan::Plan& plan, const HostStore& store);
  bool present() const { return load_ >= 0 && aux_ >= 0; }

  void startStep();
  // After each run of the plan: its choices added to the step's, its loss to the sum.
  void addRun();
  // A data-parallel step: every rank's runs added, in rank order (each rank gets the total).
  void addRanks(const World& world);

  // The step's mean load-balancing loss over its runs, and each expert's choices.
  double auxLoss() const { return runs_ ? aux_sum_ / static_cast<double>(runs_) : 0.0; }
  const std::vector<int64_t>& expertTokens() const { return tokens_; }
  // The busiest expert's choices over the mean (1: even).
  double imbalance() const;
  // "aux_loss" and "expert_tokens" into a step's log line.
  void addTo(nlohmann::json& line) const;

 private:
  const HostStore& store_;
  int load_ = -1, aux_ = -1;
  int64_t experts_ = 0;
  std::vector<int64_t> tokens_;
  double aux_sum_ = 0.0;
  int64_t runs_ = 0;
};

}  // namespace mt
