// mt-offload-activations: the activations the backward reads from the forward (block inputs
// under streamed-recompute) wait on the host instead of the device: copied out right after
// they are made, copied back in a block ahead of their first use in the backward.
#include <map>

#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_OFFLOADACTIVATIONSPASS
#include "passes/Passes.h.inc"

namespace {

bool isLate(Operation* op) { return op->hasAttr(kBackwardAttr) || op->hasAttr(kRecomputeAttr); }

struct OffloadActivationsPass : impl::OffloadActivationsPassBase<OffloadActivationsPass> {
  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    Block& body = func.getBody().front();
    bool scheduled = false;
    for (Operation& op : body) scheduled |= isa<H2DOp>(op);
    if (!scheduled) {
      func.emitError("mt-offload-activations needs a streamed schedule: run mt-schedule-streamed first");
      return signalPassFailure();
    }
    std::vector<Operation*> ops;
    DenseMap<Operation*, size_t> position;
    for (Operation& op : body.without_terminator()) {
      if (!blockOf(&op)) {
        op.emitError("has no layer block: run mt-partition first");
        return signalPassFailure();
      }
      position[&op] = ops.size();
      ops.push_back(&op);
    }
    DenseMap<Operation*, size_t> region = blockRegions(body);

    OpBuilder b(&getContext());
    int64_t moved = 0;
    for (Operation* def : ops) {
      if (isa<H2DOp, D2HOp, HostTaskOp, ReshapeOp>(def) || isLate(def)) continue;
      for (Value v : def->getResults()) {
        // Only activations (f32, or bf16 in a bf16 plan) wait on the host: integer values
        // (GPT-2's positions) are small and what the plan's activation tensors cannot hold.
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (!type || !isa<FloatType>(type.getElementType())) continue;
        // The backward's uses, in program order, by region.
        std::map<size_t, SmallVector<OpOperand*>> lateUses;  // region -> uses
        for (OpOperand& use : v.getUses())
          if (isLate(use.getOwner()) && !isa<func::ReturnOp>(use.getOwner()))
            lateUses[region[use.getOwner()]].push_back(&use);
        if (lateUses.empty()) continue;
        D2HOp out;
        for (auto& [useRegion, uses] : lateUses) {
          Operation* first = uses.front()->getOwner();
          for (OpOperand* use : uses)
            if (position[use->getOwner()] < position[first]) first = use->getOwner();
          Operation* at = prefetchPoint(ops, position[first]);
          // A copy back would have to start before the copy out ends: keep it on the device.
          if (position[at] <= position[def] + 1) continue;
          if (!out) {
            b.setInsertionPointAfter(def);
            out = b.create<D2HOp>(def->getLoc(), v);
            out->setAttr(kBlockAttr, def->getAttr(kBlockAttr));
          }
          b.setInsertionPoint(at);
          auto back = b.create<H2DOp>(def->getLoc(), out.getResult());
          back->setAttr(kBlockAttr, at->getAttr(kBlockAttr));
          for (OpOperand* use : uses) use->set(back.getResult());
          moved += 2 * tensorBytes(v.getType());
        }
      }
    }
    func->setAttr(kActivationBytesAttr, b.getI64IntegerAttr(moved));
  }
};

}  // namespace
}  // namespace mt
