// Choosing tokens from logits: greedy, temperature, top-k, top-p, and reproducible draws.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/io/error.h"
#include "runtime/generation/sampling.h"

namespace mt {
namespace {

TEST(Sampling, GreedyTakesTheLargestLogitAndTheLowestIdAmongEquals) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(sampleToken(logits.data(), 4, {.temperature = 0}, 0), 1u);
  // top-k 1 and a tiny top-p leave only the most likely token, whatever the draw.
  for (uint64_t draw = 0; draw < 50; ++draw) {
    EXPECT_EQ(sampleToken(logits.data(), 4, {.temperature = 1, .top_k = 1}, draw), 1u);
    EXPECT_EQ(sampleToken(logits.data(), 4, {.temperature = 1, .top_p = 1e-6}, draw), 1u);
  }
}

TEST(Sampling, DrawsFollowTheSoftmaxAndRepeatWithTheSeed) {
  // log-probabilities of 0.5, 0.3, 0.2 (and a token that can never be drawn).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f),
                                     -std::numeric_limits<float>::infinity()};
  std::vector<int> counts(4, 0);
  const int draws = 20000;
  for (int d = 0; d < draws; ++d) ++counts[sampleToken(logits.data(), 4, {.temperature = 1, .seed = 9}, d)];
  EXPECT_NEAR(counts[0] / double(draws), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(draws), 0.3, 0.02);
  EXPECT_NEAR(counts[2] / double(draws), 0.2, 0.02);
  EXPECT_EQ(counts[3], 0);
  // top-p 0.7 keeps {0.5, 0.3}, renormalised to 5/8 and 3/8; top-k 2 the same two.
  for (const SamplingOptions options : {SamplingOptions{.temperature = 1, .top_p = 0.7, .seed = 9},
                                        SamplingOptions{.temperature = 1, .top_k = 2, .seed = 9}}) {
    std::vector<int> kept(4, 0);
    for (int d = 0; d < draws; ++d) ++kept[sampleToken(logits.data(), 4, options, d)];
    EXPECT_EQ(kept[2] + kept[3], 0);
    EXPECT_NEAR(kept[0] / double(draws), 0.625, 0.02);
  }
  // The same (seed, draw), the same token; a high temperature flattens the distribution.
  for (int d = 0; d < 100; ++d)
    EXPECT_EQ(sampleToken(logits.data(), 4, {.seed = 3}, d), sampleToken(logits.data(), 4, {.seed = 3}, d));
  std::vector<int> hot(4, 0);
  for (int d = 0; d < draws; ++d) ++hot[sampleToken(logits.data(), 4, {.temperature = 100, .seed = 9}, d)];
  EXPECT_NEAR(hot[2] / double(draws), 1.0 / 3, 0.03);
}

TEST(Sampling, RefusesNaN) {
  const std::vector<float> logits = {0.0f, std::nanf("")};
  EXPECT_THROW(sampleToken(logits.data(), 2, {}, 0), Error);
}

}  // namespace
}  // namespace mt
