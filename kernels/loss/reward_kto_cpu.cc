// The CPU kernels of a reward model (mt.row_score, mt.reward_loss, mt.reward_margin_loss and their
// backwards) and of KTO (mt.kto_loss and its backward), each beside its CUDA twin in
// loss_cuda.cu (kernels/loss/loss.h); loss_cpu.cc holds the next token's, DPO's and its NLL term's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/loss/loss.h"
#include "kernels/loss/pair_rows.h"

namespace mt {

namespace {

// scores (B, T, 1) and positions (B) i32 of a row_score or its backward (`op`). (The positions'
// values are the run's: a position outside [0, T) reads a NaN reward, and writes no gradient.)
std::string checkRowScores(const Tensor& scores, const Tensor& positions, const char* op) {
  MT_CHECK(expectDType(scores, DType::F32, op));
  MT_CHECK(expectDType(positions, DType::I32, op));
  if (scores.shape.size() != 3 || scores.shape[2] != 1 || scores.shape[0] == 0 || scores.shape[1] == 0)
    return std::string(op) + ": the scores must be (B, T, 1), one per token";
  return expectShape(positions, {scores.shape[0]}, op);
}

// rewards (B) of rows in (chosen, rejected) pairs, float[center >= 0, finite] of a reward_loss or
// its backward (`op`).
std::string checkRewards(const KernelArgs& args, const Tensor& rewards, const char* op) {
  MT_CHECK(checkPairRows(rewards, "the rewards", "chosen, rejected", op));
  if (!args.ints.empty() || args.floats.size() != 1 || !(args.floats[0] >= 0.0f) || !std::isfinite(args.floats[0]))
    return std::string(op) + ": takes float[center], not negative and finite, and no ints";
  return "";
}

// margins (B/2) f32 of a reward_margin_loss or its backward (`op`), one per pair of `rewards`. (Their
// values are the run's, from a token file that checked each to be finite.)
std::string checkMargins(const Tensor& rewards, const Tensor& margins, const char* op) {
  MT_CHECK(expectDType(margins, DType::F32, op));
  if (rewards.shape.size() != 1) return std::string(op) + ": the rewards must be (B)";
  return expectShape(margins, {rewards.shape[0] / 2}, op);
}

}  // namespace

std::string row_score_check(const KernelArgs& args) {
  MT_CHECK(checkRowScores(args.in[0], args.in[1], "row_score"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "row_score rewards"));
  return expectShape(args.out[0], {args.in[0].shape[0]}, "row_score rewards");
}

void row_score_cpu(const KernelArgs& args) {
  const int64_t rows = args.in[0].dim(0), seq = args.in[0].dim(1);
  for (int64_t b = 0; b < rows; ++b) {
    const int32_t t = args.in[1].i32()[b];
    args.out[0].f32()[b] = t >= 0 && t < seq ? args.in[0].f32()[b * seq + t] : NAN;
  }
}

std::string row_score_grad_check(const KernelArgs& args) {
  MT_CHECK(checkRowScores(args.in[1], args.in[2], "row_score_grad"));
  MT_CHECK(expectDType(args.in[0], DType::F32, "row_score_grad drewards"));
  MT_CHECK(expectShape(args.in[0], {args.in[1].shape[0]}, "row_score_grad drewards"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "row_score_grad result"));
  return expectShape(args.out[0], args.in[1].shape, "row_score_grad result");
}

void row_score_grad_cpu(const KernelArgs& args) {
  const int64_t rows = args.in[1].dim(0), seq = args.in[1].dim(1);
  float* dscores = args.out[0].f32();
  std::fill(dscores, dscores + rows * seq, 0.0f);
  for (int64_t b = 0; b < rows; ++b) {
    const int32_t t = args.in[2].i32()[b];
    if (t >= 0 && t < seq) dscores[b * seq + t] = args.in[0].f32()[b];
  }
}

std::string reward_loss_check(const KernelArgs& args) {
  MT_CHECK(checkRewards(args, args.in[0], "reward_loss"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "reward_loss loss"));
  return expectShape(args.out[0], {}, "reward_loss loss");
}

std::string reward_margin_loss_check(const KernelArgs& args) {
  MT_CHECK(checkMargins(args.in[0], args.in[1], "reward_margin_loss"));
  return reward_loss_check(args);
}

// mt.reward_loss and mt.reward_margin_loss (its margins the second input).
void reward_loss_cpu(const KernelArgs& args) {
  const int64_t pairs = args.in[0].dim(0) / 2;
  const float* margins = args.in.size() > 1 ? args.in[1].f32() : nullptr;
  double total = 0.0;
  for (int64_t i = 0; i < pairs; ++i)
    total += rewardPair(args.in[0].f32(), args.floats[0], i, margins ? margins[i] : 0.0).loss;
  args.out[0].f32()[0] = static_cast<float>(total / pairs);
}

std::string reward_loss_grad_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::F32, "reward_loss_grad dloss"));
  MT_CHECK(expectShape(args.in[0], {}, "reward_loss_grad dloss"));
  MT_CHECK(checkRewards(args, args.in[1], "reward_loss_grad"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "reward_loss_grad result"));
  return expectShape(args.out[0], args.in[1].shape, "reward_loss_grad result");
}

std::string reward_margin_loss_grad_check(const KernelArgs& args) {
  MT_CHECK(checkMargins(args.in[1], args.in[2], "reward_margin_loss_grad"));
  return reward_loss_grad_check(args);
}

// mt.reward_loss_grad and mt.reward_margin_loss_grad (its margins the third input).
void reward_loss_grad_cpu(const KernelArgs& args) {
  const int64_t pairs = args.in[1].dim(0) / 2;
  const float* margins = args.in.size() > 2 ? args.in[2].f32() : nullptr;
  const double scale = double(args.in[0].f32()[0]) / pairs;
  float* drewards = args.out[0].f32();
  for (int64_t i = 0; i < pairs; ++i) {
    const DpoPair pair = rewardPair(args.in[1].f32(), args.floats[0], i, margins ? margins[i] : 0.0);
    drewards[2 * i] = static_cast<float>(scale * pair.d_chosen);
    drewards[2 * i + 1] = static_cast<float>(scale * pair.d_rejected);
  }
}

namespace {

// logp and reference (B) of rows in pairs and labels (B/2) of a kto_loss or its backward (`op`),
// float[beta > 0, desirable_weight >= 0, undesirable_weight >= 0].
std::string checkKto(const KernelArgs& args, const Tensor& logp, const Tensor& reference, const Tensor& labels,
                     const char* op) {
  MT_CHECK(checkPairRows(logp, "logp", "an example, its KL row", op));
  MT_CHECK(expectDType(reference, DType::F32, op));
  MT_CHECK(expectDType(labels, DType::F32, op));
  MT_CHECK(expectShape(reference, logp.shape, op));
  MT_CHECK(expectShape(labels, {logp.shape[0] / 2}, op));
  if (!args.ints.empty() || args.floats.size() != 3)
    return std::string(op) + ": takes float[beta, desirable_weight, undesirable_weight] and no ints";
  const float beta = args.floats[0], desirable = args.floats[1], undesirable = args.floats[2];
  if (!(beta > 0.0f) || !std::isfinite(beta) || !(desirable >= 0.0f) || !std::isfinite(desirable) ||
      !(undesirable >= 0.0f) || !std::isfinite(undesirable))
    return std::string(op) + ": beta must be positive and the weights not negative, all finite";
  return "";
}

}  // namespace

std::string kto_loss_check(const KernelArgs& args) {
  MT_CHECK(checkKto(args, args.in[0], args.in[1], args.in[2], "kto_loss"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "kto_loss loss"));
  return expectShape(args.out[0], {}, "kto_loss loss");
}

void kto_loss_cpu(const KernelArgs& args) {
  const int64_t pairs = args.in[0].dim(0) / 2;
  const float *logp = args.in[0].f32(), *reference = args.in[1].f32();
  const KtoParams params = ktoParams(args);
  const double kl = ktoKl(logp, reference, pairs);
  double total = 0.0;
  for (int64_t i = 0; i < pairs; ++i) total += ktoExample(params, logp, reference, args.in[2].f32(), kl, i).loss;
  args.out[0].f32()[0] = static_cast<float>(total / pairs);
}

std::string kto_loss_grad_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::F32, "kto_loss_grad dloss"));
  MT_CHECK(expectShape(args.in[0], {}, "kto_loss_grad dloss"));
  MT_CHECK(checkKto(args, args.in[1], args.in[2], args.in[3], "kto_loss_grad"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "kto_loss_grad result"));
  return expectShape(args.out[0], args.in[1].shape, "kto_loss_grad result");
}

void kto_loss_grad_cpu(const KernelArgs& args) {
  const int64_t pairs = args.in[1].dim(0) / 2;
  const float *logp = args.in[1].f32(), *reference = args.in[2].f32();
  const KtoParams params = ktoParams(args);
  const double kl = ktoKl(logp, reference, pairs), scale = double(args.in[0].f32()[0]) / pairs;
  float* dlogp = args.out[0].f32();
  for (int64_t i = 0; i < pairs; ++i) {
    dlogp[2 * i] = static_cast<float>(scale * ktoExample(params, logp, reference, args.in[3].f32(), kl, i).d_example);
    dlogp[2 * i + 1] = 0.0f;
  }
}

}  // namespace mt
