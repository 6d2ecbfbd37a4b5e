// The plan emitter: a compiled model's plan verifies, its streams carry what the schedule put
// there with events wherever one stream consumes another's result, and a module that skipped
// the memory plan is refused.
#include <gtest/gtest.h>

#include <map>

#include "compiler/Emitter.h"
#include "compiler/Stages.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "models/BuiltinModels.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/op_table.h"
#include "runtime/plan/verifier.h"

namespace mt {
namespace {

class EmitterTest : public ::testing::Test {
 protected:
  EmitterTest() {
    context_.getOrLoadDialect<MtDialect>();
    context_.getOrLoadDialect<mlir::func::FuncDialect>();
    context_.printOpOnDiagnostic(false);
  }
  mlir::LogicalResult emit(mlir::ModuleOp module, plan::Plan& plan, bool templates = false,
                           const HardwareProfile& hardware = *findHardwareProfile("cpu")) {
    EmitOptions options;
    modelShape(module, options.batch, options.seq, options.vocab);
    options.hardware = hardware;
    options.templates = templates;
    PlanStats stats;
    return emitPlan(module, options, plan, stats);
  }
  mlir::MLIRContext context_;
};

TEST_F(EmitterTest, BuiltinModelPlanVerifiesWithStreamsAndEvents) {
  ModelConfig config = findModelPreset("llama-tiny")->config;
  auto module = buildModel(context_, config, 2, 8);
  ASSERT_FALSE(runStages(*module, {}).failed);
  plan::Plan plan;
  ASSERT_TRUE(mlir::succeeded(emit(*module, plan)));
  verifyPlan(plan);

  ASSERT_EQ(plan.streams_size(), 4);
  const auto& compute = plan.streams(0);
  const auto& h2d = plan.streams(1);
  const auto& d2h = plan.streams(2);
  const auto& host = plan.streams(3);
  EXPECT_EQ(compute.kind(), plan::Stream::COMPUTE);
  int params = 0;
  for (const auto& t : plan.host_tensors()) params += t.role() == plan::ROLE_PARAM;
  int copies_in = 0, copies_out = 0, kernels = 0;
  for (const auto& in : h2d.instructions()) copies_in += in.has_copy();
  for (const auto& in : d2h.instructions()) copies_out += in.has_copy();
  for (const auto& in : compute.instructions()) kernels += in.has_kernel();
  EXPECT_EQ(copies_in, params + 2);   // every weight, tokens and targets
  EXPECT_EQ(copies_out, params + 1);  // every gradient and the loss
  EXPECT_GT(kernels, 40);
  // The compute stream's first kernel waits for the copies it reads.
  ASSERT_TRUE(compute.instructions(0).has_wait_event());
  // The host stream: the previous step's AdamW, one task per parameter, then (after waiting
  // for the gradients) this step's norm.
  std::map<uint32_t, int> updateAt;  // parameter -> position of its update on the host stream
  std::map<uint32_t, int> recordedAt;  // event -> position of its record on the host stream
  for (int i = 0; i < host.instructions_size(); ++i) {
    const auto& in = host.instructions(i);
    if (in.has_record_event()) recordedAt[in.record_event()] = i;
    if (!in.has_host_task() || in.host_task().kind() != plan::HostTask::ADAMW_PREVIOUS) continue;
    ASSERT_EQ(in.host_task().tensors_size(), 1);
    EXPECT_TRUE(updateAt.emplace(in.host_task().tensors(0), i).second);
  }
  EXPECT_EQ(static_cast<int>(updateAt.size()), params);
  const auto& norm = host.instructions(host.instructions_size() - 1);
  EXPECT_EQ(norm.host_task().kind(), plan::HostTask::GRAD_NORM);
  EXPECT_TRUE(host.instructions(host.instructions_size() - 2).has_wait_event());
  // Each weight's copy in waits for its update; the first copy does not wait for the last
  // update (the optimizer overlaps the copies and compute).
  int lastUpdate = 0;
  for (auto [param, at] : updateAt) lastUpdate = std::max(lastUpdate, at);
  int waitedHost = -1, copies = 0;
  for (const auto& in : h2d.instructions()) {
    if (in.has_wait_event() && recordedAt.count(in.wait_event()))
      waitedHost = std::max(waitedHost, recordedAt[in.wait_event()]);
    if (!in.has_copy() || !updateAt.count(in.copy().host_tensor())) continue;
    EXPECT_GE(waitedHost, updateAt[in.copy().host_tensor()]) << plan.host_tensors(in.copy().host_tensor()).name();
    if (copies++ == 0) EXPECT_LT(waitedHost, lastUpdate);
  }
  EXPECT_EQ(plan.model().num_params(), config.numParams());
}

// Identical layer blocks share one template per direction; expanding the launches gives back
// exactly the plan written without templates.
TEST_F(EmitterTest, IdenticalBlocksShareTemplatesThatExpandToTheFlatProgram) {
  ModelConfig config = findModelPreset("llama-tiny")->config;
  config.layers = 6;
  for (Schedule schedule : kSchedules) {
    SCOPED_TRACE(scheduleName(schedule));
    auto flat_module = buildModel(context_, config, 2, 8);
    auto templated_module = buildModel(context_, config, 2, 8);
    ASSERT_FALSE(runStages(*flat_module, {std::nullopt, 0, schedule}).failed);
    ASSERT_FALSE(runStages(*templated_module, {std::nullopt, 0, schedule}).failed);
    plan::Plan flat, templated;
    ASSERT_TRUE(mlir::succeeded(emit(*flat_module, flat, false)));
    ASSERT_TRUE(mlir::succeeded(emit(*templated_module, templated, true)));
    EXPECT_EQ(flat.templates_size(), 0);
    ASSERT_GE(templated.templates_size(), 2) << "no forward and backward templates";
    int launches = 0;
    for (const auto& in : templated.streams(0).instructions()) launches += in.has_launch();
    EXPECT_GE(launches, 2 * (config.layers - 1)) << "most blocks should launch a template";
    EXPECT_LT(templated.streams(0).instructions_size() * 3, flat.streams(0).instructions_size());
    expandTemplates(templated);
    templated.clear_templates();
    EXPECT_EQ(templated.SerializeAsString(), flat.SerializeAsString()) << "the expansion is not the flat program";
  }
}

// Each attention call is priced at the rate of the kernels that run it on a GPU: a bf16 plan's
// plain calls at cuDNN's; its calls with a window, sinks or packed examples at our tensor-core
// kernels' (forward and backward apart) where the heads are 64 or 128 wide, else at our f32
// kernels'; an fp32 plan's at our f32 kernels'. Four rates far apart, memory never the bound.
TEST_F(EmitterTest, PricesEachAttentionAtTheRateOfItsKernels) {
  HardwareProfile hw = *findHardwareProfile("h200");
  hw.attention_flops_per_s = 1e12, hw.bf16_attention_flops_per_s = 2e12;
  hw.bf16_attention_ours_flops_per_s = 3e12, hw.bf16_attention_grad_ours_flops_per_s = 4e12;
  hw.memory_bps = 1e30;
  struct Case {
    const char* what;
    int64_t head_dim;
    bool window, sinks, packed;
    ComputePrecision precision;
    double forward, backward;  // the rates expected
  };
  const auto bf16 = ComputePrecision::kBf16, fp32 = ComputePrecision::kFp32;
  for (const Case& c : {Case{"bf16 plain", 64, false, false, false, bf16, 2e12, 2e12},
                        Case{"bf16 window", 64, true, false, false, bf16, 3e12, 4e12},
                        Case{"bf16 sinks", 128, false, true, false, bf16, 3e12, 2e12},
                        Case{"bf16 packed", 64, false, false, true, bf16, 3e12, 4e12},
                        Case{"bf16 packed, heads of 24", 24, false, false, true, bf16, 1e12, 1e12},
                        Case{"fp32 window", 64, true, false, false, fp32, 1e12, 1e12}}) {
    ModelConfig config = findModelPreset("llama-tiny")->config;
    config.head_dim = c.head_dim;
    if (c.window) config.sliding_window = 4, config.sliding_layers = {0, 1};
    config.attention_sinks = c.sinks;
    auto module = buildModel(context_, config, 2, 16, ParamInit::kSeeded,
                             c.packed ? ModelForm::kPackedTraining : ModelForm::kTraining);
    StageOptions stages;
    stages.precision = c.precision;
    ASSERT_FALSE(runStages(*module, stages).failed) << c.what;
    plan::Plan plan;
    ASSERT_TRUE(mlir::succeeded(emit(*module, plan, false, hw))) << c.what;
    int forwards = 0, backwards = 0;
    for (const auto& in : plan.streams(0).instructions()) {
      if (!in.has_kernel()) continue;
      const std::string_view name = kKernelTable[in.kernel().kernel()].op_name;
      const bool forward = name.starts_with("mt.attention") && !name.ends_with("grad");
      const bool backward = name == "mt.attention_grad" || name == "mt.attention_packed_grad";
      if (!forward && !backward) continue;
      (forward ? forwards : backwards) += 1;
      EXPECT_NEAR(in.predicted_us(), in.flops() / (forward ? c.forward : c.backward) * 1e6, 1e-9 * in.predicted_us())
          << c.what << ": " << name;
    }
    EXPECT_EQ(forwards, 2) << c.what;
    EXPECT_EQ(backwards, 2) << c.what;
  }
}

TEST_F(EmitterTest, RefusesAModuleWithoutAMemoryPlan) {
  auto module = buildModel(context_, findModelPreset("gpt2-tiny")->config, 2, 8);
  ASSERT_FALSE(runStages(*module, {Stage::kSchedule}).failed);
  plan::Plan plan;
  std::string message;
  mlir::ScopedDiagnosticHandler capture(&context_, [&](mlir::Diagnostic& d) {
    message = d.str();
    return mlir::success();
  });
  EXPECT_TRUE(mlir::failed(emit(*module, plan)));
  EXPECT_NE(message.find("run mt-plan-memory first"), std::string::npos) << message;
}

}  // namespace
}  // namespace mt
