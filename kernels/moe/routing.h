// One token's routing, written once for the CPU kernels (kernels/moe/moe_cpu.cc) and their CUDA
// twins (kernels/moe/moe_cuda.cu), so the two cannot drift apart: the softmax of a row of router
// logits, the top-k choice, the weights each MoeRoutingKind gives, their gradient, the
// load-balancing statistics' gradient, and the load-balancing loss and its gradient. `prob(e)` is
// the row's softmax at expert e: the CPU passes the row computed once into scratch (softmaxInto),
// the GPU (no scratch per thread) a RowSoftmax evaluating it on demand; both are
// exp(l[e] - max) / sum with the sum added in expert order.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/kernel_args.h"

namespace mt {

// MoeRouting's values (the IR enum's, compiler/dialect/MtMoeOps.td).
enum class MoeRoutingKind : int64_t { kSoftmaxTopK = 0, kSoftmaxTopKNormalized = 1, kTopKSoftmax = 2 };

namespace routing {

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

// Row `l`'s softmax (n) into `p` (the CPU's scratch): RowSoftmax's bits — the same max, exps,
// sum in order and division — with each exp taken once.
MT_HOST_DEVICE inline void softmaxInto(const float* l, int64_t n, float* p) {
  float max = l[0], sum = 0.0f;
  for (int64_t i = 1; i < n; ++i) max = fmaxf(max, l[i]);
  for (int64_t i = 0; i < n; ++i) sum += p[i] = expf(l[i] - max);
  for (int64_t i = 0; i < n; ++i) p[i] /= sum;
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

// One token: its k experts and their weights w (k).
template <typename Prob>
MT_HOST_DEVICE void routeToken(const float* l, const Prob& prob, int64_t experts, int64_t k, MoeRoutingKind routing,
                               float* w, int32_t* chosen) {
  if (routing == MoeRoutingKind::kTopKSoftmax) {  // the k largest logits, then a softmax over them
    topK([&](int64_t e) { return l[e]; }, experts, k, chosen);
    float max = l[chosen[0]], sum = 0.0f;
    for (int64_t j = 1; j < k; ++j) max = fmaxf(max, l[chosen[j]]);
    for (int64_t j = 0; j < k; ++j) sum += w[j] = expf(l[chosen[j]] - max);
    for (int64_t j = 0; j < k; ++j) w[j] /= sum;
    return;
  }
  topK(prob, experts, k, chosen);
  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j) sum += w[j] = prob(chosen[j]);
  if (routing == MoeRoutingKind::kSoftmaxTopKNormalized)
    for (int64_t j = 0; j < k; ++j) w[j] /= sum;
}

// One token: the logits' gradient dl (E) from the weights' dw (k), back through the top-k's
// renormalisation (if any) and the softmax. A chosen index out of range takes no gradient.
template <typename Prob>
MT_HOST_DEVICE void routeGradToken(const float* l, const Prob& prob, const float* dw, const int32_t* chosen,
                                   int64_t experts, int64_t k, MoeRoutingKind routing, float* dl) {
  for (int64_t i = 0; i < experts; ++i) dl[i] = 0.0f;
  if (routing == MoeRoutingKind::kTopKSoftmax) {
    // w = softmax(l[chosen]): dl[chosen j] = w_j (dw_j - sum_m dw_m w_m).
    float max = chosenLogit(l, chosen, 0, experts), sum = 0.0f, dot = 0.0f;
    for (int64_t j = 1; j < k; ++j) max = fmaxf(max, chosenLogit(l, chosen, j, experts));
    for (int64_t j = 0; j < k; ++j) sum += expf(chosenLogit(l, chosen, j, experts) - max);
    auto w = [&](int64_t j) { return expf(chosenLogit(l, chosen, j, experts) - max) / sum; };
    for (int64_t j = 0; j < k; ++j) dot += dw[j] * w(j);
    for (int64_t j = 0; j < k; ++j)
      if (validExpert(chosen[j], experts)) dl[chosen[j]] += w(j) * (dw[j] - dot);
    return;
  }
  // dp_j over the chosen experts: dw_j itself, or back through w_j = p_j / S.
  const bool normalized = routing == MoeRoutingKind::kSoftmaxTopKNormalized;
  float sum = 0.0f, normalized_dot = 0.0f;
  if (normalized) {
    for (int64_t j = 0; j < k; ++j) sum += validExpert(chosen[j], experts) ? prob(chosen[j]) : 0.0f;
    for (int64_t j = 0; j < k; ++j) normalized_dot += dw[j] * (validExpert(chosen[j], experts) ? prob(chosen[j]) / sum : 0.0f);
  }
  auto dp = [&](int64_t j) { return normalized ? (dw[j] - normalized_dot) / sum : dw[j]; };
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
