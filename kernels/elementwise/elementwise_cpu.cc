#include <algorithm>
#include <cstring>

#include "kernels/broadcast.h"
#include "kernels/elementwise/elementwise.h"

namespace mt {
namespace {

std::string broadcastBinaryCheck(const KernelArgs& args, const char* op) {
  const Tensor &a = args.in[0], &b = args.in[1], &out = args.out[0];
  MT_CHECK(expectDType(a, DType::F32, op));
  MT_CHECK(expectDType(b, DType::F32, op));
  MT_CHECK(expectDType(out, DType::F32, op));
  if (!isSuffix(b.shape, a.shape))
    return std::string(op) + ": rhs shape " + shapeString(b.shape) +
           " must equal the lhs shape or a suffix of it " + shapeString(a.shape);
  return expectShape(out, a.shape, op);
}

template <typename F>
void broadcastBinary(const KernelArgs& args, F f) {
  const float* a = args.in[0].f32();
  const float* b = args.in[1].f32();
  float* out = args.out[0].f32();
  const int64_t n = args.in[0].numel(), inner = args.in[1].numel();
  if (inner == 0) return;
  const int64_t rows = n / inner;
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = a + r * inner;
    float* o = out + r * inner;
#pragma omp simd
    for (int64_t i = 0; i < inner; ++i) o[i] = f(ar[i], b[i]);
  }
}

}  // namespace

std::string add_check(const KernelArgs& args) { return broadcastBinaryCheck(args, "add"); }
void add_cpu(const KernelArgs& args) {
  broadcastBinary(args, [](float x, float y) { return x + y; });
}

std::string mul_check(const KernelArgs& args) { return broadcastBinaryCheck(args, "mul"); }
void mul_cpu(const KernelArgs& args) {
  broadcastBinary(args, [](float x, float y) { return x * y; });
}

std::string scale_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::F32, "scale input"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "scale result"));
  return expectShape(args.out[0], args.in[0].shape, "scale result");
}
void scale_cpu(const KernelArgs& args) {
  const float* x = args.in[0].f32();
  float* out = args.out[0].f32();
  const float factor = args.floats[0];
  const int64_t n = args.in[0].numel();
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * factor;
}

std::string sum_to_check(const KernelArgs& args) {
  const Tensor &x = args.in[0], &out = args.out[0];
  MT_CHECK(expectDType(x, DType::F32, "sum_to input"));
  MT_CHECK(expectDType(out, DType::F32, "sum_to result"));
  if (!broadcastsTo(out.shape, x.shape))
    return "sum_to result shape " + shapeString(out.shape) + " must broadcast to the input shape " +
           shapeString(x.shape);
  return "";
}
void sum_to_cpu(const KernelArgs& args) {
  const float* x = args.in[0].f32();
  float* out = args.out[0].f32();
  if (!isSuffix(args.out[0].shape, args.in[0].shape)) {
    // Size-1 dimensions inside the shape (a keepdims reduction): serial, in input order.
    const BroadcastIndex index(args.out[0].shape, args.in[0].shape);
    std::fill(out, out + args.out[0].numel(), 0.0f);
    for (int64_t r = 0; r < index.rows(); ++r) {
      float* row = out + index.rowOffset(r);
      for (int64_t c = 0; c < index.cols(); ++c) row[c * index.colStep()] += x[r * index.cols() + c];
    }
    return;
  }
  const int64_t inner = args.out[0].numel();
  if (inner == 0) return;
  const int64_t rows = args.in[0].numel() / inner;
  // Parallel over output columns so each output element is summed in a fixed row order:
  // deterministic for any thread count.
  constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < inner; c0 += kBlock) {
    const int64_t c1 = std::min(inner, c0 + kBlock);
    for (int64_t c = c0; c < c1; ++c) out[c] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * inner;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) out[c] += xr[c];
    }
  }
}

std::string fill_check(const KernelArgs& args) {
  return expectDType(args.out[0], DType::F32, "fill result");
}
void fill_cpu(const KernelArgs& args) {
  std::fill(args.out[0].f32(), args.out[0].f32() + args.out[0].numel(), args.floats[0]);
}

std::string transpose_check(const KernelArgs& args) {
  const Tensor &x = args.in[0], &out = args.out[0];
  if (x.dtype != out.dtype) return "transpose must keep the dtype";
  if (static_cast<int>(args.ints.size()) != x.rank())
    return "transpose permutation has " + std::to_string(args.ints.size()) +
           " entries for a rank-" + std::to_string(x.rank()) + " input";
  std::vector<bool> seen(x.rank(), false);
  std::vector<int64_t> expected;
  for (int64_t p : args.ints) {
    if (p < 0 || p >= x.rank() || seen[p]) return "transpose permutation is not a permutation";
    seen[p] = true;
    expected.push_back(x.shape[p]);
  }
  return expectShape(out, expected, "transpose result");
}
void transpose_cpu(const KernelArgs& args) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int rank = x.rank();
  const int64_t n = x.numel();
  const size_t elem = dtypeSize(x.dtype);
  std::vector<int64_t> in_strides(rank, 1);
  for (int i = rank - 2; i >= 0; --i) in_strides[i] = in_strides[i + 1] * x.shape[i + 1];
  // Stride in the input of each output dimension.
  std::vector<int64_t> strides(rank);
  for (int i = 0; i < rank; ++i) strides[i] = in_strides[args.ints[i]];
  const char* src = static_cast<const char*>(x.data);
  char* dst = static_cast<char*>(out.data);
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t o = 0; o < n; ++o) {
    int64_t rem = o, offset = 0;
    for (int i = rank - 1; i >= 0; --i) {
      offset += (rem % out.shape[i]) * strides[i];
      rem /= out.shape[i];
    }
    std::copy(src + offset * elem, src + (offset + 1) * elem, dst + o * elem);
  }
}

std::string widen_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::BF16, "widen input"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "widen result"));
  return expectShape(args.out[0], args.in[0].shape, "widen result");
}

void widen_cpu(const KernelArgs& args) {
  widen_bf16(static_cast<const uint16_t*>(args.in[0].data), args.out[0].f32(), args.in[0].numel());
}

void widen_bf16(const uint16_t* x, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) out[i] = bf16Value(x[i]);
}

std::string narrow_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::F32, "narrow input"));
  MT_CHECK(expectDType(args.out[0], DType::BF16, "narrow result"));
  return expectShape(args.out[0], args.in[0].shape, "narrow result");
}

void narrow_cpu(const KernelArgs& args) {
  round_to_bf16(args.in[0].f32(), static_cast<uint16_t*>(args.out[0].data), args.in[0].numel());
}

void round_to_bf16(const float* x, uint16_t* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) out[i] = bf16Bits(x[i]);
}

}  // namespace mt
