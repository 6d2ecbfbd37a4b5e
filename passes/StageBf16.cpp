// mt-stage-bf16: every copy of a parameter to the device reads the parameter's bf16 staging copy
// instead of its fp32 master (half the link bytes), widened to f32 on the device right before the
// copy's first use (so the bf16 buffer, not the f32 one, waits for it when copied a block ahead).
// The host keeps each staging copy rounded from its master (to nearest; the master is then held
// split, the copy + a 16-bit residual: runtime/plan.proto ROLE_RESIDUAL) whenever the master
// changes; the forward and backward then see bf16-rounded weights, while the master, the moments
// and the gradients stay fp32.
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_STAGEBF16PASS
#include "passes/Passes.h.inc"

namespace {

struct StageBf16Pass : impl::StageBf16PassBase<StageBf16Pass> {
  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    Block& body = func.getBody().front();
    SmallVector<H2DOp> copies;
    bool scheduled = false;
    for (Operation& op : body) {
      if (op.hasAttr(kOffsetsAttr)) {
        op.emitError("mt-stage-bf16 runs before mt-plan-memory (the staging changes what the arena holds)");
        return signalPassFailure();
      }
      auto copy = dyn_cast<H2DOp>(op);
      scheduled |= bool(copy);
      auto arg = copy ? dyn_cast<BlockArgument>(copy.getInput()) : nullptr;
      if (arg && func.getArgAttr(arg.getArgNumber(), kParamAttr) &&
          cast<RankedTensorType>(arg.getType()).getElementType().isF32())
        copies.push_back(copy);
    }
    if (!scheduled) {
      func.emitError("mt-stage-bf16 needs a scheduled function: run mt-schedule-resident or mt-schedule-streamed "
                     "first");
      return signalPassFailure();
    }
    OpBuilder b(func.getContext());
    DenseMap<Value, Value> stagingOf;  // parameter (piece) argument -> its staging argument
    for (H2DOp copy : copies) {
      auto param = cast<BlockArgument>(copy.getInput());
      Value& staging = stagingOf[param];
      if (!staging) {
        auto type = cast<RankedTensorType>(param.getType());
        const unsigned index = func.getNumArguments();
        func.insertArgument(index, RankedTensorType::get(type.getShape(), b.getBF16Type()),
                            b.getDictionaryAttr({b.getNamedAttr(kStagingAttr, func.getArgAttr(param.getArgNumber(),
                                                                                             kParamAttr))}),
                            param.getLoc());
        staging = func.getArgument(index);
      }
      b.setInsertionPoint(copy);
      auto half = b.create<H2DOp>(copy.getLoc(), staging);
      half->setAttrs(copy->getAttrs());
      Operation* first = nullptr;
      for (Operation* user : copy.getResult().getUsers())
        if (!first || user->isBeforeInBlock(first)) first = user;
      if (first) {
        b.setInsertionPoint(first);
        auto widen = b.create<WidenOp>(copy.getLoc(), copy.getType(), half.getResult());
        for (StringRef mark : {kBlockAttr, kBackwardAttr, kRecomputeAttr})
          if (Attribute value = first->getAttr(mark)) widen->setAttr(mark, value);
        copy.getResult().replaceAllUsesWith(widen.getResult());
      }
      copy.erase();
    }
  }
};

}  // namespace
}  // namespace mt
