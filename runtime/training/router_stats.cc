#include "runtime/training/router_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/distributed/world.h"
#include "runtime/host/host_store.h"
#include "runtime/io/error.h"

namespace mt {

RouterStats::RouterStats(const plan::Plan& plan, const HostStore& store) : store_(store) {
  load_ = store.output("expert_load");
  aux_ = store.output("router_aux_loss");
  if (load_ < 0 && aux_ < 0) return;
  // Read from a plan file: hostile until checked.
  const auto shaped = [&](int i, int64_t rank) {
    const plan::HostTensor& t = plan.host_tensors(i);
    return t.dtype() == plan::DTYPE_F32 && t.shape_size() == rank && (rank == 0 || t.shape(0) == 2);
  };
  if (!present() || !shaped(load_, 2) || !shaped(aux_, 0))
    throw Error("the plan's router outputs are malformed: expert_load must be an f32 (2, experts) output and "
                "router_aux_loss an f32 scalar beside it (recompile the plan with mtc)");
  experts_ = store.numel(load_) / 2;
  tokens_.assign(experts_, 0);
}

void RouterStats::startStep() {
  std::fill(tokens_.begin(), tokens_.end(), 0);
  aux_sum_ = 0.0;
  runs_ = 0;
}

void RouterStats::addRun() {
  if (!present()) return;
  const float* load = store_.f32(load_);  // row 0: whole counts, exact in f32 below 2^24
  for (int64_t e = 0; e < experts_; ++e) tokens_[e] += static_cast<int64_t>(std::llround(load[e]));
  aux_sum_ += store_.f32(aux_)[0];
  ++runs_;
}

void RouterStats::addRanks(const World& world) {
  if (!present()) return;
  std::vector<double> mine = {aux_sum_, static_cast<double>(runs_)};
  for (int64_t t : tokens_) mine.push_back(static_cast<double>(t));
  startStep();
  for (const std::vector<double>& rank : world.allgather(mine)) {
    aux_sum_ += rank[0];
    runs_ += static_cast<int64_t>(rank[1]);
    for (int64_t e = 0; e < experts_; ++e) tokens_[e] += static_cast<int64_t>(rank[2 + e]);
  }
}

double RouterStats::imbalance() const {
  const int64_t total = std::accumulate(tokens_.begin(), tokens_.end(), int64_t{0});
  if (total == 0 || experts_ == 0) return 0.0;
  return static_cast<double>(*std::max_element(tokens_.begin(), tokens_.end())) * static_cast<double>(experts_) /
         static_cast<double>(total);
}

void RouterStats::addTo(nlohmann::json& line) const {
  if (!present()) return;
  line["aux_loss"] = auxLoss();
  line["expert_tokens"] = tokens_;
}

}  // namespace mt
