// The mixture-of-experts kernels (kernels/moe/moe.h) against double references: the router's
// softmax weightings and their gradients (finite differences), the sigmoid router's choice (its
// bias, its groups) and weights and their gradient, the softmax router's groups, the scale, the counting sort's order, the
// grouped products and their weight gradients in both layouts, the combine and its backward;
// the router's load-balancing statistics and loss and their gradients (finite differences);
// and data a corrupt plan could hold (expert indices out of range, counts that do not add up)
// read and written inside the tensors only.
#include <algorithm>
#include <limits>
#include <numeric>

#include "kernels/moe/moe.h"
#include "tests/kernels/kernel_harness.h"

namespace mt::test {
namespace {

using Routing = MoeRoutingKind;

// Route weights of one token in double for `chosen` experts (the kernel's choice), by `routing`.
Doubles routeWeights(const Doubles& logits, const std::vector<int32_t>& chosen, Routing routing) {
  const size_t k = chosen.size();
  Doubles w(k);
  if (routing == Routing::kTopKSoftmax) {
    double max = -1e300, sum = 0;
    for (int32_t e : chosen) max = std::max(max, logits[e]);
    for (size_t j = 0; j < k; ++j) sum += w[j] = std::exp(logits[chosen[j]] - max);
    for (double& v : w) v /= sum;
    return w;
  }
  double max = *std::max_element(logits.begin(), logits.end()), sum = 0;
  for (double l : logits) sum += std::exp(l - max);
  for (size_t j = 0; j < k; ++j) w[j] = std::exp(logits[chosen[j]] - max) / sum;
  if (routing == Routing::kSoftmaxTopKNormalized) {
    const double s = std::accumulate(w.begin(), w.end(), 0.0);
    for (double& v : w) v /= s;
  }
  return w;
}

class MoeKernels : public KernelTest {};

TEST_F(MoeKernels, RouteWeighsTheLargestChoicesEachWay) {
  const int64_t tokens = 5, experts = 6, k = 2;
  const std::vector<float> logits = randomFloats(tokens * experts, rng, 2.0f);
  for (Routing routing : {Routing::kSoftmaxTopK, Routing::kSoftmaxTopKNormalized, Routing::kTopKSoftmax}) {
    auto out = runKernel(KernelId::MoeRoute, {HostTensor::f32({tokens, experts}, logits)},
                         {HostTensor::f32({tokens, k}), HostTensor::i32({tokens, k}, std::vector<int32_t>(tokens * k))},
                         {k, static_cast<int64_t>(routing)});
    Doubles want;
    for (int64_t t = 0; t < tokens; ++t) {
      const Doubles row(logits.begin() + t * experts, logits.begin() + (t + 1) * experts);
      std::vector<int32_t> order(experts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      order.resize(k);
      EXPECT_EQ(std::vector<int32_t>(out[1].ints.begin() + t * k, out[1].ints.begin() + (t + 1) * k), order)
          << "token " << t << ": the largest first";
      const Doubles w = routeWeights(row, order, routing);
      want.insert(want.end(), w.begin(), w.end());
    }
    expectClose(out[0].floats, want, kF32Tol, "route weights, routing " + std::to_string(int(routing)));
  }
}

TEST_F(MoeKernels, RouteBreaksTiesTowardTheLowerExpert) {
  auto out = runKernel(KernelId::MoeRoute, {HostTensor::f32({1, 4}, {0.5f, 1.0f, 1.0f, 1.0f})},
                       {HostTensor::f32({1, 2}), HostTensor::i32({1, 2}, {0, 0})}, {2, 0});
  EXPECT_EQ(out[1].ints, (std::vector<int32_t>{1, 2}));
}

TEST_F(MoeKernels, RouteGradientMatchesFiniteDifferences) {
  const int64_t tokens = 3, experts = 5, k = 3;
  const std::vector<float> logits = randomFloats(tokens * experts, rng, 1.5f);
  const std::vector<float> dweights = randomFloats(tokens * k, rng);
  for (Routing routing : {Routing::kSoftmaxTopK, Routing::kSoftmaxTopKNormalized, Routing::kTopKSoftmax}) {
    const int64_t mode = static_cast<int64_t>(routing);
    auto fwd = runKernel(KernelId::MoeRoute, {HostTensor::f32({tokens, experts}, logits)},
                         {HostTensor::f32({tokens, k}), HostTensor::i32({tokens, k}, std::vector<int32_t>(tokens * k))},
                         {k, mode});
    const std::vector<int32_t> chosen = fwd[1].ints;
    auto grad = runKernel(KernelId::MoeRouteGrad,
                          {HostTensor::f32({tokens, k}, dweights), HostTensor::f32({tokens, experts}, logits),
                           HostTensor::i32({tokens, k}, chosen)},
                          {HostTensor::f32({tokens, experts})}, {k, mode});
    // The choice is fixed near these logits (no ties): the weights are smooth in them.
    auto reference = [&](const Doubles& x) {
      Doubles w;
      for (int64_t t = 0; t < tokens; ++t) {
        const Doubles row(x.begin() + t * experts, x.begin() + (t + 1) * experts);
        const Doubles wt = routeWeights(row, std::vector<int32_t>(chosen.begin() + t * k, chosen.begin() + (t + 1) * k),
                                        routing);
        w.insert(w.end(), wt.begin(), wt.end());
      }
      return w;
    };
    const Doubles want = finiteDifferences(reference, Doubles(logits.begin(), logits.end()),
                                           Doubles(dweights.begin(), dweights.end()));
    expectClose(grad[0].floats, want, kGradTol, "route gradient, routing " + std::to_string(mode));
  }
}

// One token's choice in double by its choice scores, as transformers writes DeepSeek's routers: within
// the `chosen_groups` of `groups` that score largest — by their two best scores added up (DeepSeek-V3's
// sigmoid router) or by their best (`by_best`: DeepSeek-V2's softmax one) — the others' experts scored
// 0; the largest first, ties to the lower index.
std::vector<int32_t> groupedChoice(Doubles choice, int64_t k, int64_t groups, int64_t chosen_groups, bool by_best) {
  const int64_t experts = static_cast<int64_t>(choice.size()), per_group = experts / groups;
  auto largestFirst = [](const Doubles& score, int64_t n) {
    std::vector<int32_t> order(score.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return score[a] > score[b]; });
    order.resize(n);
    return order;
  };
  Doubles group_score(groups);
  for (int64_t g = 0; g < groups; ++g) {
    Doubles members(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
    std::sort(members.rbegin(), members.rend());
    group_score[g] = by_best ? members[0] : members[0] + members[1];
  }
  const std::vector<int32_t> kept = largestFirst(group_score, chosen_groups);
  for (int64_t e = 0; e < experts; ++e)
    if (std::find(kept.begin(), kept.end(), e / per_group) == kept.end()) choice[e] = 0.0;
  return largestFirst(choice, k);
}

// A sigmoid router's choice of one token (GLM-4.5's and DeepSeek-V3's, as transformers' TopkRouter):
// by score + bias within the groups whose two best such sums are largest.
std::vector<int32_t> sigmoidChoice(const Doubles& logits, const Doubles& bias, int64_t k, int64_t groups,
                                   int64_t chosen_groups) {
  Doubles choice(logits.size());
  for (size_t e = 0; e < logits.size(); ++e) choice[e] = 1.0 / (1.0 + std::exp(-logits[e])) + bias[e];
  return groupedChoice(choice, k, groups, chosen_groups, false);
}

// A row's softmax in double.
Doubles softmaxOf(const Doubles& logits) {
  const double max = *std::max_element(logits.begin(), logits.end());
  Doubles p(logits.size());
  double sum = 0;
  for (size_t e = 0; e < logits.size(); ++e) sum += p[e] = std::exp(logits[e] - max);
  for (double& v : p) v /= sum;
  return p;
}

// Its weights for `chosen`: the sigmoids, over their sum + 1e-20 where normalized, times `scale`.
Doubles sigmoidWeights(const Doubles& logits, const std::vector<int32_t>& chosen, bool normalized, double scale) {
  Doubles w;
  for (int32_t e : chosen) w.push_back(1.0 / (1.0 + std::exp(-logits[e])));
  const double sum = std::accumulate(w.begin(), w.end(), 0.0) + 1e-20;
  for (double& v : w) v = (normalized ? v / sum : v) * scale;
  return w;
}

TEST_F(MoeKernels, SigmoidRouterChoosesByScorePlusBiasWithinTheBestGroups) {
  const int64_t tokens = 8, experts = 8, k = 3, groups = 4, chosen_groups = 2;
  const std::vector<float> logits = randomFloats(tokens * experts, rng, 2.0f);
  const std::vector<float> bias = randomFloats(experts, rng, 0.3f);
  const float scale = 2.5f;
  bool bias_decides = false;  // the bias changes some token's choice: the test sees it
  for (Routing routing : {Routing::kSigmoidTopK, Routing::kSigmoidTopKNormalized}) {
    auto out = runKernel(KernelId::MoeRouteBiased,
                         {HostTensor::f32({tokens, experts}, logits), HostTensor::f32({experts}, bias)},
                         {HostTensor::f32({tokens, k}), HostTensor::i32({tokens, k}, std::vector<int32_t>(tokens * k))},
                         {k, static_cast<int64_t>(routing), groups, chosen_groups}, {scale});
    Doubles want;
    for (int64_t t = 0; t < tokens; ++t) {
      const Doubles row(logits.begin() + t * experts, logits.begin() + (t + 1) * experts);
      const std::vector<int32_t> chosen =
          sigmoidChoice(row, Doubles(bias.begin(), bias.end()), k, groups, chosen_groups);
      bias_decides |= chosen != sigmoidChoice(row, Doubles(experts, 0.0), k, groups, chosen_groups);
      EXPECT_EQ(std::vector<int32_t>(out[1].ints.begin() + t * k, out[1].ints.begin() + (t + 1) * k), chosen)
          << "token " << t;
      const Doubles w = sigmoidWeights(row, chosen, routing == Routing::kSigmoidTopKNormalized, scale);
      want.insert(want.end(), w.begin(), w.end());
    }
    expectClose(out[0].floats, want, kF32Tol, "sigmoid route weights, routing " + std::to_string(int(routing)));
  }
  EXPECT_TRUE(bias_decides) << "no token's choice depends on the bias: pick other random data";
}

TEST_F(MoeKernels, SigmoidRouterTakesZeroScoredExpertsWhereItsGroupsHoldTooFew) {
  // Group 1 (experts 2, 3) wins; a third choice can only come from group 0, scored 0 (torch's
  // masked_fill): expert 0, the lower index. Expert 3's score + bias is below 0, so the zero-scored
  // expert 0 ranks before it.
  auto out = runKernel(KernelId::MoeRouteBiased,
                       {HostTensor::f32({1, 4}, {-3.0f, -3.0f, 3.0f, 2.0f}), HostTensor::f32({4}, {0, 0, 0, -1.5f})},
                       {HostTensor::f32({1, 3}), HostTensor::i32({1, 3}, {0, 0, 0})},
                       {3, static_cast<int64_t>(Routing::kSigmoidTopK), 2, 1});
  EXPECT_EQ(out[1].ints, (std::vector<int32_t>{2, 0, 1}));
}

// Ernie 4.5's router (Ernie4_5_MoeSparseMoeBlock): the top k by softmax probability + bias, weighed by
// their probabilities over the chosen ones' sum.
TEST_F(MoeKernels, SoftmaxRouterChoosesByProbabilityPlusBias) {
  const int64_t tokens = 8, experts = 6, k = 2;
  const std::vector<float> logits = randomFloats(tokens * experts, rng, 2.0f);
  const std::vector<float> bias = randomFloats(experts, rng, 0.3f);
  auto out = runKernel(KernelId::MoeRouteBiased,
                       {HostTensor::f32({tokens, experts}, logits), HostTensor::f32({experts}, bias)},
                       {HostTensor::f32({tokens, k}), HostTensor::i32({tokens, k}, std::vector<int32_t>(tokens * k))},
                       {k, static_cast<int64_t>(Routing::kSoftmaxTopKNormalized)});
  Doubles want;
  bool bias_decides = false;  // the bias changes some token's choice: the test sees it
  for (int64_t t = 0; t < tokens; ++t) {
    const Doubles p = softmaxOf(Doubles(logits.begin() + t * experts, logits.begin() + (t + 1) * experts));
    Doubles choice = p;
    for (int64_t e = 0; e < experts; ++e) choice[e] += bias[e];
    const std::vector<int32_t> chosen = groupedChoice(choice, k, 1, 1, true);
    bias_decides |= chosen != groupedChoice(p, k, 1, 1, true);
    EXPECT_EQ(std::vector<int32_t>(out[1].ints.begin() + t * k, out[1].ints.begin() + (t + 1) * k), chosen)
        << "token " << t;
    const double sum = p[chosen[0]] + p[chosen[1]];
    for (int32_t e : chosen) want.push_back(p[e] / sum);
  }
  expectClose(out[0].floats, want, kF32Tol, "biased softmax route weights");
  EXPECT_TRUE(bias_decides) << "no token's choice depends on the bias: pick other random data";
}

TEST_F(MoeKernels, SigmoidRouterGradientMatchesFiniteDifferences) {
  const int64_t tokens = 3, experts = 6, k = 3;
  const std::vector<float> logits = randomFloats(tokens * experts, rng, 1.5f);
  const std::vector<float> dweights = randomFloats(tokens * k, rng);
  const float scale = 2.5f;
  for (Routing routing : {Routing::kSigmoidTopK, Routing::kSigmoidTopKNormalized}) {
    const int64_t mode = static_cast<int64_t>(routing);
    auto fwd = runKernel(KernelId::MoeRoute, {HostTensor::f32({tokens, experts}, logits)},
                         {HostTensor::f32({tokens, k}), HostTensor::i32({tokens, k}, std::vector<int32_t>(tokens * k))},
                         {k, mode}, {scale});
    const std::vector<int32_t> chosen = fwd[1].ints;
    auto grad = runKernel(KernelId::MoeRouteGrad,
                          {HostTensor::f32({tokens, k}, dweights), HostTensor::f32({tokens, experts}, logits),
                           HostTensor::i32({tokens, k}, chosen)},
                          {HostTensor::f32({tokens, experts})}, {k, mode}, {scale});
    auto reference = [&](const Doubles& x) {
      Doubles w;
      for (int64_t t = 0; t < tokens; ++t) {
        const Doubles row(x.begin() + t * experts, x.begin() + (t + 1) * experts);
        const Doubles wt = sigmoidWeights(row, std::vector<int32_t>(chosen.begin() + t * k, chosen.begin() + (t + 1) * k),
                                          routing == Routing::kSigmoidTopKNormalized, scale);
        w.insert(w.end(), wt.begin(), wt.end());
      }
      return w;
    };
    const Doubles want = finiteDifferences(reference, Doubles(logits.begin(), logits.end()),
                                           Doubles(dweights.begin(), dweights.end()));
    expectClose(grad[0].floats, want, kGradTol, "sigmoid route gradient, routing " + std::to_string(mode));
  }
}

// DeepSeek-V2's group_limited_greedy (transformers' DeepseekV2Moe): the softmax's top k within the
// groups whose best probabilities are largest (which matters only where k exceeds the groups kept), weighed by those probabilities (renormalised where
// the routing says) times the scale; the gradient that of the same weights, whatever chose them.
TEST_F(MoeKernels, SoftmaxRouterChoosesWithinTheGroupsOfBestProbability) {
  const int64_t tokens = 16, experts = 8, k = 3, groups = 4, chosen_groups = 2;
  const std::vector<float> logits = randomFloats(tokens * experts, rng, 2.0f);
  const std::vector<float> dweights = randomFloats(tokens * k, rng);
  const float scale = 2.0f;
  bool rule_decides = false, groups_decide = false;  // the test sees both matter for some token
  for (Routing routing : {Routing::kSoftmaxTopK, Routing::kSoftmaxTopKNormalized}) {
    const int64_t mode = static_cast<int64_t>(routing);
    auto out = runKernel(KernelId::MoeRoute, {HostTensor::f32({tokens, experts}, logits)},
                         {HostTensor::f32({tokens, k}), HostTensor::i32({tokens, k}, std::vector<int32_t>(tokens * k))},
                         {k, mode, groups, chosen_groups}, {scale});
    Doubles want;
    for (int64_t t = 0; t < tokens; ++t) {
      const Doubles row(logits.begin() + t * experts, logits.begin() + (t + 1) * experts), p = softmaxOf(row);
      const std::vector<int32_t> chosen = groupedChoice(p, k, groups, chosen_groups, true);
      rule_decides |= chosen != groupedChoice(p, k, groups, chosen_groups, false);
      groups_decide |= chosen != groupedChoice(p, k, 1, 1, true);
      EXPECT_EQ(std::vector<int32_t>(out[1].ints.begin() + t * k, out[1].ints.begin() + (t + 1) * k), chosen)
          << "token " << t;
      for (double w : routeWeights(row, chosen, routing)) want.push_back(w * scale);
    }
    expectClose(out[0].floats, want, kF32Tol, "grouped softmax route weights, routing " + std::to_string(mode));
    auto grad = [&](std::vector<int64_t> ints) {
      return runKernel(KernelId::MoeRouteGrad,
                       {HostTensor::f32({tokens, k}, dweights), HostTensor::f32({tokens, experts}, logits),
                        HostTensor::i32({tokens, k}, out[1].ints)},
                       {HostTensor::f32({tokens, experts})}, ints, {scale})[0].floats;
    };
    EXPECT_EQ(grad({k, mode, groups, chosen_groups}), grad({k, mode})) << "the groups only choose";
  }
  EXPECT_TRUE(rule_decides) << "no token's choice depends on the group rule: pick other random data";
  EXPECT_TRUE(groups_decide) << "no token's choice depends on the groups: pick other random data";
}

TEST_F(MoeKernels, ScaledSoftmaxRoutingIsTheScaleTimesTheUnscaled) {
  const int64_t tokens = 4, experts = 5, k = 2;
  const std::vector<float> logits = randomFloats(tokens * experts, rng, 2.0f);
  const std::vector<float> dweights = randomFloats(tokens * k, rng);
  const int64_t mode = static_cast<int64_t>(Routing::kSoftmaxTopKNormalized);
  auto route = [&](std::vector<float> floats) {
    return runKernel(KernelId::MoeRoute, {HostTensor::f32({tokens, experts}, logits)},
                     {HostTensor::f32({tokens, k}), HostTensor::i32({tokens, k}, std::vector<int32_t>(tokens * k))},
                     {k, mode}, floats);
  };
  auto plain = route({}), scaled = route({2.0f});
  EXPECT_EQ(plain[1].ints, scaled[1].ints);
  for (size_t i = 0; i < plain[0].floats.size(); ++i) EXPECT_EQ(scaled[0].floats[i], 2.0f * plain[0].floats[i]);
  auto grad = [&](std::vector<float> dw, std::vector<float> floats) {
    return runKernel(KernelId::MoeRouteGrad,
                     {HostTensor::f32({tokens, k}, dw), HostTensor::f32({tokens, experts}, logits),
                      HostTensor::i32({tokens, k}, plain[1].ints)},
                     {HostTensor::f32({tokens, experts})}, {k, mode}, floats)[0].floats;
  };
  std::vector<float> doubled = dweights;
  for (float& v : doubled) v *= 2.0f;
  EXPECT_EQ(grad(dweights, {2.0f}), grad(doubled, {})) << "the scale's gradient is the scaled dweights'";
}

TEST_F(MoeKernels, RouteRefusesGroupsAndBiasesItCannotUse) {
  auto check = [](int64_t experts, std::vector<int64_t> ints, std::vector<float> floats, int64_t bias_size) {
    HostTensor logits = HostTensor::f32({2, experts}), bias = HostTensor::f32({bias_size});
    HostTensor w = HostTensor::f32({2, ints[0]}), e = HostTensor::i32({2, ints[0]}, std::vector<int32_t>(2 * ints[0]));
    KernelArgs args{{logits.view()}, {w.view(), e.view()}, ints, floats};
    if (bias_size > 0) args.in.push_back(bias.view());
    return checkKernelCall(bias_size > 0 ? KernelId::MoeRouteBiased : KernelId::MoeRoute, args);
  };
  const int64_t sigmoid = static_cast<int64_t>(Routing::kSigmoidTopKNormalized);
  EXPECT_EQ(check(8, {2, sigmoid, 4, 2}, {2.5f}, 8), "");
  EXPECT_EQ(check(8, {2, 1, 4, 2}, {16.0f}, 0), "");  // DeepSeek-V2's softmax within groups
  EXPECT_NE(check(8, {2, 2, 4, 2}, {}, 0).find("not with the top-k softmax"), std::string::npos);
  EXPECT_NE(check(8, {2, sigmoid, 3, 1}, {}, 8).find("equal groups of two or more"), std::string::npos);
  EXPECT_NE(check(8, {2, sigmoid, 8, 1}, {}, 8).find("equal groups of two or more"), std::string::npos);
  EXPECT_NE(check(8, {2, sigmoid, 4, 5}, {}, 8).find("groups_chosen 5"), std::string::npos);
  EXPECT_NE(check(8, {2, sigmoid, 4}, {}, 8).find("2 or 4 int attributes"), std::string::npos);
  EXPECT_NE(check(8, {2, 5}, {}, 0).find("routing 5"), std::string::npos);
  EXPECT_NE(check(8, {2, sigmoid}, {std::numeric_limits<float>::infinity()}, 0).find("not finite"), std::string::npos);
  EXPECT_NE(check(8, {2, sigmoid}, {}, 7).find("moe_route bias"), std::string::npos);
  EXPECT_EQ(check(8, {2, 1}, {}, 8), "");  // Ernie 4.5's biased softmax
  EXPECT_NE(check(8, {2, 2}, {}, 8).find("not the top-k softmax"), std::string::npos);
}

// 4 tokens, k = 2, 3 experts; slot (1, 1) names expert -1 and slot (3, 0) expert 3: out of range.
const std::vector<int32_t> kChoices = {2, 0, 1, -1, 2, 1, 3, 2};

TEST_F(MoeKernels, DispatchGroupsRowsByExpertInTokenOrder) {
  std::vector<float> x(4 * 2);
  std::iota(x.begin(), x.end(), 0.0f);  // token t's row: {2t, 2t + 1}
  auto out = runKernel(KernelId::MoeDispatch, {HostTensor::f32({4, 2}, x), HostTensor::i32({4, 2}, kChoices)},
                       {HostTensor::f32({8, 2}), HostTensor::i32({4, 2}, std::vector<int32_t>(8)),
                        HostTensor::i32({3}, {0, 0, 0})});
  EXPECT_EQ(out[2].ints, (std::vector<int32_t>{1, 2, 3})) << "counts leave the out-of-range choices out";
  // Expert 0: (0,1); expert 1: (1,0), (2,1); expert 2: (0,0), (2,0), (3,1); then (1,1), (3,0).
  EXPECT_EQ(out[1].ints, (std::vector<int32_t>{3, 0, 1, 6, 4, 2, 7, 5}));
  const std::vector<int32_t> token_of_row = {0, 1, 2, 0, 2, 3, 1, 3};
  for (int64_t r = 0; r < 8; ++r)
    EXPECT_EQ(out[0].floats[r * 2], 2.0f * token_of_row[r]) << "routed row " << r;
  // Back: each token's rows summed.
  std::vector<float> drouted(16);
  std::iota(drouted.begin(), drouted.end(), 1.0f);
  auto back = runKernel(KernelId::MoeDispatchGrad, {HostTensor::f32({8, 2}, drouted), HostTensor::i32({4, 2}, out[1].ints)},
                        {HostTensor::f32({4, 2})});
  Doubles want(8, 0.0);
  for (int64_t s = 0; s < 8; ++s)
    for (int64_t c = 0; c < 2; ++c) want[(s / 2) * 2 + c] += drouted[out[1].ints[s] * 2 + c];
  expectClose(back[0].floats, want, 0.0, "dispatch gradient");
}

// y[r] = x[r] @ op(w[e]) for the rows of expert e; zero past the counted rows.
Doubles groupedReference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<int64_t>& counts,
                         int64_t rows, int64_t k, int64_t n, bool tb) {
  Doubles y(rows * n, 0.0);
  int64_t r = 0;
  for (size_t e = 0; e < counts.size(); ++e)
    for (int64_t i = 0; i < counts[e]; ++i, ++r)
      for (int64_t o = 0; o < n; ++o)
        for (int64_t c = 0; c < k; ++c)
          y[r * n + o] += double(x[r * k + c]) * w[e * k * n + (tb ? o * k + c : c * n + o)];
  return y;
}

TEST_F(MoeKernels, GroupedProductsAndWeightGradientsInBothLayouts) {
  const int64_t rows = 7, k = 3, n = 4, experts = 3;
  const std::vector<int32_t> counts = {2, 0, 4};  // 6 of 7 rows counted: the last is zero
  const std::vector<float> x = randomFloats(rows * k, rng), w = randomFloats(experts * k * n, rng);
  const std::vector<float> dy = randomFloats(rows * n, rng);
  for (bool tb : {false, true}) {
    const Shape wshape = tb ? Shape{experts, n, k} : Shape{experts, k, n};
    auto y = runKernel(KernelId::GroupedMatmul,
                       {HostTensor::f32({rows, k}, x), HostTensor::f32(wshape, w), HostTensor::i32({experts}, counts)},
                       {HostTensor::f32({rows, n}, std::vector<float>(rows * n, 9.0f))}, {tb});
    expectClose(y[0].floats, groupedReference(x, w, {2, 0, 4}, rows, k, n, tb), kF32Tol, "grouped product");
    auto dw = runKernel(KernelId::GroupedMatmulWeightGrad,
                        {HostTensor::f32({rows, k}, x), HostTensor::f32({rows, n}, dy), HostTensor::i32({experts}, counts)},
                        {HostTensor::f32(wshape, std::vector<float>(experts * k * n, 9.0f))}, {tb});
    Doubles want(experts * k * n, 0.0);
    for (int64_t e = 0, r0 = 0; e < experts; r0 += counts[e], ++e)
      for (int64_t r = r0; r < r0 + counts[e]; ++r)
        for (int64_t c = 0; c < k; ++c)
          for (int64_t o = 0; o < n; ++o)
            want[e * k * n + (tb ? o * k + c : c * n + o)] += double(x[r * k + c]) * dy[r * n + o];
    expectClose(dw[0].floats, want, kF32Tol, "grouped weight gradient");
  }
}

// The experts [first, first + size) of a stacked weight (E, ., .): a group's piece of it.
std::vector<float> expertSlice(const std::vector<float>& w, int64_t first, int64_t size, int64_t per_expert) {
  return std::vector<float>(w.begin() + first * per_expert, w.begin() + (first + size) * per_expert);
}

// Experts streamed in groups (mt-split-experts): for every split of 5 experts into groups of
// consecutive experts (all 16), the chain of mt.grouped_matmul_into from zeros equals the whole
// product bit for bit, and each group's weight gradient the whole gradient's rows bit for bit
// (the same sgemms); the product in place of `into` (as the memory planner places it) too.
TEST_F(MoeKernels, ProductsOverGroupsOfExpertsAreTheWholeProductBitForBit) {
  const int64_t rows = 9, k = 3, n = 4, experts = 5, per = k * n;
  const std::vector<int32_t> counts = {2, 0, 3, 1, 2};  // 8 of 9 rows counted: the last is zero
  const std::vector<float> x = randomFloats(rows * k, rng), w = randomFloats(experts * per, rng);
  const std::vector<float> dy = randomFloats(rows * n, rng);
  for (bool tb : {false, true}) {
    auto shapeOf = [&](int64_t e) { return tb ? Shape{e, n, k} : Shape{e, k, n}; };
    const auto whole = runKernel(KernelId::GroupedMatmul,
                                 {HostTensor::f32({rows, k}, x), HostTensor::f32(shapeOf(experts), w),
                                  HostTensor::i32({experts}, counts)},
                                 {HostTensor::f32({rows, n})}, {tb})[0].floats;
    const auto wholeGrad = runKernel(KernelId::GroupedMatmulWeightGrad,
                                     {HostTensor::f32({rows, k}, x), HostTensor::f32({rows, n}, dy),
                                      HostTensor::i32({experts}, counts)},
                                     {HostTensor::f32(shapeOf(experts))}, {tb})[0].floats;
    for (int split = 0; split < 16; ++split) {  // bit b set: a group starts at expert b + 1
      std::vector<int64_t> first = {0};
      for (int64_t b = 0; b < 4; ++b)
        if (split >> b & 1) first.push_back(b + 1);
      first.push_back(experts);
      HostTensor y = HostTensor::f32({rows, n}, std::vector<float>(rows * n, 0.0f));
      for (size_t g = 0; g + 1 < first.size(); ++g) {
        const int64_t size = first[g + 1] - first[g];
        const bool in_place = g % 2 == 1;  // alternately in into's bytes and in bytes of its own
        HostTensor piece = HostTensor::f32(shapeOf(size), expertSlice(w, first[g], size, per));
        HostTensor xs = HostTensor::f32({rows, k}, x), ns = HostTensor::i32({experts}, counts);
        HostTensor out = HostTensor::f32({rows, n}, std::vector<float>(rows * n, 7.0f));
        KernelArgs args;
        args.in = {xs.view(), piece.view(), ns.view(), y.view()};
        args.out = {in_place ? y.view() : out.view()};
        args.ints = {tb, first[g]};
        ASSERT_EQ(checkKernelCall(KernelId::GroupedMatmulInto, args), "");
        runKernelCpu(KernelId::GroupedMatmulInto, args);
        if (!in_place) y = out;
        const auto grad = runKernel(KernelId::GroupedMatmulWeightGrad,
                                    {HostTensor::f32({rows, k}, x), HostTensor::f32({rows, n}, dy),
                                     HostTensor::i32({experts}, counts)},
                                    {HostTensor::f32(shapeOf(size), std::vector<float>(size * per, 9.0f))},
                                    {tb, first[g]})[0].floats;
        EXPECT_EQ(grad, expertSlice(wholeGrad, first[g], size, per))
            << "split " << split << ", group " << g << ", transpose_b " << tb;
      }
      EXPECT_EQ(y.floats, whole) << "split " << split << ", transpose_b " << tb;
    }
  }
}

// A group's range is checked against the counts: experts past the counted ones, a first expert
// on the whole product, an `into` of another shape.
TEST_F(MoeKernels, GroupRangesOutsideTheCountsAreRefused) {
  const int64_t rows = 4, k = 2, n = 3;
  HostTensor x = HostTensor::f32({rows, k}), w2 = HostTensor::f32({2, n, k}), w3 = HostTensor::f32({3, n, k});
  HostTensor counts = HostTensor::i32({3}, {1, 1, 2}), into = HostTensor::f32({rows, n}), y = HostTensor::f32({rows, n});
  HostTensor bad_into = HostTensor::f32({rows, n + 1}), dy = HostTensor::f32({rows, n}), dw2 = HostTensor::f32({2, n, k});
  auto check = [&](KernelId id, std::vector<Tensor> in, Tensor out, std::vector<int64_t> ints) {
    KernelArgs args;
    args.in = std::move(in);
    args.out = {out};
    args.ints = std::move(ints);
    return checkKernelCall(id, args);
  };
  EXPECT_EQ(check(KernelId::GroupedMatmulInto, {x.view(), w2.view(), counts.view(), into.view()}, y.view(), {1, 1}), "");
  EXPECT_NE(check(KernelId::GroupedMatmulInto, {x.view(), w2.view(), counts.view(), into.view()}, y.view(), {1, 2})
                .find("experts [2, 4) are not within the 3 counted"),
            std::string::npos);
  EXPECT_NE(check(KernelId::GroupedMatmulInto, {x.view(), w2.view(), counts.view(), into.view()}, y.view(), {1, -1}),
            "");
  EXPECT_NE(check(KernelId::GroupedMatmulInto, {x.view(), w2.view(), counts.view(), bad_into.view()}, y.view(), {1, 0}),
            "");
  EXPECT_NE(check(KernelId::GroupedMatmul, {x.view(), w2.view(), counts.view()}, y.view(), {1}).find("the whole product takes them all"),
            std::string::npos);
  EXPECT_EQ(check(KernelId::GroupedMatmul, {x.view(), w3.view(), counts.view()}, y.view(), {1}), "");
  EXPECT_EQ(check(KernelId::GroupedMatmulWeightGrad, {x.view(), dy.view(), counts.view()}, dw2.view(), {1, 1}), "");
  EXPECT_NE(check(KernelId::GroupedMatmulWeightGrad, {x.view(), dy.view(), counts.view()}, dw2.view(), {1, 2}), "");
  EXPECT_NE(check(KernelId::GroupedMatmulWeightGrad, {x.view(), dy.view(), counts.view()}, dw2.view(), {1}), "");
}

TEST_F(MoeKernels, CountsThatDoNotAddUpStayInsideTheRows) {
  const int64_t rows = 6, k = 2, n = 3;
  const std::vector<float> x = randomFloats(rows * k, rng), w = randomFloats(3 * n * k, rng);
  // -5 reads as 0, 100 as the 6 rows left, the last expert gets none.
  const std::vector<int32_t> counts = {-5, 100, 3};
  auto y = runKernel(KernelId::GroupedMatmul,
                     {HostTensor::f32({rows, k}, x), HostTensor::f32({3, n, k}, w), HostTensor::i32({3}, counts)},
                     {HostTensor::f32({rows, n})}, {1});
  expectClose(y[0].floats, groupedReference(x, w, {0, 6, 0}, rows, k, n, true), kF32Tol, "clipped counts");
}

// gpt-oss's expert biases: each expert's rows get its bias row (rows past the total as they are),
// and the bias gradient sums each expert's rows; counts that do not add up are clipped alike.
TEST_F(MoeKernels, GroupedBiasAddsAndSumsEachExpertsRows) {
  const int64_t rows = 7, c = 3, experts = 3;
  const std::vector<float> x = randomFloats(rows * c, rng), bias = randomFloats(experts * c, rng);
  const std::vector<float> dy = randomFloats(rows * c, rng);
  for (const auto& [counts, clipped] : {std::pair<std::vector<int32_t>, std::vector<int64_t>>{{2, 0, 4}, {2, 0, 4}},
                                        {{-5, 100, 3}, {0, 7, 0}}}) {
    auto y = runKernel(KernelId::GroupedAddBias,
                       {HostTensor::f32({rows, c}, x), HostTensor::f32({experts, c}, bias),
                        HostTensor::i32({experts}, counts)},
                       {HostTensor::f32({rows, c}, std::vector<float>(rows * c, 9.0f))});
    auto db = runKernel(KernelId::GroupedBiasGrad, {HostTensor::f32({rows, c}, dy), HostTensor::i32({experts}, counts)},
                        {HostTensor::f32({experts, c}, std::vector<float>(experts * c, 9.0f))});
    Doubles want_y(x.begin(), x.end()), want_db(experts * c, 0.0);
    for (int64_t e = 0, r0 = 0; e < experts; r0 += clipped[e], ++e)
      for (int64_t r = r0; r < r0 + clipped[e]; ++r)
        for (int64_t j = 0; j < c; ++j) {
          want_y[r * c + j] += bias[e * c + j];
          want_db[e * c + j] += dy[r * c + j];
        }
    expectClose(y[0].floats, want_y, kF32Tol, "grouped bias add, counts " + std::to_string(counts[0]));
    expectClose(db[0].floats, want_db, kF32Tol, "grouped bias gradient, counts " + std::to_string(counts[0]));
  }
}

TEST_F(MoeKernels, CombineAndItsGradient) {
  const int64_t tokens = 3, k = 2, d = 4, rows = tokens * k;
  const std::vector<int32_t> positions = {4, 1, 0, 5, 3, 2};
  const std::vector<float> routed = randomFloats(rows * d, rng), weights = randomFloats(tokens * k, rng);
  const std::vector<float> dout = randomFloats(tokens * d, rng);
  auto y = runKernel(KernelId::MoeCombine,
                     {HostTensor::f32({rows, d}, routed), HostTensor::i32({tokens, k}, positions),
                      HostTensor::f32({tokens, k}, weights)},
                     {HostTensor::f32({tokens, d})});
  Doubles want(tokens * d, 0.0), drouted(rows * d, 0.0), dweights(tokens * k, 0.0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = positions[t * k + j];
      for (int64_t c = 0; c < d; ++c) {
        want[t * d + c] += double(weights[t * k + j]) * routed[r * d + c];
        drouted[r * d + c] = double(weights[t * k + j]) * dout[t * d + c];
        dweights[t * k + j] += double(dout[t * d + c]) * routed[r * d + c];
      }
    }
  expectClose(y[0].floats, want, kF32Tol, "combine");
  auto g = runKernel(KernelId::MoeCombineGrad,
                     {HostTensor::f32({tokens, d}, dout), HostTensor::f32({rows, d}, routed),
                      HostTensor::i32({tokens, k}, positions), HostTensor::f32({tokens, k}, weights)},
                     {HostTensor::f32({rows, d}), HostTensor::f32({tokens, k})});
  expectClose(g[0].floats, drouted, kF32Tol, "combine gradient of the routed rows");
  expectClose(g[1].floats, dweights, kF32Tol, "combine gradient of the weights");
  // A position out of range (a corrupt plan) contributes nothing and writes nowhere.
  auto bad = runKernel(KernelId::MoeCombine,
                       {HostTensor::f32({rows, d}, routed), HostTensor::i32({tokens, k}, {4, 1, 0, 99, -3, 2}),
                        HostTensor::f32({tokens, k}, weights)},
                       {HostTensor::f32({tokens, d})});
  for (int64_t c = 0; c < d; ++c)
    EXPECT_FLOAT_EQ(bad[0].floats[1 * d + c], weights[2] * routed[0 * d + c]) << "token 1 keeps its valid choice";
}

// The layers' statistics in double: choices per expert (out-of-range ones count for none) and
// softmax probabilities summed over the tokens, added to `total`.
Doubles balanceStats(const Doubles& logits, const std::vector<int32_t>& choices, int64_t experts,
                     const Doubles& total) {
  Doubles out = total;
  for (int32_t e : choices)
    if (e >= 0 && e < experts) out[e] += 1.0;
  for (size_t t = 0; t * experts < logits.size(); ++t) {
    double max = -1e300, sum = 0;
    for (int64_t e = 0; e < experts; ++e) max = std::max(max, logits[t * experts + e]);
    for (int64_t e = 0; e < experts; ++e) sum += std::exp(logits[t * experts + e] - max);
    for (int64_t e = 0; e < experts; ++e) out[experts + e] += std::exp(logits[t * experts + e] - max) / sum;
  }
  return out;
}

TEST_F(MoeKernels, BalanceStatsCountChoicesAndSumProbabilities) {
  const int64_t tokens = 4, experts = 3;
  const std::vector<float> logits = randomFloats(tokens * experts, rng, 2.0f);
  const std::vector<float> total = {5, 0, 2, 0.5f, 1.5f, 0.25f};
  auto out = runKernel(KernelId::MoeBalanceStats,
                       {HostTensor::f32({tokens, experts}, logits), HostTensor::i32({tokens, 2}, kChoices),
                        HostTensor::f32({2, experts}, total)},
                       {HostTensor::f32({2, experts})});
  const Doubles want =
      balanceStats(Doubles(logits.begin(), logits.end()), kChoices, experts, Doubles(total.begin(), total.end()));
  EXPECT_EQ(want[0] - 5, 1) << "the reference counts expert 0 once";
  expectClose(out[0].floats, want, kF32Tol, "balance statistics");
  for (int64_t e = 0; e < experts; ++e)
    EXPECT_EQ(out[0].floats[e], float(want[e])) << "the counts are exact (expert " << e << ")";
}

TEST_F(MoeKernels, BalanceGradientsMatchFiniteDifferences) {
  const int64_t tokens = 5, experts = 4, rows = 10;
  const std::vector<float> logits = randomFloats(tokens * experts, rng, 1.5f);
  const std::vector<float> dtotal = randomFloats(2 * experts, rng);
  auto grad = runKernel(KernelId::MoeBalanceStatsGrad,
                        {HostTensor::f32({2, experts}, dtotal), HostTensor::f32({tokens, experts}, logits)},
                        {HostTensor::f32({tokens, experts})});
  const std::vector<int32_t> none(tokens * 2, -1);  // the counts take no gradient
  auto statsOf = [&](const Doubles& x) { return balanceStats(x, none, experts, Doubles(2 * experts, 0.0)); };
  expectClose(grad[0].floats,
              finiteDifferences(statsOf, Doubles(logits.begin(), logits.end()), Doubles(dtotal.begin(), dtotal.end())),
              kGradTol, "balance statistics gradient");

  const std::vector<float> stats = {7, 2, 0, 11, 1.25f, 0.5f, 2.0f, 1.25f};
  auto loss = runKernel(KernelId::MoeBalanceLoss, {HostTensor::f32({2, experts}, stats)}, {HostTensor::f32({})},
                        {rows});
  double want = 0;
  for (int64_t e = 0; e < experts; ++e) want += double(stats[e]) * stats[experts + e];
  expectClose(loss[0].floats, {experts * want / (rows * rows)}, kF32Tol, "balance loss");
  auto dstats = runKernel(KernelId::MoeBalanceLossGrad,
                          {HostTensor::f32({}, {2.0f}), HostTensor::f32({2, experts}, stats)},
                          {HostTensor::f32({2, experts})}, {rows});
  Doubles dwant(2 * experts, 0.0);
  for (int64_t e = 0; e < experts; ++e) dwant[experts + e] = 2.0 * experts * stats[e] / (rows * rows);
  expectClose(dstats[0].floats, dwant, kF32Tol, "balance loss gradient (row 0, the counts: none)");
}

// The statistics with a token mask (plan 1.21, the padding of --rows examples left out): those of
// the kept tokens alone, bit for bit (the same sums in the same order), their gradient zero for a
// token left out; the loss with top_k takes its rows from the counts (the kept tokens), 0 when
// none is kept.
TEST_F(MoeKernels, MaskedStatisticsAreTheKeptTokensStatistics) {
  const int64_t tokens = 7, experts = 5, k = 2;
  const std::vector<float> logits = randomFloats(tokens * experts, rng, 1.5f);
  const std::vector<float> keep = {1, 0, 1, 1, 0, 0, 1};
  std::vector<int32_t> choices(tokens * k);
  for (int64_t i = 0; i < tokens * k; ++i) choices[i] = static_cast<int32_t>((i * 3 + i / k) % experts);
  std::vector<float> kept_logits;
  std::vector<int32_t> kept_choices;
  for (int64_t t = 0; t < tokens; ++t)
    if (keep[t] != 0.0f) {
      kept_logits.insert(kept_logits.end(), logits.begin() + t * experts, logits.begin() + (t + 1) * experts);
      kept_choices.insert(kept_choices.end(), choices.begin() + t * k, choices.begin() + (t + 1) * k);
    }
  const int64_t kept = static_cast<int64_t>(kept_logits.size()) / experts;
  const std::vector<float> total = randomFloats(2 * experts, rng);
  const auto masked = runKernel(KernelId::MoeBalanceStatsMasked,
                                {HostTensor::f32({tokens, experts}, logits), HostTensor::i32({tokens, k}, choices),
                                 HostTensor::f32({2, experts}, total), HostTensor::f32({tokens}, keep)},
                                {HostTensor::f32({2, experts})})[0].floats;
  const auto subset = runKernel(KernelId::MoeBalanceStats,
                                {HostTensor::f32({kept, experts}, kept_logits), HostTensor::i32({kept, k}, kept_choices),
                                 HostTensor::f32({2, experts}, total)},
                                {HostTensor::f32({2, experts})})[0].floats;
  EXPECT_EQ(masked, subset);
  const std::vector<float> dtotal = randomFloats(2 * experts, rng);
  const auto dmasked = runKernel(KernelId::MoeBalanceStatsGradMasked,
                                 {HostTensor::f32({2, experts}, dtotal), HostTensor::f32({tokens, experts}, logits),
                                  HostTensor::f32({tokens}, keep)},
                                 {HostTensor::f32({tokens, experts}, std::vector<float>(tokens * experts, 9.0f))})[0]
                           .floats;
  const auto dsubset = runKernel(KernelId::MoeBalanceStatsGrad,
                                 {HostTensor::f32({2, experts}, dtotal), HostTensor::f32({kept, experts}, kept_logits)},
                                 {HostTensor::f32({kept, experts})})[0].floats;
  for (int64_t t = 0, j = 0; t < tokens; j += keep[t] != 0.0f, ++t)
    for (int64_t e = 0; e < experts; ++e)
      EXPECT_EQ(dmasked[t * experts + e], keep[t] != 0.0f ? dsubset[j * experts + e] : 0.0f) << "token " << t;
  // The loss of the masked statistics (L = 1 layer here): rows from the counts = the kept tokens.
  std::vector<float> stats(2 * experts, 0.0f);
  for (int64_t e = 0; e < experts; ++e) stats[e] = masked[e] - total[e], stats[experts + e] = masked[experts + e];
  const auto byCounts = runKernel(KernelId::MoeBalanceLoss, {HostTensor::f32({2, experts}, stats)},
                                  {HostTensor::f32({})}, {tokens, k})[0].floats;
  const auto byRows = runKernel(KernelId::MoeBalanceLoss, {HostTensor::f32({2, experts}, stats)},
                                {HostTensor::f32({})}, {kept})[0].floats;
  EXPECT_EQ(byCounts, byRows);
  const auto dByCounts = runKernel(KernelId::MoeBalanceLossGrad,
                                   {HostTensor::f32({}, {1.5f}), HostTensor::f32({2, experts}, stats)},
                                   {HostTensor::f32({2, experts})}, {tokens, k})[0].floats;
  const auto dByRows = runKernel(KernelId::MoeBalanceLossGrad,
                                 {HostTensor::f32({}, {1.5f}), HostTensor::f32({2, experts}, stats)},
                                 {HostTensor::f32({2, experts})}, {kept})[0].floats;
  EXPECT_EQ(dByCounts, dByRows);
  const std::vector<float> none(2 * experts, 0.0f);
  EXPECT_EQ(runKernel(KernelId::MoeBalanceLoss, {HostTensor::f32({2, experts}, none)}, {HostTensor::f32({}, {9.0f})},
                      {tokens, k})[0].floats,
            std::vector<float>{0.0f})
      << "no token kept: no loss";
}

}  // namespace
}  // namespace mt::test
