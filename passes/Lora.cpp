// mt-lora: low-rank adapters (LoRA, Hu et al. 2021, as PEFT's LoraConfig) beside the weights
// marked as targets (mt.param's "lora": mtc --lora-targets). Each product of such a weight,
//
//   y = mt.matmul(x, W) {transpose_b}                      W (out, in)
//   ->  y = mt.matmul(x, W) {transpose_b}
//           + mt.matmul(mt.scale(mt.matmul(x, A) {transpose_b}) {factor = scale}, B) {transpose_b}
//
// with A (rank, in) and B (out, rank) parameters of their own, named as PEFT names them (W's
// name with ".lora_A" / ".lora_B" before its last ".weight"): A uniform in +-1/sqrt(in) (the
// bound of PEFT's kaiming_uniform_ with a = sqrt(5)), B zeros, so the adapted model starts as
// the model. The new ops take the product's location (its layer block). Which parameters train
// is the driver's (compiler/TrainableParams.h: with LoRA the rest is frozen); this pass only
// adds the adapters. A target read otherwise than as such a product's weight is an error.
// The scale is alpha / rank, or alpha / sqrt(rank) with rslora (loraScale), applied to x A^T (rank
// columns) rather than to the update (out columns, as PEFT scales it): the same product, rounded
// otherwise, one pass over a rank-wide activation instead of an out-wide one. Dropout p > 0 puts
// mt.dropout on x before A, one site per product, numbered in the function's order after its
// existing sites. With dora (PEFT's use_dora, Liu et al. 2024), a magnitude m (out) beside them,
// initialised to W's row norms (init "row_norms"), and the product's update is PEFT's
// DoraLinearLayer's:
//
//   (g - 1) * (x' W^T) + g * scale * (x' A^T) B^T,   g = m / ||W + scale * B A|| (each output row)
//
// x' the dropped x, the norm marked mt.stop_gradient as PEFT detaches it (the DoRA paper's section
// 4.3). Without dropout x' W^T is the product y itself, and y plus that term is g * (y + scale *
// (x A^T) B^T): two passes over the output (add, mul) instead of PEFT's five, and one output-sized
// activation for the backward instead of two; with dropout, PEFT's form with x' W^T computed again.
// A target that is a stack of experts (E, ., .), read as the weight of mt.grouped_matmul, gets
// A (E, rank, in) and B (E, out, rank): each expert's rows x W_e^T + scale * (x' A_e^T) B_e^T,
// two grouped products over the same routing (on gpt-oss PEFT's target_parameters, on Qwen3-MoE
// and Mixtral each expert's nn.Linear), x' the routed rows through their own mt.dropout as a
// weight's x (each row one token's for one expert: PEFT's per-expert dropouts draw apart alike);
// no DoRA. A target's mt.param may give its own rank and alpha (lora_rank,
// lora_alpha: PEFT's rank_pattern and alpha_pattern); A then carries that alpha (adapter_alpha)
// for the exports. All as PEFT's LoraConfig.
#include <cmath>

#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/plan_queries.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_LORAPASS
#include "passes/Passes.h.inc"

namespace {

// A weight's module: "layers.0.attn.q.weight" -> "layers.0.attn.q".
StringRef stemOf(StringRef weight) { return weight.ends_with(".weight") ? weight.drop_back(7) : weight; }

// PEFT's name of an adapter of `weight`: "layers.0.attn.q.weight" -> "layers.0.attn.q.lora_A.weight".
std::string adapterName(StringRef weight, StringRef which) {
  return (stemOf(weight) + "." + which + (weight.ends_with(".weight") ? ".weight" : "")).str();
}

// A new parameter argument at the end of `func`, initialised as `fields` say.
Value addParam(func::FuncOp func, RankedTensorType type, ArrayRef<NamedAttribute> fields, Location loc) {
  Builder b(func.getContext());
  const unsigned index = func.getNumArguments();
  func.insertArgument(index, type, b.getDictionaryAttr({b.getNamedAttr(kParamAttr, b.getDictionaryAttr(fields))}), loc);
  return func.getArgument(index);
}

// A target's adapters: A (rank, in) and B (out, rank), a stack's (E, rank, in) and (E, out, rank);
// with DoRA its magnitude (out), else null; the scale of their update.
struct Adapters {
  Value a, b, magnitude;
  bool stack = false;
  float scale = 0.0f;
};

// A target's rank and alpha: its mt.param's own, else the pass's.
struct RankAndAlpha {
  int64_t rank;
  double alpha;
  bool own_alpha;  // given by the target (A carries it)
};

struct LoraPass : impl::LoraPassBase<LoraPass> {
  using LoraPassBase::LoraPassBase;

  void runOnOperation() override {
    func::FuncOp func = getModelFunction(getOperation());
    if (!func) return signalPassFailure();
    if (!(dropout >= 0.0 && dropout < 1.0)) {
      func.emitError("mt-lora's dropout is a probability in [0, 1), not ") << dropout;
      return signalPassFailure();
    }
    SmallVector<BlockArgument> targets;
    for (BlockArgument arg : func.getArguments())
      if (isLoraTarget(func, arg.getArgNumber())) targets.push_back(arg);
    DenseMap<Value, Adapters> adapters;
    for (BlockArgument weight : targets) {
      const std::optional<RankAndAlpha> shape = rankAndAlpha(func, weight);
      if (!shape) return signalPassFailure();
      if (weight.use_empty()) {
        func.emitError("the LoRA target '") << paramName(func, weight.getArgNumber()) << "' is not read";
        return signalPassFailure();
      }
      const bool stack = cast<RankedTensorType>(weight.getType()).getRank() == 3;
      if (failed(stack ? checkExpertProducts(func, weight) : checkProducts(func, weight))) return signalPassFailure();
      adapters[weight] = addAdapters(func, weight, stack, *shape);
    }
    // The products in the function's order (each dropout's site follows it), with their weights.
    SmallVector<std::pair<Operation*, Value>> products;
    func.walk([&](Operation* op) {
      if (auto p = dyn_cast<MatmulOp>(op); p && adapters.count(p.getRhs())) products.push_back({op, p.getRhs()});
      if (auto p = dyn_cast<GroupedMatmulOp>(op); p && adapters.count(p.getWeight()))
        products.push_back({op, p.getWeight()});
    });
    int64_t site = firstFreeDropoutSite(func);
    for (auto [op, weight] : products) {
      const Adapters& a = adapters[weight];
      replaceProduct(op, [&](OpBuilder& at) {
        return a.stack ? expertProduct(at, cast<GroupedMatmulOp>(op), a, site)
                       : adapted(at, cast<MatmulOp>(op), a, site);
      });
    }
  }

  // `weight`'s rank and alpha, checked (null after an error).
  std::optional<RankAndAlpha> rankAndAlpha(func::FuncOp func, BlockArgument weight) {
    auto param = func.getArgAttrOfType<DictionaryAttr>(weight.getArgNumber(), kParamAttr);
    auto own_rank = param.getAs<IntegerAttr>(kParamLoraRankKey);
    auto own_alpha = param.getAs<FloatAttr>(kParamLoraAlphaKey);
    RankAndAlpha r{own_rank ? own_rank.getInt() : int64_t(rank),
                   own_alpha ? own_alpha.getValueAsDouble() : double(alpha), bool(own_alpha)};
    if (r.rank <= 0 || r.rank > 65536 || !(r.alpha > 0.0) || !std::isfinite(r.alpha)) {
      func.emitError("mt-lora needs a rank in [1, 65536] and a positive alpha, not ")
          << r.rank << " and " << r.alpha << " for '" << paramName(func, weight.getArgNumber()) << "'";
      return std::nullopt;
    }
    return r;
  }

  // Each read of `weight` must be a product x W^T.
  static LogicalResult checkProducts(func::FuncOp func, BlockArgument weight) {
    const StringRef name = paramName(func, weight.getArgNumber());
    auto type = cast<RankedTensorType>(weight.getType());
    for (Operation* user : weight.getUsers()) {
      auto product = dyn_cast<MatmulOp>(user);
      if (!product || product.getRhs() != weight || !product.getTransposeB() || product.getTransposeA() ||
          type.getRank() != 2)
        return user->emitError("a LoRA target must be a (out, in) weight read only as x W^T (mt.matmul {transpose_b}); '")
               << name << "' is read here otherwise";
    }
    return success();
  }

  // A stack of experts (E, ., .) read only as the weight of whole grouped products, all of one
  // layout (transpose_b: each expert (out, in), else (in, out)); without DoRA (a magnitude per
  // expert's row, which mtc does not implement).
  LogicalResult checkExpertProducts(func::FuncOp func, BlockArgument weight) {
    const StringRef name = paramName(func, weight.getArgNumber());
    if (dora) return func.emitError("LoRA on the stack of experts '") << name << "' takes no DoRA";
    std::optional<bool> transposed;
    for (Operation* user : weight.getUsers()) {
      auto product = dyn_cast<GroupedMatmulOp>(user);
      if (!product || product.getWeight() != weight || product.getInto() || product.getFirstExpert() != 0 ||
          (transposed && *transposed != product.getTransposeB()))
        return user->emitError("a stack of experts with LoRA adapters must be read only as the weight of whole "
                               "mt.grouped_matmul products of one layout; '")
               << name << "' is read here otherwise";
      transposed = product.getTransposeB();
    }
    return success();
  }

  // New parameters A and B of `weight` (and with DoRA its magnitude), initialised as PEFT
  // initialises them; a stack's, each expert's as a weight's (PEFT's lora_A (rank * E, in) is A's
  // rows; its lora_B (out, rank * E) holds expert e's rank k in column k * E + e).
  Adapters addAdapters(func::FuncOp func, BlockArgument weight, bool stack, RankAndAlpha own) {
    const StringRef name = paramName(func, weight.getArgNumber());
    auto type = cast<RankedTensorType>(weight.getType());
    Operation* first = *weight.getUsers().begin();
    const bool transposed = !stack || cast<GroupedMatmulOp>(first).getTransposeB();  // (out, in) per expert
    const int64_t d = stack ? 1 : 0, out = type.getDimSize(transposed ? d : d + 1),
                  in = type.getDimSize(transposed ? d + 1 : d);
    SmallVector<int64_t> a_shape{own.rank, in}, b_shape{out, own.rank};
    if (stack) a_shape.insert(a_shape.begin(), type.getDimSize(0)), b_shape.insert(b_shape.begin(), type.getDimSize(0));
    Builder b(func.getContext());
    const Location loc = first->getLoc();
    SmallVector<NamedAttribute> a_fields{
        b.getNamedAttr("name", b.getStringAttr(adapterName(name, "lora_A"))),
        b.getNamedAttr("init", b.getStringAttr("uniform")),
        b.getNamedAttr("bound", b.getF32FloatAttr(static_cast<float>(1.0 / std::sqrt(double(in)))))};
    if (own.own_alpha) a_fields.push_back(b.getNamedAttr(kParamAdapterAlphaKey, b.getF32FloatAttr(own.alpha)));
    Value a = addParam(func, RankedTensorType::get(a_shape, type.getElementType()), a_fields, loc);
    Value bw = addParam(func, RankedTensorType::get(b_shape, type.getElementType()),
                        {b.getNamedAttr("name", b.getStringAttr(adapterName(name, "lora_B"))),
                         b.getNamedAttr("init", b.getStringAttr("zeros"))},
                        loc);
    const float scale = static_cast<float>(loraScale(own.alpha, own.rank, rslora));
    if (!dora || stack) return {a, bw, Value(), stack, scale};
    // PEFT's key for it has no ".weight" (its state dict's rename of lora_magnitude_vector.weight).
    Value m = addParam(func, RankedTensorType::get({out}, type.getElementType()),
                       {b.getNamedAttr("name", b.getStringAttr((stemOf(name) + kDoraMagnitudeSuffix).str())),
                        b.getNamedAttr("init", b.getStringAttr("row_norms")), b.getNamedAttr("of", b.getStringAttr(name))},
                       loc);
    return {a, bw, m, false, scale};
  }

  // The site after the function's existing mt.dropout sites (0 where it has none).
  static int64_t firstFreeDropoutSite(func::FuncOp func) {
    int64_t next = 0;
    func.walk([&](DropoutOp op) { next = std::max(next, static_cast<int64_t>(op.getSite()) + 1); });
    return next;
  }

  // What `build` makes after `product` (reading the product too) in its place, for every reader the
  // product had.
  static void replaceProduct(Operation* product, function_ref<Value(OpBuilder&)> build) {
    OpBuilder at(product->getBlock(), std::next(Block::iterator(product)));
    SmallVector<OpOperand*> readers;
    for (OpOperand& use : product->getResult(0).getUses()) readers.push_back(&use);
    Value adapted = build(at);
    for (OpOperand* use : readers) use->set(adapted);
  }

  // The product with its adapters: y + (scale * (dropout(x) A^T)) B^T, or DoRA's; `site` is the
  // next dropout's and advances.
  Value adapted(OpBuilder& at, MatmulOp product, const Adapters& adapters, int64_t& site) {
    const Location loc = product.getLoc();
    Value x = dropped(at, loc, product.getLhs(), site);
    Value down = at.create<MatmulOp>(loc, x, adapters.a, false, true);
    Value scaled = at.create<ScaleOp>(loc, down, at.getF32FloatAttr(adapters.scale));
    Value up = at.create<MatmulOp>(loc, scaled, adapters.b, false, true);  // scale * (x A^T) B^T
    if (adapters.magnitude) return doraProduct(at, product, x, adapters, up);
    return at.create<AddOp>(loc, product.getResult(), up);
  }

  // `x` through the next dropout site's mask (`site` advances), or `x` itself without dropout.
  Value dropped(OpBuilder& at, Location loc, Value x, int64_t& site) {
    if (dropout <= 0.0) return x;
    return at.create<DropoutOp>(loc, x, at.getI64IntegerAttr(site++), at.getF32FloatAttr(static_cast<float>(dropout)));
  }

  // y + (scale * (dropout(x) A_e^T)) B_e^T over each expert's rows: two grouped products of the
  // product's routing (PEFT's target_parameters merge B_e A_e into W_e instead, without dropout:
  // the same sums, rounded otherwise); `site` is the next dropout's and advances.
  Value expertProduct(OpBuilder& at, GroupedMatmulOp product, const Adapters& adapters, int64_t& site) {
    const Location loc = product.getLoc();
    Value x = dropped(at, loc, product.getInput(), site);
    Value down = at.create<GroupedMatmulOp>(loc, x, adapters.a, product.getCounts(), Value(), true, 0);
    Value scaled = at.create<ScaleOp>(loc, down, at.getF32FloatAttr(adapters.scale));
    Value up = at.create<GroupedMatmulOp>(loc, scaled, adapters.b, product.getCounts(), Value(), true, 0);
    return at.create<AddOp>(loc, product.getResult(), up);
  }

  // DoRA's product from y = x W^T and `up` = scale * (x' A^T) B^T (x' the dropped x): with
  // g = m / ||W + scale * B A|| per output row, the norm a constant to the backward, g * (y + up)
  // without dropout, and y + ((g - 1) * (x' W^T) + g * up) with it (PEFT's DoraLinearLayer.forward).
  static Value doraProduct(OpBuilder& at, MatmulOp product, Value x, const Adapters& adapters, Value up) {
    const Location loc = product.getLoc();
    Value weight = product.getRhs();
    const int64_t out = cast<RankedTensorType>(weight.getType()).getDimSize(0);
    Type f32 = at.getF32Type();
    // scale * B A (out, in), B scaled (out, rank) rather than the product.
    Value scaled_b = at.create<ScaleOp>(loc, adapters.b, at.getF32FloatAttr(adapters.scale));
    Value lora_weight = at.create<MatmulOp>(loc, scaled_b, adapters.a, false, false);
    Value merged = at.create<AddOp>(loc, weight, lora_weight);
    Value squares = at.create<MulOp>(loc, merged, merged);
    Value sums = at.create<SumToOp>(loc, RankedTensorType::get({out, 1}, f32), squares);
    Value rows = at.create<ReshapeOp>(loc, RankedTensorType::get({out}, f32), sums);
    Operation* norm = at.create<UnaryOp>(loc, rows, at.getStringAttr("sqrt"));
    norm->setAttr(kStopGradientAttr, at.getUnitAttr());
    Value g = at.create<BinaryOp>(loc, adapters.magnitude, norm->getResult(0), at.getStringAttr("div"));
    if (x == product.getLhs()) return at.create<MulOp>(loc, at.create<AddOp>(loc, product.getResult(), up), g);
    Value g_minus_one = at.create<AddOp>(loc, g, at.create<FillOp>(loc, g.getType(), at.getF32FloatAttr(-1.0f)));
    Value base_term = at.create<MulOp>(loc, at.create<MatmulOp>(loc, x, weight, false, true), g_minus_one);
    Value term = at.create<AddOp>(loc, base_term, at.create<MulOp>(loc, up, g));
    return at.create<AddOp>(loc, product.getResult(), term);
  }
};

}  // namespace
}  // namespace mt
