// mt-recompute: each layer block's backward reads recomputed activations, so only the block
// inputs are kept from the forward pass (except in the last `keep` blocks, left as they are);
// a block in token tiles recomputes each tile just before that tile's backward.
#include <functional>

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "passes/PassUtils.h"
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
    // Forward and backward ops of each real block and of the epilogue (the prologue is not
    // recomputed, nor the epilogue unless it is in token tiles: its backward follows its forward).
    const int64_t blocks = templates.size();
    std::vector<std::vector<Operation*>> forward(blocks + 1), backward(blocks + 1);
    bool tiledEpilogue = false;
    for (Operation& op : body.without_terminator()) {
      const std::optional<int64_t> block = blockOf(&op);
      if (!block) {
        op.emitError("has no layer block: run mt-partition first");
        return signalPassFailure();
      }
      if (*block < 0 || *block > blocks || op.hasAttr(kRecomputeAttr)) continue;
      (op.hasAttr(kBackwardAttr) ? backward : forward)[*block].push_back(&op);
      tiledEpilogue |= *block == blocks && tileOf(&op) && !op.hasAttr(kBackwardAttr);
    }
    OpBuilder b(&getContext());
    if (keep < 0) {
      func.emitError("mt-recompute: keep must not be negative, got ") << keep;
      return signalPassFailure();
    }
    for (int64_t block = 0; block < blocks - keep; ++block)
      if (!backward[block].empty()) recomputeBlock(forward[block], backward[block], b);
    // A head in token tiles: each tile's logits recomputed just before its backward, so no two
    // tiles' are on the device at once.
    if (tiledEpilogue && !backward[blocks].empty()) recomputeBlock(forward[blocks], backward[blocks], b);
  }

  // The recompute of one block. Without token tiles: the forward ops its backward reads,
  // directly or through other forward ops of the block, cloned in forward order just before its
  // first backward op. With token tiles (mt-tile-tokens): a tile's backward comes in stretches of
  // consecutive ops of that tile, and each stretch recomputes its tile's forward ops just
  // before it, so one tile's activations are alive at a time; what the whole block shares (the
  // splits and concats, attention) is recomputed once, before the block's first backward op, as
  // is any tile op that shared recompute reads (attention's tiled inputs).
  static void recomputeBlock(ArrayRef<Operation*> forward, ArrayRef<Operation*> backward, OpBuilder& b) {
    const DenseSet<Operation*> inBlock(forward.begin(), forward.end());
    // Stretches of backward ops of one tile (a block without tiles has none).
    struct Stretch {
      Operation* first;
      SetVector<Operation*> needed;
      IRMapping mapping;
    };
    std::vector<Stretch> stretches;
    std::vector<int> stretchOf(backward.size(), -1);
    for (size_t i = 0; i < backward.size(); ++i) {
      if (!tileOf(backward[i])) continue;
      if (i == 0 || tileOf(backward[i - 1]) != tileOf(backward[i])) stretches.push_back({backward[i], {}, {}});
      stretchOf[i] = static_cast<int>(stretches.size()) - 1;
    }
    // What each recompute needs: a tile op where its stretch reads it, the rest (and whatever
    // the shared recompute reads) in the shared one.
    SetVector<Operation*> shared;
    std::function<void(Value, int)> require = [&](Value v, int stretch) {
      Operation* def = v.getDefiningOp();
      if (!def || !inBlock.count(def)) return;
      if (!tileOf(def)) stretch = -1;
      SetVector<Operation*>& needed = stretch < 0 ? shared : stretches[stretch].needed;
      if (!needed.insert(def)) return;
      for (Value operand : def->getOperands()) require(operand, stretch);
    };
    for (size_t i = 0; i < backward.size(); ++i)
      for (Value v : backward[i]->getOperands()) require(v, stretchOf[i]);
    // Clones in forward order: the shared recompute before the block's first backward op, each
    // stretch's before the stretch (reading the shared clones).
    IRMapping sharedMapping;
    auto cloneNeeded = [&](const SetVector<Operation*>& needed, IRMapping& mapping) {
      for (Operation* op : forward) {
        if (!needed.contains(op)) continue;
        Operation* clone = b.clone(*op, mapping);
        clone->setAttr(kRecomputeAttr, b.getUnitAttr());
      }
    };
    b.setInsertionPoint(backward.front());
    cloneNeeded(shared, sharedMapping);
    for (Stretch& stretch : stretches) {
      stretch.mapping = sharedMapping;
      b.setInsertionPoint(stretch.first);
      cloneNeeded(stretch.needed, stretch.mapping);
    }
    for (size_t i = 0; i < backward.size(); ++i) {
      IRMapping& mapping = stretchOf[i] < 0 ? sharedMapping : stretches[stretchOf[i]].mapping;
      for (OpOperand& operand : backward[i]->getOpOperands())
        if (Value replacement = mapping.lookupOrNull(operand.get())) operand.set(replacement);
    }
  }
};

}  // namespace
}  // namespace mt
