// mt-schedule-resident: the all-resident schedule of one training step. Every argument is
// copied to the device at the start, the loss and gradients are copied back at the end, and
// the host then takes the global gradient norm and runs AdamW on every parameter. A
// forward-only function (named outputs, no loss) is scheduled the same way without the host
// tasks: one evaluation.
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_SCHEDULERESIDENTPASS
#include "passes/Passes.h.inc"

namespace {

struct ScheduleResidentPass : impl::ScheduleResidentPassBase<ScheduleResidentPass> {
  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    Block& body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    const bool forward = isForwardOnly(func);
    if (failed(checkReadyToSchedule(func, "mt-schedule-resident", /*allowForwardOnly=*/true)))
      return signalPassFailure();

    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&body);
    for (BlockArgument arg : func.getArguments()) {
      if (arg.use_empty()) continue;
      auto copy = b.create<H2DOp>(func.getLoc(), arg);
      arg.replaceAllUsesExcept(copy.getResult(), copy);
    }

    b.setInsertionPoint(ret);
    SmallVector<Value> hostResults, hostGrads;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      Value host = b.create<D2HOp>(ret.getLoc(), v);
      hostResults.push_back(host);
      if (i > 0 && !forward) hostGrads.push_back(host);
    }
    SmallVector<Value> params = parameterArguments(func);
    if (!params.empty() && !forward) {
      b.create<HostTaskOp>(ret.getLoc(), "grad_norm", hostGrads);
      b.create<HostTaskOp>(ret.getLoc(), "adamw", params);
    }
    ret->setOperands(hostResults);
  }
};

}  // namespace
}  // namespace mt
