// mt-attach-loss: a function that returns logits (B, T, V) gets a targets input and returns
// the mean softmax cross-entropy instead. Named outputs after the logits (a mixture of experts'
// router statistics) stay where they are.
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_ATTACHLOSSPASS
#include "passes/Passes.h.inc"

namespace {

struct AttachLossPass : impl::AttachLossPassBase<AttachLossPass> {
  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    if (ret.getNumOperands() < 1) {
      ret.emitError("cannot attach a loss: the model function returns nothing; it must return its logits");
      return signalPassFailure();
    }
    if (const unsigned i = firstUnnamedResult(func, 1); i < func.getNumResults()) {
      ret.emitError("cannot attach a loss: the model function must return its logits, then named outputs "
                    "only; result ")
          << i << " has no " << kOutputAttr;
      return signalPassFailure();
    }
    Value out = ret.getOperand(0);
    auto type = dyn_cast<RankedTensorType>(out.getType());
    if (type && type.getRank() == 0 && type.getElementType().isF32()) {
      func.setResultAttr(0, kLossAttr, UnitAttr::get(&getContext()));
      return;  // already a loss
    }
    if (!type || type.getRank() != 3 || !type.getElementType().isF32() || !type.hasStaticShape()) {
      ret.emitError("cannot attach a loss: the function returns ")
          << out.getType() << "; expected f32 logits of shape (B, T, V) or a scalar loss";
      return signalPassFailure();
    }
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto input = func.getArgAttrOfType<StringAttr>(i, kInputAttr);
      if (input && input.getValue() == "targets") {
        func.emitError("cannot attach a loss: the function already has a targets input but "
                       "returns logits; return the loss or drop the targets input");
        return signalPassFailure();
      }
    }
    OpBuilder b(ret);
    auto targetsType = RankedTensorType::get(type.getShape().drop_back(), b.getI32Type());
    const unsigned index = func.getNumArguments();
    auto attrs = b.getDictionaryAttr(b.getNamedAttr(kInputAttr, b.getStringAttr("targets")));
    func.insertArgument(index, targetsType, attrs, func.getLoc());
    auto loss = b.create<SoftmaxXentOp>(ret.getLoc(), out, func.getArgument(index));
    ret->setOperand(0, loss.getLoss());
    SmallVector<Type> results(ret.getOperandTypes());
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(), results));
    func.setResultAttr(0, kLossAttr, UnitAttr::get(&getContext()));
  }
};

}  // namespace
}  // namespace mt
