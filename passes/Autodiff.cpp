// mt-autodiff: reverse-mode differentiation of the scalar loss with respect to every parameter
// that trains (a frozen one, mt.param's "frozen", takes none). Only values that depend on a
// trained parameter take gradients, so the backward stops below the first layer that trains;
// what a gradient rule builds for other operands (constants, fills, inputs, frozen weights) is
// left dead and removed. An op marked mt.stop_gradient passes none: its results are constants
// to the backward (torch's detach).
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"

namespace {

bool isDifferentiable(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getElementType().isF32();
}

struct AutodiffPass : impl::AutodiffPassBase<AutodiffPass> {
  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    Block& body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    auto lossType = ret.getNumOperands() >= 1 ? dyn_cast<RankedTensorType>(ret.getOperand(0).getType())
                                               : RankedTensorType();
    const bool outputs_after = firstUnnamedResult(func, 1) == func.getNumResults();
    if (!lossType || lossType.getRank() != 0 || !lossType.getElementType().isF32() || !outputs_after) {
      ret.emitError("autodiff needs a function that returns one scalar f32 loss, then named outputs only "
                    "(run mt-attach-loss first); it returns ")
          << ret.getOperandTypes();
      return signalPassFailure();
    }
    // The outputs after the loss, kept after the gradients; one with an objective weight adds
    // to the loss for the gradient (the loss reported stays the loss).
    SmallVector<std::pair<Value, DictionaryAttr>> outputs;
    for (unsigned i = 1; i < ret.getNumOperands(); ++i)
      outputs.emplace_back(ret.getOperand(i), func.getResultAttrDict(i));
    // The values that depend on a trained parameter, forward.
    DenseSet<Value> needsGrad;
    for (Value p : parameterArguments(func))
      if (!isFrozenParam(func, cast<BlockArgument>(p).getArgNumber())) needsGrad.insert(p);
    for (Operation& op : body.without_terminator())
      if (!op.hasAttr(kStopGradientAttr) &&
          llvm::any_of(op.getOperands(), [&](Value v) { return needsGrad.contains(v); }))
        for (Value r : op.getResults())
          if (isDifferentiable(r)) needsGrad.insert(r);

    OpBuilder b(ret);
    DenseMap<Value, Value> grads;
    auto accumulate = [&](Value v, Value g) {
      if (!g || !isDifferentiable(v) || !needsGrad.contains(v)) return;
      auto it = grads.find(v);
      if (it == grads.end()) {
        grads[v] = g;
      } else {
        it->second = b.create<AddOp>(g.getLoc(), it->second, g);
      }
    };
    // The forward ops, newest first; the backward ops are appended before the return.
    SmallVector<Operation*> forward;
    for (Operation& op : body.without_terminator()) forward.push_back(&op);
    Value loss = ret.getOperand(0);
    grads[loss] = b.create<FillOp>(ret.getLoc(), lossType, b.getF32FloatAttr(1.0f));
    for (auto& [value, attrs] : outputs)
      if (auto weight = attrs.getAs<FloatAttr>(kObjectiveWeightAttr))
        accumulate(value, b.create<FillOp>(ret.getLoc(), value.getType(), weight));
    for (Operation* op : llvm::reverse(forward)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        auto it = grads.find(r);
        resultGrads.push_back(it == grads.end() ? Value() : it->second);
        any |= bool(resultGrads.back());
      }
      if (!any) continue;
      auto rule = dyn_cast<GradientOpInterface>(op);
      if (!rule) {
        op->emitError("has no gradient rule, but the loss depends on its result");
        return signalPassFailure();
      }
      SmallVector<Value> operandGrads = rule.buildGradient(b, resultGrads);
      if (operandGrads.size() != op->getNumOperands()) return signalPassFailure();
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) accumulate(operand, g);
    }

    SmallVector<Value> results{loss};
    SmallVector<Attribute> resultAttrs{b.getDictionaryAttr(b.getNamedAttr(kLossAttr, b.getUnitAttr()))};
    for (BlockArgument arg : func.getArguments()) {
      StringRef name = paramName(func, arg.getArgNumber());
      if (name.empty() || isFrozenParam(func, arg.getArgNumber())) continue;
      Value g = grads.lookup(arg);
      if (!g)  // a parameter the loss does not depend on has a zero gradient
        g = b.create<FillOp>(ret.getLoc(), arg.getType(), b.getF32FloatAttr(0.0f));
      results.push_back(g);
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(kGradAttr, b.getStringAttr(name))));
    }
    for (auto& [value, attrs] : outputs) {
      results.push_back(value);
      resultAttrs.push_back(attrs);
    }
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    // Gradients of operands that need none (computed alongside needed ones) are dead.
    Operation* firstBackward = forward.empty() ? &body.front() : forward.back()->getNextNode();
    SmallVector<Operation*> backward;
    for (Operation* op = firstBackward; op && !isa<func::ReturnOp>(op); op = op->getNextNode()) backward.push_back(op);
    for (Operation* op : llvm::reverse(backward))
      if (isOpTriviallyDead(op)) op->erase();
    // Everything after the forward ops is backward: mark it for the passes that tell apart.
    for (Operation* op = forward.empty() ? &body.front() : forward.back()->getNextNode();
         op && !isa<func::ReturnOp>(op); op = op->getNextNode())
      op->setAttr(kBackwardAttr, b.getUnitAttr());
    SmallVector<Type> resultTypes;
    for (Value v : results) resultTypes.push_back(v.getType());
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(), resultTypes));
    func.setAllResultAttrs(resultAttrs);
  }
};

}  // namespace
}  // namespace mt
