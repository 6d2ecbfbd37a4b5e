// mt-recompute: each layer block's backward reads recomputed activations, so only the block
// inputs are kept from the forward pass (except in the last `keep` blocks, left as they are).
#include <map>
#include <set>

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "passes/Passes.h.inc"

namespace {

struct RecomputePass : impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;

  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    auto templates = func->getAttrOfType<DenseI64ArrayAttr>(kTemplatesAttr);
    if (!templates) {
      func.emitError("mt-recompute needs layer blocks: run mt-partition first");
      return signalPassFailure();
    }
    Block& body = func.getBody().front();
    bool differentiated = false;
    for (Operation& op : body) differentiated |= op.hasAttr(kBackwardAttr);
    if (!differentiated) {
      func.emitError("mt-recompute needs a differentiated function: run mt-autodiff first");
      return signalPassFailure();
    }
    // Forward and backward ops of each real block (prologue and epilogue are not recomputed).
    const int64_t blocks = templates.size();
    std::vector<std::vector<Operation*>> forward(blocks), backward(blocks);
    for (Operation& op : body.without_terminator()) {
      const std::optional<int64_t> block = blockOf(&op);
      if (!block) {
        op.emitError("has no layer block: run mt-partition first");
        return signalPassFailure();
      }
      if (*block < 0 || *block >= blocks || op.hasAttr(kRecomputeAttr)) continue;
      (op.hasAttr(kBackwardAttr) ? backward : forward)[*block].push_back(&op);
    }
    OpBuilder b(&getContext());
    if (keep < 0) {
      func.emitError("mt-recompute: keep must not be negative, got ") << keep;
      return signalPassFailure();
    }
    for (int64_t block = 0; block < blocks - keep; ++block) {
      if (backward[block].empty()) continue;
      const std::set<Operation*> in_block(forward[block].begin(), forward[block].end());
      // The forward ops the backward reads, directly or through other forward ops of the block.
      std::set<Operation*> needed;
      std::vector<Operation*> worklist;
      auto require = [&](Value v) {
        Operation* def = v.getDefiningOp();
        if (def && in_block.count(def) && needed.insert(def).second) worklist.push_back(def);
      };
      for (Operation* op : backward[block])
        for (Value v : op->getOperands()) require(v);
      while (!worklist.empty()) {
        Operation* op = worklist.back();
        worklist.pop_back();
        for (Value v : op->getOperands()) require(v);
      }
      // Clones in forward order, just before the block's first backward op.
      IRMapping mapping;
      b.setInsertionPoint(backward[block].front());
      for (Operation* op : forward[block]) {
        if (!needed.count(op)) continue;
        Operation* clone = b.clone(*op, mapping);
        clone->setAttr(kRecomputeAttr, b.getUnitAttr());
      }
      for (Operation* op : backward[block])
        for (OpOperand& operand : op->getOpOperands())
          if (Value replacement = mapping.lookupOrNull(operand.get())) operand.set(replacement);
    }
  }
};

}  // namespace
}  // namespace mt
