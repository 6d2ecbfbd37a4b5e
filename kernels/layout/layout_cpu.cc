#include <algorithm>
#include <cstring>

#include "kernels/layout/layout.h"

namespace mt {
namespace {

std::string wordTypes(const Tensor& a, const Tensor& out, const char* op) {
  if (a.dtype == DType::BF16 || out.dtype != a.dtype) return std::string(op) + ": f32 or i32, the same in and out";
  return "";
}

std::string axisCheck(int64_t axis, int rank, const char* op) {
  if (axis < 0 || axis >= rank)
    return std::string(op) + ": axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank);
  return "";
}

// The shape gather gives: data's with `axis` replaced by the indices' shape.
std::vector<int64_t> gatherShape(const Tensor& data, const Tensor& indices, int64_t axis) {
  std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  return shape;
}

// Starts and steps of a slice call, with the check that every read lies inside `x`.
std::string sliceCheck(const Tensor& x, const Tensor& out, const std::vector<int64_t>& ints, const char* op) {
  MT_CHECK(wordTypes(x, out, op));
  const int rank = x.rank();
  if (static_cast<int>(ints.size()) != 2 * rank || out.rank() != rank)
    return std::string(op) + ": needs a start and a step per dimension";
  for (int d = 0; d < rank; ++d) {
    const int64_t start = ints[d], step = ints[rank + d], size = out.shape[d];
    if (step == 0 || size < 0) return std::string(op) + ": zero step or negative size";
    if (size == 0) continue;
    const int64_t last = start + (size - 1) * step;
    if (start < 0 || start >= x.shape[d] || last < 0 || last >= x.shape[d])
      return std::string(op) + ": dimension " + std::to_string(d) + " reads outside the input";
  }
  return "";
}

// Calls f(out_offset, x_offset) for every element of the slice.
template <typename F>
void forSlice(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& out_shape,
              const std::vector<int64_t>& ints, F f) {
  const int rank = static_cast<int>(x_shape.size());
  std::vector<int64_t> x_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) x_strides[d] = x_strides[d + 1] * x_shape[d + 1];
  int64_t n = 1;
  for (int64_t d : out_shape) n *= d;
  for (int64_t o = 0; o < n; ++o) {
    int64_t rem = o, offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      offset += (ints[d] + (rem % out_shape[d]) * ints[rank + d]) * x_strides[d];
      rem /= out_shape[d];
    }
    f(o, offset);
  }
}

}  // namespace

std::string gather_check(const KernelArgs& args) {
  const Tensor &data = args.in[0], &indices = args.in[1], &out = args.out[0];
  MT_CHECK(wordTypes(data, out, "gather"));
  MT_CHECK(expectDType(indices, DType::I32, "gather indices"));
  MT_CHECK(axisCheck(args.ints[0], data.rank(), "gather"));
  return expectShape(out, gatherShape(data, indices, args.ints[0]), "gather result");
}
void gather_cpu(const KernelArgs& args) {
  const Tensor &data = args.in[0], &indices = args.in[1], &out = args.out[0];
  const AxisExtents s = extentsAround(data.shape, args.ints[0]);
  const int64_t n = indices.numel();
  const uint32_t* src = static_cast<const uint32_t*>(data.data);
  uint32_t* dst = static_cast<uint32_t*>(out.data);
#pragma omp parallel for schedule(static) if (s.outer * n * s.inner > 32768)
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      uint32_t* row = dst + (o * n + j) * s.inner;
      const int64_t i = normalisedIndex(indices.i32()[j], s.axis);
      if (i < 0) std::fill(row, row + s.inner, 0u);
      else std::memcpy(row, src + (o * s.axis + i) * s.inner, s.inner * 4);
    }
}

std::string gather_grad_check(const KernelArgs& args) {
  const Tensor &indices = args.in[0], &dy = args.in[1], &ddata = args.out[0];
  MT_CHECK(expectDType(indices, DType::I32, "gather_grad indices"));
  MT_CHECK(expectDType(dy, DType::F32, "gather_grad dy"));
  MT_CHECK(expectDType(ddata, DType::F32, "gather_grad result"));
  MT_CHECK(axisCheck(args.ints[0], ddata.rank(), "gather_grad"));
  return expectShape(dy, gatherShape(ddata, indices, args.ints[0]), "gather_grad dy");
}
void gather_grad_cpu(const KernelArgs& args) {
  const Tensor &indices = args.in[0], &dy = args.in[1], &ddata = args.out[0];
  const AxisExtents s = extentsAround(ddata.shape, args.ints[0]);
  const int64_t n = indices.numel();
  float* dst = ddata.f32();
  std::fill(dst, dst + ddata.numel(), 0.0f);
  // Serial over indices so repeated indices sum in a fixed order (deterministic).
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = normalisedIndex(indices.i32()[j], s.axis);
      if (i < 0) continue;
      const float* g = dy.f32() + (o * n + j) * s.inner;
      float* row = dst + (o * s.axis + i) * s.inner;
      for (int64_t c = 0; c < s.inner; ++c) row[c] += g[c];
    }
}

std::string concat_check(const KernelArgs& args) {
  const Tensor &a = args.in[0], &b = args.in[1], &out = args.out[0];
  MT_CHECK(wordTypes(a, out, "concat"));
  MT_CHECK(wordTypes(b, out, "concat"));
  const int64_t axis = args.ints[0];
  MT_CHECK(axisCheck(axis, a.rank(), "concat"));
  if (b.rank() != a.rank()) return "concat: operands of different rank";
  std::vector<int64_t> shape = a.shape;
  for (int d = 0; d < a.rank(); ++d)
    if (d != axis && a.shape[d] != b.shape[d]) return "concat: operands differ outside the axis";
  shape[axis] += b.shape[axis];
  return expectShape(out, shape, "concat result");
}
void concat_cpu(const KernelArgs& args) {
  const Tensor &a = args.in[0], &b = args.in[1], &out = args.out[0];
  const AxisExtents sa = extentsAround(a.shape, args.ints[0]), sb = extentsAround(b.shape, args.ints[0]);
  const int64_t ra = sa.axis * sa.inner, rb = sb.axis * sb.inner;
  const uint32_t* pa = static_cast<const uint32_t*>(a.data);
  const uint32_t* pb = static_cast<const uint32_t*>(b.data);
  uint32_t* po = static_cast<uint32_t*>(out.data);
  for (int64_t o = 0; o < sa.outer; ++o) {
    std::memcpy(po + o * (ra + rb), pa + o * ra, ra * 4);
    std::memcpy(po + o * (ra + rb) + ra, pb + o * rb, rb * 4);
  }
}

std::string slice_check(const KernelArgs& args) {
  return sliceCheck(args.in[0], args.out[0], args.ints, "slice");
}
void slice_cpu(const KernelArgs& args) {
  const uint32_t* src = static_cast<const uint32_t*>(args.in[0].data);
  uint32_t* dst = static_cast<uint32_t*>(args.out[0].data);
  forSlice(args.in[0].shape, args.out[0].shape, args.ints, [&](int64_t o, int64_t x) { dst[o] = src[x]; });
}

std::string slice_grad_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::F32, "slice_grad dy"));
  // The slice read the result's shape into dy's: the same bounds check, roles swapped.
  return sliceCheck(args.out[0], args.in[0], args.ints, "slice_grad");
}
void slice_grad_cpu(const KernelArgs& args) {
  const float* dy = args.in[0].f32();
  float* dx = args.out[0].f32();
  std::fill(dx, dx + args.out[0].numel(), 0.0f);
  // Distinct output elements read distinct input elements (non-zero steps): no accumulation.
  forSlice(args.out[0].shape, args.in[0].shape, args.ints, [&](int64_t o, int64_t x) { dx[x] = dy[o]; });
}

std::string trilu_check(const KernelArgs& args) {
  MT_CHECK(wordTypes(args.in[0], args.out[0], "trilu"));
  MT_CHECK(expectRankAtLeast(args.in[0], 2, "trilu input"));
  if (args.ints[0] != 0 && args.ints[0] != 1) return "trilu: upper must be 0 or 1";
  return expectShape(args.out[0], args.in[0].shape, "trilu result");
}
void trilu_cpu(const KernelArgs& args) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const bool upper = args.ints[0];
  const int64_t k = args.ints[1], rows = x.dim(-2), cols = x.dim(-1);
  const int64_t mats = rows * cols != 0 ? x.numel() / (rows * cols) : 0;
  const uint32_t* src = static_cast<const uint32_t*>(x.data);
  uint32_t* dst = static_cast<uint32_t*>(out.data);
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t at = (m * rows + i) * cols + j;
        const bool keep = upper ? j - i >= k : j - i <= k;
        dst[at] = keep ? src[at] : 0u;
      }
}

}  // namespace mt
