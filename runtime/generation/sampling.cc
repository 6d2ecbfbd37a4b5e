#include "runtime/generation/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/random/counter_rng.h"
#include "runtime/io/error.h"

namespace mt {
namespace {

// A uniform number in [0, 1) for (seed, draw): 53 random bits.
double uniform(uint64_t seed, uint64_t draw) {
  return double(splitmix64(splitmix64(seed ^ 0x5A3D1E) ^ draw) >> 11) * 0x1.0p-53;
}

}  // namespace

uint32_t sampleToken(const float* logits, int64_t vocab, const SamplingOptions& options, uint64_t draw) {
  for (int64_t i = 0; i < vocab; ++i)
    if (std::isnan(logits[i])) throw Error("the model's logits hold NaN (token " + std::to_string(i) + ")");
  // Token ids from the most likely down, the lower id first among equal logits.
  std::vector<uint32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0u);
  auto more_likely = [&](uint32_t a, uint32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  if (options.temperature <= 0) return *std::min_element(order.begin(), order.end(), more_likely);
  const size_t keep = options.top_k > 0 ? std::min<size_t>(options.top_k, order.size()) : order.size();
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), more_likely);
  order.resize(keep);
  std::vector<double> weight(keep);
  const double top = logits[order[0]];
  double total = 0;
  for (size_t i = 0; i < keep; ++i)  // (an infinite top logit takes all the weight)
    total += weight[i] = logits[order[i]] == top ? 1.0 : std::exp((logits[order[i]] - top) / options.temperature);
  size_t nucleus = keep;
  if (options.top_p < 1.0) {
    double sum = 0;
    for (nucleus = 0; nucleus < keep && sum < options.top_p * total;) sum += weight[nucleus++];
    total = sum;
  }
  double target = uniform(options.seed, draw) * total;
  for (size_t i = 0; i < nucleus; ++i) {
    if (target < weight[i]) return order[i];
    target -= weight[i];
  }
  return order[nucleus - 1];  // rounding left the draw past the last weight
}

}  // namespace mt
