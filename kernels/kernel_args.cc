#include "kernel_args.h"

namespace mt {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::I32: return 4;
    case DType::BF16: return 2;
  }
  return 0;
}

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::I32: return "i32";
    case DType::BF16: return "bf16";
  }
  return "?";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string expectDType(const Tensor& t, DType dtype, const char* what) {
  if (t.dtype == dtype) return "";
  return std::string(what) + " must be " + dtypeName(dtype) + ", got " + dtypeName(t.dtype);
}

std::string expectShape(const Tensor& t, const std::vector<int64_t>& shape, const char* what) {
  if (t.shape == shape) return "";
  return std::string(what) + " must have shape " + shapeString(shape) + ", got " +
         shapeString(t.shape);
}

std::string expectRankAtLeast(const Tensor& t, int rank, const char* what) {
  if (t.rank() >= rank) return "";
  return std::string(what) + " must have rank >= " + std::to_string(rank) + ", got " +
         shapeString(t.shape);
}

int64_t leadingRows(const Tensor& t) {
  if (t.rank() == 0 || t.dim(-1) == 0) return 1;
  return t.numel() / t.dim(-1);
}

AxisExtents extentsAround(const std::vector<int64_t>& shape, int64_t axis) {
  AxisExtents e;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    (i < axis ? e.outer : i == axis ? e.axis : e.inner) *= shape[i];
  return e;
}

}  // namespace mt
