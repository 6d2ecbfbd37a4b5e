#include "compiler/onnx/ConstFold.h"

#include <algorithm>

namespace mt::onnximport {
namespace {

std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

// Offset into a tensor of `shape` (broadcast into `out`) of the flat index `o` of `out`.
int64_t broadcastOffset(int64_t o, const std::vector<int64_t>& out, const std::vector<int64_t>& shape) {
  const size_t lead = out.size() - shape.size();
  int64_t offset = 0, stride = 1;
  for (size_t i = out.size(); i-- > 0;) {
    const int64_t index = o % out[i];
    o /= out[i];
    if (i < lead) continue;
    const int64_t d = shape[i - lead];
    if (d != 1) offset += index * stride;
    stride *= d;
  }
  return offset;
}

}  // namespace

std::vector<int64_t> broadcastShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                    const std::string& what) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) malformed(what + ": operand shapes do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Const foldElementwise(const std::vector<const Const*>& operands, Const::Kind kind,
                      const std::function<double(const double*)>& f, const std::string& what) {
  Const out;
  out.kind = kind;
  for (const Const* c : operands) out.sources.insert(c->sources.begin(), c->sources.end());
  for (const Const* c : operands) out.shape = broadcastShape(out.shape, c->shape, what);
  const int64_t n = checkedFoldNumel(out.shape, what);
  out.values.resize(n);
  std::vector<double> args(operands.size());
  for (int64_t o = 0; o < n; ++o) {
    for (size_t k = 0; k < operands.size(); ++k)
      args[k] = operands[k]->values[broadcastOffset(o, out.shape, operands[k]->shape)];
    out.values[o] = f(args.data());
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
  for (int64_t o = 0; o < out.numel(); ++o) out.values[o] = x.values[broadcastOffset(o, shape, x.shape)];
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
