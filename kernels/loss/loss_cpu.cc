#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/loss/loss.h"
#include "kernels/loss/pair_rows.h"

namespace mt {
namespace {

std::string checkLogitsTargets(const Tensor& logits, const Tensor& targets, const char* op) {
  MT_CHECK(expectDType(logits, DType::F32, op));
  MT_CHECK(expectDType(targets, DType::I32, op));
  MT_CHECK(expectRankAtLeast(logits, 1, op));
  return expectShape(targets, std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1),
                     op);
}

bool validTarget(int32_t t, int64_t vocab) { return t >= 0 && t < vocab; }

// log(sum(exp(x))) of one row of `width`, the sum in double.
float rowLse(const float* x, int64_t width) {
  float max_logit = -INFINITY;
  for (int64_t c = 0; c < width; ++c) max_logit = std::max(max_logit, x[c]);
  double sum = 0.0;
  for (int64_t c = 0; c < width; ++c) sum += std::exp(double(x[c] - max_logit));
  return max_logit + static_cast<float>(std::log(sum));
}

int64_t countValid(const Tensor& targets, int64_t vocab) {
  int64_t count = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) count += validTarget(targets.i32()[i], vocab);
  return count;
}

// dlogits of softmax_xent_grad / xent_chunk_grad / xent_tile_grad / sequence_logprob_grad (args:
// dloss, logits, targets, lse[, count]): the logits' columns are vocabulary ids [first, first +
// width) of a vocabulary of `vocab`; each counted row r's gradient is coeffOf(r) (dloss over the
// counted targets, or minus its sequence's dlogp) times softmax minus one-hot.
template <typename CoeffOf>
void xentGradRows(const KernelArgs& args, CoeffOf coeffOf, int64_t first, int64_t vocab) {
  const Tensor &logits = args.in[1], &targets = args.in[2];
  const float* lse = args.in[3].f32();
  const int64_t width = logits.dim(-1), rows = leadingRows(logits);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits.f32() + r * width;
    float* dx = args.out[0].f32() + r * width;
    const int32_t t = targets.i32()[r];
    if (!validTarget(t, vocab)) {
      std::fill(dx, dx + width, 0.0f);
      continue;
    }
    const float coeff = coeffOf(r);
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) dx[c] = coeff * std::exp(x[c] - lse[r]);
    if (t >= first && t - first < width) dx[t - first] -= coeff;
  }
}

// Each row's log-sum-exp into `lse`; returns the sum of lse - logit[target] over the rows with a
// valid target, in double, serially in row order: the same for any thread count.
double lossSum(const Tensor& logits, const Tensor& targets, float* lse) {
  const int64_t vocab = logits.dim(-1), rows = leadingRows(logits);
  std::vector<double> row_loss(rows, 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits.f32() + r * vocab;
    lse[r] = rowLse(x, vocab);
    const int32_t t = targets.i32()[r];
    if (validTarget(t, vocab)) row_loss[r] = double(lse[r]) - x[t];
  }
  double total = 0.0;
  for (double l : row_loss) total += l;
  return total;
}

// dloss over the targets of `targets` in [0, vocab) (0 when there are none).
float coefficientOverValid(const KernelArgs& args, int64_t vocab) {
  const int64_t count = countValid(args.in[2], vocab);
  return count ? args.in[0].f32()[0] / static_cast<float>(count) : 0.0f;
}

// A loss finished over vocabulary chunks (`op`: xent_finish, sequence_logprob_finish): (running
// (..., 2), targets (...)) -> (f32 `result` shaped, lse (...)), its vocabulary (int 0) positive.
std::string checkFinish(const KernelArgs& args, const std::vector<int64_t>& result, const char* op) {
  const Tensor &running = args.in[0], &targets = args.in[1];
  const auto what = [&](const char* part) { return std::string(op) + " " + part; };
  MT_CHECK(expectDType(running, DType::F32, what("running").c_str()));
  MT_CHECK(expectDType(targets, DType::I32, what("targets").c_str()));
  std::vector<int64_t> want = targets.shape;
  want.push_back(2);
  MT_CHECK(expectShape(running, want, what("running").c_str()));
  MT_CHECK(expectDType(args.out[0], DType::F32, what("result").c_str()));
  MT_CHECK(expectShape(args.out[0], result, what("result").c_str()));
  MT_CHECK(expectDType(args.out[1], DType::F32, what("lse").c_str()));
  MT_CHECK(expectShape(args.out[1], targets.shape, what("lse").c_str()));
  if (args.ints[0] <= 0) return std::string(op) + ": the vocabulary must be positive";
  return "";
}

// A count operand (xent_tile's, xent_tile_grad's): an f32 scalar.
std::string checkCount(const Tensor& count, const char* what) {
  MT_CHECK(expectDType(count, DType::F32, what));
  return expectShape(count, {}, what);
}

// dloss over the whole batch's counted targets, from xent_tile_grad's count (0 when it is 0).
float coefficientOverCount(const KernelArgs& args) {
  const float count = args.in[4].f32()[0];
  return count > 0.0f ? args.in[0].f32()[0] / count : 0.0f;
}

}  // namespace

std::string softmax_xent_check(const KernelArgs& args) {
  const Tensor &logits = args.in[0], &targets = args.in[1];
  MT_CHECK(checkLogitsTargets(logits, targets, "softmax_xent"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "softmax_xent loss"));
  MT_CHECK(expectShape(args.out[0], {}, "softmax_xent loss"));
  MT_CHECK(expectDType(args.out[1], DType::F32, "softmax_xent lse"));
  return expectShape(args.out[1], targets.shape, "softmax_xent lse");
}

void softmax_xent_cpu(const KernelArgs& args) {
  const Tensor &logits = args.in[0], &targets = args.in[1];
  const double total = lossSum(logits, targets, args.out[1].f32());
  const int64_t count = countValid(targets, logits.dim(-1));
  args.out[0].f32()[0] = count ? static_cast<float>(total / count) : 0.0f;
}

std::string softmax_xent_grad_check(const KernelArgs& args) {
  const Tensor &logits = args.in[1], &targets = args.in[2];
  MT_CHECK(expectDType(args.in[0], DType::F32, "softmax_xent_grad dloss"));
  MT_CHECK(expectShape(args.in[0], {}, "softmax_xent_grad dloss"));
  MT_CHECK(checkLogitsTargets(logits, targets, "softmax_xent_grad"));
  MT_CHECK(expectDType(args.in[3], DType::F32, "softmax_xent_grad lse"));
  MT_CHECK(expectShape(args.in[3], targets.shape, "softmax_xent_grad lse"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "softmax_xent_grad result"));
  return expectShape(args.out[0], logits.shape, "softmax_xent_grad result");
}

void softmax_xent_grad_cpu(const KernelArgs& args) {
  const int64_t vocab = args.in[1].dim(-1);
  const float coeff = coefficientOverValid(args, vocab);
  xentGradRows(args, [=](int64_t) { return coeff; }, /*first=*/0, vocab);
}

std::string xent_chunk_check(const KernelArgs& args) {
  const Tensor &logits = args.in[0], &targets = args.in[1];
  MT_CHECK(checkLogitsTargets(logits, targets, "xent_chunk"));
  std::vector<int64_t> running = targets.shape;
  running.push_back(2);
  MT_CHECK(expectDType(args.in[2], DType::F32, "xent_chunk running"));
  MT_CHECK(expectShape(args.in[2], running, "xent_chunk running"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "xent_chunk result"));
  MT_CHECK(expectShape(args.out[0], running, "xent_chunk result"));
  if (args.ints[0] < 0) return "xent_chunk: the chunk's first vocabulary id must not be negative";
  return "";
}

void xent_chunk_cpu(const KernelArgs& args) {
  const Tensor &logits = args.in[0], &targets = args.in[1];
  const int64_t width = logits.dim(-1), rows = leadingRows(logits), first = args.ints[0];
  const float* in = args.in[2].f32();
  float* out = args.out[0].f32();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits.f32() + r * width;
    const float chunk_lse = rowLse(x, width);
    const float so_far = in[2 * r], target_logit = in[2 * r + 1];
    const float m = std::max(so_far, chunk_lse);
    out[2 * r] = so_far == -INFINITY ? chunk_lse
                                     : m + static_cast<float>(std::log(std::exp(double(so_far - m)) +
                                                                       std::exp(double(chunk_lse - m))));
    const int64_t t = targets.i32()[r] - first;
    out[2 * r + 1] = t >= 0 && t < width ? x[t] : target_logit;
  }
}

std::string xent_finish_check(const KernelArgs& args) { return checkFinish(args, {}, "xent_finish"); }

void xent_finish_cpu(const KernelArgs& args) {
  const Tensor &running = args.in[0], &targets = args.in[1];
  const int64_t rows = targets.numel(), vocab = args.ints[0];
  float* lse = args.out[1].f32();
  double total = 0.0;  // serially, in row order, as softmax_xent
  for (int64_t r = 0; r < rows; ++r) {
    lse[r] = running.f32()[2 * r];
    if (validTarget(targets.i32()[r], vocab)) total += double(lse[r]) - running.f32()[2 * r + 1];
  }
  const int64_t count = countValid(targets, vocab);
  args.out[0].f32()[0] = count ? static_cast<float>(total / count) : 0.0f;
}

std::string xent_chunk_grad_check(const KernelArgs& args) {
  MT_CHECK(softmax_xent_grad_check(args));
  if (args.ints[0] < 0 || args.ints[1] <= 0)
    return "xent_chunk_grad: the first vocabulary id must not be negative and the vocabulary must be positive";
  return "";
}

void xent_chunk_grad_cpu(const KernelArgs& args) {
  const float coeff = coefficientOverValid(args, args.ints[1]);
  xentGradRows(args, [=](int64_t) { return coeff; }, args.ints[0], args.ints[1]);
}

std::string count_targets_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::I32, "count_targets targets"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "count_targets result"));
  MT_CHECK(expectShape(args.out[0], {}, "count_targets result"));
  if (args.ints[0] <= 0) return "count_targets: the vocabulary must be positive";
  return "";
}

void count_targets_cpu(const KernelArgs& args) {
  args.out[0].f32()[0] = static_cast<float>(countValid(args.in[0], args.ints[0]));
}

std::string xent_tile_check(const KernelArgs& args) {
  MT_CHECK(softmax_xent_check(args));  // logits, targets, loss, lse as softmax_xent's
  return checkCount(args.in[2], "xent_tile count");
}

void xent_tile_cpu(const KernelArgs& args) {
  const double total = lossSum(args.in[0], args.in[1], args.out[1].f32());
  const float count = args.in[2].f32()[0];
  args.out[0].f32()[0] = count > 0.0f ? static_cast<float>(total / count) : 0.0f;
}

std::string xent_tile_grad_check(const KernelArgs& args) {
  MT_CHECK(softmax_xent_grad_check(args));
  return checkCount(args.in[4], "xent_tile_grad count");
}

void xent_tile_grad_cpu(const KernelArgs& args) {
  const float coeff = coefficientOverCount(args);
  xentGradRows(args, [=](int64_t) { return coeff; }, /*first=*/0, args.in[1].dim(-1));
}

namespace {

// logits (B, T, V) and targets (B, T) of a sequence_logprob or its backward (`op`).
std::string checkSequences(const Tensor& logits, const Tensor& targets, const char* op) {
  MT_CHECK(checkLogitsTargets(logits, targets, op));
  if (logits.shape.size() != 3) return std::string(op) + ": the logits must be (B, T, V)";
  return "";
}

// Each sequence's sum over its valid targets of targetLogit(r, t) - lse[r], in double, in token
// order; with `average`, over its count of them (0 where it has none): mt.sequence_logprob's,
// and its finish over vocabulary chunks.
template <typename TargetLogit>
void sequenceSums(const Tensor& targets, const float* lse, int64_t vocab, bool average, TargetLogit targetLogit,
                  float* logp) {
  const int64_t rows = targets.dim(0), seq = targets.dim(1);
  for (int64_t b = 0; b < rows; ++b) {
    double sum = 0.0;
    int64_t count = 0;
    for (int64_t r = b * seq; r < (b + 1) * seq; ++r) {
      const int32_t t = targets.i32()[r];
      if (!validTarget(t, vocab)) continue;
      sum += double(targetLogit(r, t)) - lse[r];
      ++count;
    }
    logp[b] = static_cast<float>(average ? (count ? sum / count : 0.0) : sum);
  }
}

// dlogits of sequence_logprob_grad and its chunks' (args: dlogp, logits (B, T, Vc), targets,
// lse): d logp / d logits = one-hot - softmax, softmax_xent's rows with coefficient -dlogp (with
// `average`, over the row's count of valid targets, in float as the CUDA twin divides).
void sequenceGradRows(const KernelArgs& args, int64_t first, int64_t vocab, bool average) {
  const Tensor& targets = args.in[2];
  const int64_t rows = targets.dim(0), seq = std::max<int64_t>(targets.dim(1), 1);
  std::vector<float> coeff(rows);
  for (int64_t b = 0; b < rows; ++b) {
    int64_t count = 0;
    for (int64_t r = b * seq; average && r < (b + 1) * seq; ++r) count += validTarget(targets.i32()[r], vocab);
    coeff[b] = average && count ? -args.in[0].f32()[b] / static_cast<float>(count) : -args.in[0].f32()[b];
  }
  xentGradRows(args, [&](int64_t r) { return coeff[r / seq]; }, first, vocab);
}

// dlogp (B), logits (B, T, Vc), targets (B, T), lse (B, T) -> dlogits of a sequence_logprob_grad
// or a chunk's (`op`).
std::string checkSequenceGrad(const KernelArgs& args, const char* op) {
  const Tensor &logits = args.in[1], &targets = args.in[2];
  MT_CHECK(checkSequences(logits, targets, op));
  MT_CHECK(expectDType(args.in[0], DType::F32, op));
  MT_CHECK(expectShape(args.in[0], {logits.shape[0]}, op));
  MT_CHECK(expectDType(args.in[3], DType::F32, op));
  MT_CHECK(expectShape(args.in[3], targets.shape, op));
  MT_CHECK(expectDType(args.out[0], DType::F32, op));
  return expectShape(args.out[0], logits.shape, op);
}

// The int attributes of a sequence sum's kernel (`op`): `leading` of its own, then whether the
// sums are averages (0 or 1), which sequence_logprob(_grad) may leave out (plan 1.23: sums).
std::string checkAverageAttr(const KernelArgs& args, size_t leading, bool optional, const char* op) {
  const size_t n = args.ints.size();
  if (n != leading + 1 && !(optional && n == leading))
    return std::string(op) + ": takes " + std::to_string(leading) + " int attributes then average (0 or 1), not " +
           std::to_string(n);
  if (n == leading + 1 && args.ints[leading] != 0 && args.ints[leading] != 1)
    return std::string(op) + ": average must be 0 or 1";
  return "";
}

// logp and reference (B) of a dpo_loss or its backward (`op`): an even B > 0, the pairs' rows;
// its kind, beta > 0 and label smoothing in [0, 1/2] (below for the robust loss; a kind without
// smoothing ignores it, as mtc refuses it there), a third float only for the kinds that take one.
std::string checkPairs(const KernelArgs& args, const Tensor& logp, const Tensor& reference, const char* op) {
  MT_CHECK(checkPairRows(logp, "logp", "chosen, rejected", op));
  MT_CHECK(expectDType(reference, DType::F32, op));
  MT_CHECK(expectShape(reference, logp.shape, op));
  if (args.ints.size() != 1 || args.floats.size() < 2 || args.floats.size() > 3)
    return std::string(op) + ": takes int[kind] and float[beta, label_smoothing(, gamma or tau)]";
  const int64_t kind = args.ints[0];
  const float beta = args.floats[0], smoothing = args.floats[1];
  if (kind < 0 || kind >= kDpoLossKinds) return std::string(op) + ": kind " + std::to_string(kind) + " is not a loss";
  if (args.floats.size() == 3 && (!dpoHasThirdFloat(kind) || !std::isfinite(args.floats[2]) ||
                                  (kind == static_cast<int64_t>(DpoLossKind::kDiscopop) && !(args.floats[2] > 0.0f))))
    return std::string(op) + ": a third float is the simpo kind's gamma (finite) or the discopop kind's tau (positive)";
  if (args.floats.size() == 2 && kind == static_cast<int64_t>(DpoLossKind::kDiscopop))
    return std::string(op) + ": the discopop kind takes its tau, a third float";
  if (!(beta > 0.0f) || !(smoothing >= 0.0f && smoothing <= 0.5f) ||
      (kind == static_cast<int64_t>(DpoLossKind::kRobust) && smoothing == 0.5f))
    return std::string(op) + ": beta must be positive and the label smoothing in [0, 1/2] (the robust loss: below)";
  return "";
}

}  // namespace

std::string sequence_logprob_check(const KernelArgs& args) {
  const Tensor &logits = args.in[0], &targets = args.in[1];
  MT_CHECK(checkSequences(logits, targets, "sequence_logprob"));
  MT_CHECK(checkAverageAttr(args, 0, /*optional=*/true, "sequence_logprob"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "sequence_logprob logp"));
  MT_CHECK(expectShape(args.out[0], {logits.shape[0]}, "sequence_logprob logp"));
  MT_CHECK(expectDType(args.out[1], DType::F32, "sequence_logprob lse"));
  return expectShape(args.out[1], targets.shape, "sequence_logprob lse");
}

void sequence_logprob_cpu(const KernelArgs& args) {
  const Tensor &logits = args.in[0], &targets = args.in[1];
  const int64_t rows = logits.dim(0), seq = logits.dim(1), vocab = logits.dim(2);
  float* lse = args.out[1].f32();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows * seq; ++r) lse[r] = rowLse(logits.f32() + r * vocab, vocab);
  const float* x = logits.f32();
  sequenceSums(targets, lse, vocab, sequenceAverages(args, 0), [=](int64_t r, int32_t t) { return x[r * vocab + t]; },
               args.out[0].f32());
}

std::string sequence_logprob_grad_check(const KernelArgs& args) {
  MT_CHECK(checkSequenceGrad(args, "sequence_logprob_grad"));
  return checkAverageAttr(args, 0, /*optional=*/true, "sequence_logprob_grad");
}

void sequence_logprob_grad_cpu(const KernelArgs& args) {
  sequenceGradRows(args, /*first=*/0, args.in[1].dim(2), sequenceAverages(args, 0));
}

std::string sequence_logprob_finish_check(const KernelArgs& args) {
  const Tensor& targets = args.in[1];
  MT_CHECK(checkAverageAttr(args, 1, /*optional=*/false, "sequence_logprob_finish"));
  if (targets.shape.size() != 2) return "sequence_logprob_finish: the targets must be (B, T)";
  return checkFinish(args, {targets.shape[0]}, "sequence_logprob_finish");
}

void sequence_logprob_finish_cpu(const KernelArgs& args) {
  const float* running = args.in[0].f32();
  float* lse = args.out[1].f32();
  for (int64_t r = 0; r < args.in[1].numel(); ++r) lse[r] = running[2 * r];
  sequenceSums(args.in[1], lse, args.ints[0], sequenceAverages(args, 1),
               [=](int64_t r, int32_t) { return running[2 * r + 1]; }, args.out[0].f32());
}

std::string sequence_logprob_chunk_grad_check(const KernelArgs& args) {
  MT_CHECK(checkAverageAttr(args, 2, /*optional=*/false, "sequence_logprob_chunk_grad"));
  MT_CHECK(checkSequenceGrad(args, "sequence_logprob_chunk_grad"));
  if (args.ints[0] < 0 || args.ints[1] <= 0)
    return "sequence_logprob_chunk_grad: the first vocabulary id must not be negative and the vocabulary must be "
           "positive";
  return "";
}

void sequence_logprob_chunk_grad_cpu(const KernelArgs& args) {
  sequenceGradRows(args, args.ints[0], args.ints[1], sequenceAverages(args, 2));
}

std::string dpo_loss_check(const KernelArgs& args) {
  MT_CHECK(checkPairs(args, args.in[0], args.in[1], "dpo_loss"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "dpo_loss loss"));
  return expectShape(args.out[0], {}, "dpo_loss loss");
}

void dpo_loss_cpu(const KernelArgs& args) {
  const int64_t pairs = args.in[0].dim(0) / 2;
  const DpoLossParams params = dpoLossParams(args);
  double total = 0.0;
  for (int64_t i = 0; i < pairs; ++i)
    total += dpoBatchPair(params, args.in[0].f32(), args.in[1].f32(), pairs, i).loss;
  args.out[0].f32()[0] = static_cast<float>(total / pairs);
}

std::string dpo_loss_grad_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::F32, "dpo_loss_grad dloss"));
  MT_CHECK(expectShape(args.in[0], {}, "dpo_loss_grad dloss"));
  MT_CHECK(checkPairs(args, args.in[1], args.in[2], "dpo_loss_grad"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "dpo_loss_grad result"));
  return expectShape(args.out[0], args.in[1].shape, "dpo_loss_grad result");
}

void dpo_loss_grad_cpu(const KernelArgs& args) {
  const int64_t pairs = args.in[1].dim(0) / 2;
  const DpoLossParams params = dpoLossParams(args);
  const double dloss = args.in[0].f32()[0];
  float* dlogp = args.out[0].f32();
  for (int64_t i = 0; i < pairs; ++i) {
    const DpoPair pair = dpoBatchPair(params, args.in[1].f32(), args.in[2].f32(), pairs, i);
    dlogp[2 * i] = static_cast<float>(dloss / pairs * pair.d_chosen);
    dlogp[2 * i + 1] = static_cast<float>(dloss / pairs * pair.d_rejected);
  }
}

namespace {

// logp (B) of rows in pairs and targets (B, T) of a pair_nll or its backward (`op`), int[vocab,
// average] float[alpha].
std::string checkPairNll(const KernelArgs& args, const Tensor& logp, const Tensor& targets, const char* op) {
  MT_CHECK(checkAverageAttr(args, 1, /*optional=*/false, op));
  MT_CHECK(expectDType(logp, DType::F32, op));
  MT_CHECK(expectDType(targets, DType::I32, op));
  if (logp.shape.size() != 1 || logp.shape[0] == 0 || logp.shape[0] % 2 != 0 || targets.shape.size() != 2 ||
      targets.shape[0] != logp.shape[0])
    return std::string(op) + ": logp must be (B) of an even B > 0 and the targets (B, T)";
  if (args.ints[0] <= 0 || args.floats.size() != 1 || !std::isfinite(args.floats[0]))
    return std::string(op) + ": takes a positive vocabulary and a finite alpha";
  return "";
}

// The chosen rows' summed log-probabilities' total and their count of targets (mt.pair_nll's).
std::pair<double, int64_t> chosenLikelihood(const KernelArgs& args, const Tensor& logp, const Tensor& targets) {
  const int64_t seq = targets.dim(1), vocab = args.ints[0];
  const bool average = sequenceAverages(args, 1);
  double total = 0.0;
  int64_t tokens = 0;
  for (int64_t b = 0; b < logp.dim(0); b += 2) {
    const int64_t n = rowTargets(targets.i32(), b, seq, vocab);
    total += average ? double(logp.f32()[b]) * n : double(logp.f32()[b]);
    tokens += n;
  }
  return {total, tokens};
}

}  // namespace

std::string pair_nll_check(const KernelArgs& args) {
  MT_CHECK(checkPairNll(args, args.in[0], args.in[1], "pair_nll"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "pair_nll loss"));
  return expectShape(args.out[0], {}, "pair_nll loss");
}

void pair_nll_cpu(const KernelArgs& args) {
  const auto [total, tokens] = chosenLikelihood(args, args.in[0], args.in[1]);
  args.out[0].f32()[0] = tokens ? static_cast<float>(-double(args.floats[0]) * total / double(tokens)) : 0.0f;
}

std::string pair_nll_grad_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::F32, "pair_nll_grad dloss"));
  MT_CHECK(expectShape(args.in[0], {}, "pair_nll_grad dloss"));
  MT_CHECK(checkPairNll(args, args.in[1], args.in[2], "pair_nll_grad"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "pair_nll_grad result"));
  return expectShape(args.out[0], args.in[1].shape, "pair_nll_grad result");
}

void pair_nll_grad_cpu(const KernelArgs& args) {
  const Tensor &logp = args.in[1], &targets = args.in[2];
  const int64_t seq = targets.dim(1), vocab = args.ints[0];
  const int64_t tokens = chosenLikelihood(args, logp, targets).second;
  const double scale = tokens ? -double(args.in[0].f32()[0]) * args.floats[0] / double(tokens) : 0.0;
  float* dlogp = args.out[0].f32();
  for (int64_t b = 0; b < logp.dim(0); ++b)
    dlogp[b] = b % 2 ? 0.0f
                     : static_cast<float>(scale * (sequenceAverages(args, 1)
                                                       ? double(rowTargets(targets.i32(), b, seq, vocab))
                                                       : 1.0));
}

}  // namespace mt
