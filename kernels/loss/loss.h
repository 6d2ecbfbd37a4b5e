// mt.softmax_xent: mean softmax cross-entropy over the rows of the logits.
//   (logits (..., V), targets (...) i32) -> (loss () , lse (...))
//   A target outside [0, V) (e.g. -1) is ignored: it adds nothing and is not counted in the
//   mean, as torch's ignore_index.
// mt.softmax_xent_grad: (dloss (), logits, targets, lse) -> dlogits (..., V)
//
// The same loss over a vocabulary split into chunks of rows (plan 1.5; the LM head's weight
// streamed by row slices, so neither it nor the logits are on the device whole):
// mt.xent_chunk: (logits (..., Vc), targets (...), running (..., 2)) -> running (..., 2)
//   int[first]: the chunk holds vocabulary ids [first, first + Vc). running = (log-sum-exp of
//   the chunks so far, the target's logit once its chunk was seen); start from -inf.
// mt.xent_finish: (running (..., 2), targets) -> (loss (), lse (...))    int[vocab]
// mt.xent_chunk_grad: (dloss (), logits (..., Vc), targets, lse) -> dlogits (..., Vc)
//   int[first, vocab]: softmax_xent_grad's rows for the chunk's columns.
//
// The same loss over tiles of tokens (plan 1.13; mtc --token-tiles: the LM head and its loss run
// tile by tile, no tile's logits on the device beside another's):
// mt.count_targets: (targets (...) i32) -> count () f32     int[vocab]: the targets in [0, vocab)
// mt.xent_tile: (logits (..., V), targets (...), count ()) -> (loss (), lse (...)): the tile's
//   share of the mean: the sum over its rows with a valid target of lse - logit[target], divided
//   by `count`, the whole batch's counted targets (0 when it is 0); the shares add up to the loss.
// mt.xent_tile_grad: (dloss (), logits, targets, lse, count ()) -> dlogits (..., V):
//   softmax_xent_grad's rows with the whole batch's count.
//
// Preference training (DPO; compiler/dialect/MtPreferenceOps.td), rows in pairs (2i chosen,
// 2i + 1 rejected):
// mt.sequence_logprob: (logits (B, T, V), targets (B, T)) -> (logp (B), lse (B, T))
//   int[(average)]: each row's sum over its valid targets of logit[target] - lse, in double, in
//   token order; with average 1 (plan 1.24; the IPO loss), its mean over them (0 where none).
// mt.sequence_logprob_grad: (dlogp (B), logits, targets, lse) -> dlogits    int[(average)]:
//   dlogp[b] (over its count, averaged) times one-hot minus softmax on the valid targets' rows, 0
//   on the others.
// The same sums over a vocabulary split into chunks (plan 1.24; mtc --objective dpo
// --vocab-chunks), each chunk folded into the running state by mt.xent_chunk:
// mt.sequence_logprob_finish: (running (B, T, 2), targets (B, T)) -> (logp (B), lse (B, T))
//   int[vocab, average]: running[..., 1] - running[..., 0] summed (averaged) as mt.sequence_logprob's.
// mt.sequence_logprob_chunk_grad: (dlogp (B), logits (B, T, Vc), targets, lse) -> dlogits
//   int[first, vocab, average]: sequence_logprob_grad's rows for the chunk's columns.
// mt.dpo_loss: (logp (B), reference (B)) -> loss ()    int[kind] float[beta, label_smoothing(, gamma
//   or tau)]: the mean over the pairs of dpoBatchPair's loss, in double: of z = beta * ((logp -
//   reference)[2i] - (logp - reference)[2i + 1]), or of the two log-ratios apart, or for ORPO of
//   the log odds ratio of the pair's mean log-probabilities, or for AOT of sorted sides.
// mt.dpo_loss_grad: (dloss (), logp, reference) -> dlogp (B)    the same attributes
// mt.kto_loss: (logp (B), reference (B), labels (B/2)) -> loss ()    float[beta, desirable_weight,
//   undesirable_weight] (plan 1.26; KTO, TRL's KTOTrainer): rows in pairs, 2i an example (a prompt
//   and its completion), 2i + 1 its KL row (the same prompt with another example's completion),
//   labels[i] 1 for a desirable completion and 0 for an undesirable one: ktoExample's mean over the
//   examples, in double.
// mt.kto_loss_grad: (dloss (), logp, reference, labels) -> dlogp (B)    the same attributes: the
//   examples' rows dloss / P times ktoExample's derivative, the KL rows 0 (the estimate has none).
// Reward modelling (plan 1.26; TRL's RewardTrainer; mtc --objective reward), rows in (chosen,
// rejected) pairs scored by a head of one output:
// mt.row_score: (scores (B, T, 1), positions (B) i32) -> rewards (B): each row's score at its
//   position (the example's last token), rewards[b] = scores[b, positions[b], 0].
// mt.row_score_grad: (drewards (B), scores, positions) -> dscores (B, T, 1): drewards[b] at
//   (b, positions[b]), 0 elsewhere.
// mt.reward_loss: (rewards (B)) -> loss ()    float[center]: the mean over the pairs of
//   rewardPair's loss, in double.
// mt.reward_loss_grad: (dloss (), rewards) -> drewards (B)    float[center]
// mt.reward_margin_loss, mt.reward_margin_loss_grad (plan 1.27): the same with each pair's margin,
//   an input after the rewards: (rewards, margins (B/2)) -> loss, (dloss, rewards, margins) -> drewards.
// mt.pair_nll: (logp (B), targets (B, T)) -> loss ()    int[vocab, average] float[alpha] (plan 1.24;
//   TRL's rpo_alpha, CPOTrainer's cpo_alpha): alpha times the chosen replies' negative
//   log-likelihood per token, -sum_i S[2i] / sum_i n[2i], n[b] row b's targets in [0, vocab) and
//   S[b] its summed log-probability (logp[b], or logp[b] * n[b] where logp holds means); 0 where
//   the chosen rows count nothing.
// mt.pair_nll_grad: (dloss (), logp, targets) -> dlogp (B)    the same attributes: dlogp[2i] =
//   -dloss * alpha * (average ? n[2i] : 1) / sum_i n[2i], dlogp[2i + 1] = 0.
#pragma once
#include <cmath>

#include "kernels/kernel_args.h"

namespace mt {

// mt.dpo_loss's kinds (its int attribute), as TRL's DPOTrainer's loss_type names them.
enum class DpoLossKind : int64_t {
  kSigmoid = 0,  // -(1 - e) log sigmoid(z) - e log sigmoid(-z): DPO; with e > 0, conservative DPO
  kHinge = 1,    // max(0, 1 - z): SLiC's hinge
  kRobust = 2,   // (-(1 - e) log sigmoid(z) + e log sigmoid(-z)) / (1 - 2e): robust DPO (e < 1/2)
  kIpo = 3,      // ((z - 1/2) / beta)^2 = (z / beta - 1 / (2 beta))^2: IPO, of each reply's mean
                 // log-probability per token (mt.sequence_logprob's average), e ignored
  kSimpo = 4,    // sigmoid's of z - gamma: SimPO (TRL's CPOTrainer, cpo_alpha 0), reference-free (a
                 // reference of zeros), of each reply's mean log-probability per token
  kOrpo = 5,     // -beta log sigmoid(z), z the log odds ratio of the chosen reply's mean probability per
                 // token over the rejected one's: ORPO's odds-ratio term (plan 1.25), reference-free, e
                 // ignored; ORPO's NLL term is mt.pair_nll's
  // Plan 1.25, of c and r the chosen and rejected replies' log-ratios (policy minus reference),
  // z = beta (c - r):
  kExoPair = 6,    // s(z) (log s(z) - log(1 - e)) + s(-z) (log s(-z) - log e): EXO (e 1e-3 where 0, as TRL)
  kSppoHard = 7,   // (c - 1/(2 beta))^2 + (r + 1/(2 beta))^2: SPPO with hard probabilities
  kNcaPair = 8,    // -log s(beta c) - log s(-beta c) / 2 - log s(-beta r) / 2: NCA
  kApoZero = 9,    // 1 - s(beta c) + s(beta r): APO-zero (the chosen replies better than the model's own)
  kApoDown = 10,   // s(beta c) + 1 - s(z): APO-down (the chosen replies worse than the model's own)
  kDiscopop = 11,  // -log s(z) (1 - m) + exp(-z) m, m = s(z / tau): DiscoPOP (tau its third float)
  // AOT: the sigmoid loss (with smoothing) of beta times a difference of sorted values, the k-th
  // smallest of one side against the k-th smallest of the other (over the batch's pairs, ties by
  // row order): of the policy's log-ratio chosen over rejected against the reference's (aot), or
  // of the chosen replies' log-ratios against the rejected ones' (aot_pair).
  kAot = 12,
  kAotPair = 13,
};
inline constexpr int64_t kDpoLossKinds = 14;

// Whether a kind compares the policy alone (SimPO, ORPO: no reference model; the reference a
// tensor of zeros), and whether it takes each reply's mean log-probability per token (as TRL
// averages them for IPO, SimPO and ORPO) rather than its sum.
MT_HOST_DEVICE inline bool dpoReferenceFree(DpoLossKind k) { return k == DpoLossKind::kSimpo || k == DpoLossKind::kOrpo; }
MT_HOST_DEVICE inline bool dpoAverages(DpoLossKind k) {
  return k == DpoLossKind::kIpo || k == DpoLossKind::kSimpo || k == DpoLossKind::kOrpo;
}
// Whether a kind's loss reads the label smoothing e (the others have none; the kernels ignore it
// for them, mtc refuses it).
MT_HOST_DEVICE inline bool dpoSmooths(DpoLossKind k) {
  return k == DpoLossKind::kSigmoid || k == DpoLossKind::kRobust || k == DpoLossKind::kSimpo ||
         k == DpoLossKind::kExoPair || k == DpoLossKind::kAot || k == DpoLossKind::kAotPair;
}

// mt.dpo_loss's attributes: int[kind] float[beta, label_smoothing(, gamma or tau)] (a third float:
// plan 1.24 the simpo kind's gamma, 1.25 the discopop kind's tau).
struct DpoLossParams {
  int64_t kind = 0;        // DpoLossKind
  double beta = 0.0;       // how far the policy may move from the reference
  double smoothing = 0.0;  // the label smoothing e: the share of pairs taken to be mislabelled
  double gamma = 0.0;      // SimPO's target reward margin
  double tau = 0.0;        // DiscoPOP's temperature of the mix of its two losses
};
// Whether a kind takes a third float: SimPO's gamma, DiscoPOP's tau.
MT_HOST_DEVICE inline bool dpoHasThirdFloat(int64_t kind) {
  return kind == static_cast<int64_t>(DpoLossKind::kSimpo) || kind == static_cast<int64_t>(DpoLossKind::kDiscopop);
}
// From a call's kind and its `count` (2 or 3, checked) floats.
inline DpoLossParams dpoLossParams(int64_t kind, const float* floats, size_t count) {
  DpoLossParams p{kind, floats[0], floats[1]};
  if (count > 2) (kind == static_cast<int64_t>(DpoLossKind::kDiscopop) ? p.tau : p.gamma) = floats[2];
  return p;
}
inline DpoLossParams dpoLossParams(const KernelArgs& args) {
  return dpoLossParams(args.ints[0], args.floats.data(), args.floats.size());
}

// Whether a sequence sum's kernel (sequence_logprob and its backward, finish and chunks' backward)
// averages: its int attribute after `leading` others (absent: a plan 1.23 sum).
inline bool sequenceAverages(const KernelArgs& args, size_t leading) {
  return args.ints.size() > leading && args.ints[leading] == 1;
}

// Row b's count of targets in [0, vocab), of (B, T) `targets` (mt.pair_nll's n[b]).
MT_HOST_DEVICE inline int64_t rowTargets(const int32_t* targets, int64_t b, int64_t seq, int64_t vocab) {
  int64_t n = 0;
  for (int64_t t = b * seq; t < (b + 1) * seq; ++t) n += targets[t] >= 0 && targets[t] < vocab;
  return n;
}

// ORPO's log odds of a reply whose mean log-probability per token is x: log(p / (1 - p)), p = e^x,
// and its slope 1 / (1 - p). A mean above kOrpoMostLikely (p within float rounding of 1, where the
// odds are infinite and TRL's loss NaN) counts as kOrpoMostLikely, its slope 0.
inline constexpr double kOrpoMostLikely = -1e-7;
// (Written so that a NaN mean stays NaN: fmin would drop it.)
MT_HOST_DEVICE inline double orpoLogOdds(double x) {
  x = x > kOrpoMostLikely ? kOrpoMostLikely : x;
  return x - log(-expm1(x));
}
MT_HOST_DEVICE inline double orpoLogOddsSlope(double x) { return x > kOrpoMostLikely ? 0.0 : -1.0 / expm1(x); }


// The losses of the margin z alone (sigmoid, hinge, robust, IPO, SimPO, EXO, DiscoPOP) at z, and
// their derivative in z, in double.
MT_HOST_DEVICE inline double dpoSoftplus(double x) { return fmax(x, 0.0) + log1p(exp(-fabs(x))); }
MT_HOST_DEVICE inline double dpoSigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
MT_HOST_DEVICE inline double dpoMarginLoss(const DpoLossParams& p, double z) {
  const double e = p.smoothing;
  switch (static_cast<DpoLossKind>(p.kind)) {
    case DpoLossKind::kHinge: return fmax(0.0, 1.0 - z);
    case DpoLossKind::kIpo: return ((z - 0.5) / p.beta) * ((z - 0.5) / p.beta);
    case DpoLossKind::kRobust: return ((1.0 - e) * dpoSoftplus(-z) - e * dpoSoftplus(z)) / (1.0 - 2.0 * e);
    case DpoLossKind::kExoPair: {
      const double x = e > 0.0 ? e : 1e-3;  // TRL's stand-in for no smoothing
      return dpoSigmoid(z) * (-dpoSoftplus(-z) - log1p(-x)) + dpoSigmoid(-z) * (-dpoSoftplus(z) - log(x));
    }
    case DpoLossKind::kDiscopop: {  // exp(-z) m as exp(-z - softplus(-z / tau)): no inf times 0 at z << 0
      const double m = dpoSigmoid(z / p.tau);
      return dpoSoftplus(-z) * (1.0 - m) + exp(-z - dpoSoftplus(-z / p.tau));
    }
    case DpoLossKind::kSimpo: z -= p.gamma; [[fallthrough]];
    default: return (1.0 - e) * dpoSoftplus(-z) + e * dpoSoftplus(z);
  }
}
MT_HOST_DEVICE inline double dpoMarginLossGrad(const DpoLossParams& p, double z) {
  const double e = p.smoothing;
  const double up = dpoSigmoid(-z), down = dpoSigmoid(z);
  switch (static_cast<DpoLossKind>(p.kind)) {
    case DpoLossKind::kHinge: return z < 1.0 ? -1.0 : 0.0;
    case DpoLossKind::kIpo: return 2.0 * (z - 0.5) / (p.beta * p.beta);
    case DpoLossKind::kRobust: return (-(1.0 - e) * up - e * down) / (1.0 - 2.0 * e);
    case DpoLossKind::kExoPair: {  // s(z) s(-z) (z - log((1 - e) / e))
      const double x = e > 0.0 ? e : 1e-3;
      return down * up * (z - log1p(-x) + log(x));
    }
    case DpoLossKind::kDiscopop: {  // exp(-z) m and exp(-z) m', m' = m (1 - m) / tau, in log space
      const double m = dpoSigmoid(z / p.tau), dm = m * (1.0 - m) / p.tau;
      const double scaled = -z - dpoSoftplus(-z / p.tau);  // log(exp(-z) m)
      return -up * (1.0 - m) - dpoSoftplus(-z) * dm - exp(scaled) + exp(scaled - dpoSoftplus(z / p.tau)) / p.tau;
    }
    case DpoLossKind::kSimpo: {
      const double shifted_up = dpoSigmoid(p.gamma - z), shifted_down = dpoSigmoid(z - p.gamma);
      return -(1.0 - e) * shifted_up + e * shifted_down;
    }
    default: return -(1.0 - e) * up + e * down;
  }
}

// Pair i's loss under `p` and its derivatives in logp[2i] (chosen) and logp[2i + 1] (rejected),
// in double (the CPU kernel, its CUDA twin and the runtime's scoring of held-out pairs), with z,
// the margin the log reports: beta times the log-ratios' difference, or ORPO's log odds ratio.
struct DpoPair {
  double loss, d_chosen, d_rejected, z;
};
MT_HOST_DEVICE inline DpoPair dpoPair(const DpoLossParams& p, const float* logp, const float* reference, int64_t i) {
  const double c = double(logp[2 * i]) - reference[2 * i], r = double(logp[2 * i + 1]) - reference[2 * i + 1];
  const double b = p.beta, z = b * (c - r);
  const auto ds = [](double x) { return dpoSigmoid(x) * dpoSigmoid(-x); };  // the sigmoid's slope
  switch (static_cast<DpoLossKind>(p.kind)) {
    case DpoLossKind::kOrpo: {
      const double odds = orpoLogOdds(c) - orpoLogOdds(r), up = dpoSigmoid(-odds);
      return {b * dpoSoftplus(-odds), -b * up * orpoLogOddsSlope(c), b * up * orpoLogOddsSlope(r), odds};
    }
    case DpoLossKind::kSppoHard: {
      const double win = c - 0.5 / b, lose = r + 0.5 / b;
      return {win * win + lose * lose, 2.0 * win, 2.0 * lose, z};
    }
    case DpoLossKind::kNcaPair:
      return {dpoSoftplus(-b * c) + 0.5 * dpoSoftplus(b * c) + 0.5 * dpoSoftplus(b * r),
              b * (-dpoSigmoid(-b * c) + 0.5 * dpoSigmoid(b * c)), 0.5 * b * dpoSigmoid(b * r), z};
    case DpoLossKind::kApoZero:
      return {1.0 - dpoSigmoid(b * c) + dpoSigmoid(b * r), -b * ds(b * c), b * ds(b * r), z};
    case DpoLossKind::kApoDown:
      return {dpoSigmoid(b * c) + 1.0 - dpoSigmoid(z), b * ds(b * c) - b * ds(z), b * ds(z), z};
    default: {
      const double g = dpoMarginLossGrad(p, z);
      return {dpoMarginLoss(p, z), b * g, -b * g, z};
    }
  }
}
// AOT's sides of pair i: x (the policy's log-ratio chosen over rejected, or the chosen reply's
// log-ratio) and y (the reference's, or the rejected reply's log-ratio).
MT_HOST_DEVICE inline void aotSides(const DpoLossParams& p, const float* logp, const float* reference, int64_t i,
                                    double& x, double& y) {
  if (p.kind == static_cast<int64_t>(DpoLossKind::kAot)) {
    x = double(logp[2 * i]) - logp[2 * i + 1];
    y = double(reference[2 * i]) - reference[2 * i + 1];
  } else {
    x = double(logp[2 * i]) - reference[2 * i];
    y = double(logp[2 * i + 1]) - reference[2 * i + 1];
  }
}
// The rank of pair i's side (x, or y with `rejected`) among the `pairs` pairs' (ties by row order),
// and the pair whose other side has rank `rank`.
MT_HOST_DEVICE inline int64_t aotRank(const DpoLossParams& p, const float* logp, const float* reference, int64_t pairs,
                                      int64_t i, bool rejected) {
  double xi, yi, xj, yj;
  aotSides(p, logp, reference, i, xi, yi);
  const double vi = rejected ? yi : xi;
  int64_t rank = 0;
  for (int64_t j = 0; j < pairs; ++j) {
    aotSides(p, logp, reference, j, xj, yj);
    const double vj = rejected ? yj : xj;
    rank += vj < vi || (vj == vi && j < i);
  }
  return rank;
}
MT_HOST_DEVICE inline int64_t aotPartner(const DpoLossParams& p, const float* logp, const float* reference,
                                         int64_t pairs, int64_t rank, bool rejected) {
  for (int64_t j = 0; j < pairs; ++j)
    if (aotRank(p, logp, reference, pairs, j, rejected) == rank) return j;
  return 0;  // only with a NaN side (no permutation then), whose loss is NaN anyway
}

// The pairs' losses as each kernel sums them: pair i's dpoPair, or for AOT the loss at pair i's
// chosen side's rank (each rank once over the pairs) with the derivatives in pair i's two rows
// (each row's side met at its own rank: O(pairs^2) per pair, pairs being a micro-batch's).
MT_HOST_DEVICE inline DpoPair dpoBatchPair(const DpoLossParams& p, const float* logp, const float* reference,
                                           int64_t pairs, int64_t i) {
  if (p.kind != static_cast<int64_t>(DpoLossKind::kAot) && p.kind != static_cast<int64_t>(DpoLossKind::kAotPair))
    return dpoPair(p, logp, reference, i);
  DpoLossParams sigmoid = p;
  sigmoid.kind = static_cast<int64_t>(DpoLossKind::kSigmoid);
  double x, y, xo, yo;
  aotSides(p, logp, reference, i, x, y);
  // x at its rank meets the other side's value of that rank; so does y.
  const int64_t y_of_x = aotPartner(p, logp, reference, pairs, aotRank(p, logp, reference, pairs, i, false), true);
  const int64_t x_of_y = aotPartner(p, logp, reference, pairs, aotRank(p, logp, reference, pairs, i, true), false);
  aotSides(p, logp, reference, y_of_x, xo, yo);
  const double z = p.beta * (x - yo);
  const double dx = p.beta * dpoMarginLossGrad(sigmoid, z);
  aotSides(p, logp, reference, x_of_y, xo, yo);
  const double dy = -p.beta * dpoMarginLossGrad(sigmoid, p.beta * (xo - y));
  if (p.kind == static_cast<int64_t>(DpoLossKind::kAot)) return {dpoMarginLoss(sigmoid, z), dx, -dx, z};
  return {dpoMarginLoss(sigmoid, z), dx, dy, z};
}

// KTO (mt.kto_loss; TRL's KTOTrainer, loss_type kto), of c the example's log-ratio (policy minus
// reference) and kl the micro-batch's KL estimate: the mean over its KL rows of their log-ratios,
// at least 0 (and, as TRL detaches it, no gradient). A desirable example's loss is w_d (1 - s(beta
// (c - kl))), an undesirable one's w_u (1 - s(beta (kl - c))), s the sigmoid.
struct KtoParams {
  double beta = 0.0;         // how far the policy may move from the reference
  double desirable = 1.0;    // TRL's desirable_weight
  double undesirable = 1.0;  // TRL's undesirable_weight
};
inline KtoParams ktoParams(const KernelArgs& args) { return {args.floats[0], args.floats[1], args.floats[2]}; }
// (Written so that a NaN mean stays NaN, as torch's clamp keeps it.)
MT_HOST_DEVICE inline double ktoKl(const float* logp, const float* reference, int64_t pairs) {
  double sum = 0.0;
  for (int64_t i = 0; i < pairs; ++i) sum += double(logp[2 * i + 1]) - reference[2 * i + 1];
  const double kl = sum / double(pairs);
  return kl < 0.0 ? 0.0 : kl;
}
// Example i's loss and its derivative in logp[2i]; `reward` is beta c, its implicit reward.
struct KtoExample {
  double loss, d_example, reward;
};
MT_HOST_DEVICE inline KtoExample ktoExample(const KtoParams& p, const float* logp, const float* reference,
                                            const float* labels, double kl, int64_t i) {
  const double c = double(logp[2 * i]) - reference[2 * i], b = p.beta;
  if (labels[i] != 0.0f) {  // 1 - s(x) as s(-x): no cancellation where s(x) nears 1
    const double x = b * (c - kl);
    return {p.desirable * dpoSigmoid(-x), -p.desirable * b * dpoSigmoid(x) * dpoSigmoid(-x), b * c};
  }
  const double x = b * (kl - c);
  return {p.undesirable * dpoSigmoid(-x), p.undesirable * b * dpoSigmoid(x) * dpoSigmoid(-x), b * c};
}

// A reward model's pair i (rows 2i chosen, 2i + 1 rejected) as TRL's RewardTrainer scores it:
// -log s(r_c - r_r - m), m the pair's margin (its dataset's "margin" column; 0 without), plus
// `center` (its center_rewards_coefficient) times (r_c + r_r)^2, which keeps the rewards near 0;
// with its derivatives in each row's reward.
MT_HOST_DEVICE inline DpoPair rewardPair(const float* rewards, double center, int64_t i, double margin = 0.0) {
  const double c = rewards[2 * i], r = rewards[2 * i + 1], d = c - r - margin, s = c + r, up = dpoSigmoid(-d);
  return {dpoSoftplus(-d) + center * s * s, -up + 2.0 * center * s, up + 2.0 * center * s, d};
}

std::string softmax_xent_check(const KernelArgs& args);
void softmax_xent_cpu(const KernelArgs& args);
std::string softmax_xent_grad_check(const KernelArgs& args);
void softmax_xent_grad_cpu(const KernelArgs& args);
std::string xent_chunk_check(const KernelArgs& args);
void xent_chunk_cpu(const KernelArgs& args);
std::string xent_finish_check(const KernelArgs& args);
void xent_finish_cpu(const KernelArgs& args);
std::string xent_chunk_grad_check(const KernelArgs& args);
void xent_chunk_grad_cpu(const KernelArgs& args);
std::string count_targets_check(const KernelArgs& args);
void count_targets_cpu(const KernelArgs& args);
std::string xent_tile_check(const KernelArgs& args);
void xent_tile_cpu(const KernelArgs& args);
std::string xent_tile_grad_check(const KernelArgs& args);
void xent_tile_grad_cpu(const KernelArgs& args);
std::string sequence_logprob_check(const KernelArgs& args);
void sequence_logprob_cpu(const KernelArgs& args);
std::string sequence_logprob_grad_check(const KernelArgs& args);
void sequence_logprob_grad_cpu(const KernelArgs& args);
std::string sequence_logprob_finish_check(const KernelArgs& args);
void sequence_logprob_finish_cpu(const KernelArgs& args);
std::string sequence_logprob_chunk_grad_check(const KernelArgs& args);
void sequence_logprob_chunk_grad_cpu(const KernelArgs& args);
std::string pair_nll_check(const KernelArgs& args);
void pair_nll_cpu(const KernelArgs& args);
std::string pair_nll_grad_check(const KernelArgs& args);
void pair_nll_grad_cpu(const KernelArgs& args);
std::string dpo_loss_check(const KernelArgs& args);
void dpo_loss_cpu(const KernelArgs& args);
std::string dpo_loss_grad_check(const KernelArgs& args);
void dpo_loss_grad_cpu(const KernelArgs& args);
std::string row_score_check(const KernelArgs& args);
void row_score_cpu(const KernelArgs& args);
std::string row_score_grad_check(const KernelArgs& args);
void row_score_grad_cpu(const KernelArgs& args);
std::string reward_loss_check(const KernelArgs& args);
void reward_loss_cpu(const KernelArgs& args);
std::string reward_loss_grad_check(const KernelArgs& args);
void reward_loss_grad_cpu(const KernelArgs& args);
std::string reward_margin_loss_check(const KernelArgs& args);
std::string reward_margin_loss_grad_check(const KernelArgs& args);
std::string kto_loss_check(const KernelArgs& args);
void kto_loss_cpu(const KernelArgs& args);
std::string kto_loss_grad_check(const KernelArgs& args);
void kto_loss_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/loss/loss_cuda.cu), built when CUDA is enabled.
void softmax_xent_cuda(const KernelArgs& args, const CudaLaunch& launch);
void softmax_xent_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void xent_chunk_cuda(const KernelArgs& args, const CudaLaunch& launch);
void xent_finish_cuda(const KernelArgs& args, const CudaLaunch& launch);
void xent_chunk_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void count_targets_cuda(const KernelArgs& args, const CudaLaunch& launch);
void xent_tile_cuda(const KernelArgs& args, const CudaLaunch& launch);
void xent_tile_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void sequence_logprob_cuda(const KernelArgs& args, const CudaLaunch& launch);
void sequence_logprob_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void sequence_logprob_finish_cuda(const KernelArgs& args, const CudaLaunch& launch);
void sequence_logprob_chunk_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void pair_nll_cuda(const KernelArgs& args, const CudaLaunch& launch);
void pair_nll_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void dpo_loss_cuda(const KernelArgs& args, const CudaLaunch& launch);
void dpo_loss_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void kto_loss_cuda(const KernelArgs& args, const CudaLaunch& launch);
void row_score_cuda(const KernelArgs& args, const CudaLaunch& launch);
void row_score_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void reward_loss_cuda(const KernelArgs& args, const CudaLaunch& launch);
void reward_loss_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void kto_loss_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
