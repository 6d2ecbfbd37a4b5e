// mt-host-embedding: the lookup of the step's tokens in a (vocab, C) table parameter, and the
// scatter-add of its gradient, run on the host. The device never holds the table for the
// lookup, and the link carries the tokens' rows (tokens x C) instead of the table and its
// gradient (vocab x C each). A tied LM head then reads the table only at the end of the
// forward, so the vocabulary split (mt-split-vocab) can take it in chunks; its gradient is the
// head's chunks' plus the tokens' rows, added on the host.
//
// Before:  %x = mt.embedding %tokens, %W    ...    %dW_e = mt.embedding_grad %tokens, %dx
//          return ..., %dW {mt.grad = "W"}   with %dW = %dW_e (untied) or %dW_h + %dW_e (tied)
// After:   %x an argument {mt.embedded_tokens = "W"}
//          return ..., [%dW_h {mt.grad = "W"},] ..., %dx {mt.grad_tokens = "W"}
//          (and mt.padding_id = the scatter's padding_id, where it has one)
// The schedules add the host tasks that fill %x and scatter-add %dx (insertHostEmbeddingTasks).
// A frozen table (mt.param's "frozen") has no gradient: only its lookup moves to the host.
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_HOSTEMBEDDINGPASS
#include "passes/Passes.h.inc"

namespace {

// The lookup of the tokens argument in a whole parameter, or null.
EmbeddingOp tokenLookup(func::FuncOp func) {
  EmbeddingOp found;
  const BlockArgument tokens = tokensArgument(func);
  func.walk([&](EmbeddingOp op) {
    auto table = dyn_cast<BlockArgument>(op.getTable());
    auto param = table ? func.getArgAttrOfType<DictionaryAttr>(table.getArgNumber(), kParamAttr) : nullptr;
    if (tokens && op.getIds() == tokens && param && !param.get(kParamRowsKey)) found = op;
  });
  return found;
}

struct HostEmbeddingPass : impl::HostEmbeddingPassBase<HostEmbeddingPass> {
  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    if (failed(checkReadyToSchedule(func, "mt-host-embedding"))) return signalPassFailure();
    EmbeddingOp lookup = tokenLookup(func);
    if (!lookup) {
      func.emitError("the token embedding on the host needs a lookup of the tokens in a parameter table "
                     "(mt.embedding %tokens, %table); this model has none: drop --embedding host");
      return signalPassFailure();
    }
    const auto table = cast<BlockArgument>(lookup.getTable());
    const std::string name = paramName(func, table.getArgNumber()).str();
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    int gradIndex = -1;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (gradientOf(func, i) == name) gradIndex = gradIndex < 0 ? static_cast<int>(i) : -2;
    // The table's gradient: the scatter of the lookup's, alone (untied) or plus the rest (the
    // LM head's, tied).
    EmbeddingGradOp scatter;
    Value rest;
    if (gradIndex >= 0) {
      Value grad = ret.getOperand(gradIndex);
      if (auto g = grad.getDefiningOp<EmbeddingGradOp>()) scatter = g;
      if (auto add = grad.getDefiningOp<AddOp>(); add && add->hasOneUse())
        for (int k = 0; k < 2; ++k)
          if (auto g = add->getOperand(k).getDefiningOp<EmbeddingGradOp>(); g && !scatter)
            scatter = g, rest = add->getOperand(1 - k);
    }
    // A frozen table has no gradient: only its lookup moves to the host.
    const bool frozen = isFrozenParam(func, table.getArgNumber());
    if (!frozen && (!scatter || scatter.getIds() != lookup.getIds() || !scatter->hasOneUse() ||
                    scatter.getType() != table.getType())) {
      lookup.emitError("the gradient of '") << name << "' is not one result: the scatter of this lookup's "
                                            << "gradient, alone or added to the LM head's (run mt-host-embedding "
                                            << "right after mt-autodiff / mt-partition)";
      return signalPassFailure();
    }

    Builder b(func.getContext());
    const unsigned xIndex = func.getNumArguments();
    func.insertArgument(xIndex, lookup.getType(),
                        b.getDictionaryAttr({b.getNamedAttr(kEmbeddedTokensAttr, b.getStringAttr(name))}),
                        lookup.getLoc());
    lookup.getResult().replaceAllUsesWith(func.getArgument(xIndex));
    if (frozen) {
      lookup.erase();
      return;
    }

    SmallVector<DictionaryAttr> resultAttrs;
    func.getAllResultAttrs(resultAttrs);
    SmallVector<Value> results;
    SmallVector<Attribute> attrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (static_cast<int>(i) == gradIndex && !rest) continue;  // untied: the host makes it all
      results.push_back(static_cast<int>(i) == gradIndex ? rest : ret.getOperand(i));
      attrs.push_back(resultAttrs[i] ? Attribute(resultAttrs[i]) : b.getDictionaryAttr({}));
    }
    results.push_back(scatter.getDout());
    SmallVector<NamedAttribute> rowsAttrs{b.getNamedAttr(kGradTokensAttr, b.getStringAttr(name))};
    if (auto padding = scatter.getPaddingIdAttr()) rowsAttrs.push_back(b.getNamedAttr(kPaddingIdAttr, padding));
    attrs.push_back(b.getDictionaryAttr(rowsAttrs));
    Operation* sum = rest ? ret.getOperand(gradIndex).getDefiningOp() : nullptr;
    ret->setOperands(results);
    SmallVector<Type> types;
    for (Value v : results) types.push_back(v.getType());
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(), types));
    func.setAllResultAttrs(attrs);
    if (sum) sum->erase();
    scatter.erase();
    lookup.erase();
  }
};

}  // namespace
}  // namespace mt
