// The gradient rules of the mt ops, end to end: each case is a small function in the mt
// dialect, compiled in-process through every stage into a plan and run on the CPU backend; the
// gradients it lands on the host must match central finite differences of the loss, obtained
// by running the same plan with perturbed parameters (learning rate 0: the weights stay put).
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/Emitter.h"
#include "compiler/Stages.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/backends/backend.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/verifier.h"

namespace mt {
namespace {

struct Case {
  const char* name;
  const char* params;  // function arguments after %tokens
  const char* body;    // computes %logits : tensor<2x3x4xf32>
  // The finite-difference step: smaller for functions with kinks (clamp, max), so that no
  // parameter lies within a step of one.
  float h = 1e-2f;
};

const Case kCases[] = {
    {"matmul_shared_rhs_transposed", "%x: tensor<2x3x5xf32> P(x), %w: tensor<4x5xf32> P(w)",
     "%logits = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x5xf32>, tensor<4x5xf32>"},
    {"matmul_shared_rhs", "%x: tensor<2x3x5xf32> P(x), %w: tensor<5x4xf32> P(w)",
     "%logits = mt.matmul %x, %w : tensor<2x3x5xf32>, tensor<5x4xf32>"},
    {"matmul_batched_transposed_lhs", "%a: tensor<2x5x3xf32> P(a), %b: tensor<2x5x4xf32> P(b)",
     "%logits = mt.matmul %a, %b {transpose_a = true} : tensor<2x5x3xf32>, tensor<2x5x4xf32>"},
    {"matmul_batched_transposed_rhs", "%a: tensor<2x3x5xf32> P(a), %b: tensor<2x4x5xf32> P(b)",
     "%logits = mt.matmul %a, %b {transpose_b = true} : tensor<2x3x5xf32>, tensor<2x4x5xf32>"},
    {"add_mul_scale_broadcast", "%x: tensor<2x3x4xf32> P(x), %b: tensor<4xf32> P(b), %c: tensor<3x4xf32> P(c)",
     "%s = mt.add %x, %b : tensor<2x3x4xf32>, tensor<4xf32>\n"
     "%m = mt.mul %s, %c : tensor<2x3x4xf32>, tensor<3x4xf32>\n"
     "%logits = mt.scale %m {factor = 0.5 : f32} : tensor<2x3x4xf32>"},
    // The backward redraws each site's mask (the step's randomness is the same in every run).
    {"dropout_two_sites", "%x: tensor<2x3x4xf32> P(x)",
     "%d = mt.dropout %x {ratio = 0.3 : f32, site = 1 : i64} : tensor<2x3x4xf32>\n"
     "%logits = mt.dropout %d {ratio = 0.5 : f32, site = 2 : i64} : tensor<2x3x4xf32>"},
    {"clamp", "%x: tensor<2x3x4xf32> P(x)",
     "%logits = mt.clamp %x {min = -0.7 : f32, max = 0.7 : f32} : tensor<2x3x4xf32>", 1e-3f},
    {"max_min_broadcast", "%a: tensor<2x3x4xf32> P(a), %b: tensor<4xf32> P(b), %c: tensor<3x4xf32> P(c)",
     "%m = mt.binary %a, %b {fn = \"max\"} : tensor<2x3x4xf32>, tensor<4xf32>\n"
     "%logits = mt.binary %m, %c {fn = \"min\"} : tensor<2x3x4xf32>, tensor<3x4xf32>", 1e-3f},
    {"transpose_reshape_sum_to", "%x: tensor<5x4x6xf32> P(x)",
     "%t = mt.transpose %x {perm = array<i64: 0, 2, 1>} : tensor<5x4x6xf32>\n"
     "%r = mt.reshape %t : tensor<5x6x4xf32> -> tensor<5x2x3x4xf32>\n"
     "%logits = mt.sum_to %r : tensor<5x2x3x4xf32> -> tensor<2x3x4xf32>"},
    {"embedding", "%e: tensor<7x4xf32> P(e)",
     "%logits = mt.embedding %tokens, %e : tensor<2x3xi32>, tensor<7x4xf32>"},
    {"layernorm_gelu", "%x: tensor<2x3x4xf32> P(x), %g: tensor<4xf32> P(g), %b: tensor<4xf32> P(b)",
     "%y, %mean, %rstd = mt.layernorm %x, %g, %b : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>\n"
     "%logits = mt.gelu %y {tanh = true} : tensor<2x3x4xf32>"},
    {"rmsnorm_swiglu", "%x: tensor<2x3x4xf32> P(x), %g: tensor<4xf32> P(g), %u: tensor<2x3x4xf32> P(u)",
     "%y, %rstd = mt.rmsnorm %x, %g : tensor<2x3x4xf32>, tensor<4xf32>\n"
     "%logits = mt.swiglu %y, %u : tensor<2x3x4xf32>, tensor<2x3x4xf32>"},
    {"rope_attention_grouped",
     "%q: tensor<2x3x8xf32> P(q), %k: tensor<2x3x4xf32> P(k), %v: tensor<2x3x4xf32> P(v), "
     "%w: tensor<4x8xf32> P(w)",
     "%qr = mt.rope %q {head_dim = 4, theta = 100.0 : f32} : tensor<2x3x8xf32>\n"
     "%kr = mt.rope %k {head_dim = 4, theta = 100.0 : f32} : tensor<2x3x4xf32>\n"
     "%o, %lse = mt.attention %qr, %kr, %v {num_heads = 2, num_kv_heads = 1} "
     ": tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>\n"
     "%logits = mt.matmul %o, %w {transpose_b = true} : tensor<2x3x8xf32>, tensor<4x8xf32>"},
    // gpt-oss's attention: a sliding window of 2 over 3 tokens, a sink per head (a parameter).
    {"attention_window_sinks",
     "%q: tensor<2x3x8xf32> P(q), %k: tensor<2x3x4xf32> P(k), %v: tensor<2x3x4xf32> P(v), "
     "%s: tensor<2xf32> P(s), %w: tensor<4x8xf32> P(w)",
     "%o, %lse = mt.attention %q, %k, %v sinks %s : tensor<2xf32> {num_heads = 2, num_kv_heads = 1, window = 2} "
     ": tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>\n"
     "%logits = mt.matmul %o, %w {transpose_b = true} : tensor<2x3x8xf32>, tensor<4x8xf32>"},
    // Gemma 2's softcapping: the scores capped at 0.5 (the random ones reach past it), the
    // logits at 0.8.
    {"attention_softcap_logits_softcap",
     "%q: tensor<2x3x8xf32> P(q), %k: tensor<2x3x4xf32> P(k), %v: tensor<2x3x4xf32> P(v), "
     "%w: tensor<4x8xf32> P(w)",
     "%o, %lse = mt.attention %q, %k, %v {num_heads = 2, num_kv_heads = 1, softcap = 0.5 : f32} "
     ": tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>\n"
     "%l = mt.matmul %o, %w {transpose_b = true} : tensor<2x3x8xf32>, tensor<4x8xf32>\n"
     "%logits = mt.softcap %l {cap = 0.8 : f32} : tensor<2x3x4xf32>"},
    // Packed examples: rotary and attention at the input positions (kPositions below: row 0 two
    // examples, the second from token 2; row 1 an example that began before the row, then one
    // from token 1), with sinks.
    {"packed_attention_rope_at",
     "%pos: tensor<2x3xi32> {mt.input = \"positions\"}, %q: tensor<2x3x8xf32> P(q), %k: tensor<2x3x4xf32> P(k), "
     "%v: tensor<2x3x4xf32> P(v), %s: tensor<2xf32> P(s), %w: tensor<4x8xf32> P(w)",
     "%qr = mt.rope_at %q, %pos {head_dim = 4, theta = 100.0 : f32} : tensor<2x3x8xf32>, tensor<2x3xi32>\n"
     "%kr = mt.rope_at %k, %pos {head_dim = 4, theta = 100.0 : f32} : tensor<2x3x4xf32>, tensor<2x3xi32>\n"
     "%o, %lse = mt.attention %qr, %kr, %v sinks %s : tensor<2xf32> positions %pos : tensor<2x3xi32> "
     "{num_heads = 2, num_kv_heads = 1} : tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>\n"
     "%logits = mt.matmul %o, %w {transpose_b = true} : tensor<2x3x8xf32>, tensor<4x8xf32>"},
    {"unary_functions", "%x: tensor<2x3x4xf32> P(x)",
     "%e = mt.unary %x {fn = \"exp\"} : tensor<2x3x4xf32>\n"
     "%l = mt.unary %e {fn = \"log\"} : tensor<2x3x4xf32>\n"
     "%q = mt.unary %e {fn = \"sqrt\"} : tensor<2x3x4xf32>\n"
     "%r = mt.unary %q {fn = \"reciprocal\"} : tensor<2x3x4xf32>\n"
     "%t = mt.unary %l {fn = \"tanh\"} : tensor<2x3x4xf32>\n"
     "%f = mt.unary %x {fn = \"erf\"} : tensor<2x3x4xf32>\n"
     "%g = mt.unary %f {fn = \"sigmoid\"} : tensor<2x3x4xf32>\n"
     "%n = mt.unary %g {fn = \"neg\"} : tensor<2x3x4xf32>\n"
     "%a = mt.add %t, %r : tensor<2x3x4xf32>, tensor<2x3x4xf32>\n"
     "%logits = mt.add %a, %n : tensor<2x3x4xf32>, tensor<2x3x4xf32>"},
    {"binary_numpy_broadcast", "%x: tensor<2x1x4xf32> P(x), %y: tensor<3x1xf32> P(y), %z: tensor<1x3x4xf32> P(z)",
     "%s = mt.binary %x, %y {fn = \"sub\"} : tensor<2x1x4xf32>, tensor<3x1xf32>\n"
     "%e = mt.unary %z {fn = \"exp\"} : tensor<1x3x4xf32>\n"
     "%d = mt.binary %s, %e {fn = \"div\"} : tensor<2x3x4xf32>, tensor<1x3x4xf32>\n"
     "%p = mt.binary %e, %y {fn = \"pow\"} : tensor<1x3x4xf32>, tensor<3x1xf32>\n"
     "%logits = mt.binary %d, %p {fn = \"add\"} : tensor<2x3x4xf32>, tensor<1x3x4xf32>"},
    {"where_broadcast_sum_to_keepdims", "%x: tensor<2x3x4xf32> P(x), %y: tensor<1x3x1xf32> P(y)",
     "%c = mt.reshape %tokens : tensor<2x3xi32> -> tensor<2x3x1xi32>\n"
     "%w = mt.where %c, %x, %y : tensor<2x3x1xi32>, tensor<2x3x4xf32>, tensor<1x3x1xf32>\n"
     "%s = mt.sum_to %w : tensor<2x3x4xf32> -> tensor<2x1x4xf32>\n"
     "%b = mt.broadcast %s : tensor<2x1x4xf32> -> tensor<2x3x4xf32>\n"
     "%logits = mt.mul %b, %x : tensor<2x3x4xf32>, tensor<2x3x4xf32>"},
    {"softmax_log_softmax_axes", "%x: tensor<2x3x4xf32> P(x)",
     "%p = mt.softmax %x {axis = 1} : tensor<2x3x4xf32>\n"
     "%l = mt.softmax %x {axis = 2, log = true} : tensor<2x3x4xf32>\n"
     "%logits = mt.mul %p, %l : tensor<2x3x4xf32>, tensor<2x3x4xf32>"},
    {"gather_repeated_indices", "%x: tensor<4x7xf32> P(x)",
     "%g = mt.gather %x, %tokens {axis = 1} : tensor<4x7xf32>, tensor<2x3xi32>\n"
     "%logits = mt.transpose %g {perm = array<i64: 1, 2, 0>} : tensor<4x2x3xf32>"},
    {"concat_slice_trilu", "%a: tensor<2x3x1xf32> P(a), %b: tensor<2x3x5xf32> P(b)",
     "%c = mt.concat %a, %b {axis = 2} : tensor<2x3x1xf32>, tensor<2x3x5xf32>\n"
     "%s = mt.slice %c {starts = array<i64: 0, 0, 5>, steps = array<i64: 1, 1, -1>} : tensor<2x3x6xf32> -> tensor<2x3x4xf32>\n"
     "%logits = mt.trilu %s {upper = false, k = 1} : tensor<2x3x4xf32>"},
    {"silu_reuse", "%x: tensor<2x3x4xf32> P(x)",
     "%s = mt.silu %x : tensor<2x3x4xf32>\n"
     "%logits = mt.mul %s, %x : tensor<2x3x4xf32>, tensor<2x3x4xf32>"},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// P(name) -> the mt.param attribute dictionary of a normal(0, 1) parameter.
std::string expandParams(std::string params) {
  for (size_t at; (at = params.find("P(")) != std::string::npos;) {
    const size_t close = params.find(')', at);
    const std::string name = params.substr(at + 2, close - at - 2);
    params.replace(at, close - at + 1,
                   "{mt.param = {name = \"" + name + "\", init = \"normal\", std = 1.0 : f32}}");
  }
  return params;
}

class GradientRuleTest : public ::testing::TestWithParam<Case> {};

TEST_P(GradientRuleTest, MatchesFiniteDifferencesOfTheCompiledLoss) {
  const Case& c = GetParam();
  const std::string source = "func.func @f(%tokens: tensor<2x3xi32> {mt.input = \"tokens\"}, " +
                             expandParams(c.params) + ") -> tensor<2x3x4xf32> {\n" + c.body +
                             "\nreturn %logits : tensor<2x3x4xf32>\n}\n";
  mlir::MLIRContext context;
  context.getOrLoadDialect<MtDialect>();
  context.getOrLoadDialect<mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  ASSERT_TRUE(module) << source;
  ASSERT_FALSE(runStages(*module, {}).failed);
  EmitOptions options;
  modelShape(*module, options.batch, options.seq, options.vocab);
  options.hardware = *findHardwareProfile("cpu");
  plan::Plan plan;
  PlanStats stats;
  ASSERT_TRUE(mlir::succeeded(emitPlan(*module, options, plan, stats)));
  expandTemplates(plan);
  verifyPlan(plan);

  HostStore store(plan);
  store.initialize(7);
  const int32_t tokens[6] = {0, 3, 6, 3, 1, 5}, targets[6] = {1, 0, 3, 2, 2, 1};
  std::copy(tokens, tokens + 6, store.i32(store.tokens()));
  std::copy(targets, targets + 6, store.i32(store.targets()));
  if (const int positions = store.input(kPositionsInput); positions >= 0) {
    const int32_t kPositions[6] = {0, 1, 0, 4, 0, 1};
    std::copy(kPositions, kPositions + 6, store.i32(positions));
  }
  auto backend = createCpuBackend(plan, store);
  StepOptions step;
  step.update = false;  // every run sees the same weights
  const float loss = backend->runStep(step).loss;

  for (int p : store.params()) {
    const int64_t n = store.numel(p);
    std::vector<float> analytic(store.f32(store.gradOf(p)), store.f32(store.gradOf(p)) + n);
    std::vector<double> numeric(n);
    for (int64_t i = 0; i < n; ++i) {
      float* w = store.f32(p) + i;
      const float saved = *w;
      const float h = c.h;
      *w = saved + h;
      const double up = backend->runStep(step).loss;
      *w = saved - h;
      const double down = backend->runStep(step).loss;
      *w = saved;
      numeric[i] = (up - down) / (2.0 * h);
    }
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      diff += (analytic[i] - numeric[i]) * (analytic[i] - numeric[i]);
      norm += numeric[i] * numeric[i];
    }
    const double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-12);
    EXPECT_LT(rel, 1e-2) << c.name << ": gradient of " << plan.host_tensors(p).name()
                         << " vs finite differences, relative error " << rel << " (loss " << loss << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, GradientRuleTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace mt
