// mt-split-vocab: the LM head and its cross-entropy over chunks of the vocabulary, so neither
// the head's weight nor the logits are ever on the device whole. Each chunk of rows of the head
// becomes a parameter piece of its own (a row slice of the same host tensor) in a layer block
// of its own, so the streamed schedules copy one chunk at a time, a chunk ahead.
//
// Forward, chunk c:  logits_c = h W_c^T;  running = xent_chunk(logits_c, targets, running)
// then:              loss, lse = xent_finish(running, targets)
// Backward, chunk c (last chunk first; its logits are still there, the others recomputed):
//                    dlogits_c = xent_chunk_grad(dloss, logits_c, targets, lse)
//                    dh += dlogits_c W_c;  dW_c = dlogits_c^T h  (matmul's own gradient rule)
// Logits softcapped before the loss (Gemma 2: mt.softcap between the head and its loss) are
// capped chunk by chunk, logits_c = softcap(h W_c^T), and dlogits_c goes through softcap_grad.
// A DPO plan's loss (mt.sequence_logprob, each row's summed log-probability) goes the same way,
// finished by sequence_logprob_finish and differentiated by sequence_logprob_chunk_grad; what
// reads its sums (mt.dpo_loss and its backward) moves to the last chunk's block.
// The untied token embedding of the same vocabulary goes the same way: x = embedding_chunk(ids,
// E_c, x) from zeros, dE_c = embedding_grad_chunk(ids, dx), chunk c in block -1 - chunks + c.
#include <cmath>

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "compiler/dialect/MtOpShapes.h"
#include "passes/ParamPieces.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_SPLITVOCABPASS
#include "passes/Passes.h.inc"

namespace {

// Sets the block (and the backward / recompute marks) on every op from `first` up to, not
// including, `end`.
void markOps(Operation* first, Operation* end, int64_t block, StringRef mark) {
  Builder b(first->getContext());
  for (Operation* op = first; op != end; op = op->getNextNode()) {
    op->setAttr(kBlockAttr, b.getI64IntegerAttr(block));
    if (!mark.empty()) op->setAttr(mark, b.getUnitAttr());
  }
}

// The token embedding in chunks of the table's rows, each in its own layer block before the
// prologue (blocks -1 - chunks .. -2): the lookup chained from zeros, the gradient one chunk at
// a time. Left whole unless the table is an untied (vocab, C) parameter read by one lookup of
// the tokens and one mt.embedding_grad that is its returned gradient (none where it is frozen).
void splitEmbedding(func::FuncOp func, int64_t vocab, int64_t chunks) {
  EmbeddingOp lookup;
  const BlockArgument tokens = tokensArgument(func);
  func.walk([&](EmbeddingOp op) {
    if (tokens && op.getIds() == tokens) lookup = op;
  });
  auto table = lookup ? dyn_cast<BlockArgument>(lookup.getTable()) : nullptr;
  if (!table || paramName(func, table.getArgNumber()).empty() ||
      cast<RankedTensorType>(table.getType()).getDimSize(0) != vocab)
    return;
  EmbeddingGradOp grad;
  for (Operation* user : table.getUsers())
    if (user != lookup) return;  // read elsewhere: it stays whole
  for (Operation* user : lookup.getIds().getUsers())
    if (auto g = dyn_cast<EmbeddingGradOp>(user)) grad = g;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  const bool frozen = isFrozenParam(func, table.getArgNumber());
  if (frozen ? bool(grad) : !grad || !grad->hasOneUse() || *grad->getUsers().begin() != ret) return;
  const std::string name = paramName(func, table.getArgNumber()).str();

  const SmallVector<int64_t> first = pieceStarts(vocab, chunks);
  SmallVector<BlockArgument> pieces = insertPieces(func, table, first);
  OpBuilder b(func.getContext());
  auto block = [&](Operation* op, int64_t c) { op->setAttr(kBlockAttr, b.getI64IntegerAttr(-1 - chunks + c)); };
  b.setInsertionPoint(lookup);
  Value x = b.create<FillOp>(lookup.getLoc(), lookup.getType(), b.getF32FloatAttr(0.0f));
  block(x.getDefiningOp(), 0);
  for (int64_t c = 0; c < chunks; ++c) {
    x = b.create<EmbeddingChunkOp>(lookup.getLoc(), lookup.getIds(), pieces[c], x, first[c]);
    block(x.getDefiningOp(), c);
  }
  lookup.getResult().replaceAllUsesWith(x);
  if (!frozen) {
    b.setInsertionPoint(grad);
    SmallVector<Value> pieceGrads;
    const auto padding = grad.getPaddingId();
    for (int64_t c = 0; c < chunks; ++c) {
      // The padding id goes to the chunk that holds its row.
      const bool holdsPadding = padding && static_cast<int64_t>(*padding) >= first[c] &&
                                static_cast<int64_t>(*padding) < first[c + 1];
      auto g = b.create<EmbeddingGradChunkOp>(grad.getLoc(), grad.getIds(), grad.getDout(), first[c],
                                              first[c + 1] - first[c],
                                              holdsPadding ? grad.getPaddingIdAttr() : IntegerAttr());
      block(g, c);
      g->setAttr(kBackwardAttr, b.getUnitAttr());
      pieceGrads.push_back(g);
    }
    splitGradResult(func, name, pieceGrads, first);
    grad.erase();
  }
  lookup.erase();
  func.eraseArgument(table.getArgNumber());
  noteSplit(func, kVocabSplitAttr, name);
}

// The LM head and the loss it feeds: the forward product logits = h W^T (softcapped or not), its
// loss, the loss's one backward and the backward's products with dlogits (dh).
struct HeadMatch {
  Operation* loss;       // mt.softmax_xent or mt.sequence_logprob: (logits, targets) -> (loss or logp, lse)
  Operation* lossGrad;   // its backward: (dloss or dlogp, logits, targets, lse) -> dlogits
  SoftcapOp cap;         // mt.softcap between the head and the loss, or null
  SoftcapGradOp capGrad; // its backward, of the loss's backward (null where `cap` is)
  MatmulOp head;
  BlockArgument weight;  // W, (vocab, C)
  std::string name;      // W's parameter name
  bool frozen = false;   // W never trains: no gradient result, none built for its chunks
  SmallVector<MatmulOp> dhProducts;

  Value targets() const { return loss->getOperand(1); }
  Value lse() const { return loss->getResult(1); }
  // What the products with W read in the backward: the loss's dlogits, through the cap's backward.
  Value dlogits() { return capGrad ? Value(capGrad.getResult()) : lossGrad->getResult(0); }
  bool sequences() const { return isa<SequenceLogprobOp>(loss); }  // a DPO plan's
  bool average() const {  // its sums are means (the IPO loss's)
    auto sums = dyn_cast<SequenceLogprobOp>(loss);
    return sums && sums.getAverage();
  }
};

// The LoRA target whose adapted product `logits` is (mt-lora: y + its update, a DoRA head's
// g * (y + update) or y + its term), found through the adds and muls mt-lora puts on y; null where
// they are none.
BlockArgument adaptedHead(func::FuncOp func, Value logits) {
  Operation* op = logits.getDefiningOp();
  for (int depth = 0; op && isa<AddOp, MulOp>(op) && depth < 4; ++depth) {
    op = op->getOperand(0).getDefiningOp();
    if (auto product = dyn_cast_or_null<MatmulOp>(op))
      if (auto w = dyn_cast<BlockArgument>(product.getRhs()); w && isLoraTarget(func, w.getArgNumber())) return w;
  }
  return nullptr;
}

// The head a vocabulary split can take, or a diagnostic: the loss is not a head's, the head is
// read elsewhere (tied), or it has no gradient result.
FailureOr<HeadMatch> matchHead(func::FuncOp func) {
  HeadMatch m{};
  func.walk([&](Operation* op) {
    if (isa<SoftmaxXentOp, SequenceLogprobOp>(op)) m.loss = op;
  });
  const Value logits = m.loss ? m.loss->getOperand(0) : Value();
  m.cap = logits ? logits.getDefiningOp<SoftcapOp>() : nullptr;
  const Value product = logits ? uncappedLogits(logits) : Value();
  m.head = product ? product.getDefiningOp<MatmulOp>() : nullptr;
  // A head with LoRA adapters (mt-lora) adds their product to its own: no chunk has it whole.
  if (BlockArgument w = product ? adaptedHead(func, product) : nullptr)
    return func.emitError("the vocabulary split cannot take an LM head with LoRA adapters ('")
           << paramName(func, w.getArgNumber()) << "'): leave it out of --lora-targets";
  m.weight = m.head ? dyn_cast<BlockArgument>(m.head.getRhs()) : nullptr;
  if (!m.weight || !m.head.getTransposeB() || m.head.getTransposeA() ||
      paramName(func, m.weight.getArgNumber()).empty() || cast<RankedTensorType>(m.weight.getType()).getRank() != 2)
    return func.emitError("the vocabulary split needs a loss (mt.softmax_xent, or a DPO plan's mt.sequence_logprob) "
                          "of logits = mt.matmul(h, W) {transpose_b} (or their mt.softcap) with W a (vocab, C) "
                          "parameter (an LM head); this model has none");
  m.name = paramName(func, m.weight.getArgNumber()).str();
  auto lossGrads = llvm::to_vector(llvm::make_filter_range(logits.getUsers(), [](Operation* user) {
    return isa<SoftmaxXentGradOp, SequenceLogprobGradOp>(user);
  }));
  if (lossGrads.size() != 1)
    return func.emitError("the vocabulary split needs the one backward of the loss (mt.softmax_xent_grad or "
                          "mt.sequence_logprob_grad); found ")
           << lossGrads.size();
  m.lossGrad = lossGrads.front();
  if (m.cap) {
    for (Operation* user : m.lossGrad->getResult(0).getUsers())
      if (auto g = dyn_cast<SoftcapGradOp>(user); g && g.getCapped() == logits) m.capGrad = g;
    if (!m.capGrad || !m.lossGrad->getResult(0).hasOneUse())
      return func.emitError("the vocabulary split needs the softcapped logits' one backward (mt.softcap_grad of the "
                            "loss's)");
  }
  // The head's weight is read by the forward product and by the backward's products with
  // dlogits (dh) only; anything else (a tied embedding) needs the whole table.
  for (Operation* user : m.weight.getUsers()) {
    auto product = dyn_cast<MatmulOp>(user);
    if (product == m.head) continue;
    if (product && product.getLhs() == m.dlogits() && !product.getTransposeA() &&
        !product.getTransposeB()) {
      m.dhProducts.push_back(product);
      continue;
    }
    if (isa<func::ReturnOp>(user)) continue;
    return user->emitError("reads the LM head '") << m.name << "' as a whole (a tied embedding?): the vocabulary "
                                                  << "split needs an untied head (mtc --untied) or the token "
                                                  << "embedding on the host (mtc --embedding host)";
  }
  bool hasGrad = false;
  for (unsigned i = 1; i < func.getNumResults(); ++i)
    if (auto g = func.getResultAttrOfType<StringAttr>(i, kGradAttr); g && g.getValue() == m.name) hasGrad = true;
  m.frozen = isFrozenParam(func, m.weight.getArgNumber());
  if (!hasGrad && !m.frozen) return func.emitError("the LM head '") << m.name << "' has no gradient result";
  return m;
}

// The ops built since `previous` (the op before the insertion point then) up to `next` go to
// `block`.
void assignBuilt(Block& body, Operation* previous, Operation* next, int64_t block, StringRef mark) {
  markOps(previous ? previous->getNextNode() : &body.front(), next, block, mark);
}

// Forward: the chunks where the loss was, each in its own block after `epilogue`, a running
// (max, sum) through them; the loss finished with the last (its first result replaces the
// loss's; the second is the log-sum-exp). Returns the finishing op; each chunk's logits (capped
// where the head's are) in `logits`.
Operation* buildForwardChunks(HeadMatch& m, ArrayRef<BlockArgument> pieces, ArrayRef<int64_t> first, int64_t vocab,
                              int64_t epilogue, SmallVectorImpl<Value>& logits) {
  Block& body = *m.loss->getBlock();
  OpBuilder b(m.loss);
  const Location loc = m.loss->getLoc();
  const int64_t chunks = static_cast<int64_t>(pieces.size());
  Value h = m.head.getLhs(), targets = m.targets();
  const auto running_type =
      RankedTensorType::get(op_shapes::runningShape(cast<RankedTensorType>(m.lse().getType()).getShape()),
                            b.getF32Type());
  Value running;
  for (int64_t c = 0; c < chunks; ++c) {
    Operation* previous = m.loss->getPrevNode();
    if (c == 0) running = b.create<FillOp>(loc, running_type, b.getF32FloatAttr(-INFINITY));
    Value chunk = b.create<MatmulOp>(m.head.getLoc(), h, pieces[c], false, true).getResult();
    if (m.cap) chunk = b.create<SoftcapOp>(m.cap.getLoc(), chunk, m.cap.getCapAttr()).getResult();
    running = b.create<XentChunkOp>(loc, chunk, targets, running, first[c]);
    logits.push_back(chunk);
    assignBuilt(body, previous, m.loss, epilogue + 1 + c, "");
  }
  Operation* finish =
      m.sequences() ? b.create<SequenceLogprobFinishOp>(loc, running, targets, vocab, m.average()).getOperation()
                    : b.create<XentFinishOp>(loc, running, targets, vocab).getOperation();
  finish->setAttr(kBlockAttr, b.getI64IntegerAttr(epilogue + chunks));
  m.loss->getResult(0).replaceAllUsesWith(finish->getResult(0));
  return finish;
}

// `op`, unused, and what was built only for it.
void eraseUnused(Operation* op) {
  SmallVector<Operation*> work{op};
  SmallPtrSet<Operation*, 8> erased;  // an op reached twice (read twice) is erased once
  while (!work.empty()) {
    Operation* dead = work.pop_back_val();
    if (erased.contains(dead) || !isOpTriviallyDead(dead)) continue;
    for (Value operand : dead->getOperands())
      if (Operation* def = operand.getDefiningOp()) work.push_back(def);
    erased.insert(dead);
    dead->erase();
  }
}

// Backward, the last chunk first: its block's region runs on from the forward (what ran
// between the loss and its backward joins it: the loss's gradient seed, a DPO plan's mt.dpo_loss
// and its backward, which read the finished sums), so its weights are copied in once for both;
// the other chunks' products (and their caps) are recomputed. dh (the sum over chunks) replaces the
// whole head's; each piece's gradient in `pieceGrads`.
LogicalResult buildBackwardChunks(HeadMatch& m, ArrayRef<BlockArgument> pieces, ArrayRef<int64_t> first,
                                  int64_t vocab, int64_t epilogue, Operation* finish, ArrayRef<Value> forwardLogits,
                                  SmallVectorImpl<Value>& pieceGrads) {
  Block& body = *m.lossGrad->getBlock();
  OpBuilder b(m.lossGrad);
  const Location loc = m.lossGrad->getLoc();
  const int64_t chunks = static_cast<int64_t>(pieces.size());
  for (Operation* op = m.loss->getNextNode(); op && op != m.lossGrad; op = op->getNextNode())
    if (blockOf(op) == epilogue) op->setAttr(kBlockAttr, b.getI64IntegerAttr(epilogue + chunks));
  Value dseed = m.lossGrad->getOperand(0), lse = finish->getResult(1);
  Value h = m.head.getLhs(), dh;
  pieceGrads.assign(chunks, Value());
  for (int64_t c = chunks - 1; c >= 0; --c) {
    Value logits = forwardLogits[c];
    if (c != chunks - 1) {
      auto recomputed = [&](Operation* op) {
        op->setAttr(kRecomputeAttr, b.getUnitAttr());
        op->setAttr(kBlockAttr, b.getI64IntegerAttr(epilogue + 1 + c));
        return op->getResult(0);
      };
      logits = recomputed(b.create<MatmulOp>(m.head.getLoc(), h, pieces[c], false, true));
      if (m.cap) logits = recomputed(b.create<SoftcapOp>(m.cap.getLoc(), logits, m.cap.getCapAttr()));
    }
    auto product = uncappedLogits(logits).getDefiningOp<MatmulOp>();
    Operation* previous = m.lossGrad->getPrevNode();
    Value targets = m.targets();
    Value dlogits =
        m.sequences()
            ? b.create<SequenceLogprobChunkGradOp>(loc, dseed, logits, targets, lse, first[c], vocab, m.average())
                  .getResult()
            : b.create<XentChunkGradOp>(loc, dseed, logits, targets, lse, first[c], vocab).getResult();
    if (m.cap) dlogits = b.create<SoftcapGradOp>(m.capGrad.getLoc(), dlogits, logits, m.cap.getCapAttr()).getResult();
    SmallVector<Value> grads = cast<GradientOpInterface>(product.getOperation()).buildGradient(b, {dlogits});
    if (grads.size() != 2 || !grads[0] || !grads[1]) return failure();
    dh = dh ? b.create<AddOp>(loc, dh, grads[0]).getResult() : grads[0];
    if (m.frozen)  // a frozen head's chunk takes no gradient of its own
      eraseUnused(grads[1].getDefiningOp());
    else
      pieceGrads[c] = grads[1];
    assignBuilt(body, previous, m.lossGrad, epilogue + 1 + c, kBackwardAttr);
  }
  for (MatmulOp product : m.dhProducts) product.getResult().replaceAllUsesWith(dh);
  return success();
}

// What the whole head computed is dead once the chunks replace it: erased, then its weight.
void eraseWholeHead(func::FuncOp func, HeadMatch& m) {
  Block& body = func.getBody().front();
  Operation* ret = body.getTerminator();
  SetVector<Operation*> dead;
  for (MatmulOp product : m.dhProducts) dead.insert(product);
  if (m.cap) dead.insert(m.capGrad), dead.insert(m.cap);
  dead.insert(m.lossGrad);
  dead.insert(m.loss);
  dead.insert(m.head);
  for (Operation* op = m.lossGrad->getNextNode(); op != ret; op = op->getNextNode())
    if (op->hasAttr(kBackwardAttr)) dead.insert(op);
  // Users come after their operands: erasing from the last op back frees each in turn.
  SmallVector<Operation*> ops;
  for (Operation& op : body.without_terminator()) ops.push_back(&op);
  for (Operation* op : llvm::reverse(ops))
    if (dead.contains(op) && op->use_empty()) op->erase();
  func.eraseArgument(m.weight.getArgNumber());
}

// The LM head and its loss over `chunks` vocabulary chunks (see the file comment); `vocab` gets
// the head's rows. Fails, with a diagnostic, where matchHead does or the chunks outnumber the rows.
LogicalResult splitHead(func::FuncOp func, int64_t chunks, int64_t& vocab) {
  FailureOr<HeadMatch> match = matchHead(func);
  if (failed(match)) return failure();
  HeadMatch& m = *match;
  vocab = cast<RankedTensorType>(m.weight.getType()).getDimSize(0);
  if (chunks > vocab) return func.emitError("cannot split a vocabulary of ") << vocab << " into " << chunks << " chunks";
  const int64_t epilogue = *blockOf(m.loss);
  const SmallVector<int64_t> first = pieceStarts(vocab, chunks);
  SmallVector<BlockArgument> pieces = insertPieces(func, m.weight, first);
  SmallVector<Value> forwardLogits;
  Operation* finish = buildForwardChunks(m, pieces, first, vocab, epilogue, forwardLogits);
  SmallVector<Value> pieceGrads;
  if (failed(buildBackwardChunks(m, pieces, first, vocab, epilogue, finish, forwardLogits, pieceGrads)))
    return failure();
  if (!m.frozen) splitGradResult(func, m.name, pieceGrads, first);
  eraseWholeHead(func, m);
  noteSplit(func, kVocabSplitAttr, m.name);
  return success();
}

struct SplitVocabPass : impl::SplitVocabPassBase<SplitVocabPass> {
  using SplitVocabPassBase::SplitVocabPassBase;

  void runOnOperation() override {
    if (chunks <= 1) return;
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    if (failed(checkReadyToSchedule(func, "mt-split-vocab"))) return signalPassFailure();
    if (!func->hasAttr(kTemplatesAttr)) {
      func.emitError("mt-split-vocab needs layer blocks: run mt-partition first");
      return signalPassFailure();
    }
    int64_t vocab = 0;
    if (failed(splitHead(func, chunks, vocab))) return signalPassFailure();
    splitEmbedding(func, vocab, chunks);
  }
};

}  // namespace
}  // namespace mt
