// The sharded optimizer's exchanges on MPI (DESIGN.md §13; the interface: runtime/host/rank_exchange.h).
//
// A gradient, as it lands on this rank's host, is summed with every other rank's in rank order,
// weighed and divided exactly as mtrun --accumulate N sums and divides its N micro-batches' (the
// same kernel, accumulate_gradient_cpu, element for element): rank r receives every rank's
// slice r (MPI_Alltoallv) and sums it — the sum of a slice happens in one place, in one order,
// and stays there: its owner updates it. Each rank then sends (N - 1) / N of each gradient and
// receives as much; the updated weights come back by MPI_Allgatherv, (N - 1) / N of each. N ranks
// train bit for bit as one process with --accumulate N.
#pragma once
#include <map>
#include <vector>

#include "runtime/distributed/world.h"
#include "runtime/host/rank_exchange.h"
#include "runtime/plan/plan_format.h"

namespace mt {

class MpiRankExchange : public RankExchange {
 public:
  // `round`: the most elements of a gradient one MPI_Alltoallv moves (MPI counts are int, and
  // the receive buffer stays about this size).
  explicit MpiRankExchange(World& world, int64_t round = int64_t{1} << 26) : world_(world), round_(round) {}
  // This run's weighing (set before each run of the plan, the same on every rank): it is
  // micro-step `micro_step` of `micro_steps` (--accumulate K with ranks: micro-step k of rank r
  // holds the step's micro-batch k·N + r, and the owners sum them in that order, as one process
  // with --accumulate N·K sums its micro-batches); rank r's gradient times weights[r], the sum
  // divided by `divisor` at the step's last micro-batch (1 and N·K; with a loss mask, each
  // micro-batch's counted targets and the step's).
  void setStep(int64_t micro_step, int64_t micro_steps, std::vector<float> weights, float divisor);

  // The host bytes its buffers reach for `plan`'s gradients (what the memory check adds), and
  // the check that every parameter's slices fit MPI's int counts; throws mt::Error naming it.
  int64_t bufferBytes(const plan::Plan& plan) const;
  Shard shard() const override {
    return {world_.rank(), world_.size(), world_.sharesHostMemory(), !world_.sharesHostMemory() || world_.localRank() == 0};
  }
  void reduceToOwner(float* grad, int64_t n, int param) override;
  void gatherChunkSums(const double* mine, int64_t n, int param, double* all) const override;
  void gatherMaster(const MasterWeights& w, int64_t n, int param) const override;
  void gatherWhole(float* data, int64_t n, int param) const override;
  void gatherToFirst(const float* mine, int64_t n, int param, float* whole) const override;
  std::byte* sharedHostMemory(int64_t bytes) override { return world_.allocateShared(bytes); }
  bool everyRank(bool mine) const override;
  void hostCopyWritten() const override { world_.hostBarrier(); }

 private:
  // Every rank's slice of parameter `param`'s n-element tensor: counts and offsets, in elements.
  void slices(int64_t n, int param, std::vector<int64_t>& counts, std::vector<int64_t>& offsets) const;

  World& world_;
  const int64_t round_;
  int64_t micro_step_ = 0, micro_steps_ = 1;
  std::vector<float> weights_;
  float divisor_ = 1.0f;
  // --accumulate with ranks: each parameter's running sum of its slice over the micro-steps.
  std::map<int, std::vector<float>> sums_;
  std::vector<float> received_;  // the ranks' pieces of this rank's slice, rank after rank
  std::vector<float> sum_;       // their running sum
};

}  // namespace mt
