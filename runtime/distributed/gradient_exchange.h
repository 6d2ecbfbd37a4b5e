// The data-parallel gradient sum (DESIGN.md §13): a parameter's gradient, as it lands on this
// rank's host, summed with every other rank's in rank order, weighed and divided exactly as
// mtrun --accumulate N sums and divides its N micro-batches' (the same kernel,
// accumulate_gradient_cpu, element for element): N ranks train bit for bit as one process with
// --accumulate N. The tensor is cut into one slice per rank; rank r receives every rank's slice r
// (MPI_Alltoallv), sums them, and every rank gathers the summed slices (MPI_Allgatherv): each
// rank sends and receives 2 (N - 1) / N of the tensor, as a ring allreduce does, and the sum of
// a slice happens in one place, in one order.
#pragma once
#include <vector>

#include "runtime/distributed/world.h"
#include "runtime/host/step_options.h"

namespace mt {

class RankGradientExchange : public GradientExchange {
 public:
  explicit RankGradientExchange(const World& world) : world_(world) {}
  // This step's weighing (set before the step, the same on every rank): rank r's gradient times
  // weights[r], the sum divided by `divisor` (1 and N; with a loss mask, each rank's counted
  // targets and the step's).
  void setStep(std::vector<float> weights, float divisor);
  void reduce(float* grad, int64_t n) override;

 private:
  const World& world_;
  std::vector<float> weights_;
  float divisor_ = 1.0f;
  std::vector<float> received_;  // the ranks' slices of this rank's share, rank after rank
  std::vector<float> sum_;       // their running sum
};

}  // namespace mt
