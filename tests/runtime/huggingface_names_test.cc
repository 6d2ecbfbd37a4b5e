// The names and layouts PEFT's adapter folders use (runtime/plan/huggingface_names.h): a stack of
// experts' B in PEFT's lora_B form and back, and the key stems of parameters PEFT wraps in turn.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/plan/huggingface_names.h"

namespace mt {
namespace {

// B (E, out, r) with distinct values: PEFT's lora_B (out, r*E) holds expert e's rank k in column
// k*E + e (its ParamWrapper reshapes lora_B to (out, r, E)), and the two conversions are inverses.
TEST(HuggingFaceNamesTest, PeftExpertBLayoutRoundTrips) {
  const int64_t experts = 3, out = 4, rank = 2;
  std::vector<float> stack(experts * out * rank), peft(stack.size(), -1.0f), back(stack.size(), -1.0f);
  for (size_t i = 0; i < stack.size(); ++i) stack[i] = static_cast<float>(i);
  peftExpertBFromStack(stack.data(), experts, out, rank, peft.data());
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < rank; ++k)
        EXPECT_EQ(peft[o * (rank * experts) + k * experts + e], stack[(e * out + o) * rank + k])
            << "expert " << e << ", row " << o << ", rank " << k;
  stackExpertBFromPeft(peft.data(), experts, out, rank, back.data());
  EXPECT_EQ(back, stack);
}

// gpt-oss's experts register gate_up_proj before down_proj: with both adapted, PEFT wraps down_proj's
// around gate_up_proj's, so gate_up_proj's keys go through base_layer; alone, neither does.
TEST(HuggingFaceNamesTest, PeftParameterKeyStemsNestInRegistrationOrder) {
  const std::string module = "model.layers.0.mlp.experts", prefix = std::string(kPeftKeyPrefix) + module;
  const auto both = [](const std::string&) { return true; };
  const auto gate_up_only = [](const std::string& p) { return p == "gate_up_proj"; };
  const auto down_only = [](const std::string& p) { return p == "down_proj"; };
  EXPECT_EQ(peftParameterKeyStem(module, "gate_up_proj", both), prefix + ".base_layer");
  EXPECT_EQ(peftParameterKeyStem(module, "down_proj", both), prefix);
  EXPECT_EQ(peftParameterKeyStem(module, "gate_up_proj", gate_up_only), prefix);
  EXPECT_EQ(peftParameterKeyStem(module, "down_proj", down_only), prefix);
}

}  // namespace
}  // namespace mt
