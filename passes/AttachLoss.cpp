// mt-attach-loss: a function that returns logits (B, T, V) gets a targets input and returns
// the mean softmax cross-entropy instead, or, with objective=dpo, the DPO loss of its rows in
// (chosen, rejected) pairs against the reference model's log-probabilities (a second input),
// the rows' own log-probabilities a named output after it; with objective=kto, the KTO loss of
// its rows in (example, KL row) pairs, the examples' labels a third input; with objective=reward,
// a reward model's loss of its scores (B, T, 1) at each row's position, its rewards the output.
// Named outputs after the logits (a
// mixture of experts' router statistics) stay where they are.
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/plan_format.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_ATTACHLOSSPASS
#include "passes/Passes.h.inc"

namespace {

struct AttachLossPass : impl::AttachLossPassBase<AttachLossPass> {
  using AttachLossPassBase::AttachLossPassBase;

  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    FailureOr<RankedTensorType> logits = logitsToEnd(func, ret);
    if (failed(logits)) return signalPassFailure();
    if (!*logits) return;  // already a loss
    OpBuilder b(ret);
    Value targets = appendInput(func, RankedTensorType::get(logits->getShape().drop_back(), b.getI32Type()), "targets");
    if (objective == LossObjective::kNextToken) {
      ret->setOperand(0, b.create<SoftmaxXentOp>(ret.getLoc(), ret.getOperand(0), targets).getLoss());
    } else if (objective == LossObjective::kReward) {
      if (failed(attachReward(func, ret))) return signalPassFailure();
    } else if (failed(requireEvenBatch(ret, logits->getDimSize(0)))) {
      return signalPassFailure();
    } else {
      attachPreference(func, ret, targets);
    }
    SmallVector<Type> results(ret.getOperandTypes());
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(), results));
    func.setResultAttr(0, kLossAttr, UnitAttr::get(&getContext()));
  }

  // The logits' type when the function returns logits (B, T, V) and named outputs after them,
  // and no targets input yet; null when it returns a loss already (marked so); failure otherwise.
  FailureOr<RankedTensorType> logitsToEnd(func::FuncOp func, func::ReturnOp ret) {
    if (ret.getNumOperands() < 1)
      return ret.emitError("cannot attach a loss: the model function returns nothing; it must return its logits");
    if (const unsigned i = firstUnnamedResult(func, 1); i < func.getNumResults())
      return ret.emitError("cannot attach a loss: the model function must return its logits, then named outputs "
                           "only; result ")
             << i << " has no " << kOutputAttr;
    auto type = dyn_cast<RankedTensorType>(ret.getOperand(0).getType());
    if (type && type.getRank() == 0 && type.getElementType().isF32()) {
      if (rowsInPairs(objective))
        return ret.emitError("cannot train on pairs of rows (objective dpo, kto or reward): the model function "
                             "returns its own loss; it must return its logits");
      func.setResultAttr(0, kLossAttr, UnitAttr::get(&getContext()));
      return RankedTensorType();
    }
    if (!type || type.getRank() != 3 || !type.getElementType().isF32() || !type.hasStaticShape())
      return ret.emitError("cannot attach a loss: the function returns ")
             << ret.getOperand(0).getType() << "; expected f32 logits of shape (B, T, V) or a scalar loss";
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto input = func.getArgAttrOfType<StringAttr>(i, kInputAttr);
      if (input && input.getValue() == "targets")
        return func.emitError("cannot attach a loss: the function already has a targets input but "
                              "returns logits; return the loss or drop the targets input");
    }
    return type;
  }

  // A batch of pairs of rows: an even one.
  LogicalResult requireEvenBatch(func::ReturnOp ret, int64_t rows) {
    if (rows % 2 == 0) return success();
    const bool reward = objective == LossObjective::kReward, kto = objective == LossObjective::kKto;
    return ret.emitError("cannot train ")
           << (reward ? "a reward model" : "preferences") << " (objective "
           << (reward ? "reward" : kto ? "kto" : "dpo") << ") on a batch of " << rows << " rows: its rows are "
           << (kto ? "(example, KL row)" : "(chosen, rejected)") << " pairs; give an even batch";
  }

  // The function returns `loss`, then `rows` (B) as the named output `name`, then the named
  // outputs it returned after its logits.
  void returnLossThenRows(func::FuncOp func, func::ReturnOp ret, Value loss, Value rows, StringRef name) {
    OpBuilder b(ret);
    SmallVector<Value> operands{loss, rows};
    llvm::append_range(operands, ret.getOperands().drop_front());
    SmallVector<DictionaryAttr> named;  // the outputs after the logits, by result index
    func.getAllResultAttrs(named);
    ret->setOperands(operands);
    named.insert(named.begin() + 1, b.getDictionaryAttr(b.getNamedAttr(kOutputAttr, b.getStringAttr(name))));
    SmallVector<Type> results(ret.getOperandTypes());
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(), results));
    func.setAllResultAttrs(named);
  }

  // The preference loss of the logits (ret's first operand) against `targets`; each row's
  // log-probability becomes the named output after the loss.
  void attachPreference(func::FuncOp func, func::ReturnOp ret, Value targets) {
    SequenceLogprobOp logp;
    Value total = objective == LossObjective::kKto ? attachKto(func, ret, targets, logp)
                                                   : attachDpo(func, ret, targets, logp);
    returnLossThenRows(func, ret, total, logp.getLogp(), kPolicyLogprobsOutput);
  }

  // A reward model's loss of its scores (B, T, 1) (ret's first operand), read at each row's
  // position (an input) into its reward, the named output after the loss; each pair's margin an
  // input too (0 where the data has none: one plan for data with and without).
  LogicalResult attachReward(func::FuncOp func, func::ReturnOp ret) {
    auto scores = cast<RankedTensorType>(ret.getOperand(0).getType());
    const int64_t rows = scores.getDimSize(0);
    if (scores.getDimSize(2) != 1)
      return ret.emitError("cannot train a reward model (objective reward): the function returns ")
             << scores.getDimSize(2) << " outputs per token; a reward model's head gives one score";
    if (failed(requireEvenBatch(ret, rows))) return failure();
    OpBuilder b(ret);
    Value positions = appendInput(func, RankedTensorType::get({rows}, b.getI32Type()), kRewardPositionsInput);
    auto rewards = b.create<RowScoreOp>(ret.getLoc(), ret.getOperand(0), positions);
    Value margins = appendInput(func, RankedTensorType::get({rows / 2}, b.getF32Type()), kRewardMarginsInput);
    auto loss = b.create<RewardLossOp>(ret.getLoc(), rewards.getRewards(), margins, b.getF32FloatAttr(centerRewards));
    returnLossThenRows(func, ret, loss.getLoss(), rewards.getRewards(), kPolicyRewardsOutput);
    return success();
  }

  // The DPO loss (or its kin, dpo-loss) of rows in (chosen, rejected) pairs, with its NLL term;
  // `logp` the rows' log-probabilities it reads.
  Value attachDpo(func::FuncOp func, func::ReturnOp ret, Value targets, SequenceLogprobOp& logp) {
    OpBuilder b(ret);
    const DpoLossKind kind = dpoLoss.getValue();
    const int64_t rows = cast<RankedTensorType>(targets.getType()).getDimSize(0);
    const auto rowsType = RankedTensorType::get({rows}, b.getF32Type());
    // SimPO and ORPO have no reference model: their margin is the policy's alone (a reference of zeros).
    Value reference = dpoReferenceFree(kind)
                          ? b.create<FillOp>(ret.getLoc(), rowsType, b.getF32FloatAttr(0.0f)).getResult()
                          : appendInput(func, rowsType, kReferenceLogprobsInput);
    // IPO, SimPO and ORPO compare each reply's mean log-probability per token (TRL averages them for them).
    logp = b.create<SequenceLogprobOp>(ret.getLoc(), ret.getOperand(0), targets, dpoAverages(kind));
    auto loss = b.create<DpoLossOp>(ret.getLoc(), logp.getLogp(), reference, b.getF32FloatAttr(beta),
                                    PreferenceLossAttr::get(b.getContext(), static_cast<PreferenceLoss>(kind)),
                                    b.getF32FloatAttr(labelSmoothing),
                                    b.getF32FloatAttr(kind == DpoLossKind::kSimpo ? simpoGamma : 0.0),
                                    b.getF32FloatAttr(kind == DpoLossKind::kDiscopop ? discopopTau : 0.0));
    Value total = loss.getLoss();
    if (rpoAlpha != 0.0) {  // the chosen replies' NLL too (TRL's rpo_alpha, CPOTrainer's cpo_alpha, ORPO's own)
      const int64_t vocab = cast<RankedTensorType>(ret.getOperand(0).getType()).getShape().back();
      auto nll = b.create<PairNllOp>(ret.getLoc(), logp.getLogp(), targets, b.getF32FloatAttr(rpoAlpha),
                                     b.getI64IntegerAttr(vocab), b.getBoolAttr(logp.getAverage()));
      total = b.create<AddOp>(ret.getLoc(), total, nll.getLoss()).getResult();
    }
    return total;
  }

  // The KTO loss of rows in (example, KL row) pairs, of each row's summed log-probability (TRL's
  // KTOTrainer sums them) against the reference's, the examples' labels an input.
  Value attachKto(func::FuncOp func, func::ReturnOp ret, Value targets, SequenceLogprobOp& logp) {
    OpBuilder b(ret);
    const int64_t rows = cast<RankedTensorType>(targets.getType()).getDimSize(0);
    Value reference = appendInput(func, RankedTensorType::get({rows}, b.getF32Type()), kReferenceLogprobsInput);
    Value labels = appendInput(func, RankedTensorType::get({rows / 2}, b.getF32Type()), kKtoLabelsInput);
    logp = b.create<SequenceLogprobOp>(ret.getLoc(), ret.getOperand(0), targets, /*average=*/false);
    return b.create<KtoLossOp>(ret.getLoc(), logp.getLogp(), reference, labels, b.getF32FloatAttr(beta),
                               b.getF32FloatAttr(desirableWeight), b.getF32FloatAttr(undesirableWeight))
        .getLoss();
  }

  // A new last argument of `type`, the input named `name`.
  static Value appendInput(func::FuncOp func, Type type, StringRef name) {
    OpBuilder b(func.getContext());
    const unsigned index = func.getNumArguments();
    func.insertArgument(index, type, b.getDictionaryAttr(b.getNamedAttr(kInputAttr, b.getStringAttr(name))),
                        func.getLoc());
    return func.getArgument(index);
  }
};

}  // namespace
}  // namespace mt
