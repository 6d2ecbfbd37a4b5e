#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/moe/moe.h"

namespace mt {
namespace {

constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max();  // positions and BLAS sizes are 32-bit

// (..., k) beside (..., C): the same leading dimensions.
std::string expectChoices(const Tensor& choices, const Tensor& tokens, const char* what) {
  if (choices.rank() < 1 || tokens.rank() < 1 || choices.rank() != tokens.rank() ||
      !std::equal(choices.shape.begin(), choices.shape.end() - 1, tokens.shape.begin()))
    return std::string(what) + " " + shapeString(choices.shape) + " must be (..., k) beside the tokens' " +
           shapeString(tokens.shape);
  return "";
}

// Routed rows (N*k, C) for choices (..., k).
std::string expectRouted(const Tensor& routed, const Tensor& choices, const char* what) {
  if (routed.rank() != 2 || routed.dim(0) != choices.numel())
    return std::string(what) + " " + shapeString(routed.shape) + " must be (" + std::to_string(choices.numel()) +
           ", C): a row per routed choice";
  if (routed.dim(0) > kMaxRows) return std::string(what) + ": more than 2^31 - 1 routed rows";
  return "";
}

// A route's attributes (routing::routeSettings): ints [top_k, routing(, groups, groups_chosen)],
// floats [(scale)].
std::string checkRouting(const KernelArgs& args, const Tensor& logits) {
  if (logits.rank() < 1) return "moe_route logits must be (..., experts)";
  if (args.ints.size() != 2 && args.ints.size() != 4)
    return "moe_route takes 2 or 4 int attributes (top_k, routing(, groups, groups_chosen)), not " +
           std::to_string(args.ints.size());
  if (args.floats.size() > 1) return "moe_route takes at most one float attribute (the scale)";
  const int64_t experts = logits.dim(-1), k = args.ints[0], routing = args.ints[1];
  if (k < 1 || k > experts)
    return "moe_route top_k " + std::to_string(k) + " must lie in [1, " + std::to_string(experts) + "]";
  if (routing < 0 || routing > kLastMoeRoutingKind)
    return "moe_route routing " + std::to_string(routing) + " is not one of 0.." + std::to_string(kLastMoeRoutingKind);
  const routing::RouteSettings s = routing::routeSettings(args, 1);
  if (!std::isfinite(s.scale)) return "moe_route scale is not finite";
  if (s.groups == 1 && s.groups_chosen == 1) return "";
  if (!routing::choosesWithinGroups(s.kind))
    return "moe_route chooses within groups of experts by scores, not with the top-k softmax (routing 2)";
  if (!routing::splitsIntoGroups(experts, s.groups))
    return "moe_route groups " + std::to_string(s.groups) + " must lie in [2, " + std::to_string(routing::kMaxGroups) +
           "] and split the " + std::to_string(experts) + " experts into equal groups of two or more";
  if (s.groups_chosen < 1 || s.groups_chosen > s.groups)
    return "moe_route groups_chosen " + std::to_string(s.groups_chosen) + " must lie in [1, " +
           std::to_string(s.groups) + "]";
  return "";
}

std::vector<int64_t> withLast(std::vector<int64_t> shape, int64_t last) {
  shape.back() = last;
  return shape;
}

using routing::scoresInto;
using routing::softmaxInto;
using routing::validExpert;

// The router's load-balancing statistics (2, E) for (..., E) logits beside them.
std::string expectStats(const Tensor& stats, const Tensor& logits, const char* what) {
  if (logits.rank() < 1 || logits.dim(-1) < 1) return std::string(what) + ": the logits must be (..., experts), experts >= 1";
  return expectShape(stats, {2, logits.dim(-1)}, what);
}

std::string checkBalanceLoss(const KernelArgs& args, const Tensor& stats, const char* what) {
  if (stats.rank() != 2 || stats.dim(0) != 2 || stats.dim(1) < 1)
    return std::string(what) + " stats " + shapeString(stats.shape) + " must be (2, experts)";
  if (args.ints.empty() || args.ints.size() > 2) return std::string(what) + " takes int attrs [rows(, top_k)]";
  if (args.ints[0] < 1) return std::string(what) + " rows " + std::to_string(args.ints[0]) + " must be positive";
  if (args.ints.size() > 1 && args.ints[1] < 1)
    return std::string(what) + " top_k " + std::to_string(args.ints[1]) + " must be positive";
  return "";
}

// The router rows mt.moe_balance_loss(_grad)'s statistics count (routing::balanceRows).
double balanceRows(const KernelArgs& args, const Tensor& stats) {
  return routing::balanceRows(stats.f32(), stats.dim(1), args.ints[0], args.intOrZero(1));
}

// The optional mask of the tokens the statistics count (mt.moe_balance_stats(_grad) with a mask,
// plan 1.21): f32, one per token of `logits`; a token counts where it is not 0.
std::string expectTokenMask(const KernelArgs& args, size_t index, const Tensor& logits, const char* what) {
  if (args.in.size() <= index) return "";
  const Tensor& mask = args.in[index];
  MT_CHECK(expectDType(mask, DType::F32, what));
  if (mask.numel() != leadingRows(logits))
    return std::string(what) + " " + shapeString(mask.shape) + " must hold one value per token of " +
           shapeString(logits.shape);
  return "";
}

// Tokens per partial sum of the probabilities: the chunks add up in order, whatever the
// threads, so the statistics are the same on any number of cores.
constexpr int64_t kStatsChunk = 1024;

// The checks of mt.grouped_matmul(_into): `weight` holds `experts` experts from `first` on.
std::string groupedProductCheck(const KernelArgs& args, const char* name) {
  const Tensor &input = args.in[0], &weight = args.in[1], &counts = args.in[2], &out = args.out[0];
  MT_CHECK(expectDType(input, DType::F32, "grouped_matmul input"));
  MT_CHECK(expectDType(weight, DType::F32, "grouped_matmul weight"));
  MT_CHECK(expectDType(counts, DType::I32, "grouped_matmul counts"));
  MT_CHECK(expectDType(out, DType::F32, "grouped_matmul result"));
  if (args.ints[0] != 0 && args.ints[0] != 1) return std::string(name) + " transpose_b must be 0 or 1";
  const bool tb = args.ints[0];
  if (input.rank() != 2 || weight.rank() != 3 || counts.rank() != 1)
    return std::string(name) + " takes (rows, K), (experts, ., .) and (E) counts, got " + shapeString(input.shape) +
           ", " + shapeString(weight.shape) + " and " + shapeString(counts.shape);
  const int64_t first = args.intOrZero(1);
  if (first < 0 || first > counts.dim(0) - weight.dim(0) || (args.in.size() < 4 && weight.dim(0) != counts.dim(0)))
    return std::string(name) + ": experts [" + std::to_string(first) + ", " + std::to_string(first + weight.dim(0)) +
           ") are not within the " + std::to_string(counts.dim(0)) + " counted" +
           (args.in.size() < 4 ? " (the whole product takes them all)" : "");
  if ((tb ? weight.dim(2) : weight.dim(1)) != input.dim(1))
    return std::string(name) + " contraction sizes differ: " + shapeString(input.shape) + " and " +
           shapeString(weight.shape);
  if (input.dim(0) > kMaxRows || weight.dim(1) > kMaxRows || weight.dim(2) > kMaxRows)
    return std::string(name) + " dimensions exceed 2^31 - 1 (BLAS's limit)";
  return expectShape(out, {input.dim(0), tb ? weight.dim(1) : weight.dim(2)}, "grouped_matmul result");
}

// One sgemm per expert of [first, first + weight's experts) over its row range, into out's rows.
void expertProducts(const Tensor& input, const Tensor& weight, const ExpertRanges& ranges, int64_t first, bool tb,
                    const Tensor& out) {
  const int64_t k = input.dim(1), n = out.dim(1);
  for (int64_t g = 0; g < weight.dim(0); ++g) {
    const int64_t e = first + g, m = ranges.count[e];
    if (m == 0) continue;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), 1.0f, input.f32() + ranges.first[e] * k,
                static_cast<int>(k), weight.f32() + g * k * n, static_cast<int>(tb ? k : n), 0.0f,
                out.f32() + ranges.first[e] * n, static_cast<int>(n));
  }
}

}  // namespace

std::string moe_route_check(const KernelArgs& args) {
  const Tensor &logits = args.in[0], &weights = args.out[0], &experts = args.out[1];
  MT_CHECK(expectDType(logits, DType::F32, "moe_route logits"));
  MT_CHECK(expectDType(weights, DType::F32, "moe_route weights"));
  MT_CHECK(expectDType(experts, DType::I32, "moe_route experts"));
  MT_CHECK(checkRouting(args, logits));
  if (args.in.size() == 2) {  // mt.moe_route_biased
    if (static_cast<MoeRoutingKind>(args.ints[1]) == MoeRoutingKind::kTopKSoftmax)
      return "moe_route's bias is for a routing by scores, not the top-k softmax (routing 2), which chooses by logits";
    MT_CHECK(expectDType(args.in[1], DType::F32, "moe_route bias"));
    MT_CHECK(expectShape(args.in[1], {logits.dim(-1)}, "moe_route bias"));
  }
  MT_CHECK(expectShape(weights, withLast(logits.shape, args.ints[0]), "moe_route weights"));
  return expectShape(experts, weights.shape, "moe_route experts");
}

// Per token (routing::routeToken); mt.moe_route_biased too, its bias (E) the second input.
void moe_route_cpu(const KernelArgs& args) {
  const Tensor &logits = args.in[0], &weights = args.out[0], &experts = args.out[1];
  const routing::RouteSettings s = routing::routeSettings(args, 1);
  const int64_t num_experts = logits.dim(-1), k = s.top_k, tokens = leadingRows(logits);
#pragma omp parallel
  {
    std::vector<float> p(num_experts);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      const float* l = logits.f32() + t * num_experts;
      if (s.kind != MoeRoutingKind::kTopKSoftmax) scoresInto(l, num_experts, s.sigmoid(), p.data());
      routing::routeToken(l, [&](int64_t e) { return p[e]; }, num_experts, s, weights.f32() + t * k,
                          experts.i32() + t * k);
    }
  }
}

std::string moe_route_grad_check(const KernelArgs& args) {
  const Tensor &dweights = args.in[0], &logits = args.in[1], &experts = args.in[2], &dlogits = args.out[0];
  MT_CHECK(expectDType(dweights, DType::F32, "moe_route_grad dweights"));
  MT_CHECK(expectDType(logits, DType::F32, "moe_route_grad logits"));
  MT_CHECK(expectDType(experts, DType::I32, "moe_route_grad experts"));
  MT_CHECK(expectDType(dlogits, DType::F32, "moe_route_grad dlogits"));
  MT_CHECK(checkRouting(args, logits));
  MT_CHECK(expectShape(dweights, withLast(logits.shape, args.ints[0]), "moe_route_grad dweights"));
  MT_CHECK(expectShape(experts, dweights.shape, "moe_route_grad experts"));
  return expectShape(dlogits, logits.shape, "moe_route_grad dlogits");
}

// Per token: the weights' gradient back through the scale, the top-k's renormalisation (if any)
// and the softmax or sigmoid (routing::routeGradToken). A chosen index out of range takes no
// gradient.
void moe_route_grad_cpu(const KernelArgs& args) {
  const Tensor &dweights = args.in[0], &logits = args.in[1], &experts = args.in[2], &dlogits = args.out[0];
  const routing::RouteSettings s = routing::routeSettings(args, 3);
  const int64_t num_experts = logits.dim(-1), k = s.top_k, tokens = leadingRows(logits);
#pragma omp parallel
  {
    std::vector<float> p(num_experts);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      const float* l = logits.f32() + t * num_experts;
      if (s.kind != MoeRoutingKind::kTopKSoftmax) scoresInto(l, num_experts, s.sigmoid(), p.data());
      routing::routeGradToken(l, [&](int64_t e) { return p[e]; }, dweights.f32() + t * k, experts.i32() + t * k,
                              num_experts, s, dlogits.f32() + t * num_experts);
    }
  }
}

std::string moe_dispatch_check(const KernelArgs& args) {
  const Tensor &input = args.in[0], &experts = args.in[1];
  const Tensor &routed = args.out[0], &positions = args.out[1], &counts = args.out[2];
  MT_CHECK(expectDType(input, DType::F32, "moe_dispatch input"));
  MT_CHECK(expectDType(experts, DType::I32, "moe_dispatch experts"));
  MT_CHECK(expectDType(routed, DType::F32, "moe_dispatch routed"));
  MT_CHECK(expectDType(positions, DType::I32, "moe_dispatch positions"));
  MT_CHECK(expectDType(counts, DType::I32, "moe_dispatch counts"));
  MT_CHECK(expectChoices(experts, input, "moe_dispatch experts"));
  MT_CHECK(expectRouted(routed, experts, "moe_dispatch routed"));
  if (routed.dim(1) != input.dim(-1)) return "moe_dispatch routed rows must be as wide as the input's";
  MT_CHECK(expectShape(positions, experts.shape, "moe_dispatch positions"));
  if (counts.rank() != 1 || counts.dim(0) < 1) return "moe_dispatch counts must be (experts), got " + shapeString(counts.shape);
  return "";
}

// A stable counting sort of the (token, choice) slots by expert; each slot's row copied to its place.
void moe_dispatch_cpu(const KernelArgs& args) {
  const Tensor &input = args.in[0], &experts = args.in[1];
  const Tensor &routed = args.out[0], &positions = args.out[1], &counts = args.out[2];
  const int64_t slots = experts.numel(), k = experts.dim(-1), width = input.dim(-1), num_experts = counts.dim(0);
  std::vector<int64_t> next(num_experts + 1, 0);  // the last: slots whose expert is out of range
  auto bucket = [&](int32_t e) { return validExpert(e, num_experts) ? e : num_experts; };
  for (int64_t s = 0; s < slots; ++s) ++next[bucket(experts.i32()[s])];
  for (int64_t e = 0; e < num_experts; ++e) counts.i32()[e] = static_cast<int32_t>(next[e]);
  int64_t first = 0;
  for (int64_t& n : next) first += std::exchange(n, first);
  for (int64_t s = 0; s < slots; ++s) positions.i32()[s] = static_cast<int32_t>(next[bucket(experts.i32()[s])]++);
#pragma omp parallel for schedule(static) if (slots * width > 32768)
  for (int64_t s = 0; s < slots; ++s) {
    const float* row = input.f32() + (s / k) * width;
    std::copy(row, row + width, routed.f32() + positions.i32()[s] * width);
  }
}

std::string moe_dispatch_grad_check(const KernelArgs& args) {
  const Tensor &drouted = args.in[0], &positions = args.in[1], &dinput = args.out[0];
  MT_CHECK(expectDType(drouted, DType::F32, "moe_dispatch_grad drouted"));
  MT_CHECK(expectDType(positions, DType::I32, "moe_dispatch_grad positions"));
  MT_CHECK(expectDType(dinput, DType::F32, "moe_dispatch_grad dinput"));
  MT_CHECK(expectRouted(drouted, positions, "moe_dispatch_grad drouted"));
  return expectShape(dinput, withLast(positions.shape, drouted.dim(1)), "moe_dispatch_grad dinput");
}

void moe_dispatch_grad_cpu(const KernelArgs& args) {
  const Tensor &drouted = args.in[0], &positions = args.in[1], &dinput = args.out[0];
  const int64_t rows = drouted.dim(0), width = drouted.dim(1), k = positions.dim(-1), tokens = leadingRows(positions);
#pragma omp parallel for schedule(static) if (rows * width > 32768)
  for (int64_t t = 0; t < tokens; ++t) {
    float* d = dinput.f32() + t * width;
    std::fill(d, d + width, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = positions.i32()[t * k + j];
      if (r < 0 || r >= rows) continue;
      const float* g = drouted.f32() + r * width;
      for (int64_t c = 0; c < width; ++c) d[c] += g[c];
    }
  }
}

std::string grouped_matmul_check(const KernelArgs& args) { return groupedProductCheck(args, "grouped_matmul"); }

std::string grouped_matmul_into_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[3], DType::F32, "grouped_matmul_into into"));
  MT_CHECK(expectShape(args.in[3], args.out[0].shape, "grouped_matmul_into into"));
  return groupedProductCheck(args, "grouped_matmul_into");
}

// Every expert's product; rows past the experts' total are zero.
void grouped_matmul_cpu(const KernelArgs& args) {
  const Tensor &input = args.in[0], &counts = args.in[2], &out = args.out[0];
  const ExpertRanges ranges(counts.i32(), counts.numel(), input.dim(0));
  expertProducts(input, args.in[1], ranges, 0, args.ints[0], out);
  std::fill(out.f32() + ranges.total * out.dim(1), out.f32() + out.numel(), 0.0f);
}

// A group's products written over `into` (in place where the plan gave the result its bytes).
void grouped_matmul_into_cpu(const KernelArgs& args) {
  const Tensor &input = args.in[0], &counts = args.in[2], &into = args.in[3], &out = args.out[0];
  // memmove: a plan could overlap the two without making them one (still inside its arena).
  if (out.data != into.data) std::memmove(out.data, into.data, into.bytes());
  const ExpertRanges ranges(counts.i32(), counts.numel(), input.dim(0));
  expertProducts(input, args.in[1], ranges, args.ints[1], args.ints[0], out);
}

std::string grouped_add_bias_check(const KernelArgs& args) {
  const Tensor &input = args.in[0], &bias = args.in[1], &counts = args.in[2];
  MT_CHECK(expectDType(input, DType::F32, "grouped_add_bias input"));
  MT_CHECK(expectDType(bias, DType::F32, "grouped_add_bias bias"));
  MT_CHECK(expectDType(counts, DType::I32, "grouped_add_bias counts"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "grouped_add_bias result"));
  if (input.rank() != 2 || bias.rank() != 2 || bias.dim(1) != input.dim(1))
    return "grouped_add_bias takes (rows, C) and (experts, C), got " + shapeString(input.shape) + " and " +
           shapeString(bias.shape);
  MT_CHECK(expectShape(counts, {bias.dim(0)}, "grouped_add_bias counts"));
  return expectShape(args.out[0], input.shape, "grouped_add_bias result");
}

void grouped_add_bias_cpu(const KernelArgs& args) {
  const Tensor &input = args.in[0], &bias = args.in[1], &counts = args.in[2];
  const int64_t rows = input.dim(0), c = input.dim(1);
  const ExpertRanges ranges(counts.i32(), counts.numel(), rows);
  // An expert per task (one parallel region for the call, as the gradient's).
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t e = 0; e < counts.numel(); ++e) {
    const float* b = bias.f32() + e * c;
    for (int64_t r = ranges.first[e]; r < ranges.first[e] + ranges.count[e]; ++r)
      for (int64_t j = 0; j < c; ++j) args.out[0].f32()[r * c + j] = input.f32()[r * c + j] + b[j];
  }
  std::copy(input.f32() + ranges.total * c, input.f32() + rows * c, args.out[0].f32() + ranges.total * c);
}

std::string grouped_bias_grad_check(const KernelArgs& args) {
  const Tensor &dout = args.in[0], &counts = args.in[1];
  MT_CHECK(expectDType(dout, DType::F32, "grouped_bias_grad dout"));
  MT_CHECK(expectDType(counts, DType::I32, "grouped_bias_grad counts"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "grouped_bias_grad dbias"));
  if (dout.rank() != 2 || counts.rank() != 1)
    return "grouped_bias_grad takes (rows, C) gradients and (E) counts, got " + shapeString(dout.shape) + " and " +
           shapeString(counts.shape);
  return expectShape(args.out[0], {counts.dim(0), dout.dim(1)}, "grouped_bias_grad dbias");
}

// Each expert's rows summed in row order (an expert per task: deterministic); zero for one
// without rows.
void grouped_bias_grad_cpu(const KernelArgs& args) {
  const Tensor &dout = args.in[0], &counts = args.in[1];
  const int64_t c = dout.dim(1);
  const ExpertRanges ranges(counts.i32(), counts.numel(), dout.dim(0));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t e = 0; e < counts.numel(); ++e) {
    float* db = args.out[0].f32() + e * c;
    std::fill(db, db + c, 0.0f);
    for (int64_t r = ranges.first[e]; r < ranges.first[e] + ranges.count[e]; ++r)
      for (int64_t j = 0; j < c; ++j) db[j] += dout.f32()[r * c + j];
  }
}

std::string grouped_matmul_weight_grad_check(const KernelArgs& args) {
  const Tensor &input = args.in[0], &dout = args.in[1], &counts = args.in[2], &dweight = args.out[0];
  MT_CHECK(expectDType(input, DType::F32, "grouped_matmul_weight_grad input"));
  MT_CHECK(expectDType(dout, DType::F32, "grouped_matmul_weight_grad dout"));
  MT_CHECK(expectDType(counts, DType::I32, "grouped_matmul_weight_grad counts"));
  MT_CHECK(expectDType(dweight, DType::F32, "grouped_matmul_weight_grad dweight"));
  if (args.ints.empty() || args.ints.size() > 2)
    return "grouped_matmul_weight_grad takes int attrs [transpose_b(, first_expert)]";
  if (args.ints[0] != 0 && args.ints[0] != 1) return "grouped_matmul_weight_grad transpose_b must be 0 or 1";
  if (input.rank() != 2 || dout.rank() != 2 || input.dim(0) != dout.dim(0) || counts.rank() != 1 ||
      dweight.rank() != 3)
    return "grouped_matmul_weight_grad takes (R, K) rows, (R, N) gradients and (E) counts into (experts, ., .), got " +
           shapeString(input.shape) + ", " + shapeString(dout.shape) + ", " + shapeString(counts.shape) + " into " +
           shapeString(dweight.shape);
  if (input.dim(0) > kMaxRows || input.dim(1) > kMaxRows || dout.dim(1) > kMaxRows)
    return "grouped_matmul_weight_grad dimensions exceed 2^31 - 1 (BLAS's limit)";
  const int64_t first = args.intOrZero(1);
  const int64_t experts = args.ints.size() > 1 ? dweight.dim(0) : counts.dim(0);
  if (first < 0 || first > counts.dim(0) - experts)
    return "grouped_matmul_weight_grad: experts [" + std::to_string(first) + ", " + std::to_string(first + experts) +
           ") are not within the " + std::to_string(counts.dim(0)) + " counted";
  const bool tb = args.ints[0];
  return expectShape(dweight,
                     tb ? std::vector<int64_t>{experts, dout.dim(1), input.dim(1)}
                        : std::vector<int64_t>{experts, input.dim(1), dout.dim(1)},
                     "grouped_matmul_weight_grad dweight");
}

// The gradients of experts [first, first + dweight's experts): one sgemm per expert, zero for
// one without rows.
void grouped_matmul_weight_grad_cpu(const KernelArgs& args) {
  const Tensor &input = args.in[0], &dout = args.in[1], &counts = args.in[2], &dweight = args.out[0];
  const bool tb = args.ints[0];
  const int64_t first = args.intOrZero(1);
  const int64_t k = input.dim(1), n = dout.dim(1);
  const ExpertRanges ranges(counts.i32(), counts.numel(), input.dim(0));
  for (int64_t g = 0; g < dweight.dim(0); ++g) {
    float* dw = dweight.f32() + g * k * n;
    const int64_t e = first + g, m = ranges.count[e];
    if (m == 0) {
      std::fill(dw, dw + k * n, 0.0f);
      continue;
    }
    const float* x = input.f32() + ranges.first[e] * k;
    const float* dy = dout.f32() + ranges.first[e] * n;
    if (tb)  // (N, K) = dY^T X
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(k),
                  static_cast<int>(m), 1.0f, dy, static_cast<int>(n), x, static_cast<int>(k), 0.0f, dw,
                  static_cast<int>(k));
    else  // (K, N) = X^T dY
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(k), static_cast<int>(n),
                  static_cast<int>(m), 1.0f, x, static_cast<int>(k), dy, static_cast<int>(n), 0.0f, dw,
                  static_cast<int>(n));
  }
}

std::string moe_combine_check(const KernelArgs& args) {
  const Tensor &routed = args.in[0], &positions = args.in[1], &weights = args.in[2], &out = args.out[0];
  MT_CHECK(expectDType(routed, DType::F32, "moe_combine routed"));
  MT_CHECK(expectDType(positions, DType::I32, "moe_combine positions"));
  MT_CHECK(expectDType(weights, DType::F32, "moe_combine weights"));
  MT_CHECK(expectDType(out, DType::F32, "moe_combine result"));
  MT_CHECK(expectRouted(routed, positions, "moe_combine routed"));
  MT_CHECK(expectShape(weights, positions.shape, "moe_combine weights"));
  return expectShape(out, withLast(positions.shape, routed.dim(1)), "moe_combine result");
}

void moe_combine_cpu(const KernelArgs& args) {
  const Tensor &routed = args.in[0], &positions = args.in[1], &weights = args.in[2], &out = args.out[0];
  const int64_t rows = routed.dim(0), width = routed.dim(1), k = positions.dim(-1), tokens = leadingRows(positions);
#pragma omp parallel for schedule(static) if (rows * width > 32768)
  for (int64_t t = 0; t < tokens; ++t) {
    float* y = out.f32() + t * width;
    std::fill(y, y + width, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = positions.i32()[t * k + j];
      if (r < 0 || r >= rows) continue;
      const float w = weights.f32()[t * k + j];
      const float* x = routed.f32() + r * width;
      for (int64_t c = 0; c < width; ++c) y[c] += w * x[c];
    }
  }
}

std::string moe_combine_grad_check(const KernelArgs& args) {
  const Tensor &dout = args.in[0], &routed = args.in[1], &positions = args.in[2], &weights = args.in[3];
  const Tensor &drouted = args.out[0], &dweights = args.out[1];
  MT_CHECK(expectDType(dout, DType::F32, "moe_combine_grad dout"));
  MT_CHECK(expectDType(drouted, DType::F32, "moe_combine_grad drouted"));
  MT_CHECK(expectDType(dweights, DType::F32, "moe_combine_grad dweights"));
  KernelArgs forward{{routed, positions, weights}, {dout}, {}, {}};
  MT_CHECK(moe_combine_check(forward));
  MT_CHECK(expectShape(drouted, routed.shape, "moe_combine_grad drouted"));
  return expectShape(dweights, weights.shape, "moe_combine_grad dweights");
}

// drouted[positions[t, j]] = weights[t, j] * dout[t] (rows no choice names stay zero);
// dweights[t, j] = dout[t] . routed[positions[t, j]].
void moe_combine_grad_cpu(const KernelArgs& args) {
  const Tensor &dout = args.in[0], &routed = args.in[1], &positions = args.in[2], &weights = args.in[3];
  const Tensor &drouted = args.out[0], &dweights = args.out[1];
  const int64_t rows = routed.dim(0), width = routed.dim(1), k = positions.dim(-1), tokens = leadingRows(positions);
  std::fill(drouted.f32(), drouted.f32() + rows * width, 0.0f);
#pragma omp parallel for schedule(static) if (rows * width > 32768)
  for (int64_t t = 0; t < tokens; ++t) {
    const float* dy = dout.f32() + t * width;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = positions.i32()[t * k + j];
      float& dw = dweights.f32()[t * k + j];
      dw = 0.0f;
      if (r < 0 || r >= rows) continue;
      const float w = weights.f32()[t * k + j];
      const float* x = routed.f32() + r * width;
      float* dx = drouted.f32() + r * width;
      for (int64_t c = 0; c < width; ++c) {
        dx[c] = w * dy[c];
        dw += dy[c] * x[c];
      }
    }
  }
}

std::string moe_balance_stats_check(const KernelArgs& args) {
  const Tensor &logits = args.in[0], &experts = args.in[1], &total = args.in[2], &out = args.out[0];
  MT_CHECK(expectDType(logits, DType::F32, "moe_balance_stats logits"));
  MT_CHECK(expectDType(experts, DType::I32, "moe_balance_stats experts"));
  MT_CHECK(expectDType(total, DType::F32, "moe_balance_stats total"));
  MT_CHECK(expectDType(out, DType::F32, "moe_balance_stats result"));
  MT_CHECK(expectChoices(experts, logits, "moe_balance_stats experts"));
  MT_CHECK(expectStats(total, logits, "moe_balance_stats total"));
  MT_CHECK(expectTokenMask(args, 3, logits, "moe_balance_stats mask"));
  return expectShape(out, total.shape, "moe_balance_stats result");
}

// result[0, e] = total[0, e] + choices of expert e; result[1, e] = total[1, e] + the sum over the
// tokens of softmax(logits[t])[e] (in double, chunk by chunk, the chunks in order); with a mask,
// over the tokens it keeps only.
void moe_balance_stats_cpu(const KernelArgs& args) {
  const Tensor &logits = args.in[0], &experts = args.in[1], &total = args.in[2], &out = args.out[0];
  const int64_t num_experts = logits.dim(-1), tokens = leadingRows(logits), choices = experts.numel();
  const float* mask = args.optionalF32(3);
  const int64_t k = experts.dim(-1);  // choices per token
  const int64_t chunks = (tokens + kStatsChunk - 1) / kStatsChunk;
  std::vector<double> partial(chunks * num_experts, 0.0);
#pragma omp parallel if (tokens * num_experts > 32768)
  {
    std::vector<float> p(num_experts);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      double* sum = partial.data() + c * num_experts;
      for (int64_t t = c * kStatsChunk; t < std::min(tokens, (c + 1) * kStatsChunk); ++t) {
        if (mask && mask[t] == 0.0f) continue;
        softmaxInto(logits.f32() + t * num_experts, num_experts, p.data());
        for (int64_t e = 0; e < num_experts; ++e) sum[e] += p[e];
      }
    }
  }
  std::vector<int64_t> count(num_experts, 0);
  for (int64_t i = 0; i < choices; ++i)
    if (validExpert(experts.i32()[i], num_experts) && (!mask || mask[i / k] != 0.0f)) ++count[experts.i32()[i]];
  for (int64_t e = 0; e < num_experts; ++e) {
    double prob = 0.0;
    for (int64_t c = 0; c < chunks; ++c) prob += partial[c * num_experts + e];
    out.f32()[e] = total.f32()[e] + static_cast<float>(count[e]);
    out.f32()[num_experts + e] = total.f32()[num_experts + e] + static_cast<float>(prob);
  }
}

std::string moe_balance_stats_grad_check(const KernelArgs& args) {
  const Tensor &dtotal = args.in[0], &logits = args.in[1], &dlogits = args.out[0];
  MT_CHECK(expectDType(dtotal, DType::F32, "moe_balance_stats_grad dtotal"));
  MT_CHECK(expectDType(logits, DType::F32, "moe_balance_stats_grad logits"));
  MT_CHECK(expectDType(dlogits, DType::F32, "moe_balance_stats_grad dlogits"));
  MT_CHECK(expectStats(dtotal, logits, "moe_balance_stats_grad dtotal"));
  MT_CHECK(expectTokenMask(args, 2, logits, "moe_balance_stats_grad mask"));
  return expectShape(dlogits, logits.shape, "moe_balance_stats_grad dlogits");
}

// dlogits[t] = p_t * (g - <g, p_t>), g = dtotal[1]: row 1 sums each token's softmax; zero for a
// token the mask leaves out.
void moe_balance_stats_grad_cpu(const KernelArgs& args) {
  const Tensor &dtotal = args.in[0], &logits = args.in[1], &dlogits = args.out[0];
  const int64_t num_experts = logits.dim(-1), tokens = leadingRows(logits);
  const float* g = dtotal.f32() + num_experts;
  const float* mask = args.optionalF32(2);
#pragma omp parallel if (tokens * num_experts > 32768)
  {
    std::vector<float> p(num_experts);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      if (mask && mask[t] == 0.0f) {
        std::fill(dlogits.f32() + t * num_experts, dlogits.f32() + (t + 1) * num_experts, 0.0f);
        continue;
      }
      softmaxInto(logits.f32() + t * num_experts, num_experts, p.data());
      routing::balanceGradToken([&](int64_t e) { return p[e]; }, g, num_experts, dlogits.f32() + t * num_experts);
    }
  }
}

std::string moe_balance_loss_check(const KernelArgs& args) {
  const Tensor &stats = args.in[0], &loss = args.out[0];
  MT_CHECK(expectDType(stats, DType::F32, "moe_balance_loss stats"));
  MT_CHECK(expectDType(loss, DType::F32, "moe_balance_loss result"));
  MT_CHECK(checkBalanceLoss(args, stats, "moe_balance_loss"));
  return expectShape(loss, {}, "moe_balance_loss result");
}

// E * sum_e stats[0, e] * stats[1, e] / rows^2 (routing::balanceLoss; rows: balanceRows).
void moe_balance_loss_cpu(const KernelArgs& args) {
  args.out[0].f32()[0] = routing::balanceLoss(args.in[0].f32(), args.in[0].dim(1), balanceRows(args, args.in[0]));
}

std::string moe_balance_loss_grad_check(const KernelArgs& args) {
  const Tensor &dloss = args.in[0], &stats = args.in[1], &dstats = args.out[0];
  MT_CHECK(expectDType(dloss, DType::F32, "moe_balance_loss_grad dloss"));
  MT_CHECK(expectDType(stats, DType::F32, "moe_balance_loss_grad stats"));
  MT_CHECK(expectDType(dstats, DType::F32, "moe_balance_loss_grad result"));
  MT_CHECK(expectShape(dloss, {}, "moe_balance_loss_grad dloss"));
  MT_CHECK(checkBalanceLoss(args, stats, "moe_balance_loss_grad"));
  return expectShape(dstats, stats.shape, "moe_balance_loss_grad result");
}

// dstats[1, e] = dloss * E * stats[0, e] / rows^2 (routing::balanceLossGrad); row 0 (the counts) zero.
void moe_balance_loss_grad_cpu(const KernelArgs& args) {
  const Tensor &dloss = args.in[0], &stats = args.in[1], &dstats = args.out[0];
  const int64_t num_experts = stats.dim(1);
  const double rows = balanceRows(args, stats);
  for (int64_t e = 0; e < num_experts; ++e) {
    dstats.f32()[e] = 0.0f;
    dstats.f32()[num_experts + e] = routing::balanceLossGrad(dloss.f32()[0], stats.f32(), num_experts, rows, e);
  }
}

}  // namespace mt
