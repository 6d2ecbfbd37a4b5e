// The lowering of each supported ONNX op: folded when its inputs are known at compile time
// (shape arithmetic), else built from `mt` ops.
#include <cstdio>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "compiler/dialect/MtDialect.h"
#include "compiler/onnx/OnnxLowering.h"

using namespace mlir;

namespace mt::onnximport {
namespace {

using namespace lowering;

// Einsum of known operands (exporters write torch.outer and friends this way); no ellipsis.
void einsumOp(Importer& im) {
  if (!allInputsConst(im)) unsupported(im.where() + ": Einsum runs at compile time only; this one depends on run-time data");
  const auto* eq = im.attr("equation");
  std::string equation = eq ? eq->s() : "";
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  const size_t arrow = equation.find("->");
  if (arrow == std::string::npos || equation.find("...") != std::string::npos)
    unsupported(im.where() + ": Einsum needs an explicit output and no ellipsis, got '" + equation + "'");
  std::vector<std::string> terms;
  for (size_t start = 0, comma;; start = comma + 1) {
    comma = equation.find(',', start);
    terms.push_back(equation.substr(start, std::min(comma, arrow) - start));
    if (comma == std::string::npos || comma > arrow) break;
  }
  const std::string out = equation.substr(arrow + 2);
  if (terms.size() != im.numInputs()) malformed(im.where() + ": the equation names another number of operands");
  std::map<char, int64_t> size;
  std::vector<const Const*> ops;
  for (size_t t = 0; t < terms.size(); ++t) {
    const Const& c = *im.input(t).constant;
    if (terms[t].size() != c.shape.size()) malformed(im.where() + ": operand rank differs from the equation");
    for (size_t d = 0; d < c.shape.size(); ++d) {
      auto [it, fresh] = size.emplace(terms[t][d], c.shape[d]);
      if (!fresh && it->second != c.shape[d]) malformed(im.where() + ": an index has two sizes");
    }
    ops.push_back(&c);
  }
  std::string indices;
  for (auto& [letter, n] : size) indices += letter;
  Const result;
  result.kind = ops[0]->kind;
  for (const Const* c : ops) result.sources.insert(c->sources.begin(), c->sources.end());
  for (char letter : out) {
    if (!size.count(letter)) malformed(im.where() + ": the output names an unknown index");
    result.shape.push_back(size[letter]);
  }
  result.values.assign(result.numel(), 0.0);
  std::map<char, int64_t> at;
  for (char letter : indices) at[letter] = 0;
  int64_t total = 1;
  for (auto& [letter, n] : size) total *= n;
  for (int64_t k = 0; k < total; ++k) {
    int64_t rem = k;
    for (auto it = size.rbegin(); it != size.rend(); ++it) at[it->first] = rem % it->second, rem /= it->second;
    double product = 1.0;
    for (size_t t = 0; t < ops.size(); ++t) {
      int64_t offset = 0;
      for (size_t d = 0; d < terms[t].size(); ++d) offset = offset * ops[t]->shape[d] + at[terms[t][d]];
      product *= ops[t]->values[offset];
    }
    int64_t o = 0;
    for (size_t d = 0; d < out.size(); ++d) o = o * result.shape[d] + at[out[d]];
    result.values[o] += product;
  }
  im.setOutput(0, std::move(result), im.input(0).elem_type);
}

// ---------------------------------------------------------------- data movement

void gatherOp(Importer& im) {
  const int64_t rank = static_cast<int64_t>(im.input(0).shape.size());
  const int64_t axis = im.normAxis(im.intAttr("axis", 0), rank);
  if (allInputsConst(im))
    return im.setOutput(0, foldGather(*im.input(0).constant, *im.input(1).constant, axis, im.where()), im.input(0).elem_type);
  const int32_t elem = im.input(0).elem_type;
  Value data = im.runtime(0), indices = im.runtime(1);
  if (im.input(1).elem_type == TP::FLOAT) malformed(im.where() + ": indices must be integers");
  // Row lookups in a (V, C) table are embeddings: the fused kernel, with its gradient.
  if (axis == 0 && rank == 2 && elem == TP::FLOAT && !shapeOf(indices).empty())
    return im.setOutput(0, im.create1<EmbeddingOp>({indices, data}), elem);
  im.setOutput(0, im.create1<GatherOp>({data, indices}, {named(im, "axis", i64(im, axis))}), elem);
}

void concatOp(Importer& im) {
  const int64_t rank = static_cast<int64_t>(im.input(0).shape.size());
  const int64_t axis = im.normAxis(im.intAttr("axis", 0), rank);
  std::vector<size_t> parts;
  for (size_t i = 0; i < im.numInputs(); ++i) {
    if (im.input(i).shape.size() != static_cast<size_t>(rank)) malformed(im.where() + ": inputs of different rank");
    // Empty parts contribute nothing (exporters make them).
    if (im.input(i).shape[axis] != 0 || im.numInputs() == 1) parts.push_back(i);
  }
  if (parts.empty()) parts.push_back(0);
  if (allInputsConst(im)) {
    std::vector<const Const*> cs;
    for (size_t i : parts) cs.push_back(&*im.input(i).constant);
    return im.setOutput(0, foldConcat(cs, axis), im.input(0).elem_type);
  }
  const int32_t elem = im.input(0).elem_type;
  Value acc = im.runtime(parts[0]);
  for (size_t k = 1; k < parts.size(); ++k)
    acc = im.create1<ConcatOp>({acc, im.runtime(parts[k])}, {named(im, "axis", i64(im, axis))});
  im.setOutput(0, acc, elem);
}

// A slice of `x` (a Val of shape `in`) with per-dimension start, step and size.
void emitSlice(Importer& im, size_t input, size_t output, const std::vector<int64_t>& starts,
               const std::vector<int64_t>& steps, const std::vector<int64_t>& sizes) {
  const Val& x = im.input(input);
  if (im.isConst(input)) return im.setOutput(output, foldSlice(*x.constant, starts, steps, sizes), x.elem_type);
  const int32_t elem = x.elem_type;
  Value v = im.runtime(input);
  if (sizes == shapeOf(v)) {
    bool identity = true;
    for (size_t d = 0; d < sizes.size(); ++d) identity &= starts[d] == 0 && steps[d] == 1;
    if (identity) return im.setOutput(output, v, elem);
  }
  Type element = cast<RankedTensorType>(v.getType()).getElementType();
  im.setOutput(output,
               im.create1<SliceOp>({v}, {named(im, "starts", im.builder().getDenseI64ArrayAttr(starts)),
                                          named(im, "steps", im.builder().getDenseI64ArrayAttr(steps))},
                                   {RankedTensorType::get(sizes, element)}),
               elem);
}

void sliceOp(Importer& im) {
  const auto in = im.input(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (im.opset() < 10) {
    starts = im.intsAttr("starts"), ends = im.intsAttr("ends"), axes = im.intsAttr("axes");
  } else {
    starts = im.constInput(1, "starts").ints();
    ends = im.constInput(2, "ends").ints();
    if (im.hasInput(3)) axes = im.constInput(3, "axes").ints();
    if (im.hasInput(4)) steps = im.constInput(4, "steps").ints();
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    malformed(im.where() + ": starts, ends, axes and steps differ in length");
  std::vector<int64_t> s(rank, 0), st(rank, 1), sizes(in);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t d = im.normAxis(axes[k], rank), dim = in[d], step = steps[k];
    if (step == 0) malformed(im.where() + ": zero step");
    int64_t b = starts[k], e = ends[k];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    // ONNX's clamping: [0, dim] going forward, [-1, dim - 1] going backward.
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, dim), e = std::clamp<int64_t>(e, 0, dim);
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1), e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    // ceil(span / |step|) in unsigned arithmetic: a step near +-2^63 must not overflow (the
    // ONNX fuzz harness found `e - b + step - 1` past INT64_MAX).
    const int64_t span = step > 0 ? e - b : b - e;  // within [-(dim + 1), dim + 1] after the clamps
    const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : uint64_t{0} - static_cast<uint64_t>(step);
    const int64_t size = span <= 0 ? 0 : static_cast<int64_t>((static_cast<uint64_t>(span) + stride - 1) / stride);
    s[d] = b, st[d] = step, sizes[d] = size;
    if (sizes[d] == 0) s[d] = 0;
  }
  emitSlice(im, 0, 0, s, st, sizes);
}

void splitOp(Importer& im) {
  const auto in = im.input(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t axis = im.normAxis(im.intAttr("axis", 0), rank);
  std::vector<int64_t> parts = im.attr("split") ? im.intsAttr("split") : std::vector<int64_t>{};
  if (parts.empty() && im.hasInput(1)) parts = im.constInput(1, "split sizes").ints();
  const int64_t outputs = im.node().output_size();
  if (parts.empty()) {
    if (outputs == 0) malformed(im.where() + ": no outputs");
    const int64_t each = (in[axis] + outputs - 1) / outputs;  // opset 18's rule; equal parts before
    for (int64_t i = 0; i < outputs; ++i) parts.push_back(std::min(each, in[axis] - i * each));
  }
  if (static_cast<int64_t>(parts.size()) != outputs || std::accumulate(parts.begin(), parts.end(), int64_t{0}) != in[axis])
    malformed(im.where() + ": split sizes do not add up to the dimension");
  int64_t offset = 0;
  for (int64_t i = 0; i < outputs; ++i) {
    std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes(in);
    starts[axis] = parts[i] ? offset : 0;
    sizes[axis] = parts[i];
    emitSlice(im, 0, i, starts, steps, sizes);
    offset += parts[i];
  }
}

void triluOp(Importer& im) {
  const bool upper = im.intAttr("upper", 1) != 0;
  const double k_value = im.hasInput(1) ? scalarInput(im, 1, "k") : 0.0;
  if (!(std::fabs(k_value) < double(int64_t{1} << 40))) malformed(im.where() + ": k out of range");
  const int64_t k = static_cast<int64_t>(k_value);
  if (im.input(0).shape.size() < 2) malformed(im.where() + ": input needs rank >= 2");
  if (im.isConst(0)) return im.setOutput(0, foldTrilu(*im.input(0).constant, upper, k), im.input(0).elem_type);
  const int32_t elem = im.input(0).elem_type;
  im.setOutput(0, im.create1<TriluOp>({im.runtime(0)}, {named(im, "upper", im.builder().getBoolAttr(upper)),
                                                        named(im, "k", i64(im, k))}),
               elem);
}

// ---------------------------------------------------------------- reductions, softmax

// ReduceSum / ReduceMean: sum_to the keepdims shape, scale, drop the reduced dims if asked.
template <bool kMean>
void reduceOp(Importer& im) {
  const auto in = im.input(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  bool given;
  // ReduceSum takes axes as an input from opset 13, ReduceMean from opset 18.
  std::vector<int64_t> axes = axesOf(im, 1, &given);
  const bool keepdims = im.intAttr("keepdims", 1) != 0;
  if (axes.empty() && im.intAttr("noop_with_empty_axes", 0)) return reshapeTo(im, in);
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[im.normAxis(a, rank)] = true;
  std::vector<int64_t> kept, dropped;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    kept.push_back(reduced[d] ? 1 : in[d]);
    if (!reduced[d]) dropped.push_back(in[d]);
    else count *= in[d];
  }
  Value x = im.runtimeFloat(0);
  Value y = kept == in ? x : im.create1<SumToOp>({x}, {}, {RankedTensorType::get(kept, im.builder().getF32Type())});
  if (kMean && count != 1)
    y = im.create1<ScaleOp>({y}, {named(im, "factor", im.builder().getF32FloatAttr(1.0f / static_cast<float>(count)))});
  im.setOutput(0, im.reshape(y, keepdims ? kept : dropped), TP::FLOAT);
}

template <bool kLog>
void softmaxOp(Importer& im) {
  const auto in = im.input(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  Value x = im.runtimeFloat(0);
  auto attrs = [&](int64_t axis) {
    return SmallVector<NamedAttribute>{named(im, "axis", i64(im, axis)), named(im, "log", im.builder().getBoolAttr(kLog))};
  };
  if (im.opset() >= 13) {
    const int64_t axis = im.normAxis(im.intAttr("axis", -1), rank);
    return im.setOutput(0, im.create1<SoftmaxOp>({x}, attrs(axis)), TP::FLOAT);
  }
  // Before opset 13: over the input flattened to 2-D at `axis`.
  const int64_t axis = im.intAttr("axis", 1) < 0 ? im.intAttr("axis", 1) + rank : im.intAttr("axis", 1);
  const auto [outer, inner] = splitAt(in, axis);
  Value y = im.create1<SoftmaxOp>({im.reshape(x, {outer, inner})}, attrs(1));
  im.setOutput(0, im.reshape(y, in), TP::FLOAT);
}

// ---------------------------------------------------------------- matrix products

// (..., M, K) x (..., K, N) with numpy-broadcast batch dims and 1-D operands.
Value matmul(Importer& im, Value a, Value b, bool ta = false, bool tb = false) {
  auto sa = shapeOf(a), sb = shapeOf(b);
  if (sa.empty() || sb.empty()) malformed(im.where() + ": matrix product operands need rank >= 1");
  const bool vecA = sa.size() == 1, vecB = sb.size() == 1;
  if (vecA) a = im.reshape(a, {1, sa[0]}), sa = {1, sa[0]};
  if (vecB) b = im.reshape(b, {sb[0], 1}), sb = {sb[0], 1};
  if (sb.size() != 2 && !(sa.size() == sb.size() && std::equal(sa.begin(), sa.end() - 2, sb.begin()))) {
    // Broadcast the batch dims of both to a common shape.
    const std::vector<int64_t> batch = broadcastShape(std::vector<int64_t>(sa.begin(), sa.end() - 2),
                                                      std::vector<int64_t>(sb.begin(), sb.end() - 2), im.where());
    auto expand = [&](Value v, std::vector<int64_t>& s) {
      std::vector<int64_t> shape = batch;
      shape.insert(shape.end(), s.end() - 2, s.end());
      if (shape != s) v = im.create1<BroadcastOp>({v}, {}, {RankedTensorType::get(shape, im.builder().getF32Type())});
      s = shape;
      return v;
    };
    a = expand(a, sa), b = expand(b, sb);
  } else if (sa.size() == 2 && sb.size() > 2) {
    std::vector<int64_t> shape(sb.begin(), sb.end() - 2);
    shape.insert(shape.end(), sa.begin(), sa.end());
    a = im.create1<BroadcastOp>({a}, {}, {RankedTensorType::get(shape, im.builder().getF32Type())});
  }
  Value y = im.create1<MatmulOp>({a, b}, {named(im, "transpose_a", im.builder().getBoolAttr(ta)),
                                          named(im, "transpose_b", im.builder().getBoolAttr(tb))});
  auto sy = shapeOf(y);
  if (vecA || vecB) {
    std::vector<int64_t> shape(sy.begin(), sy.end() - 2);
    if (!vecA) shape.push_back(sy[sy.size() - 2]);
    if (!vecB) shape.push_back(sy.back());
    y = im.reshape(y, shape);
  }
  return y;
}

void matmulOp(Importer& im) {
  const Val& w = im.input(1);
  if (im.isTrainableInitializer(w) && w.initializer.find("::") != std::string::npos && w.shape.size() == 2 &&
      !im.node().name().empty()) {
    // An eval export folds a Linear layer's transpose into an anonymous (in, out) initializer:
    // train it as the layer's (out, in) weight, named by the layer's path, so it reads back into
    // the PyTorch module — and tie it to an equal parameter (an untied copy of a tied weight).
    const std::string path = dottedPath(im.node().name().substr(0, im.node().name().rfind('/')));
    Value weight = im.newParameter(path.empty() ? w.initializer : path + ".weight", w.initializer,
                                   {w.shape[1], w.shape[0]}, im.initializerProto(w), /*transposed=*/true,
                                   /*tie=*/true);
    return im.setOutput(0, matmul(im, im.runtimeFloat(0), weight, false, true), TP::FLOAT);
  }
  im.setOutput(0, matmul(im, im.runtimeFloat(0), im.runtimeFloat(1)), TP::FLOAT);
}

void gemmOp(Importer& im) {
  const float alpha = im.floatAttr("alpha", 1.0f), beta = im.floatAttr("beta", 1.0f);
  if (im.input(0).shape.size() != 2 || im.input(1).shape.size() != 2) malformed(im.where() + ": A and B must be 2-D");
  Value y = matmul(im, im.runtimeFloat(0), im.runtimeFloat(1), im.intAttr("transA", 0), im.intAttr("transB", 0));
  if (alpha != 1.0f) y = im.create1<ScaleOp>({y}, {named(im, "factor", im.builder().getF32FloatAttr(alpha))});
  if (im.hasInput(2) && beta != 0.0f) {
    Value c = im.runtimeFloat(2);
    if (beta != 1.0f) c = im.create1<ScaleOp>({c}, {named(im, "factor", im.builder().getF32FloatAttr(beta))});
    y = im.create1<BinaryOp>({y, c}, {named(im, "fn", im.builder().getStringAttr("add"))});
  }
  im.setOutput(0, y, TP::FLOAT);
}

// ---------------------------------------------------------------- normalisation, losses

void layerNormOp(Importer& im) {
  const auto in = im.input(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t axis = im.normAxis(im.intAttr("axis", -1), rank);
  // Not a structured binding: the lambda below captures `inner` (C++20; clang before 16, which
  // builds the fuzz harness, does not take it).
  const std::pair<int64_t, int64_t> parts = splitAt(in, axis);
  const int64_t outer = parts.first, inner = parts.second;
  const std::vector<int64_t> normalized(in.begin() + axis, in.end());
  // Scale and bias broadcast over the normalised dims: materialise them at full size, as (inner).
  auto channels = [&](Value v) {
    if (shapeOf(v) != normalized)
      v = im.create1<BroadcastOp>({v}, {}, {RankedTensorType::get(normalized, im.builder().getF32Type())});
    return im.reshape(v, {inner});
  };
  Value x = im.reshape(im.runtimeFloat(0), {outer, inner});
  Value gamma = channels(im.runtimeFloat(1));
  Value beta = im.hasInput(2) ? channels(im.runtimeFloat(2)) : im.fill(0.0f, {inner});
  Operation* ln = im.create<LayerNormOp>({x, gamma, beta}, {named(im, "eps", im.builder().getF32FloatAttr(im.floatAttr("epsilon", 1e-5f)))});
  im.setOutput(0, im.reshape(ln->getResult(0), in), TP::FLOAT);
  std::vector<int64_t> stats(in.begin(), in.begin() + axis);
  stats.resize(rank, 1);
  im.setOutput(1, im.reshape(ln->getResult(1), stats), TP::FLOAT);
  im.setOutput(2, im.reshape(ln->getResult(2), stats), TP::FLOAT);
}

// (N, C, d...) -> (N, d..., C): the class axis last, as the loss kernels and one-hot rows take it.
Value classAxisLast(Importer& im, Value v) {
  const int64_t rank = static_cast<int64_t>(shapeOf(v).size());
  if (rank == 2) return v;
  std::vector<int64_t> perm = {0};
  for (int64_t d = 2; d < rank; ++d) perm.push_back(d);
  perm.push_back(1);
  return im.create1<TransposeOp>({v}, {named(im, "perm", im.builder().getDenseI64ArrayAttr(perm))});
}

// Negative log-likelihood of log-probabilities `logp` (N, C, d...) at `labels` (N, d...),
// from generic ops: a one-hot row per label (a gathered identity whose ignored row is zero),
// the picked values summed, optional class weights, and the reduction.
Value nllFromLogProbs(Importer& im, Value logp, Value labels, std::optional<Value> weights) {
  const int64_t classes = shapeOf(logp)[1];
  const std::string reduction = im.attr("reduction") ? im.attr("reduction")->s() : "mean";
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    malformed(im.where() + ": unknown reduction '" + reduction + "'");
  Value x = classAxisLast(im, logp);
  // The one-hot table: identity, plus zero rows that negative ignore indices wrap to.
  const auto* ii = im.attr("ignore_index");
  const int64_t ignore = ii ? ii->i() : std::numeric_limits<int64_t>::min();
  if (ii && ignore < -(int64_t{1} << 20)) unsupported(im.where() + ": ignore_index below -2^20");
  const int64_t extra = ii && ignore < 0 ? -ignore : 0;
  Const eye;
  eye.shape = {classes + extra, classes};
  eye.values.assign(checkedFoldNumel(eye.shape, im.where()), 0.0);
  for (int64_t c = 0; c < classes; ++c)
    if (c != ignore) eye.values[c * classes + c] = 1.0;
  Value onehot = im.create1<GatherOp>({im.constantArg(eye, true), labels}, {named(im, "axis", i64(im, 0))});
  std::vector<int64_t> rows(shapeOf(labels));
  rows.push_back(1);
  auto f32 = [&](std::vector<int64_t> shape) { return RankedTensorType::get(shape, im.builder().getF32Type()); };
  Value picked = im.create1<SumToOp>({im.create1<MulOp>({onehot, x})}, {}, {f32(rows)});  // x[t] per row
  Value weight = im.create1<SumToOp>({onehot}, {}, {f32(rows)});                           // 1, or 0 if ignored
  if (weights) {
    Value w = im.reshape(*weights, {classes, 1});
    weight = matmul(im, onehot, w);
  }
  Value loss = im.create1<ScaleOp>({im.create1<MulOp>({picked, weight})}, {named(im, "factor", im.builder().getF32FloatAttr(-1.0f))});
  if (reduction == "none") return im.reshape(loss, shapeOf(labels));
  Value total = im.create1<SumToOp>({loss}, {}, {f32({})});
  if (reduction == "sum") return total;
  Value count = im.create1<SumToOp>({weight}, {}, {f32({})});
  return im.create1<BinaryOp>({total, count}, {named(im, "fn", im.builder().getStringAttr("div"))});
}

void nllLossOp(Importer& im) {
  if (im.input(0).shape.size() < 2) malformed(im.where() + ": input must be (N, C, ...)");
  std::optional<Value> weights;
  if (im.hasInput(2)) weights = im.runtimeFloat(2);
  im.setOutput(0, nllFromLogProbs(im, im.runtimeFloat(0), im.runtime(1), weights), TP::FLOAT);
}

void softmaxCrossEntropyOp(Importer& im) {
  const auto s = im.input(0).shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank < 2) malformed(im.where() + ": scores must be (N, C, ...)");
  const std::string reduction = im.attr("reduction") ? im.attr("reduction")->s() : "mean";
  const auto* ii = im.attr("ignore_index");
  Value scores = im.runtimeFloat(0), labels = im.runtime(1);
  const bool wants_log_prob = im.node().output_size() > 1 && !im.node().output(1).empty();
  // The fused kernel: mean over labels in [0, C), the rest ignored — exactly ONNX's mean when
  // no weights are given and the ignore index (if any) lies outside the classes.
  const bool fused = reduction == "mean" && !im.hasInput(2) && (!ii || ii->i() < 0 || ii->i() >= s[1]) && !wants_log_prob;
  if (fused) return im.setOutput(0, im.create<SoftmaxXentOp>({classAxisLast(im, scores), labels})->getResult(0), TP::FLOAT);
  Value logp = im.create1<SoftmaxOp>({scores}, {named(im, "axis", i64(im, 1)), named(im, "log", im.builder().getBoolAttr(true))});
  std::optional<Value> weights;
  if (im.hasInput(2)) weights = im.runtimeFloat(2);
  im.setOutput(0, nllFromLogProbs(im, logp, labels, weights), TP::FLOAT);
  im.setOutput(1, logp, TP::FLOAT);
}

}  // namespace

const std::map<std::string, OpLowering>& loweringTable() {
  // Op type -> lowering, and the inputs it takes (fewest, most; trailing optional ones may be
  // left out). The importer checks the count before lowering.
  static const std::map<std::string, OpLowering> table = [] {
    std::map<std::string, OpLowering> ops = {
        {"Concat", {concatOp, 1, 1 << 16}},
        {"Einsum", {einsumOp, 1, 1 << 16}},
        {"Gather", {gatherOp, 2, 2}},
        {"Gemm", {gemmOp, 2, 3}},
        {"LayerNormalization", {layerNormOp, 2, 3}},
        {"LogSoftmax", {softmaxOp<true>, 1, 1}},
        {"MatMul", {matmulOp, 2, 2}},
        {"NegativeLogLikelihoodLoss", {nllLossOp, 2, 3}},
        {"ReduceMean", {reduceOp<true>, 1, 2}},
        {"ReduceSum", {reduceOp<false>, 1, 2}},
        {"Slice", {sliceOp, 1, 5}},
        {"Softmax", {softmaxOp<false>, 1, 1}},
        {"SoftmaxCrossEntropyLoss", {softmaxCrossEntropyOp, 2, 3}},
        {"Split", {splitOp, 1, 2}},
        {"Trilu", {triluOp, 1, 2}},
    };
    addShapeLowerings(ops);
    addElementwiseLowerings(ops);
    return ops;
  }();
  return table;
}

}  // namespace mt::onnximport
