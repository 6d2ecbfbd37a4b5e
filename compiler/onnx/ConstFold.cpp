#include "compiler/onnx/ConstFold.h"

#include <algorithm>

#include "kernels/broadcast.h"

namespace mt::onnximport {
namespace {

std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

}  // namespace

std::vector<int64_t> broadcastShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                    const std::string& what) {
  std::vector<int64_t> out;
  if (!broadcastShapes(a, b, &out)) malformed(what + ": operand shapes do not broadcast");
  return out;
}

Const foldElementwise(const std::vector<const Const*>& operands, Const::Kind kind,
                      const std::function<double(const double*)>& f, const std::string& what) {
  Const out;
  out.kind = kind;
  for (const Const* c : operands) out.sources.insert(c->sources.begin(), c->sources.end());
  for (const Const* c : operands) out.shape = broadcastShape(out.shape, c->shape, what);
  out.values.resize(checkedFoldNumel(out.shape, what));
  // The kernels' broadcast walk: row by row of the result, each operand at its own offset.
  std::vector<BroadcastIndex> index;
  for (const Const* c : operands) index.emplace_back(c->shape, out.shape);
  std::vector<double> args(operands.size());
  for (int64_t r = 0; r < index[0].rows(); ++r)
    for (int64_t c = 0; c < index[0].cols(); ++c) {
      for (size_t k = 0; k < operands.size(); ++k)
        args[k] = operands[k]->values[index[k].rowOffset(r) + c * index[k].colStep()];
      out.values[r * index[0].cols() + c] = f(args.data());
    }
  return out;
}

Const foldTranspose(const Const& x, const std::vector<int64_t>& perm) {
  Const out;
  out.kind = x.kind;
  out.sources = x.sources;
  for (int64_t p : perm) out.shape.push_back(x.shape[p]);
  const auto in_strides = stridesOf(x.shape);
  out.values.resize(x.values.size());
  for (int64_t o = 0; o < out.numel(); ++o) {
    int64_t rem = o, offset = 0;
    for (size_t i = out.shape.size(); i-- > 0;) {
      offset += (rem % out.shape[i]) * in_strides[perm[i]];
      rem /= out.shape[i];
    }
    out.values[o] = x.values[offset];
  }
  return out;
}

Const foldGather(const Const& data, const Const& indices, int64_t axis, const std::string& what) {
  Const out;
  out.kind = data.kind;
  out.sources = data.sources;
  out.shape.assign(data.shape.begin(), data.shape.begin() + axis);
  out.shape.insert(out.shape.end(), indices.shape.begin(), indices.shape.end());
  out.shape.insert(out.shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  checkedFoldNumel(out.shape, what);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= data.shape[i];
  for (size_t i = axis + 1; i < data.shape.size(); ++i) inner *= data.shape[i];
  const int64_t size = data.shape[axis];
  const std::vector<int64_t> index_values = indices.ints();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t idx : index_values) {
      int64_t i = idx;
      if (i < 0 && i >= -size) i += size;
      if (i < 0 || i >= size) malformed(what + ": index " + std::to_string(idx) + " out of range");
      for (int64_t c = 0; c < inner; ++c) out.values.push_back(data.values[(o * size + i) * inner + c]);
    }
  return out;
}

Const foldConcat(const std::vector<const Const*>& parts, int64_t axis) {
  Const out;
  out.kind = parts[0]->kind;
  for (const Const* p : parts) out.sources.insert(p->sources.begin(), p->sources.end());
  out.shape = parts[0]->shape;
  out.shape[axis] = 0;
  for (const Const* p : parts) out.shape[axis] += p->shape[axis];
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= out.shape[i];
  for (int64_t o = 0; o < outer; ++o)
    for (const Const* p : parts) {
      const int64_t row = outer ? p->numel() / outer : 0;
      out.values.insert(out.values.end(), p->values.begin() + o * row, p->values.begin() + (o + 1) * row);
    }
  return out;
}

Const foldSlice(const Const& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& steps,
                const std::vector<int64_t>& sizes) {
  Const out;
  out.kind = x.kind;
  out.sources = x.sources;
  out.shape = sizes;
  const auto in_strides = stridesOf(x.shape);
  out.values.resize(out.numel());
  for (int64_t o = 0; o < out.numel(); ++o) {
    int64_t rem = o, offset = 0;
    for (size_t d = sizes.size(); d-- > 0;) {
      offset += (starts[d] + (rem % sizes[d]) * steps[d]) * in_strides[d];
      rem /= sizes[d];
    }
    out.values[o] = x.values[offset];
  }
  return out;
}

Const foldExpand(const Const& x, const std::vector<int64_t>& shape) {
  Const out;
  out.kind = x.kind;
  out.sources = x.sources;
  out.shape = shape;
  out.values.resize(out.numel());
  const BroadcastIndex index(x.shape, shape);
  for (int64_t r = 0; r < index.rows(); ++r)
    for (int64_t c = 0; c < index.cols(); ++c)
      out.values[r * index.cols() + c] = x.values[index.rowOffset(r) + c * index.colStep()];
  return out;
}

Const foldTrilu(const Const& x, bool upper, int64_t k) {
  Const out = x;
  const size_t r = x.shape.size();
  const int64_t rows = x.shape[r - 2], cols = x.shape[r - 1];
  for (int64_t o = 0; o < out.numel(); ++o) {
    const int64_t j = o % cols, i = (o / cols) % rows;
    if (upper ? j - i < k : j - i > k) out.values[o] = 0.0;
  }
  return out;
}

}  // namespace mt::onnximport
