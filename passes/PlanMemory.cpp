// mt-plan-memory: static offsets of every device value in one arena. Values are placed in
// program order, first fit, and their bytes return to the free list after their last use;
// results are placed before the op's dying operands are freed, so no op writes over its own
// inputs. A reshape is a view: it shares its input's bytes and extends its lifetime.
#include <map>

#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "passes/Passes.h.inc"

namespace {

int64_t alignUp(int64_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

// First-fit allocator over [0, infinity) that remembers its high-water mark.
class ArenaAllocator {
 public:
  int64_t allocate(int64_t bytes) {
    bytes = std::max<int64_t>(alignUp(bytes), kArenaAlignment);
    int64_t offset = 0;
    for (auto [start, size] : live_) {
      if (start - offset >= bytes) break;
      offset = std::max(offset, start + size);
    }
    live_[offset] = bytes;
    peak_ = std::max(peak_, offset + bytes);
    return offset;
  }
  void release(int64_t offset) { live_.erase(offset); }
  int64_t peak() const { return peak_; }

 private:
  std::map<int64_t, int64_t> live_;  // offset -> bytes, sorted by offset
  int64_t peak_ = 0;
};

bool onDevice(Operation* op) { return !isa<D2HOp, HostTaskOp, func::ReturnOp>(op); }

struct PlanMemoryPass : impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    Block& body = func.getBody().front();

    // Where the bytes of each value live: a reshape's result is its input's storage.
    DenseMap<Value, Value> storage;
    auto root = [&](Value v) { return storage.count(v) ? storage[v] : v; };
    DenseMap<Operation*, int64_t> position;
    DenseMap<Value, int64_t> lastUse;  // by storage root
    int64_t index = 0;
    for (Operation& op : body) {
      position[&op] = index;
      for (Value operand : op.getOperands()) {
        if (isa<BlockArgument>(operand) && onDevice(&op) && !isa<H2DOp>(op)) {
          op.emitError("reads a host value (a function argument) on the device: run "
                       "mt-schedule-resident first");
          return signalPassFailure();
        }
        Value r = root(operand);
        lastUse[r] = std::max(lastUse.lookup(r), index);
      }
      if (auto reshape = dyn_cast<ReshapeOp>(op)) storage[reshape.getResult()] = root(reshape.getInput());
      for (Value result : op.getResults())
        if (!storage.count(result)) lastUse[result] = std::max(lastUse.lookup(result), index);
      ++index;
    }

    ArenaAllocator arena;
    DenseMap<Value, int64_t> offsets;
    std::multimap<int64_t, Value> dying;  // last use -> storage root
    Builder b(&getContext());
    for (Operation& op : body) {
      if (!onDevice(&op) || op.getNumResults() == 0) {
        releaseUntil(position[&op], dying, arena, offsets);
        continue;
      }
      SmallVector<int64_t> opOffsets;
      for (Value result : op.getResults()) {
        if (storage.count(result)) {
          opOffsets.push_back(offsets[storage[result]]);
          continue;
        }
        offsets[result] = arena.allocate(tensorBytes(result.getType()));
        opOffsets.push_back(offsets[result]);
        dying.emplace(lastUse[result], result);
      }
      op.setAttr(kOffsetsAttr, b.getDenseI64ArrayAttr(opOffsets));
      releaseUntil(position[&op], dying, arena, offsets);
    }
    func->setAttr(kArenaBytesAttr, b.getI64IntegerAttr(arena.peak()));
    if (budget > 0 && arena.peak() > budget) {
      func.emitError("the plan needs ")
          << formatBytes(arena.peak()) << " of device memory but the budget is "
          << formatBytes(static_cast<int64_t>(budget)) << ": raise the budget to at least "
          << arena.peak() << " bytes, stream the weights and recompute (mtc --schedule), or make the "
          << "model or batch smaller";
      return signalPassFailure();
    }
  }

  // Frees every value whose last use is at or before `now`.
  static void releaseUntil(int64_t now, std::multimap<int64_t, Value>& dying, ArenaAllocator& arena,
                           DenseMap<Value, int64_t>& offsets) {
    while (!dying.empty() && dying.begin()->first <= now) {
      arena.release(offsets[dying.begin()->second]);
      dying.erase(dying.begin());
    }
  }
};

}  // namespace
}  // namespace mt
