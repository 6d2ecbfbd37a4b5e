// mt-fuse: the fused mt ops in place of what ONNX exporters decompose (see Passes.td).
#include <cmath>

#include "kernels/rope/rope.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
#define GEN_PASS_DEF_FUSEPASS
#include "passes/Passes.h.inc"

namespace {

// The value of a scalar mt.fill, if `v` is one.
std::optional<float> fillValue(Value v) {
  auto fill = v.getDefiningOp<FillOp>();
  if (!fill || fill.getType().getRank() != 0) return std::nullopt;
  return fill.getValue().convertToFloat();
}

bool isUnary(Value v, StringRef fn, Value& input) {
  auto op = v.getDefiningOp<UnaryOp>();
  if (!op || op.getFn() != fn) return false;
  input = op.getInput();
  return true;
}

bool isBinary(Value v, StringRef fn, Value& lhs, Value& rhs) {
  auto op = v.getDefiningOp<BinaryOp>();
  if (!op || op.getFn() != fn) return false;
  lhs = op.getLhs(), rhs = op.getRhs();
  return true;
}

bool near(float a, double b) { return std::fabs(a - b) <= 1e-6 * std::fabs(b); }

// Whether `v` is the mean of `input` over its last dimension, kept as size 1:
// scale(sum_to(input -> (..., 1)), 1/C).
bool isMeanOverLastDim(Value v, Value& input) {
  auto mean = v.getDefiningOp<ScaleOp>();
  auto sum = mean ? mean.getInput().getDefiningOp<SumToOp>() : SumToOp();
  if (!sum) return false;
  auto in = sum.getInput().getType();
  if (in.getRank() < 1) return false;
  SmallVector<int64_t> rows(in.getShape());
  rows.back() = 1;
  if (sum.getType().getShape() != ArrayRef<int64_t>(rows) || !near(mean.getFactor().convertToFloat(), 1.0 / in.getShape().back()))
    return false;
  input = sum.getInput();
  return true;
}

// Whether `v` is sqrt(mean(x^2) + eps) over the last dimension; gives x and eps.
bool isRootMeanSquare(Value v, Value& x, float& eps) {
  Value sq, squares, base, power;
  if (!isUnary(v, "sqrt", sq)) return false;
  auto add = sq.getDefiningOp<AddOp>();
  std::optional<float> e = add ? fillValue(add.getRhs()) : std::nullopt;
  if (!e || !isMeanOverLastDim(add.getLhs(), squares) || !isBinary(squares, "pow", base, power) ||
      fillValue(power) != 2.0f)
    return false;
  x = base, eps = *e;
  return true;
}

// Whether `w` is a (C) vector for a (..., C) input.
bool isChannelVector(Value w, RankedTensorType x) {
  return x.getRank() >= 1 && cast<RankedTensorType>(w.getType()).getShape() == x.getShape().take_back(1);
}

// matmul(a, transpose(w, [1, 0])) -> matmul(a, w) with transpose_b flipped.
struct FoldRhsTranspose : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op, PatternRewriter& rewriter) const override {
    auto t = op.getRhs().getDefiningOp<TransposeOp>();
    if (!t || t.getInput().getType().getRank() != 2 || t.getPerm() != ArrayRef<int64_t>{1, 0}) return failure();
    rewriter.replaceOpWithNewOp<MatmulOp>(op, op.getLhs(), t.getInput(), op.getTransposeA(), !op.getTransposeB());
    return success();
  }
};

// transpose(transpose(x, p), q) -> x when they cancel, else one transpose. The fusions below
// leave such pairs where one turns heads into rows and the next turns them back.
struct FoldTransposePair : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op, PatternRewriter& rewriter) const override {
    auto inner = op.getInput().getDefiningOp<TransposeOp>();
    if (!inner) return failure();
    SmallVector<int64_t> composed;
    bool identity = true;
    for (auto [i, p] : llvm::enumerate(op.getPerm())) {
      composed.push_back(inner.getPerm()[p]);
      identity &= composed.back() == static_cast<int64_t>(i);
    }
    if (identity) rewriter.replaceOp(op, inner.getInput());
    else rewriter.replaceOpWithNewOp<TransposeOp>(op, inner.getInput(), rewriter.getDenseI64ArrayAttr(composed));
    return success();
  }
};

// reshape(reshape(x)) -> one reshape, and a reshape to the type it has -> its input.
struct FoldReshapeChain : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op, PatternRewriter& rewriter) const override {
    Value input = op.getInput();
    if (auto inner = input.getDefiningOp<ReshapeOp>()) input = inner.getInput();
    if (input.getType() == op.getType()) {
      rewriter.replaceOp(op, input);
      return success();
    }
    if (input == op.getInput()) return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), input);
    return success();
  }
};

// Whether `v` is `a * b` (an mt.mul of equal shapes) in either order.
bool isProduct(Value v, Value a, Value b) {
  auto mul = v.getDefiningOp<MulOp>();
  return mul && ((mul.getLhs() == a && mul.getRhs() == b) || (mul.getLhs() == b && mul.getRhs() == a));
}

// Whether `t` is erf(x / sqrt(2)) — exact GELU — or tanh(sqrt(2/pi) * (x + 0.044715 x^3)).
std::optional<bool> geluInner(Value t, Value x) {
  Value in, lhs, rhs;
  if (isUnary(t, "erf", in)) {
    std::optional<float> root2 = isBinary(in, "div", lhs, rhs) ? fillValue(rhs) : std::nullopt;
    if (lhs == x && root2 && near(*root2, std::sqrt(2.0))) return false;
    return std::nullopt;
  }
  if (!isUnary(t, "tanh", in)) return std::nullopt;
  auto outer = in.getDefiningOp<ScaleOp>();
  auto sum = outer ? outer.getInput().getDefiningOp<AddOp>() : AddOp();
  auto cubic = sum ? sum.getRhs().getDefiningOp<ScaleOp>() : ScaleOp();
  if (!cubic || sum.getLhs() != x || !near(outer.getFactor().convertToFloat(), std::sqrt(2.0 / M_PI)) ||
      !near(cubic.getFactor().convertToFloat(), 0.044715))
    return std::nullopt;
  auto cube = cubic.getInput().getDefiningOp<MulOp>();
  if (!cube) return std::nullopt;
  for (auto [a, b] : {std::pair{cube.getLhs(), cube.getRhs()}, {cube.getRhs(), cube.getLhs()}})
    if (a == x && isProduct(b, x, x)) return true;
  return std::nullopt;
}

// scale(mul(x, add(inner, 1)), 0.5) -> gelu(x), inner erf (exact) or tanh (approximate),
// either order of the mul.
struct FuseGelu : OpRewritePattern<ScaleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScaleOp op, PatternRewriter& rewriter) const override {
    auto mul = op.getInput().getDefiningOp<MulOp>();
    if (!near(op.getFactor().convertToFloat(), 0.5) || !mul) return failure();
    for (auto [x, inner] : {std::pair{mul.getLhs(), mul.getRhs()}, {mul.getRhs(), mul.getLhs()}}) {
      auto add = inner.getDefiningOp<AddOp>();
      if (!add || fillValue(add.getRhs()) != 1.0f || x.getType() != op.getType()) continue;
      if (std::optional<bool> tanh = geluInner(add.getLhs(), x)) {
        rewriter.replaceOpWithNewOp<GeluOp>(op, x, *tanh);
        return success();
      }
    }
    return failure();
  }
};

// mul(x, sigmoid(x)) -> silu(x); mul(silu(g), u) -> swiglu(g, u) (either order, equal shapes).
struct FuseSiluSwiglu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op, PatternRewriter& rewriter) const override {
    if (op.getLhs().getType() != op.getRhs().getType()) return failure();
    for (auto [a, b] : {std::pair{op.getLhs(), op.getRhs()}, {op.getRhs(), op.getLhs()}}) {
      Value in;
      if (isUnary(b, "sigmoid", in) && in == a) {
        rewriter.replaceOpWithNewOp<SiluOp>(op, a);
        return success();
      }
      if (auto silu = a.getDefiningOp<SiluOp>()) {
        rewriter.replaceOpWithNewOp<SwigluOp>(op, silu.getInput(), b);
        return success();
      }
    }
    return failure();
  }
};

// mul(binary_mul(x, div(1, sqrt(mean(x^2) + eps))), w) -> rmsnorm(x, w, eps)
struct FuseRmsNorm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op, PatternRewriter& rewriter) const override {
    Value w = op.getRhs(), x, rstd, one, root, squared;
    float eps;
    if (!isChannelVector(w, op.getType()) || !isBinary(op.getLhs(), "mul", x, rstd) || x.getType() != op.getType() ||
        !isBinary(rstd, "div", one, root) || fillValue(one) != 1.0f || !isRootMeanSquare(root, squared, eps) ||
        squared != x)
      return failure();
    auto fused = rewriter.create<RmsNormOp>(op.getLoc(), x, w, rewriter.getF32FloatAttr(eps), FloatAttr());
    rewriter.replaceOp(op, fused.getResult());
    return success();
  }
};

// LayerNorm as opset 14 exports it: add(mul(div(d, sqrt(mean(d^2) + eps)), gamma), beta) with
// d = sub(x, mean(x)) -> layernorm(x, gamma, beta, eps).
struct FuseLayerNorm : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op, PatternRewriter& rewriter) const override {
    auto scaled = op.getLhs().getDefiningOp<MulOp>();
    Value beta = op.getRhs(), normed, root, d, squared, x, mean, meanOf;
    float eps;
    if (!scaled || !isChannelVector(beta, op.getType()) || !isChannelVector(scaled.getRhs(), op.getType()) ||
        !isBinary(scaled.getLhs(), "div", normed, root) || !isRootMeanSquare(root, squared, eps) || squared != normed ||
        !isBinary(normed, "sub", x, mean) || !isMeanOverLastDim(mean, meanOf) || meanOf != x || x.getType() != op.getType())
      return failure();
    auto fused = rewriter.create<LayerNormOp>(op.getLoc(), x, scaled.getRhs(), beta, rewriter.getF32FloatAttr(eps));
    rewriter.replaceOp(op, fused.getResult());
    return success();
  }
};

// --- Attention -------------------------------------------------------------------------

// The value of `v` when it is a constant function argument (mt.const) of shape
// (1, ..., 1, rows, cols): a table that broadcasts over the leading dimensions.
DenseElementsAttr constTable(Value v, int64_t rows, int64_t cols) {
  auto arg = dyn_cast<BlockArgument>(v);
  auto func = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
  auto values = func ? func.getArgAttrOfType<DenseElementsAttr>(arg.getArgNumber(), kConstAttr) : nullptr;
  if (!values) return nullptr;
  auto shape = values.getType().getShape();
  if (shape.size() < 2 || shape.take_back(2) != ArrayRef<int64_t>{rows, cols}) return nullptr;
  for (int64_t d : shape.drop_back(2))
    if (d != 1) return nullptr;
  return values;
}

// Whether `mask` is a constant (1, ..., 1, T, T) causal mask: each element classified as
// masked (true), kept (false) or neither (nullopt: not a mask), masked exactly where the key
// position is after the query's.
template <typename T, typename Classify>
bool isCausalMask(Value mask, int64_t t, Classify classify) {
  DenseElementsAttr values = constTable(mask, t, t);
  if (!values) return false;
  int64_t i = 0;
  for (T value : values.getValues<T>()) {
    const std::optional<bool> masked = classify(value);
    if (!masked || *masked != (i % t > i / t)) return false;
    ++i;
  }
  return true;
}

bool isMinusInfinity(double v) { return v <= -1e30; }  // -inf, or float's lowest (HF)

// The scores before the mask: where(causal, -inf, s) or add(s, causal 0 / -inf) -> s.
Value unmaskedScores(Value masked, int64_t t) {
  if (auto where = masked.getDefiningOp<WhereOp>()) {
    std::optional<float> fill = fillValue(where.getLhs());
    if (fill && isMinusInfinity(*fill) &&
        isCausalMask<int32_t>(where.getCond(), t, [](int32_t v) { return std::optional<bool>(v != 0); }))
      return where.getRhs();
  }
  if (auto add = masked.getDefiningOp<AddOp>()) {
    auto classify = [](float v) -> std::optional<bool> {
      if (v == 0.0f) return false;
      if (isMinusInfinity(v)) return true;
      return std::nullopt;
    };
    if (isCausalMask<float>(add.getRhs(), t, classify)) return add.getLhs();
  }
  return nullptr;
}

// The product of the scores before scaling by 1/sqrt(head_dim): scale(p, f), div(p, sqrt(D))
// or mul(p, 1/sqrt(D)).
MatmulOp unscaledProduct(Value scores, int64_t headDim) {
  const double scale = 1.0 / std::sqrt(double(headDim));
  Value product, factor;
  if (auto op = scores.getDefiningOp<ScaleOp>()) {
    if (near(op.getFactor().convertToFloat(), scale)) product = op.getInput();
  } else if (isBinary(scores, "div", product, factor)) {
    if (std::optional<float> f = fillValue(factor); !f || !near(*f, std::sqrt(double(headDim)))) product = nullptr;
  } else if (isBinary(scores, "mul", product, factor)) {
    if (std::optional<float> f = fillValue(factor); !f || !near(*f, scale)) product = nullptr;
  }
  return product ? product.getDefiningOp<MatmulOp>() : MatmulOp();
}

// x when `v` is transpose(reshape(x: (B, T, H*D) -> (B, T, H, D)), perm).
Value rowsOf(Value v, ArrayRef<int64_t> perm) {
  auto t = v.getDefiningOp<TransposeOp>();
  auto r = t ? t.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!r || t.getPerm() != perm) return nullptr;
  auto split = r.getType().getShape();
  auto rows = cast<RankedTensorType>(r.getInput().getType()).getShape();
  if (split.size() != 4 || rows != ArrayRef<int64_t>{split[0], split[1], split[2] * split[3]}) return nullptr;
  return r.getInput();
}

// (B, Hx, T, D) heads as the (B, T, Hx*D) rows mt.attention takes: the value they were made
// from when `heads` is transpose(reshape(x), [0, 2, 1, 3]), else a transpose and a reshape.
Value asRows(Value heads, PatternRewriter& rewriter, Location loc) {
  auto type = cast<RankedTensorType>(heads.getType());
  auto shape = type.getShape();
  if (Value rows = rowsOf(heads, {0, 2, 1, 3})) return rows;
  Value tokensFirst = rewriter.create<TransposeOp>(loc, heads, rewriter.getDenseI64ArrayAttr({0, 2, 1, 3}));
  auto rows = RankedTensorType::get({shape[0], shape[2], shape[1] * shape[3]}, type.getElementType());
  return rewriter.create<ReshapeOp>(loc, rows, tokensFirst);
}

// Grouped-query heads: reshape(broadcast(reshape(kv, (B, Hkv, 1, T, D)) -> (B, Hkv, r, T, D))
// -> (B, Hkv*r, T, D) gives kv (the key/value heads before repetition), else null.
Value unrepeatedHeads(Value heads) {
  auto outer = heads.getDefiningOp<ReshapeOp>();
  auto repeat = outer ? outer.getInput().getDefiningOp<BroadcastOp>() : BroadcastOp();
  auto inner = repeat ? repeat.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!inner) return nullptr;
  auto kv = cast<RankedTensorType>(inner.getInput().getType()).getShape();
  auto expanded = cast<RankedTensorType>(inner.getType()).getShape();
  auto repeated = repeat.getType().getShape();
  if (kv.size() != 4 || expanded.size() != 5 || repeated.size() != 5 || expanded[2] != 1 ||
      expanded != ArrayRef<int64_t>{kv[0], kv[1], 1, kv[2], kv[3]} ||
      repeated != ArrayRef<int64_t>{kv[0], kv[1], repeated[2], kv[2], kv[3]})
    return nullptr;
  return inner.getInput();
}

// Causal scaled-dot-product attention as exporters write it, from the heads' projections to
// the (B, T, H*D) result:
//   reshape(transpose(matmul(softmax(mask(scale(matmul(q, kT)))), v), [0, 2, 1, 3]))
// -> mt.attention(q, k, v) over (B, T, H*D) rows, with grouped-query key/value heads when k and
// v are repeated from fewer heads. kT is transpose(k, [0, 1, 3, 2]), a matmul with
// transpose_b, or transpose(reshape(k), [0, 2, 3, 1]).
struct FuseAttention : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op, PatternRewriter& rewriter) const override {
    auto merge = op.getInput().getDefiningOp<TransposeOp>();
    auto pv = merge ? merge.getInput().getDefiningOp<MatmulOp>() : MatmulOp();
    if (!pv || merge.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3} || op.getType().getRank() != 3 || pv.getTransposeA() ||
        pv.getTransposeB())
      return failure();
    auto shape = pv.getType().getShape();  // (B, H, T, D)
    if (shape.size() != 4) return failure();
    const int64_t heads = shape[1], t = shape[2], d = shape[3];
    auto softmax = pv.getLhs().getDefiningOp<SoftmaxOp>();
    if (!softmax || softmax.getLog() || (softmax.getAxis() != 3 && softmax.getAxis() != -1)) return failure();
    Value scores = unmaskedScores(softmax.getInput(), t);
    MatmulOp qk = scores ? unscaledProduct(scores, d) : MatmulOp();
    if (!qk || qk.getTransposeA() || qk.getLhs().getType() != pv.getType()) return failure();
    // The keys as (B, H, T, D) heads, or straight as (B, T, H*D) rows.
    Value keyHeads, keyRows;
    if (qk.getTransposeB()) {
      keyHeads = qk.getRhs();
    } else if (auto kT = qk.getRhs().getDefiningOp<TransposeOp>()) {
      if (kT.getPerm() == ArrayRef<int64_t>{0, 1, 3, 2}) keyHeads = kT.getInput();
      else keyRows = rowsOf(kT, {0, 2, 3, 1});
    }
    Value valueHeads = pv.getRhs();
    if (keyRows ? keyRows.getType() != op.getType() : (!keyHeads || keyHeads.getType() != pv.getType()))
      return failure();
    if (valueHeads.getType() != pv.getType() || op.getType().getShape() != ArrayRef<int64_t>{shape[0], t, heads * d})
      return failure();
    // Grouped-query attention: both repeated from the same number of heads.
    int64_t kvHeads = heads;
    Value kv[2] = {keyHeads, valueHeads};
    if (keyHeads) {
      Value k = unrepeatedHeads(keyHeads), v = unrepeatedHeads(valueHeads);
      if (k && v && k.getType() == v.getType()) {
        kv[0] = k, kv[1] = v;
        kvHeads = cast<RankedTensorType>(k.getType()).getShape()[1];
      }
    }
    Location loc = op.getLoc();
    Value q = asRows(qk.getLhs(), rewriter, loc);
    Value k = keyRows ? keyRows : asRows(kv[0], rewriter, loc);
    Value v = asRows(kv[1], rewriter, loc);
    auto fused = rewriter.create<AttentionOp>(loc, q, k, v, /*sinks=*/Value(), /*positions=*/Value(), rewriter.getI64IntegerAttr(heads),
                                              rewriter.getI64IntegerAttr(kvHeads), rewriter.getI64IntegerAttr(0),
                                              rewriter.getF32FloatAttr(0.0f));
    rewriter.replaceOp(op, fused.getResult());
    return success();
  }
};

// --- Rotary position embedding ------------------------------------------------------------

// Whether `v` is the half [first, first + D/2) of the last dimension of (B, H, T, D) heads x.
bool isHalfOf(Value v, Value x, int64_t first) {
  auto slice = v.getDefiningOp<SliceOp>();
  if (!slice || slice.getInput() != x) return false;
  auto shape = cast<RankedTensorType>(x.getType()).getShape();
  SmallVector<int64_t> half(shape), starts(shape.size(), 0), steps(shape.size(), 1);
  half.back() /= 2;
  starts.back() = first;
  return slice.getType().getShape() == ArrayRef<int64_t>(half) && slice.getStarts() == ArrayRef<int64_t>(starts) &&
         slice.getSteps() == ArrayRef<int64_t>(steps);
}

// The (T, D) values of a constant table broadcast over (B, H, T, D), if `v` is one.
std::optional<std::vector<float>> rotaryTable(Value v, int64_t t, int64_t d) {
  DenseElementsAttr values = constTable(v, t, d);
  if (!values || !values.getElementType().isF32()) return std::nullopt;
  auto range = values.getValues<float>();
  return std::vector<float>(range.begin(), range.end());
}

// The theta whose rotate-half angles t * theta^(-2i/D) give these cos/sin tables as mt.rope
// computes them (to 1e-4), or nullopt.
std::optional<float> ropeTheta(const std::vector<float>& cos, const std::vector<float>& sin, int64_t t, int64_t d) {
  const int64_t half = d / 2;
  float theta = 10000.0f;  // with one pair per head (D = 2) every theta gives the same angles
  if (t >= 2 && half >= 2) {
    const double angle = std::atan2(sin[d + 1], cos[d + 1]);  // position 1, pair 1: theta^(-2/D)
    if (!(angle > 0 && angle < 1)) return std::nullopt;
    double estimate = std::pow(angle, -double(half));
    if (std::fabs(estimate - std::round(estimate)) < 1e-3 * estimate) estimate = std::round(estimate);
    theta = static_cast<float>(estimate);
  }
  RopeFrequencies plain;
  plain.theta = theta;
  for (int64_t p = 0; p < t; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * ropeInverseFrequency(plain, i, d);
      for (int64_t j : {i, i + half})
        if (std::fabs(cos[p * d + j] - std::cos(angle)) > 1e-4f || std::fabs(sin[p * d + j] - std::sin(angle)) > 1e-4f)
          return std::nullopt;
    }
  return theta;
}

// Rotate-half RoPE on (B, H, T, D) heads as exporters write it,
//   add(mul(x, cos), mul(concat(neg(x[..., D/2:]), x[..., :D/2]), sin))
// with constant cos/sin tables that are mt.rope's for some theta -> mt.rope over the heads'
// (B, T, H*D) rows, turned back into heads for its users (a later attention takes the rows).
struct FuseRope : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op, PatternRewriter& rewriter) const override {
    auto type = op.getType();
    if (type.getRank() != 4 || op.getLhs().getType() != type || type.getShape().back() % 2 != 0) return failure();
    const int64_t t = type.getShape()[2], d = type.getShape()[3];
    for (auto [direct, rotated] : {std::pair{op.getLhs(), op.getRhs()}, {op.getRhs(), op.getLhs()}}) {
      auto withCos = direct.getDefiningOp<MulOp>();
      auto withSin = rotated.getDefiningOp<MulOp>();
      if (!withCos || !withSin) continue;
      for (auto [x, cosTable] : {std::pair{withCos.getLhs(), withCos.getRhs()}, {withCos.getRhs(), withCos.getLhs()}}) {
        for (auto [turned, sinTable] :
             {std::pair{withSin.getLhs(), withSin.getRhs()}, {withSin.getRhs(), withSin.getLhs()}}) {
          auto concat = turned.getDefiningOp<ConcatOp>();
          Value negated;
          if (x.getType() != type || !concat || (concat.getAxis() != 3 && concat.getAxis() != -1) ||
              !isUnary(concat.getLhs(), "neg", negated) || !isHalfOf(negated, x, d / 2) ||
              !isHalfOf(concat.getRhs(), x, 0))
            continue;
          std::optional<std::vector<float>> cos = rotaryTable(cosTable, t, d), sin = rotaryTable(sinTable, t, d);
          std::optional<float> theta = cos && sin ? ropeTheta(*cos, *sin, t, d) : std::nullopt;
          if (!theta) continue;
          Location loc = op.getLoc();
          Value rows = asRows(x, rewriter, loc);
          auto rotatedRows = rewriter.create<RopeOp>(
              loc, rows, rewriter.getI64IntegerAttr(d), rewriter.getF32FloatAttr(*theta), rewriter.getBoolAttr(false),
              rewriter.getI64IntegerAttr(0), rewriter.getI64IntegerAttr(0), nullptr, rewriter.getI64IntegerAttr(0));
          auto shape = type.getShape();  // (B, H, T, D)
          auto split = RankedTensorType::get({shape[0], shape[2], shape[1], shape[3]}, type.getElementType());
          Value heads = rewriter.create<ReshapeOp>(loc, split, rotatedRows);
          rewriter.replaceOpWithNewOp<TransposeOp>(op, heads, rewriter.getDenseI64ArrayAttr({0, 2, 1, 3}));
          return success();
        }
      }
    }
    return failure();
  }
};

struct FusePass : impl::FusePassBase<FusePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldRhsTranspose, FoldTransposePair, FoldReshapeChain, FuseGelu, FuseSiluSwiglu, FuseRmsNorm,
                 FuseLayerNorm, FuseRope, FuseAttention>(&getContext());
    GreedyRewriteConfig config;
    config.enableRegionSimplification = GreedySimplifyRegionLevel::Disabled;
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns), config))) signalPassFailure();
  }
};

}  // namespace
}  // namespace mt
