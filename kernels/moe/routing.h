// One token's routing, written once for the CPU kernels (kernels/moe/moe_cpu.cc) and their CUDA
// twins (kernels/moe/moe_cuda.cu), so the two cannot drift apart: the softmax or sigmoid of a row
// of router logits, the top-k choice (within the best groups of experts, where asked), the
// weights each MoeRoutingKind gives, their gradient, the load-balancing statistics' gradient, and
// the load-balancing loss and its gradient. `prob(e)` is the row's score at expert e: the CPU
// passes the row computed once into scratch (scoresInto), the GPU (no scratch per thread) a
// RowScores evaluating it on demand; a softmax is exp(l[e] - max) / sum with the sum added in
// expert order either way, a sigmoid 1 / (1 + exp(-l[e])).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/kernel_args.h"

namespace mt {

// MoeRouting's values (the IR enum's, compiler/dialect/MtMoeOps.td).
enum class MoeRoutingKind : int64_t {
  kSoftmaxTopK = 0,
  kSoftmaxTopKNormalized = 1,
  kTopKSoftmax = 2,
  kSigmoidTopK = 3,            // plan 1.38
  kSigmoidTopKNormalized = 4,  // plan 1.38
};
inline constexpr int64_t kLastMoeRoutingKind = 4;

namespace routing {

// The most groups of experts a group-limited choice may have (DeepSeek-V3's n_group is 8).
inline constexpr int64_t kMaxGroups = 64;

// How one mt.moe_route call chooses and weighs (its kernel attributes, routeSettings).
struct RouteSettings {
  MoeRoutingKind kind = MoeRoutingKind::kSoftmaxTopK;
  int64_t top_k = 1;
  // The choice within the `groups_chosen` of `groups` equal groups of experts whose group scores
  // are largest (DeepSeek's n_group, topk_group; groupScoresByBest says how a group scores); 1 and
  // 1: among all.
  int64_t groups = 1, groups_chosen = 1;
  float scale = 1.0f;           // the weights times this (routed_scaling_factor)
  const float* bias = nullptr;  // (E): added to the scores for the choice alone (e_score_correction_bias); null: none
  MT_HOST_DEVICE bool sigmoid() const {
    return kind == MoeRoutingKind::kSigmoidTopK || kind == MoeRoutingKind::kSigmoidTopKNormalized;
  }
  // The chosen scores divided by their sum (renormalised).
  MT_HOST_DEVICE bool normalized() const {
    return kind == MoeRoutingKind::kSoftmaxTopKNormalized || kind == MoeRoutingKind::kSigmoidTopKNormalized;
  }
  // A group's score: its best expert's softmax probability (DeepSeek-V2's group_limited_greedy), or
  // for a sigmoid router its two best choice scores summed (DeepSeek-V3's noaux_tc).
  MT_HOST_DEVICE bool groupScoresByBest() const { return !sigmoid(); }
};

// Whether a routing may choose within groups of experts: all but the top-k softmax (gpt-oss's,
// which chooses by the logits themselves).
inline bool choosesWithinGroups(MoeRoutingKind kind) { return kind != MoeRoutingKind::kTopKSoftmax; }

// Whether `groups` (2 to kMaxGroups) split `experts` into equal groups of two or more, as a
// group-limited choice needs (a sigmoid router's group score sums each group's two best; the
// softmax router keeps the same rule): the one rule of the kernels' checks, the IR's verifier and
// the model's validation.
inline bool splitsIntoGroups(int64_t experts, int64_t groups) {
  return groups >= 2 && groups <= kMaxGroups && experts % groups == 0 && experts / groups >= 2;
}

// A call's settings: ints [top_k, routing(, groups, groups_chosen)], floats [(scale)] (plan 1.38:
// the groups and the scale), the bias its input `bias_input` where the call has one.
inline RouteSettings routeSettings(const KernelArgs& args, size_t bias_input) {
  RouteSettings s;
  s.top_k = args.ints[0];
  s.kind = static_cast<MoeRoutingKind>(args.ints[1]);
  if (args.ints.size() >= 4) s.groups = args.ints[2], s.groups_chosen = args.ints[3];
  if (!args.floats.empty()) s.scale = args.floats[0];
  s.bias = args.optionalF32(bias_input);
  return s;
}

// An expert index a kernel may use; one outside [0, E) (a corrupt plan) chooses nothing.
MT_HOST_DEVICE inline bool validExpert(int32_t e, int64_t experts) { return e >= 0 && e < experts; }

// The softmax of row `l` (n) at e: exp(l[e] - max) / sum.
struct RowSoftmax {
  const float* l;
  float max, sum;
  MT_HOST_DEVICE RowSoftmax(const float* row, int64_t n) : l(row), max(row[0]), sum(0.0f) {
    for (int64_t i = 1; i < n; ++i) max = fmaxf(max, row[i]);
    for (int64_t i = 0; i < n; ++i) sum += expf(row[i] - max);
  }
  MT_HOST_DEVICE float operator()(int64_t e) const { return expf(l[e] - max) / sum; }
};

MT_HOST_DEVICE inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// A row's scores on demand (the GPU's): its softmax, or each logit's sigmoid.
struct RowScores {
  RowSoftmax softmax;
  bool is_sigmoid;
  MT_HOST_DEVICE RowScores(const float* row, int64_t n, bool sigmoid_scores)
      : softmax(row, sigmoid_scores ? 1 : n), is_sigmoid(sigmoid_scores) {}
  MT_HOST_DEVICE float operator()(int64_t e) const { return is_sigmoid ? sigmoid(softmax.l[e]) : softmax(e); }
};

// Row `l`'s softmax (n) into `p` (the CPU's scratch): RowSoftmax's bits — the same max, exps,
// sum in order and division — with each exp taken once.
MT_HOST_DEVICE inline void softmaxInto(const float* l, int64_t n, float* p) {
  float max = l[0], sum = 0.0f;
  for (int64_t i = 1; i < n; ++i) max = fmaxf(max, l[i]);
  for (int64_t i = 0; i < n; ++i) sum += p[i] = expf(l[i] - max);
  for (int64_t i = 0; i < n; ++i) p[i] /= sum;
}

// Row `l`'s scores into `p`: RowScores' bits.
MT_HOST_DEVICE inline void scoresInto(const float* l, int64_t n, bool sigmoid_scores, float* p) {
  if (!sigmoid_scores) return softmaxInto(l, n, p);
  for (int64_t i = 0; i < n; ++i) p[i] = sigmoid(l[i]);
}

// The k largest of score(e) over E experts into `chosen`, largest first, ties to the lower index.
template <typename Score>
MT_HOST_DEVICE void topK(const Score& score, int64_t experts, int64_t k, int32_t* chosen) {
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    float best_score = 0.0f;
    for (int64_t e = 0; e < experts; ++e) {
      bool taken = false;
      for (int64_t m = 0; m < j; ++m) taken |= chosen[m] == e;
      if (taken) continue;
      const float s = score(e);
      if (best < 0 || s > best_score) best = e, best_score = s;
    }
    chosen[j] = static_cast<int32_t>(best);
  }
}

// The logit of choice j, 0 for an index out of range (the top-k softmax's input).
MT_HOST_DEVICE inline float chosenLogit(const float* l, const int32_t* chosen, int64_t j, int64_t experts) {
  return validExpert(chosen[j], experts) ? l[chosen[j]] : 0.0f;
}

// Whether expert e lies in one of the `count` groups in `chosen_groups` (each `per_group` wide).
MT_HOST_DEVICE inline bool inGroups(int64_t e, int64_t per_group, const int32_t* chosen_groups, int64_t count) {
  for (int64_t g = 0; g < count; ++g)
    if (chosen_groups[g] == e / per_group) return true;
  return false;
}

// The choice by score (+ bias: a sigmoid router's, DeepSeek-V3's and GLM-4.5's, as transformers'
// TopkRouter; a softmax router's, Ernie 4.5's Ernie4_5_MoeStatics), where asked within the groups
// whose scores are largest (a sigmoid router's group its two best choice scores summed, a softmax router's its best probability: DeepSeek-V2's
// DeepseekV2Moe); an expert outside them scores 0 for the choice (torch's masked_fill), so it is
// chosen only where too few remain.
template <typename Prob>
MT_HOST_DEVICE void chooseExperts(const Prob& prob, int64_t experts, const RouteSettings& s, int32_t* chosen) {
  auto choice = [&](int64_t e) { return s.bias ? prob(e) + s.bias[e] : prob(e); };
  if (s.groups <= 1) return topK(choice, experts, s.top_k, chosen);
  const int64_t per_group = experts / s.groups;
  int32_t groups[kMaxGroups];
  auto groupScore = [&](int64_t g) {
    float first = -INFINITY, second = -INFINITY;
    for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
      const float c = choice(e);
      if (c > first) second = first, first = c;
      else if (c > second) second = c;
    }
    return s.groupScoresByBest() ? first : first + second;
  };
  topK(groupScore, s.groups, s.groups_chosen, groups);
  topK([&](int64_t e) { return inGroups(e, per_group, groups, s.groups_chosen) ? choice(e) : 0.0f; }, experts,
       s.top_k, chosen);
}

// One token: its k experts and their weights w (k).
template <typename Prob>
MT_HOST_DEVICE void routeToken(const float* l, const Prob& prob, int64_t experts, const RouteSettings& s, float* w,
                               int32_t* chosen) {
  const int64_t k = s.top_k;
  if (s.kind == MoeRoutingKind::kTopKSoftmax) {  // the k largest logits, then a softmax over them
    topK([&](int64_t e) { return l[e]; }, experts, k, chosen);
    float max = l[chosen[0]], sum = 0.0f;
    for (int64_t j = 1; j < k; ++j) max = fmaxf(max, l[chosen[j]]);
    for (int64_t j = 0; j < k; ++j) sum += w[j] = expf(l[chosen[j]] - max);
    for (int64_t j = 0; j < k; ++j) w[j] /= sum;
  } else {
    chooseExperts(prob, experts, s, chosen);
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += w[j] = prob(chosen[j]);
    // The sigmoid's sum as transformers adds it: + 1e-20 (no zero to divide by).
    if (s.kind == MoeRoutingKind::kSigmoidTopKNormalized) sum += 1e-20f;
    if (s.normalized())
      for (int64_t j = 0; j < k; ++j) w[j] /= sum;
  }
  if (s.scale != 1.0f)
    for (int64_t j = 0; j < k; ++j) w[j] *= s.scale;
}

// One token: the logits' gradient dl (E) from the weights' dw (k), back through the scale, the
// top-k's renormalisation (if any) and the softmax or sigmoid. A chosen index out of range takes
// no gradient; nor does the bias, which only chooses.
template <typename Prob>
MT_HOST_DEVICE void routeGradToken(const float* l, const Prob& prob, const float* dw, const int32_t* chosen,
                                   int64_t experts, const RouteSettings& s, float* dl) {
  const int64_t k = s.top_k;
  // The scaled weights' gradient (bit for bit dw where the scale is 1).
  auto dws = [&](int64_t j) { return s.scale * dw[j]; };
  auto chosenProb = [&](int64_t j) { return validExpert(chosen[j], experts) ? prob(chosen[j]) : 0.0f; };
  for (int64_t i = 0; i < experts; ++i) dl[i] = 0.0f;
  if (s.kind == MoeRoutingKind::kTopKSoftmax) {
    // w = softmax(l[chosen]): dl[chosen j] = w_j (dw_j - sum_m dw_m w_m).
    float max = chosenLogit(l, chosen, 0, experts), sum = 0.0f, dot = 0.0f;
    for (int64_t j = 1; j < k; ++j) max = fmaxf(max, chosenLogit(l, chosen, j, experts));
    for (int64_t j = 0; j < k; ++j) sum += expf(chosenLogit(l, chosen, j, experts) - max);
    auto w = [&](int64_t j) { return expf(chosenLogit(l, chosen, j, experts) - max) / sum; };
    for (int64_t j = 0; j < k; ++j) dot += dws(j) * w(j);
    for (int64_t j = 0; j < k; ++j)
      if (validExpert(chosen[j], experts)) dl[chosen[j]] += w(j) * (dws(j) - dot);
    return;
  }
  // dp_j over the chosen experts: dw_j itself, or back through w_j = p_j / S.
  const bool normalized = s.normalized();
  float sum = s.kind == MoeRoutingKind::kSigmoidTopKNormalized ? 1e-20f : 0.0f, normalized_dot = 0.0f;
  if (normalized) {
    float chosen_sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) chosen_sum += chosenProb(j);
    sum += chosen_sum;
    for (int64_t j = 0; j < k; ++j) normalized_dot += dws(j) * (chosenProb(j) / sum);
  }
  auto dp = [&](int64_t j) { return normalized ? (dws(j) - normalized_dot) / sum : dws(j); };
  if (s.sigmoid()) {  // each score its own logit's: dl = dp * p (1 - p)
    for (int64_t j = 0; j < k; ++j)
      if (validExpert(chosen[j], experts)) dl[chosen[j]] += dp(j) * chosenProb(j) * (1.0f - chosenProb(j));
    return;
  }
  // Softmax backward: dl_i = p_i (g_i - sum_m g_m p_m), g the chosen experts' dp (else 0).
  float dot = 0.0f;
  for (int64_t j = 0; j < k; ++j)
    if (validExpert(chosen[j], experts)) dot += dp(j) * prob(chosen[j]);
  for (int64_t i = 0; i < experts; ++i) dl[i] = -prob(i) * dot;
  for (int64_t j = 0; j < k; ++j)
    if (validExpert(chosen[j], experts)) dl[chosen[j]] += prob(chosen[j]) * dp(j);
}

// One token's share of mt.moe_balance_stats_grad: dl = p * (g - <g, p>), g the gradient of the
// statistics' probability row (E).
template <typename Prob>
MT_HOST_DEVICE void balanceGradToken(const Prob& prob, const float* g, int64_t experts, float* dl) {
  float dot = 0.0f;
  for (int64_t e = 0; e < experts; ++e) dot += g[e] * prob(e);
  for (int64_t e = 0; e < experts; ++e) dl[e] = prob(e) * (g[e] - dot);
}

// The router rows the statistics (2, E) count: `rows` (every token of every layer), or with
// `top_k` > 0 the choices counted over top_k — the tokens a mask kept (mt.moe_balance_stats with
// a mask; each kept token chooses top_k experts).
MT_HOST_DEVICE inline double balanceRows(const float* stats, int64_t experts, int64_t rows, int64_t top_k) {
  if (top_k <= 0) return static_cast<double>(rows);
  double choices = 0.0;
  for (int64_t e = 0; e < experts; ++e) choices += static_cast<double>(stats[e]);
  return choices / static_cast<double>(top_k);
}

// mt.moe_balance_loss from the statistics (2, E) of `rows` router rows (balanceRows): E * sum_e
// C_e * S_e / rows^2, added in double; 0 where no row was counted.
MT_HOST_DEVICE inline float balanceLoss(const float* stats, int64_t experts, double rows) {
  if (rows <= 0.0) return 0.0f;
  double sum = 0.0;
  for (int64_t e = 0; e < experts; ++e) sum += static_cast<double>(stats[e]) * static_cast<double>(stats[experts + e]);
  return static_cast<float>(static_cast<double>(experts) * sum / (rows * rows));
}

// Its gradient at expert e's probability sum (row 1): dloss * E * C_e / rows^2 (the counts, row
// 0, take none; nor does `rows`, which they give).
MT_HOST_DEVICE inline float balanceLossGrad(float dloss, const float* stats, int64_t experts, double rows, int64_t e) {
  if (rows <= 0.0) return 0.0f;
  return static_cast<float>(static_cast<double>(dloss) * static_cast<double>(experts) / (rows * rows) *
                            static_cast<double>(stats[e]));
}

}  // namespace routing
}  // namespace mt
