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
#include <cmath>

#include "llvm/ADT/SetVector.h"
#include "mlir/IR/Builders.h"
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
    SoftmaxXentOp xent;
    func.walk([&](SoftmaxXentOp op) { xent = op; });
    auto head = xent ? xent.getLogits().getDefiningOp<MatmulOp>() : nullptr;
    auto weight = head ? dyn_cast<BlockArgument>(head.getRhs()) : nullptr;
    if (!weight || !head.getTransposeB() || head.getTransposeA() ||
        paramName(func, weight.getArgNumber()).empty() || cast<RankedTensorType>(weight.getType()).getRank() != 2) {
      func.emitError("the vocabulary split needs a loss mt.softmax_xent of logits = mt.matmul(h, W) {transpose_b} "
                     "with W a (vocab, C) parameter (an LM head); this model has none");
      return signalPassFailure();
    }
    const std::string name = paramName(func, weight.getArgNumber()).str();
    auto xentGrads = llvm::to_vector(llvm::make_filter_range(
        xent.getLogits().getUsers(), [](Operation* user) { return isa<SoftmaxXentGradOp>(user); }));
    if (xentGrads.size() != 1) {
      func.emitError("the vocabulary split needs the one backward of the loss (mt.softmax_xent_grad); found ")
          << xentGrads.size();
      return signalPassFailure();
    }
    auto xentGrad = cast<SoftmaxXentGradOp>(xentGrads.front());
    // The head's weight is read by the forward product and by the backward's products with
    // dlogits (dh) only; anything else (a tied embedding) needs the whole table.
    SmallVector<MatmulOp> dhProducts;
    for (Operation* user : weight.getUsers()) {
      auto product = dyn_cast<MatmulOp>(user);
      if (product == head) continue;
      if (product && product.getLhs() == xentGrad.getResult() && !product.getTransposeA() &&
          !product.getTransposeB()) {
        dhProducts.push_back(product);
        continue;
      }
      if (isa<func::ReturnOp>(user)) continue;
      user->emitError("reads the LM head '") << name << "' as a whole (a tied embedding?): the vocabulary split "
                                             << "needs an untied head (mtc --untied)";
      return signalPassFailure();
    }
    const int64_t vocab = cast<RankedTensorType>(weight.getType()).getDimSize(0);
    const int64_t width = cast<RankedTensorType>(weight.getType()).getDimSize(1);
    if (chunks > vocab) {
      func.emitError("cannot split a vocabulary of ") << vocab << " into " << chunks << " chunks";
      return signalPassFailure();
    }
    Block& body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    std::optional<unsigned> gradResult;
    for (unsigned i = 1; i < func.getNumResults(); ++i)
      if (auto g = func.getResultAttrOfType<StringAttr>(i, kGradAttr); g && g.getValue() == name) gradResult = i;
    if (!gradResult) {
      func.emitError("the LM head '") << name << "' has no gradient result";
      return signalPassFailure();
    }
    const int64_t epilogue = *blockOf(xent);

    // The pieces: chunk c holds rows [first[c], first[c + 1]), sizes as even as they come.
    OpBuilder b(&getContext());
    SmallVector<int64_t> first;
    for (int64_t c = 0; c <= chunks; ++c) first.push_back(vocab * c / chunks);
    auto param = func.getArgAttrOfType<DictionaryAttr>(weight.getArgNumber(), kParamAttr);
    SmallVector<BlockArgument> pieces;
    for (int64_t c = 0; c < chunks; ++c) {
      NamedAttrList attrs(param);
      attrs.set(kParamRowsKey, b.getDenseI64ArrayAttr({first[c], vocab}));
      const unsigned index = weight.getArgNumber() + 1 + c;
      func.insertArgument(index, RankedTensorType::get({first[c + 1] - first[c], width}, b.getF32Type()),
                          b.getDictionaryAttr({b.getNamedAttr(kParamAttr, attrs.getDictionary(&getContext()))}),
                          weight.getLoc());
      pieces.push_back(func.getArgument(index));
    }

    // Forward: the chunks where the loss was, each in its own block; the loss with the last.
    Value h = head.getLhs(), targets = xent.getTargets();
    auto rows = cast<RankedTensorType>(xent.getLse().getType()).getShape();
    SmallVector<int64_t> runningShape(rows);
    runningShape.push_back(2);
    // The ops built since `previous` (the op before the insertion point then) go to `block`.
    auto assign = [&](Operation* previous, Operation* next, int64_t block, StringRef mark) {
      markOps(previous ? previous->getNextNode() : &body.front(), next, block, mark);
    };
    b.setInsertionPoint(xent);
    Value running;
    SmallVector<MatmulOp> forwardProducts;
    for (int64_t c = 0; c < chunks; ++c) {
      Operation* previous = xent->getPrevNode();
      if (c == 0)
        running = b.create<FillOp>(xent.getLoc(), RankedTensorType::get(runningShape, b.getF32Type()),
                                   b.getF32FloatAttr(-INFINITY));
      auto product = b.create<MatmulOp>(head.getLoc(), h, pieces[c], false, true);
      running = b.create<XentChunkOp>(xent.getLoc(), product.getResult(), targets, running, first[c]);
      forwardProducts.push_back(product);
      assign(previous, xent, epilogue + 1 + c, "");
    }
    auto finish = b.create<XentFinishOp>(xent.getLoc(), running, targets, vocab);
    finish->setAttr(kBlockAttr, b.getI64IntegerAttr(epilogue + chunks));
    xent.getLoss().replaceAllUsesWith(finish.getLoss());

    // Backward, the last chunk first: its block's region runs on from the forward (the loss's
    // gradient seed joins it), so its weights are copied in once for both.
    Value dloss = xentGrad.getDloss();
    if (Operation* seed = dloss.getDefiningOp(); seed && seed->getBlock() == &body)
      seed->setAttr(kBlockAttr, b.getI64IntegerAttr(epilogue + chunks));
    b.setInsertionPoint(xentGrad);
    Value dh;
    SmallVector<Value> pieceGrads(chunks);
    for (int64_t c = chunks - 1; c >= 0; --c) {
      MatmulOp product = forwardProducts[c];
      if (c != chunks - 1) {
        product = b.create<MatmulOp>(head.getLoc(), h, pieces[c], false, true);
        product->setAttr(kRecomputeAttr, b.getUnitAttr());
        product->setAttr(kBlockAttr, b.getI64IntegerAttr(epilogue + 1 + c));
      }
      Operation* previous = xentGrad->getPrevNode();
      auto dlogits = b.create<XentChunkGradOp>(xentGrad.getLoc(), dloss, product.getResult(), targets,
                                               finish.getLse(), first[c], vocab);
      SmallVector<Value> grads = cast<GradientOpInterface>(product.getOperation()).buildGradient(b, {dlogits});
      if (grads.size() != 2 || !grads[0] || !grads[1]) return signalPassFailure();
      dh = dh ? b.create<AddOp>(xentGrad.getLoc(), dh, grads[0]).getResult() : grads[0];
      pieceGrads[c] = grads[1];
      assign(previous, xentGrad, epilogue + 1 + c, kBackwardAttr);
    }
    for (MatmulOp product : dhProducts) product.getResult().replaceAllUsesWith(dh);

    // The head's gradient result becomes one result per piece, in row order.
    SmallVector<Value> results(ret.getOperands());
    SmallVector<DictionaryAttr> resultAttrs;
    func.getAllResultAttrs(resultAttrs);
    SmallVector<Value> newResults;
    SmallVector<Attribute> newAttrs;
    for (unsigned i = 0; i < results.size(); ++i) {
      if (i != *gradResult) {
        newResults.push_back(results[i]);
        newAttrs.push_back(resultAttrs[i] ? Attribute(resultAttrs[i]) : b.getDictionaryAttr({}));
        continue;
      }
      for (int64_t c = 0; c < chunks; ++c) {
        newResults.push_back(pieceGrads[c]);
        newAttrs.push_back(b.getDictionaryAttr({b.getNamedAttr(kGradAttr, b.getStringAttr(name)),
                                                b.getNamedAttr(kGradRowAttr, b.getI64IntegerAttr(first[c]))}));
      }
    }
    ret->setOperands(newResults);
    SmallVector<Type> resultTypes;
    for (Value v : newResults) resultTypes.push_back(v.getType());
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(), resultTypes));
    func.setAllResultAttrs(newAttrs);

    // What the whole head computed is dead now.
    SetVector<Operation*> dead;
    for (MatmulOp product : dhProducts) dead.insert(product);
    dead.insert(xentGrad);
    dead.insert(xent);
    dead.insert(head);
    for (Operation* op = xentGrad->getNextNode(); op != ret; op = op->getNextNode())
      if (op->hasAttr(kBackwardAttr)) dead.insert(op);
    // Users come after their operands: erasing from the last op back frees each in turn.
    SmallVector<Operation*> ops = llvm::to_vector(llvm::map_range(body.without_terminator(), [](Operation& op) { return &op; }));
    for (Operation* op : llvm::reverse(ops))
      if (dead.contains(op) && op->use_empty()) op->erase();
    func.eraseArgument(weight.getArgNumber());
  }
};

}  // namespace
}  // namespace mt
