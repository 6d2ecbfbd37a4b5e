// Mixture-of-experts kernels (compiler/dialect/MtMoeOps.td; DESIGN.md §14). N tokens of width
// D, E experts, k chosen per token, R = N*k routed rows grouped by expert.
//   mt.moe_route: logits (N, E) f32 -> weights (N, k) f32, experts (N, k) i32
//                 int attrs: [top_k, routing (MoeRouting: 0 softmax_topk, 1 softmax_topk_normalized,
//                 2 topk_softmax, 3 sigmoid_topk, 4 sigmoid_topk_normalized)(, groups, groups_chosen)]
//                 float attrs: [(scale)] (routing::RouteSettings)
//   mt.moe_route_biased: (logits (N, E), bias (E)) -> the same; the bias added to the scores for the
//                        choice alone (the same kernels as mt.moe_route)
//   mt.moe_route_grad: (dweights (N, k), logits (N, E), experts (N, k)) -> dlogits (N, E); int attrs
//                      [top_k, routing], float attrs [(scale)]
//   mt.moe_dispatch: (input (N, D), experts (N, k)) -> routed (R, D), positions (N, k) i32, counts (E) i32
//   mt.moe_dispatch_grad: (drouted (R, D), positions (N, k)) -> dinput (N, D)
//   mt.grouped_matmul: (input (R, K), weight (E, Nout, K) | (E, K, Nout), counts (E)) -> (R, Nout)
//                      int attrs: [transpose_b]
//   mt.grouped_matmul_into: (input (R, K), weight (G, Nout, K) | (G, K, Nout), counts (E), into (R, Nout))
//                           -> (R, Nout): `into` with the rows of experts [first, first + G) replaced
//                           by their products (weight[g] is expert first + g's; plan 1.20, experts
//                           streamed in groups); the result may be into's own bytes
//                           int attrs: [transpose_b, first_expert]
//   mt.grouped_matmul_weight_grad: (input (R, K), dout (R, Nout), counts (E)) -> dweight (G, ., .), the
//                                  weight's shape: experts [first, first + G) (G = E without first)
//                                  int attrs: [transpose_b(, first_expert)] (plan 1.20: the first)
//   mt.grouped_add_bias: (input (R, C), bias (E, C), counts (E)) -> (R, C): each expert's rows plus
//                        its bias row (gpt-oss's expert biases); rows past the experts' total as they are
//   mt.grouped_bias_grad: (dout (R, C), counts (E)) -> dbias (E, C): the sum of each expert's rows
//   mt.moe_combine: (routed (R, D), positions (N, k), weights (N, k)) -> (N, D)
//   mt.moe_combine_grad: (dout (N, D), routed (R, D), positions, weights) -> drouted (R, D), dweights (N, k)
//   mt.moe_balance_stats: (logits (N, E), experts (N, k), total (2, E)) -> (2, E): total plus the
//                         layer's choices per expert (row 0) and softmax probabilities summed (row 1)
//   mt.moe_balance_stats_grad: (dtotal (2, E), logits (N, E)) -> dlogits (N, E)
//   mt.moe_balance_loss: stats (2, E) -> () E * sum_e stats[0,e] * stats[1,e] / rows^2; int attrs: [rows]
//   mt.moe_balance_loss_grad: (dloss (), stats (2, E)) -> dstats (2, E); int attrs: [rows]
// Leading dimensions of the token tensors may be any (B, T, ...): N is their product.
// Expert indices, positions and counts are data: a kernel treats one out of range as choosing
// nothing (no row read or written outside its tensors), so a corrupt plan cannot reach memory.
#pragma once
#include <algorithm>
#include <vector>

#include "kernels/kernel_args.h"
#include "kernels/moe/routing.h"  // MoeRoutingKind; the per-token routing both backends run

namespace mt {

// An expert's row count clipped to what is left of the `rows` after the `total` of the experts
// before it (a negative or oversized count cannot reach past the tensors).
MT_HOST_DEVICE inline int64_t clippedCount(int32_t count, int64_t rows, int64_t total) {
  return count < 0 ? 0 : (count > rows - total ? rows - total : count);
}

// Expert e's first routed row and row count from the experts' counts (in host memory), each
// clipped: the grouped products' ranges, on the CPU and, from the counts read back, on CUDA.
struct ExpertRanges {
  std::vector<int64_t> first, count;
  int64_t total = 0;
  ExpertRanges(const int32_t* counts, int64_t experts, int64_t rows) {
    for (int64_t e = 0; e < experts; ++e) {
      first.push_back(total);
      count.push_back(clippedCount(counts[e], rows, total));
      total += count.back();
    }
  }
};

// Expert e's first row and row count as ExpertRanges clips them, for one expert without the
// others' vectors (the CUDA twin of mt.grouped_bias_grad, a block per expert).
MT_HOST_DEVICE inline void expertRange(const int32_t* counts, int64_t e, int64_t rows, int64_t* first, int64_t* count) {
  int64_t total = 0;
  for (int64_t i = 0; i < e; ++i) total += clippedCount(counts[i], rows, total);
  *first = total, *count = clippedCount(counts[e], rows, total);
}

std::string moe_route_check(const KernelArgs& args);
void moe_route_cpu(const KernelArgs& args);
std::string moe_route_grad_check(const KernelArgs& args);
void moe_route_grad_cpu(const KernelArgs& args);
std::string moe_dispatch_check(const KernelArgs& args);
void moe_dispatch_cpu(const KernelArgs& args);
std::string moe_dispatch_grad_check(const KernelArgs& args);
void moe_dispatch_grad_cpu(const KernelArgs& args);
std::string grouped_matmul_check(const KernelArgs& args);
void grouped_matmul_cpu(const KernelArgs& args);
std::string grouped_matmul_into_check(const KernelArgs& args);
void grouped_matmul_into_cpu(const KernelArgs& args);
std::string grouped_matmul_weight_grad_check(const KernelArgs& args);
void grouped_matmul_weight_grad_cpu(const KernelArgs& args);
std::string grouped_add_bias_check(const KernelArgs& args);
void grouped_add_bias_cpu(const KernelArgs& args);
std::string grouped_bias_grad_check(const KernelArgs& args);
void grouped_bias_grad_cpu(const KernelArgs& args);
std::string moe_combine_check(const KernelArgs& args);
void moe_combine_cpu(const KernelArgs& args);
std::string moe_combine_grad_check(const KernelArgs& args);
void moe_combine_grad_cpu(const KernelArgs& args);
std::string moe_balance_stats_check(const KernelArgs& args);
void moe_balance_stats_cpu(const KernelArgs& args);
std::string moe_balance_stats_grad_check(const KernelArgs& args);
void moe_balance_stats_grad_cpu(const KernelArgs& args);
std::string moe_balance_loss_check(const KernelArgs& args);
void moe_balance_loss_cpu(const KernelArgs& args);
std::string moe_balance_loss_grad_check(const KernelArgs& args);
void moe_balance_loss_grad_cpu(const KernelArgs& args);

// CUDA twins (kernels/moe/moe_cuda.cu), built when CUDA is enabled. f32 (the op table's F32_ONLY);
// mt.moe_route takes at most 32 experts per token there; the grouped products read the experts'
// counts back to the host (one synchronisation of the stream per product); mt.moe_balance_stats
// sums 512 experts per pass over the tokens there.
void moe_route_cuda(const KernelArgs& args, const CudaLaunch& launch);
void moe_route_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void moe_dispatch_cuda(const KernelArgs& args, const CudaLaunch& launch);
void moe_dispatch_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void grouped_matmul_cuda(const KernelArgs& args, const CudaLaunch& launch);
void grouped_matmul_into_cuda(const KernelArgs& args, const CudaLaunch& launch);
void grouped_matmul_weight_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void grouped_add_bias_cuda(const KernelArgs& args, const CudaLaunch& launch);
void grouped_bias_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void moe_combine_cuda(const KernelArgs& args, const CudaLaunch& launch);
void moe_combine_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void moe_balance_stats_cuda(const KernelArgs& args, const CudaLaunch& launch);
void moe_balance_stats_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void moe_balance_loss_cuda(const KernelArgs& args, const CudaLaunch& launch);
void moe_balance_loss_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);

}  // namespace mt
