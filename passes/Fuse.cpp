// mt-fuse: the fused mt ops in place of what ONNX exporters decompose (see Passes.td).
#include <cmath>

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
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
    auto fused = rewriter.create<RmsNormOp>(op.getLoc(), x, w, rewriter.getF32FloatAttr(eps));
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

struct FusePass : impl::FusePassBase<FusePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldRhsTranspose, FuseGelu, FuseSiluSwiglu, FuseRmsNorm, FuseLayerNorm>(&getContext());
    GreedyRewriteConfig config;
    config.enableRegionSimplification = GreedySimplifyRegionLevel::Disabled;
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns), config))) signalPassFailure();
  }
};

}  // namespace
}  // namespace mt
