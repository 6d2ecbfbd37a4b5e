// The seeded initializers (runtime/plan/initializer.h) and how a plan's LoRA adapters pair with
// their weights (runtime/training/lora_merge.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/plan/initializer.h"
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

void addParam(plan::Plan& plan, const std::string& name, std::vector<int64_t> shape) {
  plan::HostTensor* t = plan.add_host_tensors();
  t->set_name(name);
  t->set_role(plan::ROLE_PARAM);
  for (int64_t d : shape) t->add_shape(d);
}

// Each adapted weight with its A and B; a misfit, a lone adapter and a missing alpha refused.
TEST(LoraAdapters, PairWithTheirWeightOrAreRefused) {
  plan::Plan plan;
  addParam(plan, "layers.0.attn.q.weight", {6, 4});
  addParam(plan, "layers.0.attn.q.lora_A.weight", {2, 4});
  addParam(plan, "layers.0.attn.q.lora_B.weight", {6, 2});
  addParam(plan, "norm.weight", {4});
  plan::Plan unscaled = plan;  // adapters, but no alpha to merge them with
  test::expectError([&] { loraAdapters(unscaled); }, "no alpha to scale them by");
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

}  // namespace
}  // namespace mt
