// mt-schedule-streamed: weights stream in per block (one block ahead; a stack's groups of
// experts one group ahead within the block), gradients stream out as they complete, the host
// takes the norm as they land; AdamW runs one step late, each
// parameter's update just before its first copy in (overlapped with the next forward), or —
// on arrival — right after its gradient landed (overlapped with the backward, no clipping).
// With keepFrozen, a frozen weight is copied once per step instead, before the first op, its copy
// marked kept (mt.kept: mt-plan-memory keeps its bytes, a backend copies it in the first step
// only); with keepFrozenLimit, only that many: those whose streaming would copy most often.
// A forward-only function streams its weights the same way and copies its outputs out.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "llvm/ADT/DenseSet.h"
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_SCHEDULESTREAMEDPASS
#include "passes/Passes.h.inc"

namespace {

struct ScheduleStreamedPass : impl::ScheduleStreamedPassBase<ScheduleStreamedPass> {
  using ScheduleStreamedPassBase::ScheduleStreamedPassBase;

  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    Block& body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (failed(checkReadyToSchedule(func, "mt-schedule-streamed", /*allowForwardOnly=*/true)))
      return signalPassFailure();
    // A forward-only function (a model too large for the device sampled by mtgen): the weights
    // stream in per block as in training; its outputs leave as they are complete; no update.
    const bool forward_only = isForwardOnly(func);
    std::vector<Operation*> ops;
    for (Operation& op : body.without_terminator()) {
      if (!blockOf(&op)) {
        op.emitError("has no layer block: run mt-partition first");
        return signalPassFailure();
      }
      ops.push_back(&op);
    }
    // Regions: maximal runs of consecutive ops of one block (a block's forward is one region,
    // its recompute + backward another).
    DenseMap<Operation*, size_t> position, region = blockRegions(body);
    for (size_t i = 0; i < ops.size(); ++i) position[ops[i]] = i;

    OpBuilder b(&getContext());
    // Copies `arg` in once, before the first op, for every use but host tasks' (tokens,
    // targets, pinned shared weights); with keepFrozen, a persistent one's copy is kept.
    auto copyInOnce = [&](BlockArgument arg) {
      b.setInsertionPoint(ops.front());
      auto copy = b.create<H2DOp>(func.getLoc(), arg);
      copy->setAttr(kBlockAttr, ops.front()->getAttr(kBlockAttr));
      if (keepFrozen) markKeptIfPersistent(func, copy);
      arg.replaceUsesWithIf(copy.getResult(), [&](OpOperand& use) {
        return use.getOwner() != copy && !isa<func::ReturnOp, HostTaskOp>(use.getOwner());
      });
    };
    // Uses in program order, split into runs of one value within one region, each run reading a
    // copy of its own: placed where the run before it starts if that run is in the same region
    // (a row piece one piece ahead: the next group of experts streams in during the products of
    // this one), else one region ahead.
    auto streamRuns = [&](std::vector<OpOperand*> uses) {
      std::sort(uses.begin(), uses.end(), [&](OpOperand* x, OpOperand* y) {
        return position[x->getOwner()] < position[y->getOwner()];
      });
      size_t previous = uses.size();  // the first use of the run before, if any
      for (size_t start = 0; start < uses.size();) {
        const size_t run_region = region[uses[start]->getOwner()];
        const Value read = uses[start]->get();
        size_t end = start;
        while (end < uses.size() && region[uses[end]->getOwner()] == run_region && uses[end]->get() == read) ++end;
        Operation* at = previous < uses.size() && region[uses[previous]->getOwner()] == run_region
                            ? uses[previous]->getOwner()
                            : prefetchPoint(ops, position[uses[start]->getOwner()]);
        b.setInsertionPoint(at);
        auto copy = b.create<H2DOp>(func.getLoc(), read);
        copy->setAttr(kBlockAttr, at->getAttr(kBlockAttr));
        for (size_t u = start; u < end; ++u) uses[u]->set(copy.getResult());
        previous = start;
        start = end;
      }
    };
    auto streamedUses = [&](BlockArgument arg, std::vector<OpOperand*>& uses) {
      for (OpOperand& use : arg.getUses())
        if (!isa<func::ReturnOp, HostTaskOp>(use.getOwner())) uses.push_back(&use);
    };
    int64_t pinned_bytes = 0;
    DenseSet<Value> pinned;  // before any copy replaces a use
    if (pinShared)
      for (Value param : sharedParameters(func)) pinned.insert(param);
    // A parameter in row pieces: its pieces in argument order (gathered in one pass: a scan of
    // every argument per split parameter grew with their product).
    std::map<std::string, std::vector<BlockArgument>> piecesOf;
    for (BlockArgument arg : func.getArguments())
      if (isRowPiece(func, arg.getArgNumber())) piecesOf[paramName(func, arg.getArgNumber()).str()].push_back(arg);
    std::set<std::string> streamedPieces;  // parameters whose row pieces are scheduled
    const std::set<std::string> kept =
        keepFrozen && !forward_only ? keptFrozen(func, pinned, position, region) : std::set<std::string>{};
    for (BlockArgument arg : func.getArguments()) {
      if (arg.use_empty()) continue;
      const StringRef name = paramName(func, arg.getArgNumber());
      if (name.empty()) {
        copyInOnce(arg);
        continue;
      }
      if (pinned.contains(arg)) {
        copyInOnce(arg);
        pinned_bytes += tensorBytes(arg.getType());
        continue;
      }
      std::vector<OpOperand*> uses;
      if (kept.count(name.str())) {
        streamedUses(arg, uses);  // none where only the host reads it (a table looked up there)
        if (!uses.empty()) copyInOnce(arg);
        continue;
      }
      if (!isRowPiece(func, arg.getArgNumber())) {
        streamedUses(arg, uses);
      } else if (streamedPieces.insert(name.str()).second) {  // all its pieces at the first one
        for (BlockArgument piece : piecesOf[name.str()]) streamedUses(piece, uses);
      }
      streamRuns(std::move(uses));
    }

    // The loss and each gradient leave as soon as they are complete; each gradient's share of
    // the global norm is taken on the host right away (on arrival, by the update of its
    // parameter, in the same pass over the gradient).
    std::map<std::string, Value> paramByName;
    for (Value p : parameterArguments(func))
      paramByName[paramName(func, cast<BlockArgument>(p).getArgNumber()).str()] = p;
    SmallVector<Value> hostResults;
    const std::vector<bool> completes = completedGradients(func);
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      Operation* def = v.getDefiningOp();
      if (def) b.setInsertionPointAfter(def); else b.setInsertionPoint(ret);
      auto host = b.create<D2HOp>(ret.getLoc(), v);
      if (def) host->setAttr(kBlockAttr, def->getAttr(kBlockAttr));
      hostResults.push_back(host);
      if (forward_only || i == 0 || !completes[i]) continue;  // a piece: the last one's tasks cover all
      if (update == UpdateKind::kDeferred) {
        auto norm = b.create<HostTaskOp>(ret.getLoc(), HostTaskKind::GradNorm, ValueRange{host.getResult()});
        if (def) norm->setAttr(kBlockAttr, def->getAttr(kBlockAttr));
      }
      if (update == UpdateKind::kOnArrival) {
        Value param = paramByName[gradientOf(func, i).str()];
        if (!param) {
          func.emitError("result ") << i << " is not the gradient of a parameter";
          return signalPassFailure();
        }
        auto adamw = b.create<HostTaskOp>(ret.getLoc(), HostTaskKind::AdamwOnArrival, ValueRange{param});
        if (def) adamw->setAttr(kBlockAttr, def->getAttr(kBlockAttr));
      }
    }
    ret->setOperands(hostResults);
    if (failed(insertHostEmbeddingTasks(func, hostResults))) return signalPassFailure();
    if (update == UpdateKind::kDeferred && !forward_only) insertDeferredUpdates(func);
    if (pinned_bytes) func->setAttr(kPinnedBytesAttr, b.getI64IntegerAttr(pinned_bytes));
  }

  // The frozen parameters (by name) copied once a step and kept: all, or the first
  // keepFrozenLimit of them by the block regions that read them (a copy each when streamed),
  // most first, then by their first read. Pinned ones are copied once anyway.
  std::set<std::string> keptFrozen(func::FuncOp func, const DenseSet<Value>& pinned,
                                   DenseMap<Operation*, size_t>& position, DenseMap<Operation*, size_t>& region) {
    struct Reads {
      std::set<size_t> regions;
      size_t first = SIZE_MAX;
    };
    std::map<std::string, Reads> reads;
    for (BlockArgument arg : func.getArguments()) {
      if (!isFrozenParam(func, arg.getArgNumber()) || pinned.contains(arg)) continue;
      Reads& r = reads[paramName(func, arg.getArgNumber()).str()];
      for (Operation* user : arg.getUsers()) {
        if (isa<func::ReturnOp, HostTaskOp>(user)) continue;
        r.regions.insert(region[user]);
        r.first = std::min(r.first, position[user]);
      }
    }
    std::vector<std::pair<std::string, Reads>> order(reads.begin(), reads.end());
    std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
      if (x.second.regions.size() != y.second.regions.size())
        return x.second.regions.size() > y.second.regions.size();
      return x.second.first < y.second.first;
    });
    std::set<std::string> kept;
    for (const auto& [name, r] : order)  // (one the device never reads is never copied)
      if (!r.regions.empty() && (keepFrozenLimit < 0 || static_cast<int64_t>(kept.size()) < keepFrozenLimit))
        kept.insert(name);
    return kept;
  }
};

}  // namespace
}  // namespace mt
