// mt-partition: layer blocks from module paths, and templates from a structural hash.
#include <map>

#include "llvm/ADT/Hashing.h"
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_PARTITIONPASS
#include "passes/Passes.h.inc"

namespace {

struct PartitionPass : impl::PartitionPassBase<PartitionPass> {
  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    Block& body = func.getBody().front();
    // Block indices from paths; parts without one are prologue or epilogue by where they first
    // appear relative to the blocks (backward ops share their forward op's path).
    int64_t last_block = -1;
    std::map<std::string, bool> before_blocks;  // path without an index -> is prologue
    std::vector<std::pair<Operation*, std::optional<int64_t>>> found;
    for (Operation& op : body.without_terminator()) {
      const std::string path = modulePath(&op);
      std::optional<int64_t> index = layerBlockInPath(&op);
      if (index) {
        last_block = std::max(last_block, *index);
      } else {
        before_blocks.emplace(path, last_block < 0);
      }
      found.emplace_back(&op, index);
    }
    Builder b(&getContext());
    for (auto& [op, index] : found) {
      const int64_t block = index ? *index : (before_blocks[modulePath(op)] ? -1 : last_block + 1);
      op->setAttr(kBlockAttr, b.getI64IntegerAttr(block));
      if (std::optional<int64_t> tile = tileInLocation(op->getLoc())) op->setAttr(kTileAttr, b.getI64IntegerAttr(*tile));
    }
    // Structural hash of each block's forward ops: names, result types, inherent attributes.
    std::map<int64_t, llvm::hash_code> hashes;
    for (auto& [op, index] : found) {
      if (!index || op->hasAttr(kBackwardAttr)) continue;
      llvm::hash_code h = hashes.count(*index) ? hashes[*index] : llvm::hash_code(0);
      h = llvm::hash_combine(h, op->getName().getStringRef());
      for (Type t : op->getResultTypes()) h = llvm::hash_combine(h, t.getAsOpaquePointer());
      for (NamedAttribute attr : op->getAttrs())
        if (!attr.getName().getValue().starts_with("mt."))
          h = llvm::hash_combine(h, attr.getName().getAsOpaquePointer(), attr.getValue().getAsOpaquePointer());
      hashes[*index] = h;
    }
    SmallVector<int64_t> templates;
    for (int64_t block = 0; block <= last_block; ++block) {
      int64_t first = block;
      for (int64_t other = 0; other < block; ++other)
        if (hashes.count(block) && hashes.count(other) && hashes[other] == hashes[block]) {
          first = other;
          break;
        }
      templates.push_back(first);
    }
    func->setAttr(kTemplatesAttr, b.getDenseI64ArrayAttr(templates));
  }
};

}  // namespace
}  // namespace mt
