// The lowering of ONNX's elementwise ops: arithmetic, functions, Clip, Max/Min, comparisons and
// logic (compile time only), Where and Cast. Folded when the inputs are known (shape arithmetic),
// else built from the `mt` pointwise ops.
#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/dialect/MtDialect.h"
#include "compiler/onnx/OnnxLowering.h"
#include "kernels/pointwise/pointwise.h"

using namespace mlir;

namespace mt::onnximport::lowering {
namespace {

// Binary arithmetic: Add, Sub, Mul, Div, Pow. Folded in double (exact for the integers of
// shape arithmetic), integer division truncating.
template <BinaryFn kFn>
void binaryOp(Importer& im) {
  constexpr bool kAdd = kFn == BinaryFn::Add, kMul = kFn == BinaryFn::Mul, kDiv = kFn == BinaryFn::Div;
  if (allInputsConst(im)) {
    const Const &a = *im.input(0).constant, &b = *im.input(1).constant;
    const bool integer = a.kind != Const::Kind::Float;
    im.setOutput(0, foldElementwise({&a, &b}, a.kind, [&](const double* x) {
      switch (kFn) {
        case BinaryFn::Add: return x[0] + x[1];
        case BinaryFn::Sub: return x[0] - x[1];
        case BinaryFn::Mul: return x[0] * x[1];
        case BinaryFn::Div:
          return integer ? std::trunc(x[0] / x[1]) : static_cast<double>(static_cast<float>(x[0]) / static_cast<float>(x[1]));
        case BinaryFn::Pow: return std::pow(x[0], x[1]);
      }
      return 0.0;
    }, im.where()), im.input(0).elem_type);
    return;
  }
  // Scaling by a compile-time scalar (either side of a product) is mt.scale: no second
  // operand to move.
  const size_t scalar_side = kMul && im.isConst(0) && !im.isConst(1) ? 0 : 1;
  if ((kMul || kDiv) && im.isConst(scalar_side) && im.input(scalar_side).constant->isScalarLike() &&
      im.input(scalar_side).constant->shape.size() <= im.input(1 - scalar_side).shape.size()) {
    const double s = im.input(scalar_side).constant->values[0];
    const float factor = kMul ? static_cast<float>(s) : 1.0f / static_cast<float>(s);
    // x / s and x * (1/s) differ in the last bit: keep division exact unless s is a power of 2.
    if (kMul || std::ldexp(1.0, std::ilogb(s)) == s) {
      im.setOutput(0, im.create1<ScaleOp>({im.runtimeFloat(1 - scalar_side)},
                                          {named(im, "factor", im.builder().getF32FloatAttr(factor))}),
                   TP::FLOAT);
      return;
    }
  }
  Value a = im.runtimeFloat(0), b = im.runtimeFloat(1);
  // The fused add/mul kernels take a suffix-shaped rhs: commutative operands may swap.
  auto sa = shapeOf(a), sb = shapeOf(b);
  if ((kAdd || kMul) && sa.size() < sb.size()) std::swap(a, b), std::swap(sa, sb);
  const bool suffix = sb.size() <= sa.size() && std::equal(sb.begin(), sb.end(), sa.end() - sb.size());
  if (suffix && kAdd) return im.setOutput(0, im.create1<AddOp>({a, b}), TP::FLOAT);
  if (suffix && kMul) return im.setOutput(0, im.create1<MulOp>({a, b}), TP::FLOAT);
  const std::string_view fn = kBinaryFnNames[static_cast<size_t>(kFn)];
  im.setOutput(0, im.create1<BinaryOp>({a, b}, {named(im, "fn", im.builder().getStringAttr(fn))}), TP::FLOAT);
}

// Elementwise functions, folded with the kernel's own function (integers' Neg, Relu and Abs
// exactly, in double).
template <UnaryFn kFn>
void unaryOp(Importer& im) {
  if (im.isConst(0)) {
    const Const& x = *im.input(0).constant;
    constexpr bool kExactOnIntegers = kFn == UnaryFn::Neg || kFn == UnaryFn::Relu || kFn == UnaryFn::Abs;
    const bool exact = kExactOnIntegers && x.kind != Const::Kind::Float;
    im.setOutput(0, foldElementwise({&x}, x.kind, [&](const double* v) -> double {
      if (!exact) return applyUnary(kFn, static_cast<float>(v[0]));
      return kFn == UnaryFn::Neg ? -v[0] : kFn == UnaryFn::Relu ? std::max(v[0], 0.0) : std::fabs(v[0]);
    }, im.where()), im.input(0).elem_type);
    return;
  }
  const std::string_view fn = kUnaryFnNames[static_cast<size_t>(kFn)];
  im.setOutput(0, im.create1<UnaryOp>({im.runtimeFloat(0)}, {named(im, "fn", im.builder().getStringAttr(fn))}),
               TP::FLOAT);
}

// Functions with no run-time kernel, folded when their input is known (rotary tables).
template <int kFn>
void foldOnlyUnaryOp(Importer& im) {
  if (!im.isConst(0))
    unsupported(im.where() + ": " + im.node().op_type() + " runs at compile time only; this one depends on run-time data");
  const Const& x = *im.input(0).constant;
  im.setOutput(0, foldElementwise({&x}, x.kind, [](const double* v) -> double {
    const float f = static_cast<float>(v[0]);
    return kFn == 0 ? std::cos(f) : std::sin(f);
  }, im.where()), im.input(0).elem_type);
}


// Max and Min of one or more operands (numpy broadcasting), NaN propagating: a chain of
// mt.binary max/min, whose gradient at ties goes half to each side (as torch.maximum's).
template <BinaryFn kFn>
void extremumOp(Importer& im) {
  static_assert(kFn == BinaryFn::Max || kFn == BinaryFn::Min);
  if (allInputsConst(im)) {
    std::vector<const Const*> operands;
    for (size_t i = 0; i < im.numInputs(); ++i) operands.push_back(&im.constInput(i, "operand"));
    const size_t n = operands.size();
    im.setOutput(0, foldElementwise(operands, operands[0]->kind, [n](const double* x) {
      double result = x[0];
      for (size_t i = 1; i < n; ++i) result = kFn == BinaryFn::Max ? maxOrNaN(result, x[i]) : minOrNaN(result, x[i]);
      return result;
    }, im.where()), im.input(0).elem_type);
    return;
  }
  const std::string_view fn = kBinaryFnNames[static_cast<size_t>(kFn)];
  Value result = im.runtimeFloat(0);
  for (size_t i = 1; i < im.numInputs(); ++i)
    result = im.create1<BinaryOp>({result, im.runtimeFloat(i)}, {named(im, "fn", im.builder().getStringAttr(fn))});
  im.setOutput(0, result, TP::FLOAT);
}

// Clip: mt.clamp between compile-time bounds (attributes before opset 11, scalar inputs since);
// a bound left out is none. Folded when the input is known.
void clipOp(Importer& im) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float lo = -kInf, hi = kInf;
  if (im.opset() < 11) {
    lo = im.floatAttr("min", -kInf), hi = im.floatAttr("max", kInf);
  } else {
    if (im.hasInput(1)) lo = static_cast<float>(scalarInput(im, 1, "min"));
    if (im.hasInput(2)) hi = static_cast<float>(scalarInput(im, 2, "max"));
  }
  if (im.isConst(0)) {
    const Const& x = *im.input(0).constant;
    im.setOutput(0, foldElementwise({&x}, x.kind, [&](const double* v) -> double {
      return x.kind == Const::Kind::Float ? applyClamp(static_cast<float>(v[0]), lo, hi)
                                          : applyClamp(v[0], double(lo), double(hi));
    }, im.where()), im.input(0).elem_type);
    return;
  }
  im.setOutput(0, im.create1<ClampOp>({im.runtimeFloat(0)}, {named(im, "min", im.builder().getF32FloatAttr(lo)),
                                                              named(im, "max", im.builder().getF32FloatAttr(hi))}),
               TP::FLOAT);
}

// Comparisons and logic: compile time only (masks and shape arithmetic).
template <int kFn>
void compareOp(Importer& im) {
  if (!allInputsConst(im))
    unsupported(im.where() + ": comparisons and logic run at compile time only; this one depends on run-time data");
  std::vector<const Const*> operands;
  for (size_t i = 0; i < im.numInputs(); ++i) operands.push_back(&im.constInput(i, "operand"));
  im.setOutput(0, foldElementwise(operands, Const::Kind::Bool, [](const double* x) -> double {
    switch (kFn) {
      case 0: return x[0] == x[1];
      case 1: return x[0] < x[1];
      case 2: return x[0] > x[1];
      case 3: return x[0] == 0.0;  // Not
      case 4: return x[0] != 0.0 && x[1] != 0.0;
      default: return x[0] != 0.0 || x[1] != 0.0;
    }
  }, im.where()), TP::BOOL);
}

void whereOp(Importer& im) {
  if (allInputsConst(im)) {
    const Const &c = *im.input(0).constant, &a = *im.input(1).constant, &b = *im.input(2).constant;
    im.setOutput(0, foldElementwise({&c, &a, &b}, a.kind, [](const double* x) { return x[0] != 0.0 ? x[1] : x[2]; }, im.where()),
                 im.input(1).elem_type);
    return;
  }
  const int32_t elem = im.input(1).elem_type;
  im.setOutput(0, im.create1<WhereOp>({im.runtime(0), im.runtime(1), im.runtime(2)}), elem);
}

// Cast, and CastLike (to the type of its second input).
void castOp(Importer& im) {
  const int32_t declared = im.node().op_type() == "CastLike" ? im.input(1).elem_type : static_cast<int32_t>(im.intAttr("to", -1));
  if (!isSupportedElemType(declared))
    unsupported(im.where() + ": cast to " + elemTypeName(declared) + " (supported: " + kSupportedElemTypes + ")");
  const int32_t to = narrowedElemType(declared);
  if (im.isConst(0)) {
    Const c = *im.input(0).constant;
    c.kind = constKindOf(to);
    for (double& v : c.values)
      v = c.kind == Const::Kind::Bool ? (v != 0.0) : c.kind == Const::Kind::Int ? std::trunc(v) : static_cast<float>(v);
    im.setOutput(0, std::move(c), to);
    return;
  }
  const int32_t from = im.input(0).elem_type;
  if (to == TP::BOOL && from != TP::BOOL) unsupported(im.where() + ": a run-time cast to BOOL");
  Value x = im.runtime(0);
  Type element = mtElementType(*x.getContext(), to);
  if (cast<RankedTensorType>(x.getType()).getElementType() == element) return im.setOutput(0, x, to);
  im.setOutput(0, im.create1<CastOp>({x}, {}, {RankedTensorType::get(shapeOf(x), element)}), to);
}

}  // namespace

void addElementwiseLowerings(std::map<std::string, OpLowering>& table) {
  const std::map<std::string, OpLowering> elementwise = {
      {"Abs", {unaryOp<UnaryFn::Abs>, 1, 1}},
      {"Add", {binaryOp<BinaryFn::Add>, 2, 2}},
      {"And", {compareOp<4>, 2, 2}},
      {"Cast", {castOp, 1, 1}},
      {"CastLike", {castOp, 2, 2}},
      {"Clip", {clipOp, 1, 3}},
      {"Cos", {foldOnlyUnaryOp<0>, 1, 1}},
      {"Div", {binaryOp<BinaryFn::Div>, 2, 2}},
      {"Equal", {compareOp<0>, 2, 2}},
      {"Erf", {unaryOp<UnaryFn::Erf>, 1, 1}},
      {"Exp", {unaryOp<UnaryFn::Exp>, 1, 1}},
      {"Greater", {compareOp<2>, 2, 2}},
      {"Less", {compareOp<1>, 2, 2}},
      {"Log", {unaryOp<UnaryFn::Log>, 1, 1}},
      {"Max", {extremumOp<BinaryFn::Max>, 1, 1 << 16}},
      {"Min", {extremumOp<BinaryFn::Min>, 1, 1 << 16}},
      {"Mul", {binaryOp<BinaryFn::Mul>, 2, 2}},
      {"Neg", {unaryOp<UnaryFn::Neg>, 1, 1}},
      {"Not", {compareOp<3>, 1, 1}},
      {"Or", {compareOp<5>, 2, 2}},
      {"Pow", {binaryOp<BinaryFn::Pow>, 2, 2}},
      {"Reciprocal", {unaryOp<UnaryFn::Reciprocal>, 1, 1}},
      {"Relu", {unaryOp<UnaryFn::Relu>, 1, 1}},
      {"Sigmoid", {unaryOp<UnaryFn::Sigmoid>, 1, 1}},
      {"Sin", {foldOnlyUnaryOp<1>, 1, 1}},
      {"Sqrt", {unaryOp<UnaryFn::Sqrt>, 1, 1}},
      {"Sub", {binaryOp<BinaryFn::Sub>, 2, 2}},
      {"Tanh", {unaryOp<UnaryFn::Tanh>, 1, 1}},
      {"Where", {whereOp, 3, 3}},
  };
  table.insert(elementwise.begin(), elementwise.end());
}

}  // namespace mt::onnximport::lowering
