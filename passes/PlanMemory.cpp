// mt-plan-memory: static offsets of every device value in one arena. Values are placed in
// program order, first fit, and their bytes return to the free list after their last use;
// results are placed before the op's dying operands are freed, so no op writes over its own
// inputs but a chain's link (below). Views share another value's bytes and extend its lifetime:
// a reshape its input's, a token tile (mt.token_split) its part of the whole, each tile of an
// mt.token_concat is made in place in the whole's bytes (which are taken when the first tile is
// made), and each link of a chain of a stack's groups of experts (mt.grouped_matmul into, from
// mt-split-experts) is made in place in its `into`'s bytes, of which it is the only reader.
#include <map>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
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

// What a schedule could still save, for the error of a plan over the budget: nothing once it
// recomputes (or, forward-only, once it streams: it is then partitioned into blocks).
const char* scheduleAdvice(func::FuncOp func, bool recomputes) {
  if (!isForwardOnly(func)) return recomputes ? "" : "stream the weights and recompute (mtc --schedule), ";
  bool streams = false;
  func.walk([&](Operation* op) { streams |= op->hasAttr(kBlockAttr); });
  return streams ? "" : "stream the weights (mtc --schedule streamed), ";
}

// Where each value's bytes are: its own, or at an offset inside another value's (a view).
class Views {
 public:
  bool isView(Value v) const { return of_.count(v); }
  // The value that owns v's bytes, and where in them v starts.
  Value root(Value v) const {
    for (auto it = of_.find(v); it != of_.end(); it = of_.find(v)) v = it->second.first;
    return v;
  }
  int64_t offset(Value v) const {
    int64_t at = 0;
    for (auto it = of_.find(v); it != of_.end(); it = of_.find(v)) at += it->second.second, v = it->second.first;
    return at;
  }
  void alias(Value v, Value in, int64_t at) { of_[v] = {in, at}; }

 private:
  DenseMap<Value, std::pair<Value, int64_t>> of_;
};

// Tile i of an mt.token_concat can be made in place where the result's bytes have it when it
// is a value of its own, exactly a tile's bytes, placed in no other concat.
bool placeableTile(Value tile, const Views& views, const DenseSet<Value>& placed) {
  Value r = views.root(tile);
  return r.getDefiningOp() && onDevice(r.getDefiningOp()) && views.offset(tile) == 0 &&
         tensorBytes(r.getType()) == tensorBytes(tile.getType()) && !placed.contains(r);
}

// The views of `body`: reshapes and token splits, then the tiles of each token concat in its
// result. A tile that cannot be placed (a view itself, or in two concats) is first copied
// (mt.scale by 1, exact) and the copy placed.
Views buildViews(Block& body) {
  Views views;
  DenseSet<Value> links;  // results of a group's product placed in their `into`'s bytes
  for (Operation& op : body) {
    if (auto reshape = dyn_cast<ReshapeOp>(op)) views.alias(reshape.getResult(), reshape.getInput(), 0);
    if (auto split = dyn_cast<TokenSplitOp>(op))
      for (auto [i, tile] : llvm::enumerate(split.getTiles()))
        views.alias(tile, split.getInput(), static_cast<int64_t>(i) * tensorBytes(tile.getType()));
    // A chain of a stack's groups of experts (mt-split-experts) in one buffer: each link in its
    // `into`'s bytes where it is their only reader (a value of its own or the link before).
    if (auto product = dyn_cast<GroupedMatmulOp>(op)) {
      Value into = product.getInto();
      Operation* def = into ? into.getDefiningOp() : nullptr;
      if (into && into.hasOneUse() &&
          (links.contains(into) || (def && !views.isView(into) && onDevice(def) && !isa<TokenConcatOp>(def)))) {
        views.alias(product.getResult(), into, 0);
        links.insert(product.getResult());
      }
    }
  }
  DenseSet<Value> placed;
  for (Operation& op : body) {
    auto concat = dyn_cast<TokenConcatOp>(op);
    if (!concat) continue;
    for (auto [i, operand] : llvm::enumerate(concat->getOpOperands())) {
      if (!placeableTile(operand.get(), views, placed)) {
        OpBuilder b(concat);
        auto copy = b.create<ScaleOp>(concat.getLoc(), operand.get(), b.getF32FloatAttr(1.0f));
        for (StringRef mark : {kBlockAttr, kBackwardAttr, kRecomputeAttr, kTileAttr})
          if (Attribute value = concat->getAttr(mark)) copy->setAttr(mark, value);
        operand.set(copy.getResult());
      }
      Value r = views.root(operand.get());
      placed.insert(r);
      views.alias(r, concat.getResult(), static_cast<int64_t>(i) * tensorBytes(operand.get().getType()));
    }
  }
  return views;
}

struct PlanMemoryPass : impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    Block& body = func.getBody().front();

    // Where the bytes of each value live.
    const Views views = buildViews(body);
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
        Value r = views.root(operand);
        lastUse[r] = std::max(lastUse.lookup(r), index);
      }
      for (Value result : op.getResults())
        if (!views.isView(result)) lastUse[result] = std::max(lastUse.lookup(result), index);
      ++index;
    }
    // The copies a schedule kept (mt.kept: its keep-frozen's frozen weights, their staging
    // copies, constants) keep their bytes to the end in every placement: no other value takes
    // them, so every step after the first finds them on the device (runtime/plan/plan_queries.h,
    // keptCopies), and the smallest arena (what mtc's trials fit to the budget) includes them.
    for (Operation& op : body)
      if (isa<H2DOp>(op) && op.hasAttr(kKeptAttr)) lastUse[op.getResult(0)] = index;
    // A copy to the host runs beside the compute that follows it: with slack, the bytes it
    // reads stay allocated to the end of its block's region, so the next kernels do not write
    // over them (and wait for the copy) right after it was issued. Without, the arena is as
    // small as liveness allows: taken only when the slack does not fit the budget.
    DenseMap<Value, int64_t> lastUseWithSlack = lastUse;
    DenseMap<Operation*, size_t> regionOf = blockRegions(body);
    std::vector<int64_t> regionEnd(regionOf[body.getTerminator()] + 1);  // by region: its last op's position
    for (Operation& op : body) regionEnd[regionOf[&op]] = position[&op];
    for (Operation& op : body)
      if (auto copy = dyn_cast<D2HOp>(op)) {
        Value r = views.root(copy.getInput());
        lastUseWithSlack[r] = std::max(lastUseWithSlack[r], regionEnd[regionOf[&op]]);
      }

    Placement chosen = place(body, position, views, lastUseWithSlack);
    const Placement smallest = place(body, position, views, lastUse);
    if (budget > 0 && chosen.peak > budget) chosen = smallest;
    // A forward-only function's weights (and constants) keep their bytes to the end where the
    // budget has room: no other value takes them, so a backend running the plan again on the
    // same weights (mtgen's tokens) leaves them on the device (keptCopies) instead of copying
    // them again.
    if (isForwardOnly(func)) {
      DenseMap<Value, int64_t> keeping = lastUseWithSlack;
      for (Operation& op : body)
        if (auto copy = dyn_cast<H2DOp>(op); copy && isPersistentSource(func, copy.getInput()))
          keeping[copy.getResult()] = index;
      Placement kept = place(body, position, views, keeping);
      if (budget == 0 || kept.peak <= budget) chosen = std::move(kept);
    }
    Builder b(&getContext());
    for (auto& [op, offsets] : chosen.offsets) op->setAttr(kOffsetsAttr, b.getDenseI64ArrayAttr(offsets));
    func->setAttr(kArenaBytesAttr, b.getI64IntegerAttr(chosen.peak));
    func->setAttr(kArenaMinBytesAttr, b.getI64IntegerAttr(smallest.peak));
    planGradientLanding(func, position, regionOf, regionEnd, landDeferred);
    if (budget > 0 && chosen.peak > budget) {
      bool recomputes = false;
      for (Operation& op : body) recomputes |= op.hasAttr(kRecomputeAttr);
      InFlightDiagnostic diag = func.emitError("the plan needs ")
          << formatBytesExact(chosen.peak) << " of device memory but the budget is "
          << formatBytesExact(static_cast<int64_t>(budget)) << ": raise the budget to at least " << chosen.peak
          << " bytes, "
          << scheduleAdvice(func, recomputes)
          << "or make the batch, the sequence or the model smaller";
      diag.attachNote(func.getLoc()) << describePeak(body, chosen, position, views, lastUse);
      return signalPassFailure();
    }
  }

  // The host buffer the gradients land in when each is consumed on arrival (adamw_on_arrival),
  // or, with `deferred`, when the host keeps each apart once its norm is taken (grad_norm): a
  // gradient's bytes are taken at its copy out and free again at the end of the block region
  // where that task ran, so the next copies overlap the host's work instead of waiting for it.
  static void planGradientLanding(func::FuncOp func, DenseMap<Operation*, int64_t>& position,
                                  DenseMap<Operation*, size_t>& regionOf, std::vector<int64_t>& regionEnd,
                                  bool deferred) {
    Block& body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // Each parameter's gradient on the host: one value, or one per row piece (mt-split-vocab),
    // which land at their rows' places in one allocation of the whole gradient.
    struct Piece {
      std::string param;
      int64_t offset = 0;  // bytes from the start of the whole gradient
    };
    DenseMap<Value, Piece> pieceOf;
    std::map<std::string, int64_t> wholeBytes;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto name = func.getResultAttrOfType<StringAttr>(i, kGradAttr);
      if (!name) continue;
      auto type = cast<RankedTensorType>(ret.getOperand(i).getType());
      auto row = func.getResultAttrOfType<IntegerAttr>(i, kGradRowAttr);
      Piece piece{name.getValue().str(), row ? row.getInt() * rowBytes(type) : 0};
      pieceOf[ret.getOperand(i)] = piece;
      wholeBytes[piece.param] = std::max(wholeBytes[piece.param], piece.offset + tensorBytes(type));
    }
    // The token embedding's gradient on the host (mt-host-embedding) lands in the whole
    // gradient too: scatter-added onto the head's pieces (tied), or from zeros (untied).
    auto tableOf = [&](Operation& op) -> BlockArgument {
      auto task = dyn_cast<HostTaskOp>(op);
      return task && task.getKind() == HostTaskKind::EmbeddingGrad ? cast<BlockArgument>(task.getTensors()[0]) : nullptr;
    };
    for (Operation& op : body) {
      // A piece stands for a table split by mt-split-vocab: the pieces' results give its size.
      BlockArgument table = tableOf(op);
      auto param = table ? func.getArgAttrOfType<DictionaryAttr>(table.getArgNumber(), kParamAttr) : nullptr;
      if (!param || param.get(kParamRowsKey)) continue;
      const std::string name = paramName(func, table.getArgNumber()).str();
      wholeBytes[name] = std::max(wholeBytes[name], tensorBytes(table.getType()));
    }
    // The parameter whose gradient a grad_norm task takes as `v`: a gradient (piece) copied out,
    // or the tokens' rows the host scatters into a table's gradient; "" if neither.
    auto normedParam = [&](Value v) -> std::string {
      if (auto piece = pieceOf.find(v); piece != pieceOf.end()) return piece->second.param;
      for (Operation* user : v.getUsers())
        if (BlockArgument table = tableOf(*user)) return paramName(func, table.getArgNumber()).str();
      return "";
    };
    std::map<std::string, int64_t> freeAt;  // parameter -> position after which its gradient's bytes are free
    for (Operation& op : body) {
      auto task = dyn_cast<HostTaskOp>(op);
      if (!task) continue;
      for (Value v : task.getTensors()) {
        std::string name;  // the parameter whose gradient the task consumes
        if (task.getKind() == HostTaskKind::AdamwOnArrival)
          if (auto arg = dyn_cast<BlockArgument>(v)) name = paramName(func, arg.getArgNumber()).str();
        if (deferred && task.getKind() == HostTaskKind::GradNorm) name = normedParam(v);
        if (wholeBytes.count(name)) freeAt[name] = std::max(freeAt[name], regionEnd[regionOf[&op]]);
      }
    }
    if (freeAt.empty()) return;
    ArenaAllocator landing;
    DenseMap<Value, int64_t> offsets;         // by the parameter's first piece to land
    std::map<std::string, Value> firstLanded;
    std::multimap<int64_t, Value> dying;
    Builder b(func.getContext());
    for (Operation& op : body) {
      // What lands: a gradient (piece) copied out, at its rows' offset, or the tokens' rows
      // scatter-added by the host, over the whole gradient.
      Value landed;
      Piece piece;
      if (auto copy = dyn_cast<D2HOp>(op); copy && pieceOf.count(copy.getResult()))
        landed = copy.getResult(), piece = pieceOf[landed];
      if (BlockArgument table = tableOf(op))
        landed = cast<HostTaskOp>(op).getTensors()[2], piece = Piece{paramName(func, table.getArgNumber()).str(), 0};
      if (landed && freeAt.count(piece.param)) {
        auto [first, isFirst] = firstLanded.emplace(piece.param, landed);
        if (isFirst) {
          offsets[landed] = landing.allocate(wholeBytes[piece.param]);
          dying.emplace(freeAt[piece.param], landed);
        }
        op.setAttr(kLandingOffsetAttr, b.getI64IntegerAttr(offsets[first->second] + piece.offset));
      }
      releaseUntil(position[&op], dying, landing, offsets);
    }
    func->setAttr(kLandingBytesAttr, b.getI64IntegerAttr(landing.peak()));
  }

  struct Placement {
    DenseMap<Operation*, SmallVector<int64_t>> offsets;  // of each device op's results
    int64_t peak = 0;
    Operation* peakOp = nullptr;  // the op whose results first reached the peak
  };

  // Places every device value in program order, first fit, freeing its bytes after `lastUse`.
  // A view's root is placed when the first value in its bytes is made (a concat's first tile).
  static Placement place(Block& body, DenseMap<Operation*, int64_t>& position, const Views& views,
                         DenseMap<Value, int64_t>& lastUse) {
    Placement placement;
    ArenaAllocator arena;
    DenseMap<Value, int64_t> offsets;
    std::multimap<int64_t, Value> dying;  // last use -> storage root
    for (Operation& op : body) {
      if (!onDevice(&op) || op.getNumResults() == 0) {
        releaseUntil(position[&op], dying, arena, offsets);
        continue;
      }
      SmallVector<int64_t>& opOffsets = placement.offsets[&op];
      for (Value result : op.getResults()) {
        const Value r = views.root(result);
        if (!offsets.count(r)) {
          offsets[r] = arena.allocate(tensorBytes(r.getType()));
          dying.emplace(lastUse[r], r);
        }
        opOffsets.push_back(offsets[r] + views.offset(result));
      }
      if (arena.peak() > placement.peak) placement.peak = arena.peak(), placement.peakOp = &op;
      releaseUntil(position[&op], dying, arena, offsets);
    }
    return placement;
  }

  // What the device holds when `placement` peaks, by kind, largest first, with the single
  // largest value: what to shrink to fit a budget.
  static std::string describePeak(Block& body, const Placement& placement, DenseMap<Operation*, int64_t>& position,
                                  const Views& views, DenseMap<Value, int64_t>& lastUse) {
    if (!placement.peakOp) return "";
    const int64_t at = position[placement.peakOp];
    struct Kind {
      const char* name;
      int64_t bytes = 0, count = 0;
    };
    Kind kinds[] = {{"activations of the forward"}, {"weights"}, {"backward values (gradients, their temporaries)"},
                    {"inputs"}};
    Value largest;
    DenseSet<Value> counted;  // roots: a concat's whole is counted from its first tile
    for (Operation& op : body) {
      if (position[&op] > at) break;
      if (!onDevice(&op)) continue;
      for (Value result : op.getResults()) {
        const Value v = views.root(result);
        if (lastUse[v] < at || !counted.insert(v).second) continue;
        int kind = 0;
        if (auto copy = dyn_cast<H2DOp>(op)) {
          auto arg = dyn_cast<BlockArgument>(copy.getInput());
          kind = arg && !paramName(cast<func::FuncOp>(body.getParentOp()), arg.getArgNumber()).empty() ? 1 : 3;
        } else if (op.hasAttr(kBackwardAttr)) {
          kind = 2;
        }
        kinds[kind].bytes += tensorBytes(v.getType());
        ++kinds[kind].count;
        if (!largest || tensorBytes(v.getType()) > tensorBytes(largest.getType())) largest = v;
      }
    }
    std::sort(std::begin(kinds), std::end(kinds), [](const Kind& a, const Kind& b) { return a.bytes > b.bytes; });
    std::string out;
    llvm::raw_string_ostream os(out);
    Operation* peak = placement.peakOp;
    os << "at the peak (" << peak->getName();
    if (auto block = blockOf(peak)) os << " in block " << *block;
    os << (peak->hasAttr(kBackwardAttr) ? "'s backward" : peak->hasAttr(kRecomputeAttr) ? "'s recompute" : "")
       << ") the device holds";
    const char* separator = " ";
    for (const Kind& k : kinds) {
      if (k.count == 0) continue;
      os << separator << k.name << " " << formatBytes(k.bytes) << " (" << k.count
         << (k.count == 1 ? " value)" : " values)");
      separator = ", ";
    }
    if (largest) {
      os << "; the largest is " << formatBytes(tensorBytes(largest.getType())) << ", ";
      auto copy = largest.getDefiningOp<H2DOp>();
      auto arg = copy ? dyn_cast<BlockArgument>(copy.getInput()) : nullptr;
      StringRef name = arg ? paramName(cast<func::FuncOp>(body.getParentOp()), arg.getArgNumber()) : "";
      if (!name.empty()) os << "the weight '" << name << "'";
      else os << "the result of " << largest.getDefiningOp()->getName();
      os << " " << largest.getType();
    }
    return out;
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
