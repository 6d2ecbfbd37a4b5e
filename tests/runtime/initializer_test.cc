// The seeded initializers (runtime/plan/initializer.h), DoRA's row norms and their merge
// (kernels/matmul/lora_merge.h), and how a plan's LoRA adapters pair with their weights
// (runtime/training/lora_merge.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/matmul/lora_merge.h"
#include "runtime/plan/initializer.h"
#include "runtime/plan/verifier.h"
#include "runtime/training/lora_merge.h"
#include "tests/runtime/expect_error.h"

namespace mt {
namespace {

std::vector<float> uniform(float bound, const std::string& name, int64_t n, int64_t first = 0) {
  plan::Initializer init;
  init.set_kind(plan::Initializer::UNIFORM);
  init.set_bound(bound);
  std::vector<float> values(static_cast<size_t>(n));
  initializeTensor(values.data(), n, init, /*seed=*/7, name, first);
  return values;
}

// A LoRA adapter's A: U(-bound, bound), the same for the same (seed, name) however it is cut into
// pieces, another for another name; its mean and variance those of the uniform.
TEST(Initializer, UniformStaysInItsBoundAndIsKeyedByNameAndElement) {
  const int64_t n = 200000;
  const std::vector<float> a = uniform(0.25f, "layers.0.attn.q.lora_A.weight", n);
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](float v) { return v >= -0.25f && v < 0.25f; }));
  double mean = 0, square = 0;
  for (float v : a) mean += v, square += double(v) * v;
  mean /= n, square /= n;
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(square, 0.25 * 0.25 / 3.0, 0.0005);  // the variance of U(-b, b): b^2 / 3
  const std::vector<float> tail = uniform(0.25f, "layers.0.attn.q.lora_A.weight", 1000, n - 1000);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), a.end() - 1000));
  EXPECT_NE(uniform(0.25f, "layers.0.attn.v.lora_A.weight", 1000), std::vector<float>(a.begin(), a.begin() + 1000));
}

plan::HostTensor* addParam(plan::Plan& plan, const std::string& name, std::vector<int64_t> shape) {
  plan::HostTensor* t = plan.add_host_tensors();
  t->set_name(name);
  t->set_role(plan::ROLE_PARAM);
  for (int64_t d : shape) t->add_shape(d);
  return t;
}

// Layer 0's q and v (6, 4), each with rank-2 adapters: tensors 0-2 and 3-5.
void addAdaptedQAndV(plan::Plan& plan) {
  for (const char* w : {"layers.0.attn.q", "layers.0.attn.v"}) {
    addParam(plan, std::string(w) + ".weight", {6, 4});
    addParam(plan, std::string(w) + ".lora_A.weight", {2, 4});
    addParam(plan, std::string(w) + ".lora_B.weight", {6, 2});
  }
}

// Each row's L2 norm: 3-4-0 rows and a zero row.
TEST(RowNorms, AreEachRowsLength) {
  const std::vector<float> w = {3, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0};  // (3, 4)
  std::vector<float> norms(3);
  rowNorms(w.data(), 3, 4, norms.data());
  EXPECT_EQ(norms, (std::vector<float>{5, 1, 0}));
}

// DoRA's merge (PEFT's merge_safe): W + s B A with each row rescaled to length m, its direction
// kept; without a magnitude, the plain merge.
TEST(LoraMerge, DoraRescalesEachRowToItsMagnitude) {
  const int64_t out = 3, in = 4, r = 2;
  const std::vector<float> w = {1, 2, 3, 4, -1, 0, 2, 1, 0.5f, 0.5f, -2, 1};
  const std::vector<float> a = {0.1f, -0.2f, 0.3f, 0.0f, 0.05f, 0.1f, -0.1f, 0.2f};
  const std::vector<float> b = {1, 0, 0.5f, -1, 2, 2};
  const std::vector<float> m = {2, 0.5f, 3};
  std::vector<float> plain(out * in), dora(out * in);
  loraMerge(w.data(), a.data(), b.data(), out, in, r, 1.5, plain.data());
  loraMerge(w.data(), a.data(), b.data(), out, in, r, 1.5, dora.data(), m.data());
  for (int64_t o = 0; o < out; ++o) {
    double length = 0, plain_length = 0;
    for (int64_t i = 0; i < in; ++i) {
      double want = w[o * in + i];
      for (int64_t k = 0; k < r; ++k) want += 1.5 * b[o * r + k] * a[k * in + i];
      EXPECT_NEAR(plain[o * in + i], want, 1e-6);
      length += double(dora[o * in + i]) * dora[o * in + i];
      plain_length += want * want;
    }
    EXPECT_NEAR(std::sqrt(length), m[o], 1e-6 * m[o]);
    for (int64_t i = 0; i < in; ++i)
      EXPECT_NEAR(dora[o * in + i], plain[o * in + i] * m[o] / std::sqrt(plain_length), 1e-6);
  }
}

// A stack of experts merged expert by expert: W_e + s B_e A_e for (E, out, in), its transpose
// added for (E, in, out) (gpt-oss's), both as a direct sum computes them.
TEST(LoraMerge, ExpertStacksInBothLayouts) {
  const int64_t experts = 2, out = 3, in = 4, r = 2;
  std::vector<float> w(experts * out * in), a(experts * r * in), b(experts * out * r);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * float(i % 7) - 0.3f;
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.05f * float(i % 5) - 0.1f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.2f * float(i % 3) - 0.2f;
  std::vector<float> out_in(w.size()), in_out(w.size());
  loraMergeExperts(w.data(), a.data(), b.data(), experts, out, in, r, 1.5, false, out_in.data());
  loraMergeExperts(w.data(), a.data(), b.data(), experts, out, in, r, 1.5, true, in_out.data());
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double delta = 0;
        for (int64_t k = 0; k < r; ++k) delta += 1.5 * b[(e * out + o) * r + k] * a[(e * r + k) * in + i];
        EXPECT_NEAR(out_in[(e * out + o) * in + i], w[(e * out + o) * in + i] + delta, 1e-6);
        EXPECT_NEAR(in_out[(e * in + i) * out + o], w[(e * in + i) * out + o] + delta, 1e-6);
      }
}

// A ROW_NORMS parameter needs one 2-D source parameter with a row per element, itself not
// ROW_NORMS; no tensor but a parameter has such an initializer.
TEST(RowNorms, TheVerifierChecksTheSource) {
  plan::Plan plan;
  addParam(plan, "q.weight", {6, 4});
  plan::HostTensor* m = addParam(plan, "q.lora_magnitude_vector", {6});
  m->mutable_init()->set_kind(plan::Initializer::ROW_NORMS);
  m->mutable_init()->set_of("k.weight");
  test::expectError([&] { verifyPlan(plan); }, "reads 'k.weight', which is no parameter");
  m->mutable_init()->set_of("q.weight");
  m->set_shape(0, 5);
  test::expectError([&] { verifyPlan(plan); }, "one element per row of the 2-D 'q.weight'");
  m->set_shape(0, 6);
  m->mutable_init()->set_of("q.lora_magnitude_vector");
  test::expectError([&] { verifyPlan(plan); }, "reads another ROW_NORMS parameter");
  plan.mutable_host_tensors(0)->mutable_init()->set_of("q.weight");
  test::expectError([&] { verifyPlan(plan); }, "names a parameter to initialize from, but is not ROW_NORMS");
  plan.mutable_host_tensors(0)->mutable_init()->clear_of();
  m->mutable_init()->set_of("q.weight");
  plan::Plan twice = plan;
  addParam(twice, "q.weight", {6, 4});
  test::expectError([&] { verifyPlan(twice); }, "two parameters are named 'q.weight'");
  plan::HostTensor* moment = plan.add_host_tensors();  // an optimizer tensor posing as one
  *moment = *m;
  moment->set_role(plan::ROLE_MOMENT1);
  moment->set_param_index(1);
  test::expectError([&] { verifyPlan(plan); }, "only a parameter has a ROW_NORMS initializer");
  moment->set_role(plan::ROLE_PARAM);
  EXPECT_EQ(rowNormSource(plan, *m), 0);
  moment->set_role(plan::ROLE_MOMENT1);
  EXPECT_EQ(rowNormSource(plan, *moment), -1);
}

// Each adapted weight with its A and B; a misfit, a lone adapter and a missing alpha refused.
TEST(LoraAdapters, PairWithTheirWeightOrAreRefused) {
  plan::Plan plan;
  addParam(plan, "layers.0.attn.q.weight", {6, 4});
  addParam(plan, "layers.0.attn.q.lora_A.weight", {2, 4});
  addParam(plan, "layers.0.attn.q.lora_B.weight", {6, 2});
  addParam(plan, "norm.weight", {4});
  plan::Plan unscaled = plan;  // adapters, but no alpha to merge them with
  test::expectError([&] { loraAdapters(unscaled); }, "'layers.0.attn.q.lora_A.weight' has no alpha to scale it by");
  plan.mutable_model()->set_lora_alpha(8.0f);
  const std::vector<LoraAdapter> adapters = loraAdapters(plan);
  ASSERT_EQ(adapters.size(), 1u);
  EXPECT_EQ(adapters[0].weight, 0);
  EXPECT_EQ(adapters[0].a, 1);
  EXPECT_EQ(adapters[0].b, 2);
  EXPECT_TRUE(isLoraAdapter("layers.0.attn.q.lora_B.weight"));
  EXPECT_FALSE(isLoraAdapter("layers.0.attn.q.weight"));

  plan::Plan misfit = plan;
  misfit.mutable_host_tensors(2)->set_shape(0, 5);  // B (5, r) for a weight of 6 rows
  test::expectError([&] { loraAdapters(misfit); }, "do not fit it");
  plan::Plan lone = plan;
  lone.mutable_host_tensors(2)->set_name("layers.0.attn.k.lora_B.weight");
  test::expectError([&] { loraAdapters(lone); }, "has no layers.0.attn.q.lora_B.weight beside it");
}

// An adapter's alpha: A's own (mtc --lora-alpha-pattern), else the plan's; the verifier takes an
// own alpha on an A only, within [1e-6, 1e6].
TEST(LoraAdapters, OwnAlphaOrThePlans) {
  plan::Plan plan;
  addAdaptedQAndV(plan);
  plan.mutable_host_tensors(1)->set_lora_alpha(32.0f);
  test::expectError([&] { loraAdapters(plan); }, "'layers.0.attn.v.lora_A.weight' has no alpha to scale it by");
  plan.mutable_model()->set_lora_alpha(8.0f);
  const std::vector<LoraAdapter> adapters = loraAdapters(plan);
  ASSERT_EQ(adapters.size(), 2u);
  EXPECT_EQ(adapters[0].alpha, 32.0);
  EXPECT_EQ(adapters[1].alpha, 8.0);
  // The host tensors pass; the verifier goes on to the program this plan does not have.
  test::expectError([&] { verifyPlan(plan); }, "needs at least one output");
  plan::Plan on_b = plan;
  on_b.mutable_host_tensors(2)->set_lora_alpha(4.0f);
  test::expectError([&] { verifyPlan(on_b); }, "only a LoRA adapter's A (\"X.lora_A.weight\") has an alpha of its own");
  for (float wrong : {std::nanf(""), 1e7f, -1.0f}) {
    plan::Plan bad = plan;
    bad.mutable_host_tensors(1)->set_lora_alpha(wrong);
    test::expectError([&] { verifyPlan(bad); }, "is not in [1e-6, 1e6]");
  }
}

// A stack of experts' adapters (mtc --lora-experts): A (E, r, in) and B (E, out, r) for a stack
// (E, out, in) or (E, in, out); another expert count or a misfit refused; no DoRA magnitude on it.
TEST(LoraAdapters, ExpertStacksPairOrAreRefused) {
  plan::Plan plan;
  plan.mutable_model()->set_lora_alpha(8.0f);
  addParam(plan, "layers.0.moe.gate.weight", {4, 6, 3});     // (E, out, in)
  addParam(plan, "layers.0.moe.gate.lora_A.weight", {4, 2, 3});
  addParam(plan, "layers.0.moe.gate.lora_B.weight", {4, 6, 2});
  addParam(plan, "layers.0.moe.down.weight", {4, 3, 6});     // (E, in, out): gpt-oss's
  addParam(plan, "layers.0.moe.down.lora_A.weight", {4, 2, 3});
  addParam(plan, "layers.0.moe.down.lora_B.weight", {4, 6, 2});
  ASSERT_EQ(loraAdapters(plan).size(), 2u);
  plan::Plan experts = plan;
  experts.mutable_host_tensors(2)->set_shape(0, 3);  // B for 3 experts of 4
  test::expectError([&] { loraAdapters(experts); }, "'layers.0.moe.gate.weight' do not fit it");
  plan::Plan misfit = plan;
  misfit.mutable_host_tensors(5)->set_shape(1, 5);
  test::expectError([&] { loraAdapters(misfit); }, "'layers.0.moe.down.weight' do not fit it");
  addParam(plan, "layers.0.moe.gate.lora_magnitude_vector", {6});
  addParam(plan, "layers.0.moe.down.lora_magnitude_vector", {6});
  test::expectError([&] { loraAdapters(plan); }, "DoRA magnitude of 'layers.0.moe.down.weight' does not fit it");
}

// DoRA's magnitudes pair with their adapters: on every adapted weight or none, one element per
// output, never without A.
TEST(LoraAdapters, DoraMagnitudesPairOrAreRefused) {
  plan::Plan plan;
  plan.mutable_model()->set_lora_alpha(8.0f);
  addAdaptedQAndV(plan);
  addParam(plan, "layers.0.attn.q.lora_magnitude_vector", {6});
  EXPECT_TRUE(isLoraAdapter("layers.0.attn.q.lora_magnitude_vector"));
  test::expectError([&] { loraAdapters(plan); }, "DoRA magnitudes on 1 of 2 weights, not all or none");
  addParam(plan, "layers.0.attn.v.lora_magnitude_vector", {6});
  const std::vector<LoraAdapter> adapters = loraAdapters(plan);
  ASSERT_EQ(adapters.size(), 2u);
  EXPECT_EQ(adapters[0].magnitude, 6);
  EXPECT_EQ(adapters[1].magnitude, 7);
  plan::Plan misfit = plan;
  misfit.mutable_host_tensors(7)->set_shape(0, 5);
  test::expectError([&] { loraAdapters(misfit); }, "DoRA magnitude of 'layers.0.attn.v.weight' does not fit it");
  plan::Plan lone = plan;
  lone.mutable_host_tensors(7)->set_name("layers.0.attn.k.lora_magnitude_vector");
  test::expectError([&] { loraAdapters(lone); }, "'layers.0.attn.k.lora_magnitude_vector' has no lora_A beside it");
}

}  // namespace
}  // namespace mt
