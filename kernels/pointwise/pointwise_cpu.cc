#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/broadcast.h"
#include "kernels/pointwise/pointwise.h"

namespace mt {
namespace {

constexpr int64_t kParallelMin = 32768;

std::string checkFn(const KernelArgs& args, size_t count, const char* op) {
  if (args.ints[0] < 0 || args.ints[0] >= static_cast<int64_t>(count))
    return std::string(op) + ": unknown function " + std::to_string(args.ints[0]);
  return "";
}

// Applies f(a_elem, b_elem) -> out for `a` and `b` broadcast to out's shape.
template <typename T, typename F>
void forBroadcastPair(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const BroadcastIndex ia(a.shape, out.shape), ib(b.shape, out.shape);
  const T* pa = static_cast<const T*>(a.data);
  const T* pb = static_cast<const T*>(b.data);
  const int64_t cols = ia.cols(), sa = ia.colStep(), sb = ib.colStep();
#pragma omp parallel for schedule(static) if (out.numel() > kParallelMin)
  for (int64_t r = 0; r < ia.rows(); ++r) {
    const T* ra = pa + ia.rowOffset(r);
    const T* rb = pb + ib.rowOffset(r);
    for (int64_t c = 0; c < cols; ++c) f(r * cols + c, ra[c * sa], rb[c * sb]);
  }
}

std::string broadcastPairCheck(const Tensor& a, const Tensor& b, const Tensor& out, const char* op) {
  std::vector<int64_t> shape;
  if (!broadcastShapes(a.shape, b.shape, &shape))
    return std::string(op) + ": shapes " + shapeString(a.shape) + " and " + shapeString(b.shape) +
           " do not broadcast";
  return expectShape(out, shape, op);
}

}  // namespace

std::string unary_check(const KernelArgs& args) {
  MT_CHECK(checkFn(args, std::size(kUnaryFnNames), "unary"));
  MT_CHECK(expectDType(args.in[0], DType::F32, "unary input"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "unary result"));
  return expectShape(args.out[0], args.in[0].shape, "unary result");
}
void unary_cpu(const KernelArgs& args) {
  const auto fn = static_cast<UnaryFn>(args.ints[0]);
  const float* x = args.in[0].f32();
  float* out = args.out[0].f32();
  const int64_t n = args.in[0].numel();
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = applyUnary(fn, x[i]);
}

std::string unary_grad_check(const KernelArgs& args) {
  MT_CHECK(checkFn(args, std::size(kUnaryFnNames), "unary_grad"));
  for (const Tensor* t : {&args.in[0], &args.in[1], &args.out[0]}) {
    MT_CHECK(expectDType(*t, DType::F32, "unary_grad operand"));
    MT_CHECK(expectShape(*t, args.in[1].shape, "unary_grad operand"));
  }
  return "";
}
void unary_grad_cpu(const KernelArgs& args) {
  const auto fn = static_cast<UnaryFn>(args.ints[0]);
  const float *dy = args.in[0].f32(), *x = args.in[1].f32();
  float* dx = args.out[0].f32();
  const int64_t n = args.in[1].numel();
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * unaryDerivative(fn, x[i]);
}

std::string clamp_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.in[0], DType::F32, "clamp input"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "clamp result"));
  return expectShape(args.out[0], args.in[0].shape, "clamp result");
}
void clamp_cpu(const KernelArgs& args) {
  const float *x = args.in[0].f32(), lo = args.floats[0], hi = args.floats[1];
  float* out = args.out[0].f32();
  const int64_t n = args.in[0].numel();
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = applyClamp(x[i], lo, hi);
}

std::string clamp_grad_check(const KernelArgs& args) {
  for (const Tensor* t : {&args.in[0], &args.in[1], &args.out[0]}) {
    MT_CHECK(expectDType(*t, DType::F32, "clamp_grad operand"));
    MT_CHECK(expectShape(*t, args.in[1].shape, "clamp_grad operand"));
  }
  return "";
}
void clamp_grad_cpu(const KernelArgs& args) {
  const float *dy = args.in[0].f32(), *x = args.in[1].f32(), lo = args.floats[0], hi = args.floats[1];
  float* dx = args.out[0].f32();
  const int64_t n = args.in[1].numel();
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = clampPasses(x[i], lo, hi) ? dy[i] : 0.0f;
}

std::string binary_check(const KernelArgs& args) {
  MT_CHECK(checkFn(args, std::size(kBinaryFnNames), "binary"));
  for (const Tensor* t : {&args.in[0], &args.in[1], &args.out[0]})
    MT_CHECK(expectDType(*t, DType::F32, "binary operand"));
  return broadcastPairCheck(args.in[0], args.in[1], args.out[0], "binary result");
}
void binary_cpu(const KernelArgs& args) {
  const auto fn = static_cast<BinaryFn>(args.ints[0]);
  float* out = args.out[0].f32();
  forBroadcastPair<float>(args.in[0], args.in[1], args.out[0],
                          [&](int64_t o, float a, float b) { out[o] = applyBinary(fn, a, b); });
}

std::string binary_grad_check(const KernelArgs& args) {
  MT_CHECK(checkFn(args, std::size(kBinaryFnNames), "binary_grad"));
  for (const Tensor* t : {&args.in[0], &args.in[1], &args.in[2], &args.out[0], &args.out[1]})
    MT_CHECK(expectDType(*t, DType::F32, "binary_grad operand"));
  MT_CHECK(broadcastPairCheck(args.in[1], args.in[2], args.in[0], "binary_grad dy"));
  MT_CHECK(expectShape(args.out[0], args.in[0].shape, "binary_grad da"));
  return expectShape(args.out[1], args.in[0].shape, "binary_grad db");
}
void binary_grad_cpu(const KernelArgs& args) {
  const auto fn = static_cast<BinaryFn>(args.ints[0]);
  const float* dy = args.in[0].f32();
  float *da = args.out[0].f32(), *db = args.out[1].f32();
  forBroadcastPair<float>(args.in[1], args.in[2], args.in[0],
                          [&](int64_t o, float a, float b) { binaryGradient(fn, dy[o], a, b, da[o], db[o]); });
}

std::string where_check(const KernelArgs& args) {
  const Tensor &cond = args.in[0], &a = args.in[1], &b = args.in[2], &out = args.out[0];
  MT_CHECK(expectDType(cond, DType::I32, "where condition"));
  if (a.dtype == DType::BF16 || b.dtype != a.dtype || out.dtype != a.dtype)
    return "where: both branches and the result must be f32, or all i32";
  std::vector<int64_t> ab, shape;
  if (!broadcastShapes(a.shape, b.shape, &ab) || !broadcastShapes(cond.shape, ab, &shape))
    return "where: the condition and branch shapes do not broadcast";
  return expectShape(out, shape, "where result");
}
void where_cpu(const KernelArgs& args) {
  const Tensor &cond = args.in[0], &a = args.in[1], &b = args.in[2], &out = args.out[0];
  // Both dtypes are 4-byte words: select the bits.
  const BroadcastIndex ic(cond.shape, out.shape), ia(a.shape, out.shape), ib(b.shape, out.shape);
  const int32_t* pc = cond.i32();
  const uint32_t* pa = static_cast<const uint32_t*>(a.data);
  const uint32_t* pb = static_cast<const uint32_t*>(b.data);
  uint32_t* po = static_cast<uint32_t*>(out.data);
  const int64_t cols = ic.cols();
#pragma omp parallel for schedule(static) if (out.numel() > kParallelMin)
  for (int64_t r = 0; r < ic.rows(); ++r) {
    const int32_t* rc = pc + ic.rowOffset(r);
    const uint32_t* ra = pa + ia.rowOffset(r);
    const uint32_t* rb = pb + ib.rowOffset(r);
    for (int64_t c = 0; c < cols; ++c)
      po[r * cols + c] = rc[c * ic.colStep()] ? ra[c * ia.colStep()] : rb[c * ib.colStep()];
  }
}

std::string broadcast_check(const KernelArgs& args) {
  const Tensor &x = args.in[0], &out = args.out[0];
  if (x.dtype == DType::BF16 || out.dtype != x.dtype) return "broadcast: f32 or i32, the same in and out";
  if (!broadcastsTo(x.shape, out.shape))
    return "broadcast: " + shapeString(x.shape) + " does not broadcast to " + shapeString(out.shape);
  return "";
}
void broadcast_cpu(const KernelArgs& args) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const BroadcastIndex ix(x.shape, out.shape);
  const uint32_t* px = static_cast<const uint32_t*>(x.data);
  uint32_t* po = static_cast<uint32_t*>(out.data);
  const int64_t cols = ix.cols();
#pragma omp parallel for schedule(static) if (out.numel() > kParallelMin)
  for (int64_t r = 0; r < ix.rows(); ++r) {
    const uint32_t* row = px + ix.rowOffset(r);
    for (int64_t c = 0; c < cols; ++c) po[r * cols + c] = row[c * ix.colStep()];
  }
}

std::string cast_check(const KernelArgs& args) {
  const Tensor &x = args.in[0], &out = args.out[0];
  if (x.dtype == DType::BF16 || out.dtype == DType::BF16) return "cast: f32 and i32 only";
  return expectShape(out, x.shape, "cast result");
}
void cast_cpu(const KernelArgs& args) {
  const Tensor &x = args.in[0], &out = args.out[0];
  const int64_t n = x.numel();
  if (x.dtype == out.dtype) {
    std::memcpy(out.data, x.data, x.bytes());
  } else if (x.dtype == DType::I32) {
    for (int64_t i = 0; i < n; ++i) out.f32()[i] = static_cast<float>(x.i32()[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out.i32()[i] = castToI32(x.f32()[i]);
  }
}

}  // namespace mt
