// CUDA twins of the cross-entropy loss; kernels/loss/loss_cpu.cc is the reference. One block
// per row of logits; the mean over rows is one more block, in row order (deterministic).
#include "kernels/cuda_common.cuh"
#include "kernels/loss/loss.h"

namespace mt {
namespace {

using cuda::blockMax;
using cuda::blockSum;
using cuda::data;
using cuda::fromFloat;
using cuda::kThreads;
using cuda::toFloat;
using cuda::withFloat;

constexpr int kRowThreads = 512;

__device__ bool validTarget(int32_t t, int64_t vocab) { return t >= 0 && t < vocab; }

// log(sum(exp(x))) of one row of `width`, by the whole block (every thread gets it). Logits
// are f32 or bf16 (T); the log-sum-exp, the loss and the running state are f32.
template <typename T>
__device__ float blockRowLse(const T* __restrict__ x, int64_t width) {
  float max_logit = -INFINITY;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) max_logit = fmaxf(max_logit, toFloat(x[c]));
  max_logit = blockMax(max_logit);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) sum += expf(toFloat(x[c]) - max_logit);
  return max_logit + logf(blockSum(sum));
}

template <typename T>
__global__ void rowLogSumExp(const T* __restrict__ logits, float* __restrict__ lse, int64_t vocab) {
  const float row_lse = blockRowLse(logits + blockIdx.x * vocab, vocab);
  if (threadIdx.x == 0) lse[blockIdx.x] = row_lse;
}

// loss = sum over rows with a valid target of lse - x[target], over their count — or, for a
// token tile (mt.xent_tile), over `divisor` (the whole batch's count); one block.
template <typename T>
__global__ void meanLoss(const T* __restrict__ logits, const int32_t* __restrict__ targets,
                         const float* __restrict__ lse, float* __restrict__ loss, int64_t rows, int64_t vocab,
                         const float* __restrict__ divisor) {
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const int32_t t = targets[r];
    if (!validTarget(t, vocab)) continue;
    total += double(lse[r]) - toFloat(logits[r * vocab + t]);
    ++count;
  }
  total = blockSum(total);
  count = blockSum(count);
  if (threadIdx.x != 0) return;
  if (divisor) loss[0] = *divisor > 0.0f ? static_cast<float>(total / *divisor) : 0.0f;
  else loss[0] = count ? static_cast<float>(total / count) : 0.0f;
}

// The targets in [0, vocab) as an f32 scalar (mt.count_targets); one block.
__global__ void countTargets(const int32_t* __restrict__ targets, float* __restrict__ count, int64_t n,
                             int64_t vocab) {
  int64_t c = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) c += validTarget(targets[i], vocab);
  c = blockSum(c);
  if (threadIdx.x == 0) count[0] = static_cast<float>(c);
}

// dlogits row = coeff * softmax(row) - coeff * onehot(target), coeff = dloss / valid rows; the
// row's `width` columns are vocabulary ids [first, first + width) of `vocab`.
// Every block counts the valid targets itself (the plan gives the kernel no scratch memory: rows
// reads of the targets per block, which a large batch feels), unless the count is given
// (`divisor`: mt.xent_tile_grad's, the whole batch's, computed once by mt.count_targets).
// Each element is stored once (a bf16 dlogit rounded once, as the CPU's).
// With `dlogp` (mt.sequence_logprob_grad: one-hot minus softmax), row r's coefficient is minus
// its sequence's, dlogp[r / seq] (with `average`, over the sequence's count of valid targets, which
// each block counts).
template <typename T>
__global__ void xentGrad(const float* __restrict__ dloss, const T* __restrict__ logits,
                         const int32_t* __restrict__ targets, const float* __restrict__ lse, T* __restrict__ dlogits,
                         int64_t rows, int64_t width, int64_t first, int64_t vocab, const float* __restrict__ divisor,
                         const float* __restrict__ dlogp, int64_t seq, bool average) {
  float coeff;
  if (dlogp) {
    const int64_t b = blockIdx.x / seq;
    float d = dlogp[b];
    if (average) {
      int64_t count = 0;
      for (int64_t r = b * seq + threadIdx.x; r < (b + 1) * seq; r += blockDim.x) count += validTarget(targets[r], vocab);
      count = blockSum(count);
      if (count) d /= static_cast<float>(count);
    }
    coeff = -d;
  } else if (divisor) {
    coeff = *divisor > 0.0f ? dloss[0] / *divisor : 0.0f;
  } else {
    int64_t count = 0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) count += validTarget(targets[r], vocab);
    count = blockSum(count);
    coeff = count ? dloss[0] / static_cast<float>(count) : 0.0f;
  }
  const int64_t r = blockIdx.x;
  const T* x = logits + r * width;
  T* dx = dlogits + r * width;
  const int32_t t = targets[r];
  const bool valid = validTarget(t, vocab);
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    float d = valid ? coeff * expf(toFloat(x[c]) - lse[r]) : 0.0f;
    if (valid && c == t - first) d -= coeff;
    dx[c] = fromFloat<T>(d);
  }
}

// Each sequence's sum over its valid targets of logit[target] - lse (with `average`, over their
// count; 0 where there are none); one block per sequence. With `running`
// (mt.sequence_logprob_finish: the vocabulary chunks' state), the target's logit is
// running[2r + 1] and lse[r] is written from running[2r] first.
template <typename T>
__global__ void sequenceSums(const T* __restrict__ logits, const int32_t* __restrict__ targets, float* __restrict__ lse,
                             float* __restrict__ logp, int64_t seq, int64_t vocab, const float* __restrict__ running,
                             bool average) {
  const int64_t first_row = blockIdx.x * seq;
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t r = first_row + threadIdx.x; r < first_row + seq; r += blockDim.x) {
    if (running) lse[r] = running[2 * r];
    const int32_t t = targets[r];
    if (!validTarget(t, vocab)) continue;
    const float logit = running ? running[2 * r + 1] : toFloat(logits[r * vocab + t]);
    sum += double(logit) - lse[r];
    ++count;
  }
  sum = blockSum(sum);
  count = blockSum(count);
  if (threadIdx.x == 0) logp[blockIdx.x] = static_cast<float>(average ? (count ? sum / count : 0.0) : sum);
}

// mt.dpo_loss: the mean over the pairs of dpoBatchPair's losses; one block.
__global__ void dpoLoss(const float* __restrict__ logp, const float* __restrict__ reference, float* __restrict__ loss,
                        int64_t pairs, DpoLossParams params) {
  double total = 0.0;
  for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x)
    total += dpoBatchPair(params, logp, reference, pairs, i).loss;
  total = blockSum(total);
  if (threadIdx.x == 0) loss[0] = static_cast<float>(total / pairs);
}

// mt.dpo_loss_grad: dlogp[2i] = dloss / pairs times the pair's loss's derivative in it, dlogp[2i + 1]
// alike.
__global__ void dpoLossGrad(const float* __restrict__ dloss, const float* __restrict__ logp,
                            const float* __restrict__ reference, float* __restrict__ dlogp, int64_t pairs,
                            DpoLossParams params) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < pairs; i += int64_t(gridDim.x) * blockDim.x) {
    const DpoPair pair = dpoBatchPair(params, logp, reference, pairs, i);
    dlogp[2 * i] = static_cast<float>(double(dloss[0]) / pairs * pair.d_chosen);
    dlogp[2 * i + 1] = static_cast<float>(double(dloss[0]) / pairs * pair.d_rejected);
  }
}

// mt.kto_loss (`dlogp` null) or its backward; one block: the micro-batch's KL estimate (each thread
// sums the KL rows itself, as few as a batch's examples), then each example's loss or derivative.
__global__ void ktoLoss(const float* __restrict__ logp, const float* __restrict__ reference,
                        const float* __restrict__ labels, float* __restrict__ loss, const float* __restrict__ dloss,
                        float* __restrict__ dlogp, int64_t pairs, KtoParams params) {
  const double kl = ktoKl(logp, reference, pairs);
  if (dlogp) {
    const double scale = double(dloss[0]) / pairs;
    for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
      dlogp[2 * i] = static_cast<float>(scale * ktoExample(params, logp, reference, labels, kl, i).d_example);
      dlogp[2 * i + 1] = 0.0f;
    }
    return;
  }
  double total = 0.0;
  for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x)
    total += ktoExample(params, logp, reference, labels, kl, i).loss;
  total = blockSum(total);
  if (threadIdx.x == 0) loss[0] = static_cast<float>(total / pairs);
}

// mt.row_score: rewards[b] = scores[b, positions[b]] (NaN for a position outside the row, as the
// CPU's); one thread per row.
__global__ void rowScore(const float* __restrict__ scores, const int32_t* __restrict__ positions,
                         float* __restrict__ rewards, int64_t rows, int64_t seq) {
  for (int64_t b = blockIdx.x * blockDim.x + threadIdx.x; b < rows; b += int64_t(gridDim.x) * blockDim.x) {
    const int32_t t = positions[b];
    rewards[b] = t >= 0 && t < seq ? scores[b * seq + t] : __int_as_float(0x7fc00000);  // a quiet NaN
  }
}

// mt.row_score_grad: dscores zero but drewards[b] at each row's position; one thread per element.
__global__ void rowScoreGrad(const float* __restrict__ drewards, const int32_t* __restrict__ positions,
                             float* __restrict__ dscores, int64_t rows, int64_t seq) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < rows * seq; i += int64_t(gridDim.x) * blockDim.x)
    dscores[i] = i % seq == positions[i / seq] ? drewards[i / seq] : 0.0f;
}

// mt.reward_loss (`drewards` null) or its backward, with each pair's margin where `margins` is not
// null (mt.reward_margin_loss); one block: rewardPair's losses summed, or each pair's derivatives.
__global__ void rewardLoss(const float* __restrict__ rewards, const float* __restrict__ margins,
                           float* __restrict__ loss, const float* __restrict__ dloss, float* __restrict__ drewards,
                           int64_t pairs, double center) {
  if (drewards) {
    const double scale = double(dloss[0]) / pairs;
    for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
      const DpoPair pair = rewardPair(rewards, center, i, margins ? margins[i] : 0.0);
      drewards[2 * i] = static_cast<float>(scale * pair.d_chosen);
      drewards[2 * i + 1] = static_cast<float>(scale * pair.d_rejected);
    }
    return;
  }
  double total = 0.0;
  for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x)
    total += rewardPair(rewards, center, i, margins ? margins[i] : 0.0).loss;
  total = blockSum(total);
  if (threadIdx.x == 0) loss[0] = static_cast<float>(total / pairs);
}

// mt.pair_nll (`dlogp` null) or its backward; one block: the chosen rows' summed log-probabilities
// (means times their counts with `average`) and counts of targets, then the loss or dlogp.
__global__ void pairNll(const float* __restrict__ logp, const int32_t* __restrict__ targets, float* __restrict__ loss,
                        const float* __restrict__ dloss, float* __restrict__ dlogp, int64_t rows, int64_t seq,
                        int64_t vocab, bool average, float alpha) {
  double total = 0.0;
  int64_t tokens = 0;
  for (int64_t b = 2 * threadIdx.x; b < rows; b += 2 * blockDim.x) {
    const int64_t n = rowTargets(targets, b, seq, vocab);
    total += average ? double(logp[b]) * n : double(logp[b]);
    tokens += n;
  }
  total = blockSum(total);
  tokens = blockSum(tokens);
  if (!dlogp) {
    if (threadIdx.x == 0) loss[0] = tokens ? static_cast<float>(-double(alpha) * total / double(tokens)) : 0.0f;
    return;
  }
  const double scale = tokens ? -double(dloss[0]) * alpha / double(tokens) : 0.0;
  for (int64_t b = threadIdx.x; b < rows; b += blockDim.x)
    dlogp[b] = b % 2 ? 0.0f : static_cast<float>(scale * (average ? double(rowTargets(targets, b, seq, vocab)) : 1.0));
}

// One block per row: folds the chunk's log-sum-exp into the running one, takes the target's
// logit if the chunk holds it.
template <typename T>
__global__ void xentChunk(const T* __restrict__ logits, const int32_t* __restrict__ targets,
                          const float* __restrict__ in, float* __restrict__ out, int64_t width, int64_t first) {
  const int64_t r = blockIdx.x;
  const T* x = logits + r * width;
  const float chunk_lse = blockRowLse(x, width);
  if (threadIdx.x != 0) return;
  const float so_far = in[2 * r];
  const float m = fmaxf(so_far, chunk_lse);
  out[2 * r] = so_far == -INFINITY ? chunk_lse : m + logf(expf(so_far - m) + expf(chunk_lse - m));
  const int64_t t = targets[r] - first;
  out[2 * r + 1] = t >= 0 && t < width ? toFloat(x[t]) : in[2 * r + 1];
}

// loss = mean over rows with a valid target of lse - target logit, lse = running's first
// column; one block.
__global__ void xentFinish(const float* __restrict__ running, const int32_t* __restrict__ targets,
                           float* __restrict__ loss, float* __restrict__ lse, int64_t rows, int64_t vocab) {
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    lse[r] = running[2 * r];
    if (!validTarget(targets[r], vocab)) continue;
    total += double(running[2 * r]) - running[2 * r + 1];
    ++count;
  }
  total = blockSum(total);
  count = blockSum(count);
  if (threadIdx.x == 0) loss[0] = count ? static_cast<float>(total / count) : 0.0f;
}

unsigned rowGrid(int64_t rows) { return cuda::gridBlocks(rows, "softmax_xent"); }  // a block per row

}  // namespace

// softmax_xent, or xent_tile with `divisor` its count (args: logits, targets[, count]).
static void launchXentLoss(const KernelArgs& args, const CudaLaunch& launch, const float* divisor) {
  const Tensor &logits = args.in[0], &targets = args.in[1];
  const int64_t vocab = logits.dim(-1), rows = leadingRows(logits);
  withFloat(logits.dtype, [&](auto type) {
    using T = decltype(type);
    if (rows > 0 && vocab > 0) {
      rowLogSumExp<<<rowGrid(rows), kRowThreads, 0, launch.stream>>>(data<const T>(logits), args.out[1].f32(), vocab);
      MT_CUDA_CHECK_LAUNCH();
    }
    meanLoss<<<1, 1024, 0, launch.stream>>>(data<const T>(logits), targets.i32(), args.out[1].f32(), args.out[0].f32(),
                                            rows, vocab, divisor);
  });
  MT_CUDA_CHECK_LAUNCH();
}

void softmax_xent_cuda(const KernelArgs& args, const CudaLaunch& launch) { launchXentLoss(args, launch, nullptr); }

void xent_tile_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchXentLoss(args, launch, args.in[2].f32());
}

void count_targets_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  countTargets<<<1, 1024, 0, launch.stream>>>(args.in[0].i32(), args.out[0].f32(), args.in[0].numel(), args.ints[0]);
  MT_CUDA_CHECK_LAUNCH();
}

// dlogits of softmax_xent_grad / xent_chunk_grad / xent_tile_grad (args: dloss, logits, targets,
// lse[, count]: `divisor`).
static void launchXentGrad(const KernelArgs& args, const CudaLaunch& launch, int64_t first, int64_t vocab,
                           const float* divisor = nullptr, const float* dlogp = nullptr, int64_t seq = 1,
                           bool average = false) {
  const Tensor &logits = args.in[1], &targets = args.in[2];
  const int64_t width = logits.dim(-1), rows = leadingRows(logits);
  if (rows == 0 || width == 0) return;
  withFloat(logits.dtype, [&](auto type) {
    using T = decltype(type);
    xentGrad<<<rowGrid(rows), kRowThreads, 0, launch.stream>>>(args.in[0].f32(), data<const T>(logits), targets.i32(),
                                                               args.in[3].f32(), data<T>(args.out[0]), rows, width,
                                                               first, vocab, divisor, dlogp, seq, average);
  });
  MT_CUDA_CHECK_LAUNCH();
}

void softmax_xent_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchXentGrad(args, launch, 0, args.in[1].dim(-1));
}

void xent_chunk_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchXentGrad(args, launch, args.ints[0], args.ints[1]);
}

void xent_tile_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  launchXentGrad(args, launch, 0, args.in[1].dim(-1), args.in[4].f32());
}

void xent_chunk_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& logits = args.in[0];
  const int64_t width = logits.dim(-1), rows = leadingRows(logits);
  if (rows == 0 || width == 0) return;
  withFloat(logits.dtype, [&](auto type) {
    using T = decltype(type);
    xentChunk<<<rowGrid(rows), kRowThreads, 0, launch.stream>>>(data<const T>(logits), args.in[1].i32(),
                                                                args.in[2].f32(), args.out[0].f32(), width,
                                                                args.ints[0]);
  });
  MT_CUDA_CHECK_LAUNCH();
}

void xent_finish_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& targets = args.in[1];
  xentFinish<<<1, 1024, 0, launch.stream>>>(args.in[0].f32(), targets.i32(), args.out[0].f32(), args.out[1].f32(),
                                            targets.numel(), args.ints[0]);
  MT_CUDA_CHECK_LAUNCH();
}

void sequence_logprob_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &logits = args.in[0], &targets = args.in[1];
  const int64_t rows = logits.dim(0), seq = logits.dim(1), vocab = logits.dim(2);
  if (rows == 0) return;
  withFloat(logits.dtype, [&](auto type) {
    using T = decltype(type);
    if (seq > 0 && vocab > 0) {
      rowLogSumExp<<<rowGrid(rows * seq), kRowThreads, 0, launch.stream>>>(data<const T>(logits), args.out[1].f32(),
                                                                           vocab);
      MT_CUDA_CHECK_LAUNCH();
    }
    sequenceSums<<<rowGrid(rows), kThreads, 0, launch.stream>>>(data<const T>(logits), targets.i32(),
                                                                args.out[1].f32(), args.out[0].f32(), seq, vocab,
                                                                nullptr, sequenceAverages(args, 0));
  });
  MT_CUDA_CHECK_LAUNCH();
}

void sequence_logprob_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& logits = args.in[1];
  launchXentGrad(args, launch, 0, logits.dim(2), nullptr, args.in[0].f32(), std::max<int64_t>(logits.dim(1), 1),
                 sequenceAverages(args, 0));
}

void sequence_logprob_finish_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& targets = args.in[1];
  const int64_t rows = targets.dim(0), seq = targets.dim(1);
  if (rows == 0) return;
  sequenceSums<float><<<rowGrid(rows), kThreads, 0, launch.stream>>>(nullptr, targets.i32(), args.out[1].f32(),
                                                                     args.out[0].f32(), seq, args.ints[0],
                                                                     args.in[0].f32(), sequenceAverages(args, 1));
  MT_CUDA_CHECK_LAUNCH();
}

void sequence_logprob_chunk_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& logits = args.in[1];
  launchXentGrad(args, launch, args.ints[0], args.ints[1], nullptr, args.in[0].f32(),
                 std::max<int64_t>(logits.dim(1), 1), sequenceAverages(args, 2));
}

void pair_nll_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& targets = args.in[1];
  pairNll<<<1, 256, 0, launch.stream>>>(args.in[0].f32(), targets.i32(), args.out[0].f32(), nullptr, nullptr,
                                        targets.dim(0), targets.dim(1), args.ints[0], sequenceAverages(args, 1),
                                        args.floats[0]);
  MT_CUDA_CHECK_LAUNCH();
}

void pair_nll_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor& targets = args.in[2];
  pairNll<<<1, 256, 0, launch.stream>>>(args.in[1].f32(), targets.i32(), nullptr, args.in[0].f32(), args.out[0].f32(),
                                        targets.dim(0), targets.dim(1), args.ints[0], sequenceAverages(args, 1),
                                        args.floats[0]);
  MT_CUDA_CHECK_LAUNCH();
}

void dpo_loss_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  dpoLoss<<<1, 256, 0, launch.stream>>>(args.in[0].f32(), args.in[1].f32(), args.out[0].f32(), args.in[0].dim(0) / 2,
                                        dpoLossParams(args));
  MT_CUDA_CHECK_LAUNCH();
}

void dpo_loss_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t pairs = args.in[1].dim(0) / 2;
  dpoLossGrad<<<cuda::gridBlocks((pairs + kThreads - 1) / kThreads, "dpo_loss_grad"), kThreads, 0, launch.stream>>>(
      args.in[0].f32(), args.in[1].f32(), args.in[2].f32(), args.out[0].f32(), pairs, dpoLossParams(args));
  MT_CUDA_CHECK_LAUNCH();
}

void row_score_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t rows = args.in[0].dim(0), seq = args.in[0].dim(1);
  rowScore<<<cuda::gridBlocks((rows + kThreads - 1) / kThreads, "row_score"), kThreads, 0, launch.stream>>>(
      args.in[0].f32(), args.in[1].i32(), args.out[0].f32(), rows, seq);
  MT_CUDA_CHECK_LAUNCH();
}

void row_score_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const int64_t rows = args.in[1].dim(0), seq = args.in[1].dim(1);
  rowScoreGrad<<<cuda::gridBlocks((rows * seq + kThreads - 1) / kThreads, "row_score_grad"), kThreads, 0,
                 launch.stream>>>(args.in[0].f32(), args.in[2].i32(), args.out[0].f32(), rows, seq);
  MT_CUDA_CHECK_LAUNCH();
}

// Also mt.reward_margin_loss (its margins the second input) and its backward (the third).
void reward_loss_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const float* margins = args.in.size() > 1 ? args.in[1].f32() : nullptr;
  rewardLoss<<<1, 256, 0, launch.stream>>>(args.in[0].f32(), margins, args.out[0].f32(), nullptr, nullptr,
                                           args.in[0].dim(0) / 2, args.floats[0]);
  MT_CUDA_CHECK_LAUNCH();
}

void reward_loss_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const float* margins = args.in.size() > 2 ? args.in[2].f32() : nullptr;
  rewardLoss<<<1, 256, 0, launch.stream>>>(args.in[1].f32(), margins, nullptr, args.in[0].f32(), args.out[0].f32(),
                                           args.in[1].dim(0) / 2, args.floats[0]);
  MT_CUDA_CHECK_LAUNCH();
}

void kto_loss_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  ktoLoss<<<1, 256, 0, launch.stream>>>(args.in[0].f32(), args.in[1].f32(), args.in[2].f32(), args.out[0].f32(),
                                        nullptr, nullptr, args.in[0].dim(0) / 2, ktoParams(args));
  MT_CUDA_CHECK_LAUNCH();
}

void kto_loss_grad_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  ktoLoss<<<1, 256, 0, launch.stream>>>(args.in[1].f32(), args.in[2].f32(), args.in[3].f32(), nullptr,
                                        args.in[0].f32(), args.out[0].f32(), args.in[1].dim(0) / 2, ktoParams(args));
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt
