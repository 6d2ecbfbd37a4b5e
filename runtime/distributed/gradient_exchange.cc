#include "runtime/distributed/gradient_exchange.h"

#include <algorithm>

#include "kernels/adamw/adamw.h"

namespace mt {
namespace {

// Elements per round of collectives: MPI counts are int, and the receive buffer stays bounded
// (a rank holds N slices of a round, about one round's elements).
constexpr int64_t kRound = int64_t{1} << 26;

}  // namespace

void RankGradientExchange::setStep(std::vector<float> weights, float divisor) {
  weights_ = std::move(weights);
  divisor_ = divisor;
}

void RankGradientExchange::reduce(float* grad, int64_t n) {
  const int ranks = world_.size(), me = world_.rank();
  std::vector<int64_t> counts(static_cast<size_t>(ranks)), offsets(static_cast<size_t>(ranks));
  for (int64_t begin = 0; begin < n; begin += kRound) {
    const int64_t m = std::min(kRound, n - begin);
    for (int r = 0; r < ranks; ++r) {
      offsets[r] = m * r / ranks;
      counts[r] = m * (r + 1) / ranks - offsets[r];
    }
    const int64_t mine = counts[me];
    received_.resize(static_cast<size_t>(std::max<int64_t>(mine * ranks, 1)));
    world_.exchangeSlices(grad + begin, counts, offsets, received_.data());
    // Rank order, as --accumulate's micro-batches: the first starts the sum, the last leaves
    // the mean in its own slice.
    sum_.resize(static_cast<size_t>(std::max<int64_t>(mine, 1)));
    for (int r = 0; r < ranks; ++r)
      accumulate_gradient_cpu(sum_.data(), received_.data() + r * mine, mine, r, ranks, weights_[r], divisor_);
    world_.gatherSlices(received_.data() + (ranks - 1) * mine, counts, offsets, grad + begin);
  }
}

}  // namespace mt
