// The lowering of ONNX's shape ops: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout,
// Shape, Size, Constant, ConstantOfShape, Range, Transpose, Expand. Folded when the inputs are
// known at compile time (shape arithmetic), else built from `mt` ops.
#include <algorithm>
#include <numeric>

#include "compiler/dialect/MtDialect.h"
#include "compiler/onnx/OnnxLowering.h"

using namespace mlir;

namespace mt::onnximport::lowering {

void reshapeTo(Importer& im, const std::vector<int64_t>& shape) {
  const Val& x = im.input(0);
  const int64_t n = checkedNumel(shape, im.where()), have = checkedNumel(x.shape, im.where());
  if (n != have) malformed(im.where() + ": cannot reshape " + std::to_string(have) + " elements into " + std::to_string(n));
  if (im.isConst(0)) {
    Const c = *x.constant;
    c.shape = shape;
    return im.setOutput(0, std::move(c), x.elem_type);
  }
  const int32_t elem = x.elem_type;
  im.setOutput(0, im.reshape(im.runtime(0), shape), elem);
}

std::vector<int64_t> axesOf(Importer& im, size_t input, bool* given) {
  *given = true;
  if (im.attr("axes")) return im.intsAttr("axes");
  if (im.hasInput(input)) return im.constInput(input, "axes").ints();
  *given = false;
  return {};
}

namespace {

void identityOp(Importer& im) {
  // Eval exports share equal initializers behind Identity nodes named after the parameters
  // they stand for: in a model to train each is its own parameter.
  const std::string& out = im.node().output(0);
  if (im.isTrainableInitializer(im.input(0)) && out.find("::") == std::string::npos)
    return im.aliasInitializer(im.input(0), out);
  reshapeTo(im, im.input(0).shape);
}

// Dropout in training mode with a ratio above 0 (nanoGPT, nn.TransformerEncoderLayer) in a model
// to train: mt.dropout, its mask keyed by the node's site (the k-th such node) and never stored,
// so its mask output cannot be read; the node's `seed` attribute is not used (mtrun --seed keys
// every mask). Elsewhere — not training (an eval export, or training_mode false, ONNX's
// default), a model compiled for evaluation (mtc --forward-only, as PyTorch's eval()), or a
// ratio of 0 (nanoGPT's dropout = 0.0) — the identity, its mask all true.
void dropoutOp(Importer& im) {
  const double ratio = im.hasInput(1) ? scalarInput(im, 1, "ratio") : 0.5;
  const bool training = im.hasInput(2) && scalarInput(im, 2, "training_mode") != 0;
  if (!(ratio >= 0 && ratio < 1)) malformed(im.where() + ": Dropout's ratio must lie in [0, 1)");
  if (training && ratio != 0 && im.training()) {
    auto& b = im.builder();
    im.setOutput(0, im.create1<DropoutOp>({im.runtimeFloat(0)},
                                          {b.getNamedAttr("site", b.getI64IntegerAttr(im.nextDropoutSite())),
                                           b.getNamedAttr("ratio", b.getF32FloatAttr(static_cast<float>(ratio)))}),
                 TP::FLOAT);
    im.setUnreadableOutput(1, "is the mask of a Dropout that drops at random: mtc redraws the mask where it is "
                              "applied and never stores it, so no node can read it");
    return;
  }
  // The mask, a compile-time constant where it is small enough to be one (exporters name it but
  // training graphs leave it unread; a node reading a larger one finds no such value).
  const int64_t numel = checkedNumel(im.input(0).shape, im.where());
  if (im.node().output_size() > 1 && !im.node().output(1).empty() && numel <= (int64_t{1} << 26)) {
    Const mask;
    mask.kind = Const::Kind::Bool;
    mask.shape = im.input(0).shape;
    mask.values.assign(static_cast<size_t>(numel), 1.0);
    im.setOutput(1, std::move(mask), TP::BOOL);
  }
  reshapeTo(im, im.input(0).shape);
}

void reshapeOp(Importer& im) {
  const std::vector<int64_t> in = im.input(0).shape;
  std::vector<int64_t> shape = im.constInput(1, "target shape").ints();
  const bool allowzero = im.intAttr("allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= in.size()) malformed(im.where() + ": a 0 in the shape copies a dimension the input lacks");
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) malformed(im.where() + ": more than one -1 in the shape");
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      malformed(im.where() + ": negative dimension in the shape");
    } else {
      known = checkedNumel({known, shape[i]}, im.where());
    }
  }
  if (infer >= 0) {
    const int64_t n = checkedNumel(in, im.where());
    if (known == 0 || n % known != 0) malformed(im.where() + ": cannot infer the -1 dimension");
    shape[infer] = n / known;
  }
  reshapeTo(im, shape);
}

void flattenOp(Importer& im) {
  const auto& in = im.input(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = im.intAttr("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) malformed(im.where() + ": axis out of range");
  const auto [outer, inner] = splitAt(in, axis);
  reshapeTo(im, {outer, inner});
}

void squeezeOp(Importer& im) {
  const auto& in = im.input(0).shape;
  bool given;
  std::vector<int64_t> axes = axesOf(im, 1, &given);
  std::vector<bool> drop(in.size(), false);
  for (size_t i = 0; i < in.size(); ++i) drop[i] = !given && in[i] == 1;
  for (int64_t a : axes) {
    const int64_t d = im.normAxis(a, static_cast<int64_t>(in.size()));
    if (in[d] != 1) malformed(im.where() + ": cannot squeeze dimension " + std::to_string(d) + " of size " + std::to_string(in[d]));
    drop[d] = true;
  }
  std::vector<int64_t> shape;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) shape.push_back(in[i]);
  reshapeTo(im, shape);
}

void unsqueezeOp(Importer& im) {
  const auto& in = im.input(0).shape;
  bool given;
  std::vector<int64_t> axes = axesOf(im, 1, &given);
  const int64_t rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    const int64_t d = im.normAxis(a, rank);
    if (inserted[d]) malformed(im.where() + ": repeated axis");
    inserted[d] = true;
  }
  std::vector<int64_t> shape;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) shape.push_back(inserted[i] ? 1 : in[next++]);
  reshapeTo(im, shape);
}

void shapeOp(Importer& im) {
  const auto& in = im.input(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t start = im.intAttr("start", 0), end = im.intAttr("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<int64_t> dims(in.begin() + start, in.begin() + end);
  im.setOutput(0, intConst(dims, {static_cast<int64_t>(dims.size())}), TP::INT64);
}

void sizeOp(Importer& im) {
  im.setOutput(0, intConst({checkedNumel(im.input(0).shape, im.where())}, {}), TP::INT64);
}

void constantOp(Importer& im) {
  if (const auto* a = im.attr("value")) {
    Const c = decodeTensor(a->t(), ".");
    const int32_t elem = narrowedElemType(a->t().data_type());
    return im.setOutput(0, std::move(c), elem);
  }
  Const c;
  if (const auto* a = im.attr("value_float")) {
    c.values = {a->f()};
    return im.setOutput(0, std::move(c), TP::FLOAT);
  }
  if (const auto* a = im.attr("value_floats")) {
    c.values.assign(a->floats().begin(), a->floats().end());
    c.shape = {static_cast<int64_t>(c.values.size())};
    return im.setOutput(0, std::move(c), TP::FLOAT);
  }
  if (const auto* a = im.attr("value_int")) return im.setOutput(0, intConst({a->i()}, {}), TP::INT64);
  if (const auto* a = im.attr("value_ints")) {
    std::vector<int64_t> v(a->ints().begin(), a->ints().end());
    return im.setOutput(0, intConst(v, {static_cast<int64_t>(v.size())}), TP::INT64);
  }
  unsupported(im.where() + ": a Constant without a tensor, float(s) or int(s) value");
}

void constantOfShapeOp(Importer& im) {
  Const c;
  c.shape = im.constInput(0, "shape").ints();
  checkedFoldNumel(c.shape, im.where());
  int32_t elem = TP::FLOAT;
  double value = 0.0;
  if (const auto* a = im.attr("value")) {
    Const v = decodeTensor(a->t(), ".");
    if (v.numel() != 1) malformed(im.where() + ": value must hold one element");
    value = v.values[0];
    c.kind = v.kind;
    elem = narrowedElemType(a->t().data_type());
  }
  c.values.assign(c.numel(), value);
  im.setOutput(0, std::move(c), elem);
}

void rangeOp(Importer& im) {
  const double start = scalarInput(im, 0, "start"), limit = scalarInput(im, 1, "limit"),
               delta = scalarInput(im, 2, "delta");
  if (delta == 0) malformed(im.where() + ": delta is zero");
  const double count = std::ceil((limit - start) / delta);
  if (!(count <= double(int64_t{1} << 26))) unsupported(im.where() + ": a range of more than 2^26 elements");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  Const c;
  c.kind = im.constInput(0, "start").kind;
  c.shape = {n};
  for (int64_t i = 0; i < n; ++i) c.values.push_back(start + i * delta);
  im.setOutput(0, std::move(c), im.input(0).elem_type);
}

void transposeOp(Importer& im) {
  const int64_t rank = static_cast<int64_t>(im.input(0).shape.size());
  std::vector<int64_t> perm = im.intsAttr("perm");
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != rank) malformed(im.where() + ": perm has the wrong length");
  if (im.isConst(0)) {
    std::vector<bool> seen(rank, false);
    for (int64_t p : perm)
      if (p < 0 || p >= rank || seen[p]) malformed(im.where() + ": perm is not a permutation");
      else seen[p] = true;
    return im.setOutput(0, foldTranspose(*im.input(0).constant, perm), im.input(0).elem_type);
  }
  const int32_t elem = im.input(0).elem_type;
  im.setOutput(0, im.create1<TransposeOp>({im.runtime(0)}, {named(im, "perm", im.builder().getDenseI64ArrayAttr(perm))}), elem);
}

void expandOp(Importer& im) {
  const std::vector<int64_t> target = im.constInput(1, "shape").ints();
  const std::vector<int64_t> shape = broadcastShape(im.input(0).shape, target, im.where());
  checkedNumel(shape, im.where());
  if (im.isConst(0)) {
    checkedFoldNumel(shape, im.where());
    return im.setOutput(0, foldExpand(*im.input(0).constant, shape), im.input(0).elem_type);
  }
  const int32_t elem = im.input(0).elem_type;
  Value x = im.runtime(0);
  if (shapeOf(x) == shape) return im.setOutput(0, x, elem);
  Type element = cast<RankedTensorType>(x.getType()).getElementType();
  im.setOutput(0, im.create1<BroadcastOp>({x}, {}, {RankedTensorType::get(shape, element)}), elem);
}

}  // namespace

void addShapeLowerings(std::map<std::string, OpLowering>& table) {
  const std::map<std::string, OpLowering> shapes = {
      {"Constant", {constantOp, 0, 0}},
      {"ConstantOfShape", {constantOfShapeOp, 1, 1}},
      {"Dropout", {dropoutOp, 1, 3}},
      {"Expand", {expandOp, 2, 2}},
      {"Flatten", {flattenOp, 1, 1}},
      {"Identity", {identityOp, 1, 1}},
      {"Range", {rangeOp, 3, 3}},
      {"Reshape", {reshapeOp, 2, 2}},
      {"Shape", {shapeOp, 1, 1}},
      {"Size", {sizeOp, 1, 1}},
      {"Squeeze", {squeezeOp, 1, 2}},
      {"Transpose", {transposeOp, 1, 1}},
      {"Unsqueeze", {unsqueezeOp, 1, 2}},
  };
  table.insert(shapes.begin(), shapes.end());
}

}  // namespace mt::onnximport::lowering
