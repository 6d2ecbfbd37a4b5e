// mt-lora: low-rank adapters (LoRA, Hu et al. 2021, as PEFT's LoraConfig) beside the weights
// marked as targets (mt.param's "lora": mtc --lora-targets). Each product of such a weight,
//
//   y = mt.matmul(x, W) {transpose_b}                      W (out, in)
//   ->  y = mt.matmul(x, W) {transpose_b}
//           + mt.scale(mt.matmul(mt.matmul(x, A) {transpose_b}, B) {transpose_b}) {factor = alpha / rank}
//
// with A (rank, in) and B (out, rank) parameters of their own, named as PEFT names them (W's
// name with ".lora_A" / ".lora_B" before its last ".weight"): A uniform in +-1/sqrt(in) (the
// bound of PEFT's kaiming_uniform_ with a = sqrt(5)), B zeros, so the adapted model starts as
// the model. The new ops take the product's location (its layer block). Which parameters train
// is the driver's (compiler/TrainableParams.h: with LoRA the rest is frozen); this pass only
// adds the adapters. A target read otherwise than as such a product's weight is an error.
#include <cmath>

#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_LORAPASS
#include "passes/Passes.h.inc"

namespace {

// PEFT's name of an adapter of `weight`: "layers.0.attn.q.weight" -> "layers.0.attn.q.lora_A.weight".
std::string adapterName(StringRef weight, StringRef which) {
  const bool suffixed = weight.ends_with(".weight");
  const StringRef stem = suffixed ? weight.drop_back(7) : weight;
  return (stem + "." + which + (suffixed ? ".weight" : "")).str();
}

// A new parameter argument at the end of `func`, initialised as `fields` say.
Value addParam(func::FuncOp func, RankedTensorType type, ArrayRef<NamedAttribute> fields, Location loc) {
  Builder b(func.getContext());
  const unsigned index = func.getNumArguments();
  func.insertArgument(index, type, b.getDictionaryAttr({b.getNamedAttr(kParamAttr, b.getDictionaryAttr(fields))}), loc);
  return func.getArgument(index);
}

struct LoraPass : impl::LoraPassBase<LoraPass> {
  using LoraPassBase::LoraPassBase;

  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    if (rank <= 0 || !(alpha > 0.0) || !std::isfinite(alpha)) {
      func.emitError("mt-lora needs a positive rank and alpha, not ") << rank << " and " << alpha;
      return signalPassFailure();
    }
    SmallVector<BlockArgument> targets;
    for (BlockArgument arg : func.getArguments())
      if (isLoraTarget(func, arg.getArgNumber())) targets.push_back(arg);
    for (BlockArgument weight : targets)
      if (failed(adapt(func, weight))) return signalPassFailure();
  }

  // Adds the adapters of `weight` to each of its products.
  LogicalResult adapt(func::FuncOp func, BlockArgument weight) {
    const StringRef name = paramName(func, weight.getArgNumber());
    auto type = cast<RankedTensorType>(weight.getType());
    SmallVector<MatmulOp> products;
    for (Operation* user : weight.getUsers()) {
      auto product = dyn_cast<MatmulOp>(user);
      if (!product || product.getRhs() != weight || !product.getTransposeB() || product.getTransposeA() ||
          type.getRank() != 2)
        return user->emitError("a LoRA target must be a (out, in) weight read only as x W^T (mt.matmul {transpose_b}); '")
               << name << "' is read here otherwise";
      products.push_back(product);
    }
    if (products.empty()) return func.emitError("the LoRA target '") << name << "' is not read";
    Builder b(func.getContext());
    const int64_t out = type.getDimSize(0), in = type.getDimSize(1);
    const Location loc = products.front().getLoc();
    Value a = addParam(func, RankedTensorType::get({rank, in}, type.getElementType()),
                       {b.getNamedAttr("name", b.getStringAttr(adapterName(name, "lora_A"))),
                        b.getNamedAttr("init", b.getStringAttr("uniform")),
                        b.getNamedAttr("bound", b.getF32FloatAttr(static_cast<float>(1.0 / std::sqrt(double(in)))))},
                       loc);
    Value bw = addParam(func, RankedTensorType::get({out, rank}, type.getElementType()),
                        {b.getNamedAttr("name", b.getStringAttr(adapterName(name, "lora_B"))),
                         b.getNamedAttr("init", b.getStringAttr("zeros"))},
                        loc);
    // Scaled after B, as PEFT computes lora_B(lora_A(x)) * scaling: a twin follows it op for op.
    const float scale = static_cast<float>(alpha / static_cast<double>(rank));
    for (MatmulOp product : products) {
      OpBuilder at(product->getBlock(), std::next(Block::iterator(product)));
      Value down = at.create<MatmulOp>(product.getLoc(), product.getLhs(), a, false, true);
      Value up = at.create<MatmulOp>(product.getLoc(), down, bw, false, true);
      Value scaled = at.create<ScaleOp>(product.getLoc(), up, at.getF32FloatAttr(scale));
      auto sum = at.create<AddOp>(product.getLoc(), product.getResult(), scaled);
      product.getResult().replaceAllUsesExcept(sum.getResult(), sum);
    }
    return success();
  }
};

}  // namespace
}  // namespace mt
