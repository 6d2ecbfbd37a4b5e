// mt-split-experts: each stacked expert weight (E, ., .) in `groups` pieces of consecutive
// experts, so that the device holds a few experts of a layer at a time. Each piece is a
// parameter of its own (a row slice of the same host tensor, as mt-split-vocab's chunks); each
// product over the whole stack becomes a chain over the groups from zeros,
//
//   y = mt.grouped_matmul(x, W, counts)
//   ->  y_0 = fill 0;  y_g+1 = mt.grouped_matmul(x, W_g, counts) into y_g {first_expert = e_g}
//
// each link replacing its experts' rows (the same sgemms: bit for bit the whole product; the
// memory planner gives each link its `into`'s bytes), and the weight's gradient one
// mt.grouped_matmul_weight_grad per group, a gradient piece each. The streamed schedules copy
// a piece in one group ahead of its products (mt-schedule-streamed). Runs after mt-autodiff
// (the chains have no gradient rule) and before mt-recompute (which clones them as it finds them);
// a forward-only function (mtgen's plans) has no gradients to split, nor has a frozen stack.
#include "mlir/IR/Builders.h"
#include "passes/ParamPieces.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_SPLITEXPERTSPASS
#include "passes/Passes.h.inc"

namespace {

// A stacked expert weight the split can take: a whole (E, ., .) parameter read only as the
// weight of whole grouped products, its gradient one mt.grouped_matmul_weight_grad.
struct ExpertStack {
  BlockArgument weight;
  std::string name;
  SmallVector<GroupedMatmulOp> products;
  GroupedMatmulWeightGradOp grad;
};

// The stack `arg` is, if it is one; a parameter that looks like one but is read otherwise is
// left whole (it is not an expert weight).
std::optional<ExpertStack> matchStack(func::FuncOp func, BlockArgument arg) {
  auto type = dyn_cast<RankedTensorType>(arg.getType());
  if (paramName(func, arg.getArgNumber()).empty() || isRowPiece(func, arg.getArgNumber()) || !type ||
      type.getRank() != 3)
    return std::nullopt;
  ExpertStack s{arg, paramName(func, arg.getArgNumber()).str(), {}, nullptr};
  for (Operation* user : arg.getUsers()) {
    if (isa<func::ReturnOp>(user)) continue;
    auto product = dyn_cast<GroupedMatmulOp>(user);
    if (!product || product.getWeight() != arg || product.getInto()) return std::nullopt;
    s.products.push_back(product);
  }
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (unsigned i = 1; i < func.getNumResults(); ++i)
    if (auto g = func.getResultAttrOfType<StringAttr>(i, kGradAttr); g && g.getValue() == s.name)
      s.grad = ret.getOperand(i).getDefiningOp<GroupedMatmulWeightGradOp>();
  if (s.products.empty()) return std::nullopt;
  if (isForwardOnly(func) || isFrozenParam(func, arg.getArgNumber())) return s;  // no gradient to split
  if (!s.grad || s.grad.getExperts() != 0 || !s.grad->hasOneUse()) return std::nullopt;
  return s;
}

// `op` takes `from`'s block, backward, recompute and tile marks.
void copyMarks(Operation* op, Operation* from) {
  for (NamedAttribute attr : from->getDiscardableAttrs()) op->setAttr(attr.getName(), attr.getValue());
}

// The whole product `product` replaced by its chain over the pieces.
void splitProduct(GroupedMatmulOp product, ArrayRef<BlockArgument> pieces, ArrayRef<int64_t> first) {
  OpBuilder b(product);
  Value y = b.create<FillOp>(product.getLoc(), product.getType(), b.getF32FloatAttr(0.0f));
  copyMarks(y.getDefiningOp(), product);
  for (size_t g = 0; g < pieces.size(); ++g) {
    y = b.create<GroupedMatmulOp>(product.getLoc(), product.getInput(), pieces[g], product.getCounts(), y,
                                  product.getTransposeB(), first[g]);
    copyMarks(y.getDefiningOp(), product);
  }
  product.getResult().replaceAllUsesWith(y);
  product.erase();
}

// The stack's weight gradient replaced by one per piece; returns them in piece order.
SmallVector<Value> splitGradient(GroupedMatmulWeightGradOp grad, ArrayRef<int64_t> first) {
  OpBuilder b(grad);
  SmallVector<Value> pieces;
  for (size_t g = 0; g + 1 < first.size(); ++g) {
    auto piece = b.create<GroupedMatmulWeightGradOp>(grad.getLoc(), grad.getInput(), grad.getDout(), grad.getCounts(),
                                                     grad.getTransposeB(), first[g], first[g + 1] - first[g]);
    copyMarks(piece, grad);
    pieces.push_back(piece);
  }
  return pieces;
}

struct SplitExpertsPass : impl::SplitExpertsPassBase<SplitExpertsPass> {
  using SplitExpertsPassBase::SplitExpertsPassBase;

  void runOnOperation() override {
    if (groups <= 1) return;
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    if (failed(checkReadyToSchedule(func, "mt-split-experts", /*allowForwardOnly=*/true))) return signalPassFailure();
    if (!func->hasAttr(kTemplatesAttr)) {
      func.emitError("mt-split-experts needs layer blocks: run mt-partition first");
      return signalPassFailure();
    }
    SmallVector<ExpertStack> stacks;
    for (BlockArgument arg : func.getArguments())
      if (std::optional<ExpertStack> s = matchStack(func, arg)) stacks.push_back(*s);
    if (stacks.empty()) {
      func.emitError("mt-split-experts: the model has no stacked expert weights (an (E, ., .) parameter read by "
                     "mt.grouped_matmul) to split into groups; drop --expert-groups");
      return signalPassFailure();
    }
    for (ExpertStack& s : stacks) {
      const int64_t experts = cast<RankedTensorType>(s.weight.getType()).getDimSize(0);
      const SmallVector<int64_t> first = pieceStarts(experts, std::min<int64_t>(groups, experts));
      SmallVector<BlockArgument> pieces = insertPieces(func, s.weight, first);
      for (GroupedMatmulOp product : s.products) splitProduct(product, pieces, first);
      if (s.grad) {
        SmallVector<Value> grads = splitGradient(s.grad, first);
        splitGradResult(func, s.name, grads, first);
        s.grad.erase();
      }
      func.eraseArgument(s.weight.getArgNumber());
      noteSplit(func, kExpertSplitAttr, s.name);
    }
  }
};

}  // namespace
}  // namespace mt
