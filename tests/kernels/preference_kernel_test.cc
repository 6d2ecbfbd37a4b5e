// The preference-training kernels (kernels/loss/loss.h: mt.sequence_logprob, mt.dpo_loss and
// their backwards) against double references and finite differences; the two chained, as a
// DPO plan runs them, against the finite differences of the whole loss in the logits; and the
// checks' refusals of what a corrupt plan could hold.
#include "kernels/loss/loss.h"
#include "tests/kernels/kernel_harness.h"
#include "tests/kernels/reference.h"

namespace mt::test {
namespace {

class PreferenceKernels : public KernelTest {};

// Each row's sum over its valid targets of log softmax(logits)[target], in double.
Doubles sequenceLogprob(const Doubles& logits, const std::vector<int32_t>& targets, int64_t rows, int64_t vocab) {
  const Doubles xent = ref::softmaxXent(logits, targets, vocab);  // [mean, lse per token...]
  const int64_t seq = static_cast<int64_t>(targets.size()) / rows;
  Doubles logp(rows, 0.0);
  for (int64_t r = 0; r < rows * seq; ++r)
    if (targets[r] >= 0 && targets[r] < vocab) logp[r / seq] += logits[r * vocab + targets[r]] - xent[1 + r];
  return logp;
}

// The mean over pairs (2i chosen, 2i + 1 rejected) of -log sigmoid(beta * (margin_chosen - margin_rejected)).
double dpoLoss(const Doubles& logp, const Doubles& reference, double beta) {
  const size_t pairs = logp.size() / 2;
  double total = 0.0;
  for (size_t i = 0; i < pairs; ++i) {
    const double z = beta * ((logp[2 * i] - reference[2 * i]) - (logp[2 * i + 1] - reference[2 * i + 1]));
    total += -std::log(1.0 / (1.0 + std::exp(-z)));
  }
  return total / pairs;
}

TEST_F(PreferenceKernels, SequenceLogprobSumsEachRowsCountedTargets) {
  const int64_t rows = 3, seq = 4, vocab = 7;
  auto logits = HostTensor::f32({rows, seq, vocab}, randomFloats(rows * seq * vocab, rng, 2.0f));
  // Row 0's prompt ignored (-1) and a target past the vocabulary; row 2 counts nothing: 0.
  auto targets = HostTensor::i32({rows, seq}, {-1, -1, 3, 6, 0, 1, 2, vocab, -1, -1, -1, -1});
  auto out = runKernel(KernelId::SequenceLogprob, {logits, targets},
                       {HostTensor::f32({rows}), HostTensor::f32({rows, seq})});
  const Doubles want = sequenceLogprob(logits.asDoubles(), targets.ints, rows, vocab);
  expectClose(out[0].floats, want, kF32Tol, "sequence_logprob logp");
  EXPECT_EQ(out[0].floats[2], 0.0f) << "a row counting no target";
  expectClose(out[1].floats, slice(ref::softmaxXent(logits.asDoubles(), targets.ints, vocab), 1, rows * seq),
              kF32Tol, "sequence_logprob lse");
  const Doubles dlogp{0.7, -1.3, 2.0};
  auto grad = runKernel(KernelId::SequenceLogprobGrad,
                        {HostTensor::f32({rows}, toFloats(dlogp)), logits, targets, out[1]},
                        {HostTensor::f32({rows, seq, vocab})});
  expectClose(grad[0].floats,
              finiteDifferences([&](const Doubles& x) { return sequenceLogprob(x, targets.ints, rows, vocab); },
                                logits.asDoubles(), dlogp),
              kGradTol, "sequence_logprob grad");
}

TEST_F(PreferenceKernels, DpoLossAndGradientOverPairs) {
  const float beta = 0.25f;
  // Pair 1's margins are huge, both ways round with pair 2: softplus neither overflows nor rounds to NaN.
  const Doubles logp{-12.5, -14.0, -3.0, -900.0, -900.0, -3.0}, reference{-13.0, -13.5, -2.0, -1.0, -1.0, -2.0};
  auto logpT = HostTensor::f32({6}, toFloats(logp)), refT = HostTensor::f32({6}, toFloats(reference));
  auto loss = runKernel(KernelId::DpoLoss, {logpT, refT}, {HostTensor::f32({})}, {}, {beta});
  expectClose(loss[0].floats, {dpoLoss(logp, reference, beta)}, kF32Tol, "dpo_loss");
  auto grad = runKernel(KernelId::DpoLossGrad, {HostTensor::f32({}, {0.5f}), logpT, refT}, {HostTensor::f32({6})}, {},
                        {beta});
  expectClose(grad[0].floats,
              finiteDifferences([&](const Doubles& x) { return Doubles{dpoLoss(x, reference, beta)}; }, logp, {0.5}),
              kGradTol, "dpo_loss grad");
  EXPECT_EQ(grad[0].floats[0], -grad[0].floats[1]) << "a pair's rows take opposite gradients";
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
  auto loss = runKernel(KernelId::DpoLoss, {seqOut[0], reference}, {HostTensor::f32({})}, {}, {beta});
  auto wholeLoss = [&](const Doubles& x) {
    return Doubles{dpoLoss(sequenceLogprob(x, targets.ints, rows, vocab), reference.asDoubles(), beta)};
  };
  expectClose(loss[0].floats, wholeLoss(logits.asDoubles()), kF32Tol, "the chained loss");
  auto dlogp = runKernel(KernelId::DpoLossGrad, {HostTensor::f32({}, {1.0f}), seqOut[0], reference},
                         {HostTensor::f32({rows})}, {}, {beta});
  auto dlogits = runKernel(KernelId::SequenceLogprobGrad, {dlogp[0], logits, targets, seqOut[1]},
                           {HostTensor::f32({rows, seq, vocab})});
  expectClose(dlogits[0].floats, finiteDifferences(wholeLoss, logits.asDoubles(), {1.0}), kGradTol,
              "the chained backward");
}

// A plan read from a file is hostile: an odd batch, rows that are not (B, T, V), a reference
// of another length are refused by name.
TEST_F(PreferenceKernels, ChecksRefuseWhatIsNotPairsOfSequences) {
  auto problem = [](KernelId id, std::vector<HostTensor> in, std::vector<HostTensor> out, std::vector<float> floats) {
    KernelArgs args;
    for (auto& t : in) args.in.push_back(t.view());
    for (auto& t : out) args.out.push_back(t.view());
    args.floats = floats;
    return checkKernelCall(id, args);
  };
  EXPECT_NE(problem(KernelId::DpoLoss, {HostTensor::f32({3}), HostTensor::f32({3})}, {HostTensor::f32({})}, {0.1f})
                .find("even B"),
            std::string::npos);
  EXPECT_NE(problem(KernelId::DpoLoss, {HostTensor::f32({4}), HostTensor::f32({2})}, {HostTensor::f32({})}, {0.1f}),
            "");
  EXPECT_EQ(problem(KernelId::DpoLoss, {HostTensor::f32({4}), HostTensor::f32({4})}, {HostTensor::f32({})}, {0.1f}),
            "");
  EXPECT_NE(problem(KernelId::SequenceLogprob, {HostTensor::f32({6, 5}), HostTensor::i32({6}, std::vector<int32_t>(6, 0))},
                    {HostTensor::f32({6}), HostTensor::f32({6})}, {})
                .find("(B, T, V)"),
            std::string::npos);
}

}  // namespace
}  // namespace mt::test
