// The preference-training kernels (kernels/loss/loss.h: mt.sequence_logprob, mt.dpo_loss,
// mt.kto_loss and their backwards) against double references and finite differences; the two chained, as a
// DPO plan runs them, against the finite differences of the whole loss in the logits; and the
// checks' refusals of what a corrupt plan could hold.
#include <algorithm>

#include "kernels/loss/loss.h"
#include "tests/kernels/kernel_harness.h"
#include "tests/kernels/reference.h"

namespace mt::test {
namespace {

class PreferenceKernels : public KernelTest {
 protected:
  void expectChunksGiveTheWhole(int64_t average);
};

// Each row's sum over its valid targets of log softmax(logits)[target], in double; with `average`,
// over their count (0 where there are none).
Doubles sequenceLogprob(const Doubles& logits, const std::vector<int32_t>& targets, int64_t rows, int64_t vocab,
                        bool average = false) {
  const Doubles xent = ref::softmaxXent(logits, targets, vocab);  // [mean, lse per token...]
  const int64_t seq = static_cast<int64_t>(targets.size()) / rows;
  Doubles logp(rows, 0.0), count(rows, 0.0);
  for (int64_t r = 0; r < rows * seq; ++r)
    if (targets[r] >= 0 && targets[r] < vocab) {
      logp[r / seq] += logits[r * vocab + targets[r]] - xent[1 + r];
      count[r / seq] += 1.0;
    }
  for (int64_t b = 0; average && b < rows; ++b) logp[b] = count[b] > 0.0 ? logp[b] / count[b] : 0.0;
  return logp;
}

// The mean over pairs (2i chosen, 2i + 1 rejected) of TRL's losses of c and r, the pair's
// log-ratios (policy minus reference), and z = beta (c - r), with label smoothing e, from their
// definitions (TRL's DPOTrainer.dpo_loss): sigmoid -(1 - e) log s(z) - e log s(-z); hinge max(0,
// 1 - z); robust (-(1 - e) log s(z) + e log s(-z)) / (1 - 2e); IPO; SimPO's shifted by `third`
// (gamma); EXO; SPPO; NCA; APO; DiscoPOP with tau `third`; AOT of the sorted sides.
double dpoLoss(const Doubles& logp, const Doubles& reference, double beta, DpoLossKind kind = DpoLossKind::kSigmoid,
               double e = 0.0, double third = 0.0) {
  const size_t pairs = logp.size() / 2;
  double total = 0.0;
  auto logSigmoid = [](double x) { return -std::log1p(std::exp(-x)); };
  if (kind == DpoLossKind::kAot || kind == DpoLossKind::kAotPair) {  // TRL: torch.sort of each side
    Doubles x(pairs), y(pairs);
    for (size_t i = 0; i < pairs; ++i) {
      const bool aot = kind == DpoLossKind::kAot;
      x[i] = aot ? logp[2 * i] - logp[2 * i + 1] : logp[2 * i] - reference[2 * i];
      y[i] = aot ? reference[2 * i] - reference[2 * i + 1] : logp[2 * i + 1] - reference[2 * i + 1];
    }
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    for (size_t k = 0; k < pairs; ++k) {
      const double z = beta * (x[k] - y[k]);
      total += -(1 - e) * logSigmoid(z) - e * logSigmoid(-z);
    }
    return total / pairs;
  }
  auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  for (size_t i = 0; i < pairs; ++i) {
    const double c = logp[2 * i] - reference[2 * i], r = logp[2 * i + 1] - reference[2 * i + 1];
    const double z = beta * (c - r);
    switch (kind) {
      case DpoLossKind::kHinge: total += std::max(0.0, 1.0 - z); break;
      case DpoLossKind::kIpo: total += (z / beta - 1 / (2 * beta)) * (z / beta - 1 / (2 * beta)); break;
      case DpoLossKind::kSimpo: total += -(1 - e) * logSigmoid(z - third) - e * logSigmoid(third - z); break;
      case DpoLossKind::kRobust: total += (-(1 - e) * logSigmoid(z) + e * logSigmoid(-z)) / (1 - 2 * e); break;
      case DpoLossKind::kExoPair: {
        const double x = e == 0.0 ? 1e-3 : e;
        total += sigmoid(z) * (logSigmoid(z) - std::log(1 - x)) + sigmoid(-z) * (logSigmoid(-z) - std::log(x));
        break;
      }
      case DpoLossKind::kSppoHard:
        total += (c - 0.5 / beta) * (c - 0.5 / beta) + (r + 0.5 / beta) * (r + 0.5 / beta);
        break;
      case DpoLossKind::kNcaPair:
        total += -logSigmoid(beta * c) - 0.5 * logSigmoid(-beta * c) - 0.5 * logSigmoid(-beta * r);
        break;
      case DpoLossKind::kApoZero: total += 1 - sigmoid(beta * c) + sigmoid(beta * r); break;
      case DpoLossKind::kApoDown: total += sigmoid(beta * c) + 1 - sigmoid(z); break;
      case DpoLossKind::kDiscopop: {
        const double m = sigmoid(z / third);
        total += -logSigmoid(z) * (1 - m) + std::exp(-z) * m;
        break;
      }
      default: total += -(1 - e) * logSigmoid(z) - e * logSigmoid(-z);
    }
  }
  return total / pairs;
}

// Sums (no int attribute, plan 1.23's calls) and means (average 1, the IPO loss's).
TEST_F(PreferenceKernels, SequenceLogprobSumsEachRowsCountedTargets) {
  const int64_t rows = 3, seq = 4, vocab = 7;
  auto logits = HostTensor::f32({rows, seq, vocab}, randomFloats(rows * seq * vocab, rng, 2.0f));
  // Row 0's prompt ignored (-1) and a target past the vocabulary; row 2 counts nothing: 0.
  auto targets = HostTensor::i32({rows, seq}, {-1, -1, 3, 6, 0, 1, 2, vocab, -1, -1, -1, -1});
  for (bool average : {false, true}) {
    const std::string what = average ? " (average)" : "";
    const std::vector<int64_t> ints = average ? std::vector<int64_t>{1} : std::vector<int64_t>{};
    auto out = runKernel(KernelId::SequenceLogprob, {logits, targets},
                         {HostTensor::f32({rows}), HostTensor::f32({rows, seq})}, ints);
    const Doubles want = sequenceLogprob(logits.asDoubles(), targets.ints, rows, vocab, average);
    expectClose(out[0].floats, want, kF32Tol, "sequence_logprob logp" + what);
    EXPECT_EQ(out[0].floats[2], 0.0f) << "a row counting no target" << what;
    expectClose(out[1].floats, slice(ref::softmaxXent(logits.asDoubles(), targets.ints, vocab), 1, rows * seq),
                kF32Tol, "sequence_logprob lse" + what);
    const Doubles dlogp{0.7, -1.3, 2.0};
    auto grad = runKernel(KernelId::SequenceLogprobGrad,
                          {HostTensor::f32({rows}, toFloats(dlogp)), logits, targets, out[1]},
                          {HostTensor::f32({rows, seq, vocab})}, ints);
    expectClose(grad[0].floats,
                finiteDifferences(
                    [&](const Doubles& x) { return sequenceLogprob(x, targets.ints, rows, vocab, average); },
                    logits.asDoubles(), dlogp),
                kGradTol, "sequence_logprob grad" + what);
  }
}

// Over vocabulary chunks (mtc --objective dpo --vocab-chunks; uneven chunks, a target in each,
// ignored targets, a row counting nothing): mt.xent_chunk's running state finished by
// sequence_logprob_finish gives sequence_logprob's logp and lse, and each chunk's
// sequence_logprob_chunk_grad its columns of sequence_logprob_grad; sums and means alike.
TEST_F(PreferenceKernels, VocabularyChunksGiveTheWholeSums) {
  for (int64_t average : {0, 1}) expectChunksGiveTheWhole(average);
}

void PreferenceKernels::expectChunksGiveTheWhole(int64_t average) {
  SCOPED_TRACE(average ? "average" : "sums");
  const int64_t rows = 3, seq = 4, vocab = 11;
  const int64_t firsts[] = {0, 4, 8, vocab};  // chunks [0, 4), [4, 8), [8, 11)
  const std::vector<int64_t> whole_ints = average ? std::vector<int64_t>{1} : std::vector<int64_t>{};
  auto logits = HostTensor::f32({rows, seq, vocab}, randomFloats(rows * seq * vocab, rng, 3.0f));
  auto targets = HostTensor::i32({rows, seq}, {-1, 1, 5, 10, 4, -1, 8, 9, -1, -1, -1, -1});
  const auto whole = runKernel(KernelId::SequenceLogprob, {logits, targets},
                               {HostTensor::f32({rows}), HostTensor::f32({rows, seq})}, whole_ints);
  auto dlogp = HostTensor::f32({rows}, {0.7f, -1.3f, 2.0f});
  const auto dwhole = runKernel(KernelId::SequenceLogprobGrad, {dlogp, logits, targets, whole[1]},
                                {HostTensor::f32({rows, seq, vocab})}, whole_ints);
  auto chunkOf = [&](const HostTensor& t, int64_t first, int64_t width) {
    HostTensor out = HostTensor::f32({rows, seq, width});
    for (int64_t r = 0; r < rows * seq; ++r)
      for (int64_t c = 0; c < width; ++c) out.floats[r * width + c] = t.floats[r * vocab + first + c];
    return out;
  };
  auto running = HostTensor::f32({rows, seq, 2}, std::vector<float>(rows * seq * 2, -INFINITY));
  for (int k = 0; k < 3; ++k)
    running = runKernel(KernelId::XentChunk, {chunkOf(logits, firsts[k], firsts[k + 1] - firsts[k]), targets, running},
                        {HostTensor::f32({rows, seq, 2})}, {firsts[k]})[0];
  const auto finished = runKernel(KernelId::SequenceLogprobFinish, {running, targets},
                                  {HostTensor::f32({rows}), HostTensor::f32({rows, seq})}, {vocab, average});
  expectClose(finished[0].floats, whole[0].asDoubles(), kF32Tol, "sequence_logprob_finish logp");
  EXPECT_EQ(finished[0].floats[2], 0.0f) << "a row counting no target";
  expectClose(finished[1].floats, whole[1].asDoubles(), kF32Tol, "sequence_logprob_finish lse");
  for (int k = 0; k < 3; ++k) {
    const int64_t first = firsts[k], width = firsts[k + 1] - first;
    const auto dchunk = runKernel(KernelId::SequenceLogprobChunkGrad,
                                  {dlogp, chunkOf(logits, first, width), targets, finished[1]},
                                  {HostTensor::f32({rows, seq, width})}, {first, vocab, average});
    expectClose(dchunk[0].floats, chunkOf(dwhole[0], first, width).asDoubles(), kF32Tol,
                "sequence_logprob_chunk_grad");
  }
}

TEST_F(PreferenceKernels, DpoLossAndGradientOverPairs) {
  const float beta = 0.25f;
  // Pair 1's margins are huge, both ways round with pair 2: softplus neither overflows nor rounds to NaN.
  const Doubles logp{-12.5, -14.0, -3.0, -900.0, -900.0, -3.0}, reference{-13.0, -13.5, -2.0, -1.0, -1.0, -2.0};
  auto logpT = HostTensor::f32({6}, toFloats(logp)), refT = HostTensor::f32({6}, toFloats(reference));
  auto loss = runKernel(KernelId::DpoLoss, {logpT, refT}, {HostTensor::f32({})}, {0}, {beta, 0.0f});
  expectClose(loss[0].floats, {dpoLoss(logp, reference, beta)}, kF32Tol, "dpo_loss");
  auto grad = runKernel(KernelId::DpoLossGrad, {HostTensor::f32({}, {0.5f}), logpT, refT}, {HostTensor::f32({6})}, {0},
                        {beta, 0.0f});
  expectClose(grad[0].floats,
              finiteDifferences([&](const Doubles& x) { return Doubles{dpoLoss(x, reference, beta)}; }, logp, {0.5}),
              kGradTol, "dpo_loss grad");
  EXPECT_EQ(grad[0].floats[0], -grad[0].floats[1]) << "a pair's rows take opposite gradients";
}

// Every kind at margins of thousands, both ways round (z = -2999 and 2999): the loss and its
// gradient stay finite (DiscoPOP's exp(-z) times a sigmoid that has rounded to 0 is taken in log
// space, as is every softplus).
TEST_F(PreferenceKernels, EveryKindStaysFiniteAtHugeMargins) {
  auto logp = HostTensor::f32({4}, {-3000.0f, -1.0f, -1.0f, -3000.0f}), zeros = HostTensor::f32({4});
  for (int64_t kind = 0; kind < kDpoLossKinds; ++kind) {
    std::vector<float> floats{1.0f, 0.0f};
    if (dpoHasThirdFloat(kind)) floats.push_back(0.5f);
    auto loss = runKernel(KernelId::DpoLoss, {logp, zeros}, {HostTensor::f32({})}, {kind}, floats);
    auto grad = runKernel(KernelId::DpoLossGrad, {HostTensor::f32({}, {1.0f}), logp, zeros}, {HostTensor::f32({4})},
                          {kind}, floats);
    EXPECT_TRUE(std::isfinite(loss[0].floats[0])) << "kind " << kind << ": loss " << loss[0].floats[0];
    for (float g : grad[0].floats) EXPECT_TRUE(std::isfinite(g)) << "kind " << kind << ": a gradient " << g;
  }
}

// TRL's other losses (mt.dpo_loss's kind: hinge, robust, IPO, SimPO with its gamma, EXO with and
// without smoothing, SPPO, NCA, APO, DiscoPOP with its tau) and label smoothing: each against its
// definition, its gradient against finite differences (margins kept off the hinge's kink).
TEST_F(PreferenceKernels, EveryKindAgainstItsDefinition) {
  // z = 0.4, 0.8, -1.32, 1.6: the last past the hinge (no gradient there), none at its kink; no two
  // pairs' sides tie (AOT sorts them).
  const Doubles logp{-12.5, -14.0, -3.0, -4.0, -7.3, -2.0, -5.0, -9.0}, reference{-13.0, -13.5, -2.0, -1.0, -6.0, -4.0,
                                                                                -5.0, -5.0};
  auto logpT = HostTensor::f32({8}, toFloats(logp)), refT = HostTensor::f32({8}, toFloats(reference));
  const float beta = 0.4f;
  struct Case {
    DpoLossKind kind;
    double e, third;  // third: SimPO's gamma, DiscoPOP's tau
  };
  for (Case c : {Case{DpoLossKind::kSigmoid, 0.1, 0.0}, {DpoLossKind::kHinge, 0.0, 0.0}, {DpoLossKind::kRobust, 0.2, 0.0},
                 {DpoLossKind::kIpo, 0.0, 0.0}, {DpoLossKind::kSimpo, 0.1, 0.3}, {DpoLossKind::kExoPair, 0.0, 0.0},
                 {DpoLossKind::kExoPair, 0.2, 0.0}, {DpoLossKind::kSppoHard, 0.0, 0.0}, {DpoLossKind::kNcaPair, 0.0, 0.0},
                 {DpoLossKind::kApoZero, 0.0, 0.0}, {DpoLossKind::kApoDown, 0.0, 0.0},
                 {DpoLossKind::kDiscopop, 0.0, 0.5}, {DpoLossKind::kAot, 0.1, 0.0}, {DpoLossKind::kAotPair, 0.0, 0.0}}) {
    const std::string what = "kind " + std::to_string(static_cast<int>(c.kind)) + ", smoothing " + std::to_string(c.e);
    const std::vector<int64_t> ints{static_cast<int64_t>(c.kind)};
    std::vector<float> floats{beta, float(c.e)};
    if (dpoHasThirdFloat(static_cast<int64_t>(c.kind))) floats.push_back(float(c.third));
    const auto want = [&](const Doubles& x) { return dpoLoss(x, reference, beta, c.kind, float(c.e), float(c.third)); };
    auto loss = runKernel(KernelId::DpoLoss, {logpT, refT}, {HostTensor::f32({})}, ints, floats);
    expectClose(loss[0].floats, {want(logp)}, kF32Tol, "dpo_loss, " + what);
    auto grad = runKernel(KernelId::DpoLossGrad, {HostTensor::f32({}, {0.5f}), logpT, refT}, {HostTensor::f32({8})},
                          ints, floats);
    expectClose(grad[0].floats, finiteDifferences([&](const Doubles& x) { return Doubles{want(x)}; }, logp, {0.5}),
                kGradTol, "dpo_loss grad, " + what);
  }
}

// ORPO's odds-ratio term (kind 5, reference-free: a reference of zeros): -beta log sigmoid of the
// log odds ratio of each pair's mean log-probabilities, as TRL's ORPOTrainer writes it (log1p of
// -exp), its gradient against finite differences; a reply whose mean is 0 (certain in float) gives
// a finite loss and no gradient where TRL's is NaN.
TEST_F(PreferenceKernels, OrpoIsTheLogOddsRatioTerm) {
  const Doubles logp{-0.5, -1.2, -2.0, -0.3, -0.05, -3.0, -1.0, -1.0};
  const Doubles zeros(logp.size(), 0.0);
  const float beta = 0.25f;
  const auto want = [&](const Doubles& x) {
    double total = 0.0;
    for (size_t i = 0; i < x.size() / 2; ++i) {
      const double c = x[2 * i], r = x[2 * i + 1];
      const double log_odds = (c - r) - (std::log1p(-std::exp(c)) - std::log1p(-std::exp(r)));
      total += -beta * -std::log1p(std::exp(-log_odds));  // -beta log sigmoid(log_odds)
    }
    return Doubles{total / double(x.size() / 2)};
  };
  const std::vector<int64_t> ints{static_cast<int64_t>(DpoLossKind::kOrpo)};
  const std::vector<float> floats{beta, 0.0f};
  auto logpT = HostTensor::f32({8}, toFloats(logp)), zerosT = HostTensor::f32({8}, toFloats(zeros));
  auto loss = runKernel(KernelId::DpoLoss, {logpT, zerosT}, {HostTensor::f32({})}, ints, floats);
  expectClose(loss[0].floats, want(logp), kF32Tol, "orpo loss");
  auto grad = runKernel(KernelId::DpoLossGrad, {HostTensor::f32({}, {0.5f}), logpT, zerosT}, {HostTensor::f32({8})},
                        ints, floats);
  expectClose(grad[0].floats, finiteDifferences(want, logp, {0.5}), kGradTol, "orpo grad");

  auto certain = HostTensor::f32({2}, {0.0f, -1.0f}), zeros2 = HostTensor::f32({2}, {0.0f, 0.0f});
  auto edge = runKernel(KernelId::DpoLoss, {certain, zeros2}, {HostTensor::f32({})}, ints, floats);
  auto edgeGrad = runKernel(KernelId::DpoLossGrad, {HostTensor::f32({}, {1.0f}), certain, zeros2},
                            {HostTensor::f32({2})}, ints, floats);
  EXPECT_TRUE(std::isfinite(edge[0].floats[0]) && edge[0].floats[0] >= 0.0f) << edge[0].floats[0];
  EXPECT_EQ(edgeGrad[0].floats[0], 0.0f) << "a chosen reply certain in float: no slope";
  EXPECT_TRUE(std::isfinite(edgeGrad[0].floats[1]) && edgeGrad[0].floats[1] > 0.0f) << edgeGrad[0].floats[1];
}

// The NLL term (mtc --rpo-alpha): alpha times the chosen rows' negative log-likelihood per token,
// from sums or means; its gradient (on the chosen rows only) against finite differences; a batch
// whose chosen rows count nothing gives 0.
TEST_F(PreferenceKernels, PairNllIsTheChosenRepliesLikelihoodPerToken) {
  const int64_t rows = 4, seq = 5, vocab = 9;
  // Row 0 counts 3 targets, row 2 counts 5 (row 1 and 3 are rejected: not counted).
  auto targets = HostTensor::i32({rows, seq}, {-1, -1, 3, 4, 5, -1, 1, 2, 3, 4, 0, 1, 2, 3, 8, -1, -1, -1, -1, 2});
  const Doubles logp{-6.0, -9.0, -4.5, -3.0};
  const float alpha = 0.7f;
  for (int64_t average : {0, 1}) {
    const Doubles n{3.0, 0.0, 5.0, 0.0};
    const auto want = [&](const Doubles& x) {  // -alpha * (S0 + S2) / (n0 + n2)
      const auto sum = [&](int b) { return average ? x[b] * n[b] : x[b]; };
      return Doubles{-alpha * (sum(0) + sum(2)) / (n[0] + n[2])};
    };
    const std::vector<int64_t> ints{vocab, average};
    auto loss = runKernel(KernelId::PairNll, {HostTensor::f32({rows}, toFloats(logp)), targets},
                          {HostTensor::f32({})}, ints, {alpha});
    expectClose(loss[0].floats, want(logp), kF32Tol, "pair_nll, average " + std::to_string(average));
    auto grad = runKernel(KernelId::PairNllGrad, {HostTensor::f32({}, {0.5f}), HostTensor::f32({rows}, toFloats(logp)),
                                                  targets},
                          {HostTensor::f32({rows})}, ints, {alpha});
    expectClose(grad[0].floats, finiteDifferences(want, logp, {0.5}), kGradTol,
                "pair_nll grad, average " + std::to_string(average));
    EXPECT_EQ(grad[0].floats[1], 0.0f) << "a rejected row";
  }
  auto none = HostTensor::i32({rows, seq}, std::vector<int32_t>(rows * seq, -1));
  auto zero = runKernel(KernelId::PairNll, {HostTensor::f32({rows}, toFloats(logp)), none}, {HostTensor::f32({})},
                        {vocab, 0}, {alpha});
  EXPECT_EQ(zero[0].floats[0], 0.0f) << "chosen rows counting nothing";
}

// A DPO plan's loss: mt.dpo_loss of mt.sequence_logprob; its backward, the two backwards
// chained, is the derivative of the whole loss in the logits.
TEST_F(PreferenceKernels, ChainedBackwardIsTheDerivativeOfTheWholeLoss) {
  const int64_t rows = 4, seq = 3, vocab = 5;
  const float beta = 0.5f;
  auto logits = HostTensor::f32({rows, seq, vocab}, randomFloats(rows * seq * vocab, rng, 2.0f));
  auto targets = HostTensor::i32({rows, seq}, {-1, 2, 4, -1, 1, 3, -1, -1, 0, -1, 4, 4});
  auto reference = HostTensor::f32({rows}, {-4.0f, -5.5f, -2.0f, -3.0f});
  auto seqOut = runKernel(KernelId::SequenceLogprob, {logits, targets},
                          {HostTensor::f32({rows}), HostTensor::f32({rows, seq})});
  auto loss = runKernel(KernelId::DpoLoss, {seqOut[0], reference}, {HostTensor::f32({})}, {0}, {beta, 0.0f});
  auto wholeLoss = [&](const Doubles& x) {
    return Doubles{dpoLoss(sequenceLogprob(x, targets.ints, rows, vocab), reference.asDoubles(), beta)};
  };
  expectClose(loss[0].floats, wholeLoss(logits.asDoubles()), kF32Tol, "the chained loss");
  auto dlogp = runKernel(KernelId::DpoLossGrad, {HostTensor::f32({}, {1.0f}), seqOut[0], reference},
                         {HostTensor::f32({rows})}, {0}, {beta, 0.0f});
  auto dlogits = runKernel(KernelId::SequenceLogprobGrad, {dlogp[0], logits, targets, seqOut[1]},
                           {HostTensor::f32({rows, seq, vocab})});
  expectClose(dlogits[0].floats, finiteDifferences(wholeLoss, logits.asDoubles(), {1.0}), kGradTol,
              "the chained backward");
}

// KTO's loss as TRL's KTOTrainer writes it: kl = (policy_KL_logps - reference_KL_logps).mean()
// .clamp(min=0), then 1 - sigmoid(beta (c - kl)) for the desirable examples, 1 - sigmoid(beta (kl
// - c)) for the undesirable ones, weighted, their nanmean. Rows in pairs: 2i the example, 2i + 1
// its KL row.
double ktoLoss(const Doubles& logp, const Doubles& reference, const std::vector<float>& labels, double beta,
               double desirable = 1.0, double undesirable = 1.0) {
  const size_t examples = logp.size() / 2;
  auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  double kl = 0.0;
  for (size_t i = 0; i < examples; ++i) kl += logp[2 * i + 1] - reference[2 * i + 1];
  kl = std::max(kl / examples, 0.0);
  double total = 0.0;
  for (size_t i = 0; i < examples; ++i) {
    const double c = logp[2 * i] - reference[2 * i];
    total += labels[i] ? desirable * (1 - sigmoid(beta * (c - kl))) : undesirable * (1 - sigmoid(beta * (kl - c)));
  }
  return total / examples;
}

// mt.kto_loss against TRL's formula, with the KL estimate above 0 and clamped to it, both labels and
// unequal weights; its gradient against finite differences with the estimate held (TRL detaches
// it): the KL rows get none.
TEST_F(PreferenceKernels, KtoLossAgainstTrlsFormula) {
  const std::vector<float> labels{1.0f, 0.0f, 1.0f, 0.0f};
  const float beta = 0.3f;
  for (double shift : {2.0, -2.0}) {  // the KL rows' mean log-ratio 2 - 0.25 > 0, or below 0 (clamped)
    const Doubles logp{-12.5, -10.0 + shift, -3.0, -4.0 + shift, -7.3, -2.0 + shift, -5.0, -9.0 + shift};
    const Doubles reference{-13.0, -10.5, -2.0, -3.5, -6.0, -2.0, -5.0, -9.0};
    auto logpT = HostTensor::f32({8}, toFloats(logp)), refT = HostTensor::f32({8}, toFloats(reference));
    auto labelsT = HostTensor::f32({4}, labels);
    for (auto [desirable, undesirable] : {std::pair{1.0f, 1.0f}, std::pair{0.5f, 1.5f}}) {
      const std::string what = "KL rows shifted " + std::to_string(shift) + ", weights " + std::to_string(desirable) +
                               ", " + std::to_string(undesirable);
      const std::vector<float> floats{beta, desirable, undesirable};
      auto loss = runKernel(KernelId::KtoLoss, {logpT, refT, labelsT}, {HostTensor::f32({})}, {}, floats);
      expectClose(loss[0].floats, {ktoLoss(logp, reference, labels, beta, desirable, undesirable)}, kF32Tol,
                  "kto_loss, " + what);
      auto grad = runKernel(KernelId::KtoLossGrad, {HostTensor::f32({}, {0.5f}), logpT, refT, labelsT},
                            {HostTensor::f32({8})}, {}, floats);
      // The estimate held: the examples' rows move alone.
      Doubles want = finiteDifferences(
          [&](const Doubles& x) {
            Doubles moved = logp;
            for (size_t i = 0; i < x.size(); i += 2) moved[i] = x[i];
            return Doubles{ktoLoss(moved, reference, labels, beta, desirable, undesirable)};
          },
          logp, {0.5});
      for (size_t i = 1; i < want.size(); i += 2) want[i] = 0.0;
      expectClose(grad[0].floats, want, kGradTol, "kto_loss grad, " + what);
    }
  }
}

// A reward model's: each row's score at its position (and its gradient there alone, a position
// outside the row a NaN reward and no gradient), and TRL's RewardTrainer loss of the rewards, with
// and without center_rewards_coefficient, and with each pair's margin, its gradient against finite
// differences.
TEST_F(PreferenceKernels, RewardModelScoresAndLoss) {
  const int64_t rows = 4, seq = 3;
  const std::vector<float> scores{0.5f, -1.0f, 2.0f, 0.25f, 3.0f, -0.5f, 1.5f, 1.0f, -2.0f, 0.0f, 0.75f, -1.25f};
  auto scoresT = HostTensor::f32({rows, seq, 1}, scores);
  auto positions = HostTensor::i32({rows}, {2, 0, 1, seq});
  auto rewards = runKernel(KernelId::RowScore, {scoresT, positions}, {HostTensor::f32({rows})});
  EXPECT_EQ(std::vector<float>(rewards[0].floats.begin(), rewards[0].floats.begin() + 3),
            (std::vector<float>{2.0f, 0.25f, 1.0f}));
  EXPECT_TRUE(std::isnan(rewards[0].floats[3])) << "a position past the row reads no score";
  auto dscores = runKernel(KernelId::RowScoreGrad, {HostTensor::f32({rows}, {1.0f, 2.0f, 3.0f, 4.0f}), scoresT, positions},
                           {HostTensor::f32({rows, seq, 1})});
  EXPECT_EQ(dscores[0].floats, (std::vector<float>{0, 0, 1, 2, 0, 0, 0, 3, 0, 0, 0, 0}));
  const Doubles r{0.5, -1.0, 2.0, 2.5};
  auto rT = HostTensor::f32({4}, toFloats(r));
  const Doubles margins{0.75, -1.5};
  auto marginsT = HostTensor::f32({2}, toFloats(margins));
  for (bool margined : {false, true})
    for (double center : {0.0, 0.1}) {
      const auto want = [&](const Doubles& x) {
        double total = 0.0;
        for (size_t i = 0; i < x.size(); i += 2)
          total += std::log1p(std::exp(-(x[i] - x[i + 1] - (margined ? margins[i / 2] : 0.0)))) +
                   center * (x[i] + x[i + 1]) * (x[i] + x[i + 1]);
        return Doubles{total / double(x.size() / 2)};
      };
      const std::string what = (margined ? "reward_margin_loss" : "reward_loss") + std::string(", center ") +
                               std::to_string(center);
      std::vector<HostTensor> in{rT};
      if (margined) in.push_back(marginsT);
      auto loss = runKernel(margined ? KernelId::RewardMarginLoss : KernelId::RewardLoss, in, {HostTensor::f32({})}, {},
                            {float(center)});
      expectClose(loss[0].floats, want(r), kF32Tol, what);
      in.insert(in.begin(), HostTensor::f32({}, {0.5f}));
      auto grad = runKernel(margined ? KernelId::RewardMarginLossGrad : KernelId::RewardLossGrad, in,
                            {HostTensor::f32({4})}, {}, {float(center)});
      expectClose(grad[0].floats, finiteDifferences(want, r, {0.5}), kGradTol, what + " grad");
    }
}

// A plan read from a file is hostile: an odd batch, rows that are not (B, T, V), a reference
// of another length are refused by name.
TEST_F(PreferenceKernels, ChecksRefuseWhatIsNotPairsOfSequences) {
  auto problem = [](KernelId id, std::vector<HostTensor> in, std::vector<HostTensor> out, std::vector<float> floats,
                    std::vector<int64_t> ints = {}) {
    KernelArgs args;
    for (auto& t : in) args.in.push_back(t.view());
    for (auto& t : out) args.out.push_back(t.view());
    args.floats = floats;
    args.ints = ints;
    return checkKernelCall(id, args);
  };
  const auto pairs = [&](std::vector<int64_t> ints, std::vector<float> floats, int64_t reference = 4) {
    KernelArgs args;
    auto logp = HostTensor::f32({4}), ref = HostTensor::f32({reference}), loss = HostTensor::f32({});
    args.in = {logp.view(), ref.view()};
    args.out = {loss.view()};
    args.ints = ints;
    args.floats = floats;
    return checkKernelCall(KernelId::DpoLoss, args);
  };
  EXPECT_NE(problem(KernelId::DpoLoss, {HostTensor::f32({3}), HostTensor::f32({3})}, {HostTensor::f32({})}, {0.1f, 0.0f})
                .find("even B"),
            std::string::npos);
  EXPECT_NE(pairs({0}, {0.1f, 0.0f}, 2), "");
  EXPECT_EQ(pairs({0}, {0.1f, 0.0f}), "");
  EXPECT_NE(pairs({kDpoLossKinds}, {0.1f, 0.0f}).find("is not a loss"), std::string::npos);
  EXPECT_NE(pairs({0}, {0.0f, 0.0f}).find("beta must be positive"), std::string::npos);
  EXPECT_NE(pairs({0}, {0.1f, 0.6f}).find("label smoothing in [0, 1/2]"), std::string::npos);
  EXPECT_NE(pairs({2}, {0.1f, 0.5f}).find("the robust loss: below"), std::string::npos) << "1 - 2e = 0";
  EXPECT_EQ(pairs({1}, {0.1f, 0.5f}), "");
  EXPECT_EQ(pairs({4}, {2.0f, 0.0f, 0.5f}), "") << "SimPO's gamma";
  EXPECT_NE(pairs({0}, {0.1f, 0.0f, 0.5f}).find("a third float is the simpo kind's gamma"), std::string::npos);
  EXPECT_NE(pairs({4}, {2.0f, 0.0f, INFINITY}).find("(finite)"), std::string::npos);
  const int64_t discopop = static_cast<int64_t>(DpoLossKind::kDiscopop);
  EXPECT_EQ(pairs({discopop}, {0.1f, 0.0f, 0.05f}), "") << "DiscoPOP's tau";
  EXPECT_NE(pairs({discopop}, {0.1f, 0.0f}).find("takes its tau"), std::string::npos);
  EXPECT_NE(pairs({discopop}, {0.1f, 0.0f, 0.0f}).find("tau (positive)"), std::string::npos);
  EXPECT_NE(problem(KernelId::SequenceLogprob, {HostTensor::f32({6, 5}), HostTensor::i32({6}, std::vector<int32_t>(6, 0))},
                    {HostTensor::f32({6}), HostTensor::f32({6})}, {})
                .find("(B, T, V)"),
            std::string::npos);
  // The vocabulary chunks': a running state of other tokens, a chunk before the first id.
  const auto targets = HostTensor::i32({2, 3}, std::vector<int32_t>(6, 0));
  EXPECT_NE(problem(KernelId::SequenceLogprobFinish, {HostTensor::f32({2, 4, 2}), targets},
                    {HostTensor::f32({2}), HostTensor::f32({2, 3})}, {}, {8, 0})
                .find("running"),
            std::string::npos);
  EXPECT_EQ(problem(KernelId::SequenceLogprobFinish, {HostTensor::f32({2, 3, 2}), targets},
                    {HostTensor::f32({2}), HostTensor::f32({2, 3})}, {}, {8, 1}),
            "");
  const auto chunkGrad = [&](int64_t first, int64_t average) {
    return problem(KernelId::SequenceLogprobChunkGrad,
                   {HostTensor::f32({2}), HostTensor::f32({2, 3, 4}), targets, HostTensor::f32({2, 3})},
                   {HostTensor::f32({2, 3, 4})}, {}, {first, 8, average});
  };
  EXPECT_NE(chunkGrad(-4, 0).find("first vocabulary id must not be negative"), std::string::npos);
  EXPECT_NE(chunkGrad(4, 2).find("average must be 0 or 1"), std::string::npos);
  EXPECT_EQ(chunkGrad(4, 1), "");
  // The sums' average: absent (plan 1.23) or 0 or 1, nothing more.
  const auto sums = [&](std::vector<int64_t> ints) {
    return problem(KernelId::SequenceLogprob, {HostTensor::f32({2, 3, 8}), targets},
                   {HostTensor::f32({2}), HostTensor::f32({2, 3})}, {}, ints);
  };
  EXPECT_EQ(sums({}), "");
  EXPECT_EQ(sums({1}), "");
  EXPECT_NE(sums({1, 1}).find("takes 0 int attributes then average"), std::string::npos);
  // The NLL term's: logp of pairs beside (B, T) targets, a finite alpha.
  const auto nll = [&](std::vector<float> alpha, int64_t rows) {
    return problem(KernelId::PairNll, {HostTensor::f32({rows}), targets}, {HostTensor::f32({})}, alpha, {8, 0});
  };
  EXPECT_EQ(nll({0.5f}, 2), "");
  EXPECT_NE(nll({INFINITY}, 2).find("finite alpha"), std::string::npos);
  EXPECT_NE(nll({0.5f}, 4).find("logp must be (B) of an even B > 0 and the targets (B, T)"), std::string::npos);
  // KTO's: a label per example (B/2), beta positive, the weights not negative, no ints.
  const auto kto = [&](int64_t labels, std::vector<float> floats, std::vector<int64_t> ints = {}) {
    return problem(KernelId::KtoLoss, {HostTensor::f32({4}), HostTensor::f32({4}), HostTensor::f32({labels})},
                   {HostTensor::f32({})}, floats, ints);
  };
  EXPECT_EQ(kto(2, {0.1f, 1.0f, 1.0f}), "");
  EXPECT_EQ(kto(2, {0.1f, 0.0f, 1.0f}), "") << "a weight of 0 leaves a kind of example out";
  EXPECT_NE(kto(4, {0.1f, 1.0f, 1.0f}), "") << "labels per row, not per example";
  EXPECT_NE(kto(2, {0.0f, 1.0f, 1.0f}).find("beta must be positive"), std::string::npos);
  EXPECT_NE(kto(2, {0.1f, -1.0f, 1.0f}).find("weights not negative"), std::string::npos);
  EXPECT_NE(kto(2, {0.1f, 1.0f, NAN}).find("weights not negative"), std::string::npos);
  EXPECT_NE(kto(2, {0.1f, 1.0f}).find("takes float[beta, desirable_weight, undesirable_weight]"), std::string::npos);
  EXPECT_NE(kto(2, {0.1f, 1.0f, 1.0f}, {0}).find("no ints"), std::string::npos);
  // A reward model's: scores (B, T, 1) beside positions (B); rewards of pairs, a center not negative.
  EXPECT_EQ(problem(KernelId::RowScore, {HostTensor::f32({2, 3, 1}), HostTensor::i32({2}, {0, 0})},
                    {HostTensor::f32({2})}, {}),
            "");
  EXPECT_NE(problem(KernelId::RowScore, {HostTensor::f32({2, 3, 4}), HostTensor::i32({2}, {0, 0})},
                    {HostTensor::f32({2})}, {})
                .find("(B, T, 1)"),
            std::string::npos);
  EXPECT_NE(problem(KernelId::RewardLoss, {HostTensor::f32({3})}, {HostTensor::f32({})}, {0.0f}).find("even B"),
            std::string::npos);
  EXPECT_NE(problem(KernelId::RewardLoss, {HostTensor::f32({4})}, {HostTensor::f32({})}, {-0.1f}).find("not negative"),
            std::string::npos);
  // ... and one margin per pair.
  EXPECT_EQ(problem(KernelId::RewardMarginLoss, {HostTensor::f32({4}), HostTensor::f32({2})}, {HostTensor::f32({})},
                    {0.0f}),
            "");
  EXPECT_NE(problem(KernelId::RewardMarginLoss, {HostTensor::f32({4}), HostTensor::f32({4})}, {HostTensor::f32({})},
                    {0.0f})
                .find("reward_margin_loss"),
            std::string::npos);
  EXPECT_NE(problem(KernelId::RewardMarginLossGrad,
                    {HostTensor::f32({}), HostTensor::f32({4}), HostTensor::f32({3})}, {HostTensor::f32({4})}, {0.0f})
                .find("reward_margin_loss_grad"),
            std::string::npos);
}

}  // namespace
}  // namespace mt::test
