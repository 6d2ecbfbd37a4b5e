// mt-schedule-resident: the all-resident schedule of one training step. Every argument is
// copied to the device at the start, the loss and gradients are copied back at the end, and
// the host then takes the global gradient norm. AdamW runs one step late: each parameter's
// update just before its copy in, overlapped with the copies and compute before it. A
// forward-only function (named outputs, no loss) is scheduled the same way without the host
// tasks: one evaluation. With keepFrozen, the copies of frozen weights and constants are marked
// kept (mt.kept): mt-plan-memory keeps their bytes, a backend copies them in the first step only.
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_SCHEDULERESIDENTPASS
#include "passes/Passes.h.inc"

namespace {

struct ScheduleResidentPass : impl::ScheduleResidentPassBase<ScheduleResidentPass> {
  using ScheduleResidentPassBase::ScheduleResidentPassBase;

  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    Block& body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    const bool forward = isForwardOnly(func);
    if (failed(checkReadyToSchedule(func, "mt-schedule-resident", /*allowForwardOnly=*/true)))
      return signalPassFailure();

    // Copies in the order the step first needs the arguments, so compute can start on the
    // first while later ones (and their deferred updates) are still under way.
    DenseMap<Operation*, size_t> position;
    for (Operation& op : body) position[&op] = position.size();
    SmallVector<std::pair<size_t, BlockArgument>> firstUse;
    for (BlockArgument arg : func.getArguments()) {
      if (arg.use_empty()) continue;
      size_t first = position.size();
      for (Operation* user : arg.getUsers()) first = std::min(first, position[user]);
      firstUse.emplace_back(first, arg);
    }
    std::stable_sort(firstUse.begin(), firstUse.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&body);
    for (auto [first, arg] : firstUse) {
      auto copy = b.create<H2DOp>(func.getLoc(), arg);
      arg.replaceAllUsesExcept(copy.getResult(), copy);
      if (keepFrozen) markKeptIfPersistent(func, copy);
    }

    // The loss and the named outputs are copied out first: a loss-only run (validation, a
    // preference plan's reference pass) ends at their copies, before any gradient's.
    b.setInsertionPoint(ret);
    const unsigned n = ret.getNumOperands();
    SmallVector<Value> hostResults(n), hostGrads;
    const std::vector<bool> completes = completedGradients(func);
    for (unsigned i = 0; i < n; ++i)
      if (i == 0 || forward || func.getResultAttr(i, kOutputAttr))
        hostResults[i] = b.create<D2HOp>(ret.getLoc(), ret.getOperand(i));
    for (unsigned i = 0; i < n; ++i) {
      if (hostResults[i]) continue;
      hostResults[i] = b.create<D2HOp>(ret.getLoc(), ret.getOperand(i));
      if (completes[i]) hostGrads.push_back(hostResults[i]);  // a piece: once
    }
    if (!hostGrads.empty()) b.create<HostTaskOp>(ret.getLoc(), HostTaskKind::GradNorm, hostGrads);
    ret->setOperands(hostResults);
    if (forward) return;
    if (failed(insertHostEmbeddingTasks(func, hostResults))) return signalPassFailure();
    insertDeferredUpdates(func);
  }
};

}  // namespace
}  // namespace mt
