// The host optimizer: AdamW on fp32 master weights and fp32 moments, in the exact operation
// order of torch.optim.AdamW (torch 1.13, single-tensor path), so that training matches
// PyTorch step for step. With `l2` it is plain Adam with coupled L2 regularisation instead
// (what ONNX's training-domain Adam computes; the conformance runner checks it on test_adam*).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/adamw/master_weights.h"

namespace mt {

struct AdamWParams {
  // Doubles, as torch's Python scalars: coefficients are formed in double, then rounded.
  double lr = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;  // 0 for tensors that take no decay
  int64_t step = 1;           // 1-based, for the bias corrections
  float grad_scale = 1.0f;    // global-norm clipping factor, applied to the gradient first
  // Plain Adam's coupled L2 term, added to the (scaled) gradient before the moments:
  // torch.optim.Adam's weight_decay, ONNX Adam's norm_coefficient. 0 for AdamW.
  double l2 = 0.0;
  bool bias_correction = true;  // false: the moments are used as they are (ONNX Adam at T = 0)
};

// Updates the master weights `w`, m and v in place from grad (n elements each). Vectorised and
// multithreaded. A split master is restored, updated and split again tile by tile in cache; a
// plain one with a bf16 copy has each updated chunk rounded into it while still in cache. The
// master's values are the same bit for bit whatever its layout.
void adamw_cpu(const MasterWeights& w, const float* grad, float* m, float* v, int64_t n, const AdamWParams& p);

// The gradient norm's chunks: its sum of squares is summed per chunk of this many elements (in
// double), then the chunks' sums in order — fixed, so the sum is the same for any thread count,
// and the same when the chunks are summed on different ranks (a sharded optimizer owns whole
// chunks); small enough (256 KiB of gradient) that a chunk just summed is still in cache for its
// update.
constexpr int64_t kAdamWChunk = int64_t{1} << 16;
inline int64_t adamw_chunks(int64_t n) { return (n + kAdamWChunk - 1) / kAdamWChunk; }

// Sum of squares in double, deterministic for any thread count: sum_of_chunks over
// sum_squares_chunks_cpu's partial sums.
double sum_squares_cpu(const float* x, int64_t n);
// Each chunk's sum of squares: partials[adamw_chunks(n)].
void sum_squares_chunks_cpu(const float* x, int64_t n, double* partials);
// The chunks' sums added in order: the sum of squares.
double sum_of_chunks(const double* partials, int64_t chunks);
// Several arrays' chunks in one parallel pass: partials holds arrays[i]'s adamw_chunks(sizes[i])
// sums after those of the arrays before it, each the value sum_squares_chunks_cpu gives. A task
// that norms many small gradients (a LoRA's adapters, each a chunk or a few) spreads their chunks
// over the threads, where one array at a time kept one thread busy.
void sum_squares_chunks_many_cpu(const std::vector<const float*>& arrays, const std::vector<int64_t>& sizes,
                                 double* partials);

// AdamW and the gradient's sum of squares (returned: the same value, bit for bit, as
// sum_squares_cpu) in one pass over it: chunk by chunk, the chunk's squares are summed, then, if
// they are finite, the chunk is updated while its gradient is still in cache. A chunk holding
// NaN/Inf is left as it was (the others are updated); the sum is then not finite. For updates
// that need no global norm first (on arrival): the gradient crosses the memory bus once, not twice.
double adamw_with_norm_cpu(const MasterWeights& w, const float* grad, float* m, float* v, int64_t n,
                           const AdamWParams& p);
// The same, each chunk's sum of squares left in partials[adamw_chunks(n)] (adamw_with_norm_cpu
// returns their sum_of_chunks).
void adamw_with_norm_chunks_cpu(const MasterWeights& w, const float* grad, float* m, float* v, int64_t n,
                                const AdamWParams& p, double* partials);

// Gradient accumulation over `count` micro-batches (mtrun --accumulate), one landed gradient
// `grad` of micro-batch `index` (0-based) folded into its running sum `sum` (n elements each):
// the first sets sum = weight * grad, the middle ones add weight * grad, the last turns `grad`
// into (sum + weight * grad) / divisor. With weight 1 and divisor `count`: the mean, the gradient
// of the count-times-larger batch whose loss is the mean of the micro-batches' losses; with each
// micro-batch's counted targets as its weight and their total as the divisor: the gradient of
// the mean over every counted target (a loss mask). In fp32, in the micro-batches' order.
void accumulate_gradient_cpu(float* sum, float* grad, int64_t n, int64_t index, int64_t count, float weight,
                             float divisor);

}  // namespace mt
