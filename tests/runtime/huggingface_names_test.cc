// The names and layouts PEFT's adapter folders use (runtime/plan/huggingface_names.h): a stack of
// experts' B in PEFT's lora_B form and back, the key stems of parameters PEFT wraps in turn, and
// where transformers 5 fuses Qwen3-MoE's and Mixtral's experts; Qwen2-MoE's shared expert; Phi-3's
// fused projections.
#include <gtest/gtest.h>

#include <string>
#include <utility>
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

// Transformers 5's fused experts of Qwen3-MoE and Mixtral (Mixtral's moved from block_sparse_moe
// to mlp): gate's rows, then up's, in gate_up_proj; down alone in down_proj; the router a parameter
// of mlp.gate. gpt-oss's stacks and other parameters have no such place.
TEST(HuggingFaceNamesTest, FusedExpertsPlaces) {
  for (CheckpointLayout layout : {CheckpointLayout::kLlama, CheckpointLayout::kMixtral}) {
    const auto gate = fusedExpertsPlace("layers.12.moe.gate.weight", layout);
    const auto up = fusedExpertsPlace("layers.12.moe.up.weight", layout);
    const auto down = fusedExpertsPlace("layers.12.moe.down.weight", layout);
    ASSERT_TRUE(gate && up && down);
    EXPECT_EQ(gate->parameter, "model.layers.12.mlp.experts.gate_up_proj");
    EXPECT_EQ(up->parameter, gate->parameter);
    EXPECT_EQ(down->parameter, "model.layers.12.mlp.experts.down_proj");
    EXPECT_EQ(std::pair(gate->part, gate->parts), std::pair(int64_t{0}, int64_t{2}));
    EXPECT_EQ(std::pair(up->part, up->parts), std::pair(int64_t{1}, int64_t{2}));
    EXPECT_EQ(std::pair(down->part, down->parts), std::pair(int64_t{0}, int64_t{1}));
    EXPECT_EQ(fusedRouterName("layers.12.moe.router.weight", layout), "model.layers.12.mlp.gate.weight");
    EXPECT_FALSE(fusedExpertsPlace("layers.12.mlp.gate.weight", layout));  // a dense layer's MLP
    EXPECT_FALSE(fusedExpertsPlace("layers.12", layout));
    EXPECT_EQ(fusedRouterName("layers.12.attn.q.weight", layout), "");
  }
  EXPECT_FALSE(fusedExpertsPlace("layers.0.moe.gate_up.weight", CheckpointLayout::kGptOss));
  EXPECT_FALSE(fusedExpertsPlace("layers.0.moe.down.weight", CheckpointLayout::kGptOss));
  EXPECT_EQ(fusedRouterName("layers.0.moe.router.weight", CheckpointLayout::kGptOss), "");
}

// Qwen2-MoE's shared expert and its gate: nn.Linear modules of their own beside the experts (in
// transformers 5 too), so no fused place; the routed experts' stacks keep theirs.
TEST(HuggingFaceNamesTest, Qwen2MoeSharedExpertPlaces) {
  const std::pair<const char*, const char*> kShared[] = {
      {"layers.2.moe.shared.gate.weight", "model.layers.2.mlp.shared_expert.gate_proj.weight"},
      {"layers.2.moe.shared.up.weight", "model.layers.2.mlp.shared_expert.up_proj.weight"},
      {"layers.2.moe.shared.down.weight", "model.layers.2.mlp.shared_expert.down_proj.weight"},
      {"layers.2.moe.shared_gate.weight", "model.layers.2.mlp.shared_expert_gate.weight"}};
  const CheckpointLayout layout = checkpointLayoutOf("Qwen2MoeForCausalLM");
  EXPECT_EQ(layout, CheckpointLayout::kLlama);
  for (const auto& [ours, theirs] : kShared) {
    const HuggingFacePlace place = huggingFacePlace(ours, "", layout);
    EXPECT_EQ(place.name, theirs) << ours;
    EXPECT_FALSE(place.per_expert) << ours;
    EXPECT_EQ(notOwnModuleTensor(place), nullptr) << ours;
    EXPECT_FALSE(fusedExpertsPlace(ours, layout)) << ours;
  }
  EXPECT_EQ(huggingFacePlace("layers.2.moe.gate.weight", "", layout).name, "model.layers.2.mlp.experts.*.gate_proj.weight");
  EXPECT_TRUE(peftMovesToFused("model.layers.2.mlp.shared_expert.gate_proj", layout));  // refused in the fused form
}

// GLM-4.5's mixture: Qwen3-MoE's experts and router (fused alike in transformers 5), the router's
// choice bias a buffer of its router module, the shared experts nn.Linear modules of their own.
TEST(HuggingFaceNamesTest, Glm4MoePlaces) {
  const CheckpointLayout layout = checkpointLayoutOf("Glm4MoeForCausalLM");
  EXPECT_EQ(layout, CheckpointLayout::kGlm4Moe);
  const std::pair<const char*, const char*> kOwn[] = {
      {"layers.3.moe.shared.gate.weight", "model.layers.3.mlp.shared_experts.gate_proj.weight"},
      {"layers.3.moe.shared.up.weight", "model.layers.3.mlp.shared_experts.up_proj.weight"},
      {"layers.3.moe.shared.down.weight", "model.layers.3.mlp.shared_experts.down_proj.weight"},
      {"layers.3.moe.router.score_bias", "model.layers.3.mlp.gate.e_score_correction_bias"},
      {"layers.3.moe.router.weight", "model.layers.3.mlp.gate.weight"},
      {"layers.0.mlp.up.weight", "model.layers.0.mlp.up_proj.weight"},
      {"layers.0.attn.q.bias", "model.layers.0.self_attn.q_proj.bias"}};
  for (const auto& [ours, theirs] : kOwn) {
    const HuggingFacePlace place = huggingFacePlace(ours, "", layout);
    EXPECT_EQ(place.name, theirs) << ours;
    EXPECT_FALSE(place.per_expert) << ours;
    EXPECT_FALSE(fusedExpertsPlace(ours, layout)) << ours;
  }
  EXPECT_TRUE(huggingFacePlace("layers.3.moe.router.score_bias", "", layout).keep_f32);  // frozen: written as read
  const HuggingFacePlace up = huggingFacePlace("layers.3.moe.up.weight", "", layout);
  EXPECT_EQ(up.name, "model.layers.3.mlp.experts.*.up_proj.weight");
  EXPECT_TRUE(up.per_expert);
  const auto fused = fusedExpertsPlace("layers.3.moe.up.weight", layout);
  ASSERT_TRUE(fused);
  EXPECT_EQ(fused->parameter, "model.layers.3.mlp.experts.gate_up_proj");
  EXPECT_EQ(fused->part, 1);
  EXPECT_TRUE(peftMovesToFused("model.layers.3.mlp.experts.0.up_proj", layout));
}

// Ernie 4.5's mixture: GLM-4.5's names (its experts fused alike in transformers 5) but for the
// router's choice bias, its moe_statics' (1, E) tensor: the first axis of 1 before ours.
TEST(HuggingFaceNamesTest, Ernie45MoePlaces) {
  const CheckpointLayout layout = checkpointLayoutOf("Ernie4_5_MoeForCausalLM");
  EXPECT_EQ(layout, CheckpointLayout::kErnie45Moe);
  const HuggingFacePlace bias = huggingFacePlace("layers.2.moe.router.score_bias", "", layout);
  EXPECT_EQ(bias.name, "model.layers.2.mlp.moe_statics.e_score_correction_bias");
  EXPECT_TRUE(bias.unit_first_axis);
  EXPECT_TRUE(bias.keep_f32);  // the router and its bias F32 in a bf16 export, as transformers keeps them
  EXPECT_TRUE(huggingFacePlace("layers.2.moe.router.weight", "", layout).keep_f32);
  EXPECT_FALSE(huggingFacePlace("layers.2.moe.shared.up.weight", "", layout).keep_f32);
  const std::pair<const char*, const char*> kOwn[] = {
      {"layers.2.moe.shared.gate.weight", "model.layers.2.mlp.shared_experts.gate_proj.weight"},
      {"layers.2.moe.shared.down.weight", "model.layers.2.mlp.shared_experts.down_proj.weight"},
      {"layers.2.moe.router.weight", "model.layers.2.mlp.gate.weight"},
      {"layers.0.mlp.gate.weight", "model.layers.0.mlp.gate_proj.weight"}};
  for (const auto& [ours, theirs] : kOwn) {
    const HuggingFacePlace place = huggingFacePlace(ours, "", layout);
    EXPECT_EQ(place.name, theirs) << ours;
    EXPECT_FALSE(place.unit_first_axis) << ours;
  }
  EXPECT_EQ(huggingFacePlace("layers.2.moe.down.weight", "", layout).name,
            "model.layers.2.mlp.experts.*.down_proj.weight");
  const auto fused = fusedExpertsPlace("layers.2.moe.gate.weight", layout);
  ASSERT_TRUE(fused);
  EXPECT_EQ(fused->parameter, "model.layers.2.mlp.experts.gate_up_proj");
  EXPECT_EQ(fusedRouterName("layers.2.moe.router.weight", layout), "model.layers.2.mlp.gate.weight");
}

// DeepSeek-V3: GLM-4.5's mixture and names, its latent attention's projections and norms.
TEST(HuggingFaceNamesTest, DeepseekV3LatentAttentionPlaces) {
  const CheckpointLayout layout = checkpointLayoutOf("DeepseekV3ForCausalLM");
  EXPECT_EQ(layout, CheckpointLayout::kGlm4Moe);
  const std::pair<const char*, const char*> kAttention[] = {
      {"layers.5.attn.q.weight", "model.layers.5.self_attn.q_proj.weight"},
      {"layers.5.attn.q_a.weight", "model.layers.5.self_attn.q_a_proj.weight"},
      {"layers.5.attn.q_a_norm.weight", "model.layers.5.self_attn.q_a_layernorm.weight"},
      {"layers.5.attn.q_b.weight", "model.layers.5.self_attn.q_b_proj.weight"},
      {"layers.5.attn.kv_a.weight", "model.layers.5.self_attn.kv_a_proj_with_mqa.weight"},
      {"layers.5.attn.kv_a_norm.weight", "model.layers.5.self_attn.kv_a_layernorm.weight"},
      {"layers.5.attn.kv_b.weight", "model.layers.5.self_attn.kv_b_proj.weight"},
      {"layers.5.attn.o.weight", "model.layers.5.self_attn.o_proj.weight"},
      {"layers.5.moe.router.score_bias", "model.layers.5.mlp.gate.e_score_correction_bias"}};
  for (const auto& [ours, theirs] : kAttention) EXPECT_EQ(huggingFacePlace(ours, "", layout).name, theirs) << ours;
}

// Phi-3's fused projections: q, k and v parts 0-2 of qkv_proj, gate and up parts 0-1 of gate_up_proj,
// the other parameters where Llama has them; neither a module of its own PEFT could adapt. Parsed
// from the architecture once, its classifier's too; no experts there.
TEST(HuggingFaceNamesTest, Phi3FusedProjectionPlaces) {
  EXPECT_EQ(checkpointLayoutOf("Phi3ForCausalLM"), CheckpointLayout::kPhi3);
  EXPECT_EQ(checkpointLayoutOf("Phi3ForSequenceClassification"), CheckpointLayout::kPhi3);
  const CheckpointLayout phi3 = CheckpointLayout::kPhi3;
  const std::pair<const char*, std::pair<const char*, int64_t>> kFused[] = {
      {"layers.7.attn.q.weight", {"model.layers.7.self_attn.qkv_proj.weight", 0}},
      {"layers.7.attn.k.weight", {"model.layers.7.self_attn.qkv_proj.weight", 1}},
      {"layers.7.attn.v.weight", {"model.layers.7.self_attn.qkv_proj.weight", 2}},
      {"layers.7.mlp.gate.weight", {"model.layers.7.mlp.gate_up_proj.weight", 0}},
      {"layers.7.mlp.up.weight", {"model.layers.7.mlp.gate_up_proj.weight", 1}}};
  for (const auto& [ours, theirs] : kFused) {
    const HuggingFacePlace place = huggingFacePlace(ours, "transformer.", phi3);
    EXPECT_EQ(place.name, theirs.first) << ours;
    EXPECT_EQ(place.part, theirs.second) << ours;
    EXPECT_EQ(place.parts, std::string(theirs.first).find("qkv") != std::string::npos ? 3 : 2) << ours;
    EXPECT_FALSE(place.transposed) << ours;
    EXPECT_NE(notOwnModuleTensor(place), nullptr) << ours;
  }
  const HuggingFacePlace o = huggingFacePlace("layers.7.attn.o.weight", "transformer.", phi3);
  EXPECT_EQ(o.name, "model.layers.7.self_attn.o_proj.weight");
  EXPECT_EQ(o.parts, 1);
  EXPECT_EQ(notOwnModuleTensor(o), nullptr);
  EXPECT_EQ(huggingFacePlace("layers.7.mlp.down.weight", "transformer.", phi3).name, "model.layers.7.mlp.down_proj.weight");
  EXPECT_EQ(huggingFacePlace("layers.7.mlp_norm.weight", "transformer.", phi3).name,
            "model.layers.7.post_attention_layernorm.weight");
  EXPECT_EQ(huggingFacePlace("layers.7.attn.q.weight").name, "model.layers.7.self_attn.q_proj.weight");  // Llama's
  EXPECT_TRUE(fusedExpertsPlace("layers.7.moe.gate.weight", CheckpointLayout::kLlama));  // Qwen3-MoE's names...
  EXPECT_FALSE(fusedExpertsPlace("layers.7.moe.gate.weight", phi3));                    // ... not Phi-3's
  EXPECT_FALSE(peftMovesToFused("down_proj", phi3));
}

// GraniteMoE's mixture: the router under router.layer, every expert's gate and up parts 0 and 1 of
// input_linear (along each expert's output axis, the stack's second), down in output_linear; the
// attention where Llama has it; dense Granite's layout Llama's. Neither stack one linear layer an
// expert, nor transformers 5's fused Qwen3-MoE names.
TEST(HuggingFaceNamesTest, GraniteMoeExpertPlaces) {
  EXPECT_EQ(checkpointLayoutOf("GraniteMoeForCausalLM"), CheckpointLayout::kGraniteMoe);
  EXPECT_EQ(checkpointLayoutOf("GraniteMoeForSequenceClassification"), CheckpointLayout::kGraniteMoe);
  EXPECT_EQ(checkpointLayoutOf("GraniteForCausalLM"), CheckpointLayout::kLlama);
  const CheckpointLayout granite = CheckpointLayout::kGraniteMoe;
  const HuggingFacePlace gate = huggingFacePlace("layers.3.moe.gate.weight", "", granite);
  const HuggingFacePlace up = huggingFacePlace("layers.3.moe.up.weight", "", granite);
  const HuggingFacePlace down = huggingFacePlace("layers.3.moe.down.weight", "", granite);
  const HuggingFacePlace router = huggingFacePlace("layers.3.moe.router.weight", "", granite);
  EXPECT_EQ(gate.name, "model.layers.3.block_sparse_moe.input_linear.weight");
  EXPECT_EQ(up.name, gate.name);
  EXPECT_EQ(gate.part, 0);
  EXPECT_EQ(up.part, 1);
  EXPECT_EQ(up.parts, 2);
  EXPECT_EQ(down.name, "model.layers.3.block_sparse_moe.output_linear.weight");
  EXPECT_EQ(down.parts, 1);
  EXPECT_EQ(router.name, "model.layers.3.block_sparse_moe.router.layer.weight");
  for (const HuggingFacePlace& place : {gate, up, down, router}) EXPECT_FALSE(place.per_expert) << place.name;
  EXPECT_NE(notOwnModuleTensor(gate), nullptr);
  EXPECT_EQ(notOwnModuleTensor(router), nullptr);  // an nn.Linear in transformers
  EXPECT_EQ(huggingFacePlace("layers.3.attn.k.weight", "", granite).name, "model.layers.3.self_attn.k_proj.weight");
  EXPECT_FALSE(fusedExpertsPlace("layers.3.moe.gate.weight", granite));
  EXPECT_EQ(fusedRouterName("layers.3.moe.router.weight", granite), "");
  EXPECT_FALSE(peftMovesToFused("gate_proj", granite));
  EXPECT_EQ(fusedPartAxis(3), 1u);  // a stack (experts, out, in)
  EXPECT_EQ(fusedPartAxis(2), 0u);
}

// GLM-4 (Glm4ForCausalLM, and its classifier; not GLM-4.5's layout, whose name it begins): its norms
// around both sublayers by its own names, the MLP's gate and up parts 0 and 1 of gate_up_proj (a fused
// linear layer, as Phi-3's), q, k and v where Llama has them.
TEST(HuggingFaceNamesTest, Glm4Places) {
  const CheckpointLayout layout = checkpointLayoutOf("Glm4ForCausalLM");
  EXPECT_EQ(layout, CheckpointLayout::kGlm4);
  EXPECT_EQ(checkpointLayoutOf("Glm4ForSequenceClassification"), CheckpointLayout::kGlm4);
  EXPECT_EQ(checkpointLayoutOf("Glm4MoeForCausalLM"), CheckpointLayout::kGlm4Moe);
  EXPECT_TRUE(holdsFusedLinearLayers(layout));
  const std::pair<const char*, const char*> kNorms[] = {
      {"layers.1.attn_norm.weight", "model.layers.1.input_layernorm.weight"},
      {"layers.1.attn_post_norm.weight", "model.layers.1.post_self_attn_layernorm.weight"},
      {"layers.1.mlp_pre_norm.weight", "model.layers.1.post_attention_layernorm.weight"},
      {"layers.1.mlp_post_norm.weight", "model.layers.1.post_mlp_layernorm.weight"},
      {"layers.1.attn.q.bias", "model.layers.1.self_attn.q_proj.bias"},
      {"layers.1.mlp.down.weight", "model.layers.1.mlp.down_proj.weight"}};
  for (const auto& [ours, theirs] : kNorms) {
    const HuggingFacePlace place = huggingFacePlace(ours, "", layout);
    EXPECT_EQ(place.name, theirs) << ours;
    EXPECT_EQ(place.parts, 1) << ours;
  }
  const HuggingFacePlace gate = huggingFacePlace("layers.1.mlp.gate.weight", "", layout);
  const HuggingFacePlace up = huggingFacePlace("layers.1.mlp.up.weight", "", layout);
  EXPECT_EQ(gate.name, "model.layers.1.mlp.gate_up_proj.weight");
  EXPECT_EQ(up.name, gate.name);
  EXPECT_EQ(gate.part, 0);
  EXPECT_EQ(up.part, 1);
  EXPECT_EQ(up.parts, 2);
  EXPECT_NE(notOwnModuleTensor(up), nullptr);  // PEFT adapts gate_up_proj whole
}

// Granite 4.0's MLP (GraniteMoeHybridForCausalLM): gate and up parts 0 and 1 of one nn.Linear,
// shared_mlp.input_linear, which PEFT adapts whole (a fused linear layer, as Phi-3's); down its
// output_linear; the attention where Llama has it. Not GraniteMoE's layout, whose name it extends.
TEST(HuggingFaceNamesTest, GraniteHybridSharedMlpPlaces) {
  EXPECT_EQ(checkpointLayoutOf("GraniteMoeHybridForCausalLM"), CheckpointLayout::kGraniteHybrid);
  EXPECT_EQ(checkpointLayoutOf("GraniteMoeHybridForSequenceClassification"), CheckpointLayout::kGraniteHybrid);
  const CheckpointLayout granite = CheckpointLayout::kGraniteHybrid;
  EXPECT_TRUE(holdsFusedLinearLayers(granite));
  EXPECT_TRUE(holdsFusedLinearLayers(CheckpointLayout::kPhi3));
  EXPECT_FALSE(holdsFusedLinearLayers(CheckpointLayout::kGraniteMoe));  // its fused tensors are stacks of experts
  const HuggingFacePlace gate = huggingFacePlace("layers.5.mlp.gate.weight", "", granite);
  const HuggingFacePlace up = huggingFacePlace("layers.5.mlp.up.weight", "", granite);
  const HuggingFacePlace down = huggingFacePlace("layers.5.mlp.down.weight", "", granite);
  EXPECT_EQ(gate.name, "model.layers.5.shared_mlp.input_linear.weight");
  EXPECT_EQ(up.name, gate.name);
  EXPECT_EQ(gate.part, 0);
  EXPECT_EQ(up.part, 1);
  EXPECT_EQ(up.parts, 2);
  EXPECT_EQ(down.name, "model.layers.5.shared_mlp.output_linear.weight");
  EXPECT_EQ(down.parts, 1);
  EXPECT_EQ(notOwnModuleTensor(down), nullptr);
  EXPECT_EQ(huggingFacePlace("layers.5.attn.o.weight", "", granite).name, "model.layers.5.self_attn.o_proj.weight");
  EXPECT_EQ(huggingFacePlace("layers.5.mlp_norm.weight", "", granite).name,
            "model.layers.5.post_attention_layernorm.weight");
}

}  // namespace
}  // namespace mt
