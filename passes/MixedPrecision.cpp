// mt-mixed-precision: a bf16 plan (Passes.td has the contract). The types each kernel takes come
// from the op table's precision column (runtime/plan/op_table.def), the one place that says which
// operands and results stay f32; the ops' own type inference gives the results.
#include "runtime/plan/precision.h"
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/op_table.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "passes/Passes.h.inc"

namespace {

bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

RankedTensorType withElement(Value v, Type element) {
  return RankedTensorType::get(cast<RankedTensorType>(v.getType()).getShape(), element);
}

// The op table's row for `op`, or null (ops without a kernel: copies, host tasks, views).
const KernelInfo* kernelOf(Operation* op) {
  KernelId id;
  auto kernel = dyn_cast<KernelOpInterface>(op);
  if (!kernel || !findKernel(kernel.getKernelName(), &id)) return nullptr;
  return &kKernelTable[static_cast<size_t>(id)];
}

// The device values that are, or only add up to, a parameter's gradient: what its d2h copies
// (a result named mt.grad or mt.grad_row) and, through adds, scales, transposes and reshapes,
// what those are made of (and a parameter-shaped binary_grad's incoming gradient). They stay
// f32: a gradient leaves the device as f32.
DenseSet<Value> gradientValues(func::FuncOp func) {
  DenseSet<Value> found;
  SmallVector<Value> work;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (func.getResultAttr(i, kGradAttr) || func.getResultAttr(i, kGradRowAttr))
      if (auto copy = v.getDefiningOp<D2HOp>()) work.push_back(copy.getInput());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!found.insert(v).second) continue;
    Operation* op = v.getDefiningOp();
    if (isa_and_nonnull<AddOp, ScaleOp, TransposeOp, ReshapeOp>(op))
      for (Value operand : op->getOperands()) work.push_back(operand);
    // The elementwise gradient of a parameter-shaped quotient or product (DoRA's magnitude over
    // its weight's row norms) reads its incoming gradient at its results' shape, so at a
    // parameter's here (nothing above leads to a larger value): a sum over the tokens, kept f32
    // rather than rounded to bf16 before it is divided.
    else if (auto grad = dyn_cast_or_null<BinaryGradOp>(op))
      work.push_back(grad.getDout());
  }
  return found;
}

class Retyper {
 public:
  Retyper(func::FuncOp func) : func_(func), b_(func.getContext()), gradients_(gradientValues(func)) {}

  void run() {
    dropStagedWidens();
    SmallVector<Operation*> ops;
    for (Operation& op : func_.getBody().front()) ops.push_back(&op);
    for (Operation* op : ops) retype(op);
  }

 private:
  // The weights are used as the bf16 copies they crossed the link as.
  void dropStagedWidens() {
    SmallVector<WidenOp> widens;
    func_.walk([&](WidenOp widen) { widens.push_back(widen); });
    for (WidenOp widen : widens) {
      widen.getResult().replaceAllUsesWith(widen.getInput());
      widen.erase();
    }
  }

  void retype(Operation* op) {
    Type f32 = b_.getF32Type(), bf16 = b_.getBF16Type();
    if (auto copy = dyn_cast<H2DOp>(op)) return copy.getResult().setType(copy.getInput().getType());
    if (auto copy = dyn_cast<D2HOp>(op)) {
      // A copy the function returns lands in an f32 host tensor (gradients, the loss, the
      // tokens' rows' gradient); any other (an offloaded activation) keeps its type.
      const bool returned = llvm::any_of(copy->getUsers(), [](Operation* u) { return isa<func::ReturnOp>(u); });
      if (returned) convertOperand(op, 0, elementOf(copy.getResult()));
      return copy.getResult().setType(copy.getInput().getType());
    }
    if (auto view = dyn_cast<ReshapeOp>(op))
      return view.getResult().setType(withElement(view.getResult(), elementOf(view.getInput())));
    if (auto split = dyn_cast<TokenSplitOp>(op)) {
      for (Value tile : split.getTiles()) tile.setType(withElement(tile, elementOf(split.getInput())));
      return;
    }
    if (auto concat = dyn_cast<TokenConcatOp>(op)) {
      // The tiles of one value share a type; the first's decides where a tile's differs.
      const Type element = elementOf(concat.getTiles().front());
      for (unsigned i = 1; i < op->getNumOperands(); ++i) convertOperand(op, i, element);
      return concat.getResult().setType(withElement(concat.getResult(), element));
    }
    const KernelInfo* kernel = kernelOf(op);
    if (!kernel) return;  // host tasks, the return
    const KernelPrecision& precision = kernel->precision;
    if (precision.kind == KernelPrecision::kConvert) return;
    if (precision.kind == KernelPrecision::kF32Only) {
      // Its f32 results meet their users' types at the users.
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        if (isFloatTensor(op->getOperand(i))) convertOperand(op, i, f32);
      return;
    }
    // Mixed: an op that only accumulates gradients computes in f32; any other has bf16 activations.
    const bool accumulates = isa<AddOp, ScaleOp, TransposeOp>(op) && gradients_.count(op->getResult(0));
    Type act = accumulates ? f32 : bf16;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (isFloatTensor(op->getOperand(i))) convertOperand(op, i, precision.f32Input(i) ? f32 : act);
    if (auto fill = dyn_cast<FillOp>(op)) return fill.getResult().setType(withElement(fill.getResult(), fillType(fill, act)));
    if (auto sum = dyn_cast<SumToOp>(op))
      return sum.getResult().setType(withElement(sum.getResult(), gradients_.count(sum.getResult()) ? f32 : act));
    if (auto product = dyn_cast<MatmulOp>(op))
      if (gradients_.count(product.getResult()) && act != f32) product.setF32Result(true);
    auto infer = cast<InferTypeOpInterface>(op);
    SmallVector<Type> types;
    if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(), op->getAttrDictionary(),
                                      op->getPropertiesStorage(), op->getRegions(), types)))
      return;  // the verifier after the pass names the op
    for (auto [result, type] : llvm::zip(op->getResults(), types)) result.setType(type);
  }

  // A fill's type: f32 where it is a gradient or a user reads it as a statistic (the loss's
  // seed, the cross-entropy's starting state), else the activations'.
  Type fillType(FillOp fill, Type act) {
    Type f32 = b_.getF32Type();
    if (gradients_.count(fill.getResult())) return f32;
    for (OpOperand& use : fill.getResult().getUses()) {
      const KernelInfo* user = kernelOf(use.getOwner());
      if (user && (user->precision.kind != KernelPrecision::kMixed ||
                   user->precision.f32Input(use.getOperandNumber())))
        return f32;
    }
    return act;
  }

  // Makes operand `i` of `op` of element type `want`, through a conversion before `op` (one per
  // value and type: later users share it).
  void convertOperand(Operation* op, unsigned i, Type want) {
    Value v = op->getOperand(i);
    if (elementOf(v) == want) return;
    Value& converted = conversions_[{v, want}];
    if (!converted) {
      b_.setInsertionPoint(op);
      Operation* cast = want.isBF16() ? b_.create<NarrowOp>(op->getLoc(), withElement(v, want), v).getOperation()
                                      : b_.create<WidenOp>(op->getLoc(), withElement(v, want), v).getOperation();
      for (StringRef mark : {kBlockAttr, kBackwardAttr, kRecomputeAttr})
        if (Attribute value = op->getAttr(mark)) cast->setAttr(mark, value);
      converted = cast->getResult(0);
    }
    op->setOperand(i, converted);
  }

  func::FuncOp func_;
  OpBuilder b_;
  DenseSet<Value> gradients_;
  DenseMap<std::pair<Value, Type>, Value> conversions_;
};

struct MixedPrecisionPass : impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    bool scheduled = false;
    for (Operation& op : func.getBody().front()) {
      if (op.hasAttr(kOffsetsAttr)) {
        op.emitError("mt-mixed-precision runs before mt-plan-memory (it changes the bytes of what the arena holds)");
        return signalPassFailure();
      }
      auto copy = dyn_cast<H2DOp>(op);
      scheduled |= bool(copy);
      auto arg = copy ? dyn_cast<BlockArgument>(copy.getInput()) : nullptr;
      if (arg && func.getArgAttr(arg.getArgNumber(), kParamAttr)) {
        copy.emitError("mt-mixed-precision needs the weights staged as bf16: run mt-stage-bf16 first (this copy "
                       "reads the f32 master of '")
            << paramName(func, arg.getArgNumber()) << "')";
        return signalPassFailure();
      }
    }
    if (!scheduled) {
      func.emitError("mt-mixed-precision needs a scheduled function: run mt-schedule-resident or "
                     "mt-schedule-streamed, then mt-stage-bf16, first");
      return signalPassFailure();
    }
    Retyper(func).run();
    func->setAttr(kPrecisionAttr, StringAttr::get(func.getContext(), precisionName(ComputePrecision::kBf16)));
  }
};

}  // namespace
}  // namespace mt
