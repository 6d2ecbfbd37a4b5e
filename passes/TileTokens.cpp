// mt-tile-tokens: the token-wise work of each layer block (norms, projections, the MLP, rope,
// residual adds) and of the head (its norm, the LM head and the loss, each tile's share of the
// mean) runs tile by tile along the tokens; what reads the whole sequence (attention)
// gets the whole, assembled in place from the tiles (mt.token_concat), and the tiles read their
// slice of a whole in place (mt.token_split). Runs on the forward function, before mt-autodiff:
// the backward of each tile then follows from the gradient rules, and mt-recompute recomputes
// each tile's activations just before that tile's backward.
#include <limits>

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_TILETOKENSPASS
#include "passes/Passes.h.inc"

namespace {

RankedTensorType tensorOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

// The function's values that carry tokens: everything computed from an input that is neither a
// parameter nor a constant, whose leading dimensions are the tokens' (batch, seq).
class TokenValues {
 public:
  TokenValues(func::FuncOp func, int64_t batch, int64_t seq) : batch_(batch), seq_(seq) {
    for (BlockArgument arg : func.getArguments())
      if (!func.getArgAttr(arg.getArgNumber(), kParamAttr) && !func.getArgAttr(arg.getArgNumber(), kConstAttr))
        derived_.insert(arg);
    for (Operation& op : func.getBody().front())
      if (llvm::any_of(op.getOperands(), [&](Value v) { return derived_.contains(v); }))
        for (Value r : op.getResults()) derived_.insert(r);
  }

  // Derived from the tokens, with (batch, seq) leading dimensions and at least `rank` dims.
  bool isToken(Value v, int64_t rank = 2) const {
    auto type = tensorOf(v);
    return derived_.contains(v) && type && type.getRank() >= rank && type.getDimSize(0) == batch_ &&
           type.getDimSize(1) == seq_;
  }
  // Not derived from the tokens at all (a weight, a constant, what is made of them).
  bool isConstant(Value v) const { return !derived_.contains(v); }
  // A value made by the tiling (a whole assembled from tiles) carries tokens as its tiles did.
  void add(Value v) { derived_.insert(v); }

 private:
  int64_t batch_, seq_;
  DenseSet<Value> derived_;
};

// Whether `op` computes each token from that token alone, so it can run tile by tile: the fused
// token-wise ops, each token operand (batch, seq, ...), every other operand constant and only as
// wide as the trailing dimensions it broadcasts over; every result a token value. Anything else
// (attention, softmax over an axis, dropout whose mask follows the element index, reshapes) runs
// on the whole.
bool isTokenWise(Operation* op, const TokenValues& tokens) {
  if (op->getNumResults() == 0 || !llvm::all_of(op->getResults(), [&](Value r) { return tokens.isToken(r); }))
    return false;
  auto trailingConstant = [&](Value v, Value result) {
    return tokens.isConstant(v) && tensorOf(v) && tensorOf(v).getRank() <= tensorOf(result).getRank() - 2;
  };
  auto tokenOrTrailing = [&](Operation* o) {
    bool any = false;
    for (Value v : o->getOperands()) {
      if (tokens.isToken(v, 3)) any = true;
      else if (!trailingConstant(v, o->getResult(0))) return false;
    }
    return any;
  };
  if (auto product = dyn_cast<MatmulOp>(op))
    return tokens.isToken(product.getLhs(), 3) && !product.getTransposeA() && tokens.isConstant(product.getRhs()) &&
           product.getRhs().getType().getRank() == 2;
  if (isa<RmsNormOp, LayerNormOp>(op))
    return tokens.isToken(op->getOperand(0), 3) &&
           llvm::all_of(op->getOperands().drop_front(), [&](Value v) { return tokens.isConstant(v); });
  if (isa<RopeOp>(op)) return tokens.isToken(op->getOperand(0), 3);
  if (isa<AddOp, MulOp, BinaryOp, ScaleOp, GeluOp, SiluOp, SwigluOp, UnaryOp, ClampOp, SoftcapOp>(op))
    return tokenOrTrailing(op);
  return false;
}

// The loss over (batch, seq, V) logits: each tile's share of it is `mt.xent_tile`'s.
bool isTileableLoss(Operation* op, const TokenValues& tokens) {
  auto xent = dyn_cast<SoftmaxXentOp>(op);
  return xent && tokens.isToken(xent.getLogits(), 3) && tokens.isToken(xent.getTargets());
}

// Where an op's runs are tiled: its layer block, or the head after the last layer block
// (kHead); std::nullopt before the first (the prologue: the token embedding, not tiled).
constexpr int64_t kHead = std::numeric_limits<int64_t>::max();
DenseMap<Operation*, int64_t> tilingRegions(Block& body) {
  DenseMap<Operation*, int64_t> region;
  Operation* lastLayerOp = nullptr;
  for (Operation& op : body.without_terminator())
    if (std::optional<int64_t> block = layerBlockInPath(&op)) region[&op] = *block, lastLayerOp = &op;
  bool after = false;
  for (Operation& op : body.without_terminator()) {
    if (after && !region.count(&op)) region[&op] = kHead;
    after |= &op == lastLayerOp;
  }
  return region;
}

struct TileTokensPass : impl::TileTokensPassBase<TileTokensPass> {
  using TileTokensPassBase::TileTokensPassBase;

  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    if (tiles < 0) {
      func.emitError("mt-tile-tokens: tiles must not be negative, got ") << tiles;
      return signalPassFailure();
    }
    if (tiles <= 1) return;
    Block& body = func.getBody().front();
    for (Operation& op : body)
      if (op.hasAttr(kBackwardAttr) || op.hasAttr(kBlockAttr)) {
        op.emitError("mt-tile-tokens runs on the forward function, before mt-autodiff and mt-partition");
        return signalPassFailure();
      }
    BlockArgument ids = tokensArgument(func);
    auto idsType = ids ? tensorOf(ids) : nullptr;
    if (!idsType || idsType.getRank() != 2) {
      func.emitError("mt-tile-tokens needs a (batch, seq) tokens input to tile along");
      return signalPassFailure();
    }
    batch_ = idsType.getDimSize(0), seq_ = idsType.getDimSize(1);
    if (failed(checkTiles(func))) return signalPassFailure();
    TokenValues tokens(func, batch_, seq_);

    // Runs of consecutive token-wise ops of one layer block (or of the head, with its loss),
    // each tiled as a unit.
    region_ = tilingRegions(body);
    SmallVector<SmallVector<Operation*>> runs;
    bool runOpen = false;
    for (Operation& op : body.without_terminator()) {
      auto found = region_.find(&op);
      const bool inHead = found != region_.end() && found->second == kHead;
      const bool tileable = found != region_.end() && (!inHead || head) &&
                            (isTokenWise(&op, tokens) || (inHead && isTileableLoss(&op, tokens)));
      if (!tileable) {
        runOpen = false;
        continue;
      }
      if (!runOpen || region_.lookup(runs.back().front()) != found->second) runs.emplace_back();
      runOpen = true;
      runs.back().push_back(&op);
      tiled_.insert(&op);
    }
    if (runs.empty()) {
      func.emitError("mt-tile-tokens found no token-wise op in a layer block to tile");
      return signalPassFailure();
    }
    for (auto& run : runs) tileRun(run, tokens);
    for (auto& run : llvm::reverse(runs))
      for (Operation* op : llvm::reverse(run)) op->erase();
    func->setAttr(kTokenTilesAttr, Builder(&getContext()).getI64IntegerAttr(tiles));
  }

 private:
  // The tile count must cut the batch's token rows into equal tiles inside one sequence or of
  // whole sequences, of a multiple of 32 tokens (every tile's bytes then keep the arena's
  // 64-byte alignment, f32 or bf16).
  LogicalResult checkTiles(func::FuncOp func) {
    const int64_t rows = batch_ * seq_;
    const int64_t tileRows = rows % tiles == 0 ? rows / tiles : 0;
    if (tileRows > 0 && (seq_ % tileRows == 0 || tileRows % seq_ == 0) && tileRows % 32 == 0) return success();
    std::string valid;
    for (int64_t n = 2; n <= rows / 32 && valid.size() < 60; ++n)
      if (rows % n == 0 && (seq_ % (rows / n) == 0 || (rows / n) % seq_ == 0) && (rows / n) % 32 == 0)
        valid += (valid.empty() ? "" : ", ") + std::to_string(n);
    return func.emitError("cannot cut ") << batch_ << " x " << seq_ << " tokens into " << static_cast<int64_t>(tiles)
                                         << " token tiles: a tile must be a multiple of 32 tokens inside one sequence "
                                            "or whole sequences; counts that work: "
                                         << (valid.empty() ? "none (the batch is too small to tile)" : valid);
  }

  // The tile `t` of token value `v` (its tiles made where this run starts if it has none yet).
  Value tileOf(Value v, int64_t t, OpBuilder& b, Location loc) {
    auto it = pieces_.find(v);
    if (it == pieces_.end()) {
      auto tileType = tokenTileType(tensorOf(v), tiles);
      auto split = b.create<TokenSplitOp>(loc, SmallVector<Type>(tiles, tileType), v);
      it = pieces_.try_emplace(v, SmallVector<Value>(split.getResults())).first;
    }
    return it->second[t];
  }

  void tileRun(ArrayRef<Operation*> run, TokenValues& tokens) {
    Operation* last = run.back();
    OpBuilder b(last->getContext());
    b.setInsertionPointAfter(last);
    const Location blockLoc = run.front()->getLoc();
    // Token operands from outside the run: split first, so the tiles' ops follow one another.
    for (Operation* op : run)
      for (Value v : op->getOperands())
        if (tokens.isToken(v) && !(v.getDefiningOp() && tiled_.contains(v.getDefiningOp()))) tileOf(v, 0, b, blockLoc);
    // The loss's divisor: the whole batch's counted targets, before any tile's share of it.
    DenseMap<Operation*, Value> counts;
    for (Operation* op : run)
      if (auto xent = dyn_cast<SoftmaxXentOp>(op))
        counts[op] = b.create<CountTargetsOp>(op->getLoc(), xent.getTargets(),
                                              xent.getLogits().getType().getShape().back());
    const int64_t rowsPerTile = batch_ * seq_ / tiles;
    llvm::MapVector<Operation*, SmallVector<Value>> shares;  // a loss -> each tile's share of it
    for (int64_t t = 0; t < tiles; ++t) {
      for (Operation* op : run) {
        auto tileOperand = [&](Value v) { return tokens.isToken(v) ? tileOf(v, t, b, blockLoc) : v; };
        Operation* clone;
        if (auto xent = dyn_cast<SoftmaxXentOp>(op)) {
          clone = b.create<XentTileOp>(withTile(op->getLoc(), t), tileOperand(xent.getLogits()),
                                       tileOperand(xent.getTargets()), counts[op]);
          shares[op].push_back(clone->getResult(0));
        } else {
          clone = b.clone(*op);
          clone->setLoc(withTile(op->getLoc(), t));
          for (OpOperand& operand : clone->getOpOperands()) operand.set(tileOperand(operand.get()));
          if (auto rope = dyn_cast<RopeOp>(clone))
            rope.setPositionOffset(rope.getPositionOffset() + (t * rowsPerTile) % seq_);
          for (Value r : clone->getResults()) r.setType(tokenTileType(tensorOf(r), tiles));
        }
        for (auto [original, tile] : llvm::zip(op->getResults(), clone->getResults())) {
          if (!tokens.isToken(original)) continue;  // a loss share: summed below
          SmallVector<Value>& list = pieces_[original];
          if (list.empty()) list.resize(tiles);
          list[t] = tile;
        }
      }
    }
    // Each loss is the sum of its tiles' shares.
    for (auto& [op, parts] : shares) {
      Value loss = parts.front();
      for (Value part : ArrayRef<Value>(parts).drop_front()) loss = b.create<AddOp>(op->getLoc(), loss, part);
      op->getResult(0).replaceAllUsesWith(loss);
    }
    // What the run makes that anything but a later tiled op of its block reads: the whole,
    // assembled from the tiles.
    const int64_t region = region_.lookup(run.front());
    for (Operation* op : run)
      for (Value r : op->getResults()) {
        if (!pieces_.count(r)) continue;  // a loss: replaced by its shares' sum
        auto readsWhole = [&](OpOperand& use) {
          Operation* user = use.getOwner();
          return !tiled_.contains(user) || region_.lookup(user) != region;
        };
        if (llvm::none_of(r.getUses(), readsWhole)) continue;
        Value whole = b.create<TokenConcatOp>(op->getLoc(), r.getType(), pieces_[r]).getResult();
        tokens.add(whole);
        r.replaceUsesWithIf(whole, readsWhole);
      }
  }

  int64_t batch_ = 0, seq_ = 0;
  DenseMap<Operation*, int64_t> region_;       // the layer block (or kHead) of each op after the prologue
  DenseSet<Operation*> tiled_;                 // the original ops of every run (erased at the end)
  DenseMap<Value, SmallVector<Value>> pieces_;  // a token value -> its tiles
};

}  // namespace
}  // namespace mt
