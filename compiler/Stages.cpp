#include "compiler/Stages.h"

#include "compiler/Pipeline.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
namespace {

// The pass that ends each stage after "input".
std::unique_ptr<Pass> stagePass(const std::string& stage, int64_t budget) {
  if (stage == "attach-loss") return createAttachLossPass();
  if (stage == "autodiff") return createAutodiffPass();
  if (stage == "schedule") return createScheduleResidentPass();
  PlanMemoryPassOptions options;
  options.budget = budget;
  return createPlanMemoryPass(options);
}

}  // namespace

std::string runStages(ModuleOp module, const std::string& last, int64_t device_mem) {
  if (last == "input") return "";
  for (const char* stage : kStages) {
    if (std::string(stage) == "input") continue;
    PassManager pm(module.getContext());
    pm.addPass(stagePass(stage, device_mem));
    if (failed(pm.run(module))) return stage;
    if (last == stage) return "";
  }
  return "";
}

void modelShape(ModuleOp module, int64_t& batch, int64_t& seq, int64_t& vocab) {
  module.walk([&](SoftmaxXentOp op) {
    auto logits = op.getLogits().getType().getShape();
    vocab = logits.back();
    batch = logits.size() >= 3 ? logits[0] : 1;
    seq = logits.size() >= 2 ? logits[logits.size() - 2] : 1;
  });
}

}  // namespace mt
