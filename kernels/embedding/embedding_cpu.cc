#include <algorithm>

#include "kernels/embedding/embedding.h"

namespace mt {

std::string embedding_check(const KernelArgs& args) {
  const Tensor &ids = args.in[0], &table = args.in[1], &out = args.out[0];
  MT_CHECK(expectDType(ids, DType::I32, "embedding ids"));
  MT_CHECK(expectDType(table, DType::F32, "embedding table"));
  MT_CHECK(expectDType(out, DType::F32, "embedding result"));
  if (table.rank() != 2) return "embedding table must be rank 2, got " + shapeString(table.shape);
  std::vector<int64_t> expected = ids.shape;
  expected.push_back(table.dim(1));
  return expectShape(out, expected, "embedding result");
}

void embedding_cpu(const KernelArgs& args) {
  const Tensor &ids = args.in[0], &table = args.in[1], &out = args.out[0];
  const int64_t n = ids.numel(), vocab = table.dim(0), width = table.dim(1);
#pragma omp parallel for schedule(static) if (n * width > 32768)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids.i32()[i];
    float* dst = out.f32() + i * width;
    if (id < 0 || id >= vocab) {
      std::fill(dst, dst + width, 0.0f);
    } else {
      std::copy(table.f32() + id * width, table.f32() + (id + 1) * width, dst);
    }
  }
}

std::string embedding_grad_check(const KernelArgs& args) {
  const Tensor &ids = args.in[0], &dout = args.in[1], &dtable = args.out[0];
  MT_CHECK(expectDType(ids, DType::I32, "embedding_grad ids"));
  MT_CHECK(expectDType(dout, DType::F32, "embedding_grad dout"));
  MT_CHECK(expectDType(dtable, DType::F32, "embedding_grad result"));
  if (dtable.rank() != 2) return "embedding_grad result must be rank 2";
  std::vector<int64_t> expected = ids.shape;
  expected.push_back(dtable.dim(1));
  return expectShape(dout, expected, "embedding_grad dout");
}

void embedding_grad_cpu(const KernelArgs& args) {
  const Tensor &ids = args.in[0], &dout = args.in[1], &dtable = args.out[0];
  const int64_t n = ids.numel(), vocab = dtable.dim(0), width = dtable.dim(1);
  float* table = dtable.f32();
  // Parallel over column blocks: every table element accumulates its rows in token order,
  // so the result does not depend on the thread count.
  constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < width; c0 += kBlock) {
    const int64_t c1 = std::min(width, c0 + kBlock);
    for (int64_t v = 0; v < vocab; ++v) std::fill(table + v * width + c0, table + v * width + c1, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = ids.i32()[i];
      if (id < 0 || id >= vocab) continue;
      const float* src = dout.f32() + i * width;
      float* dst = table + id * width;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  }
}

std::string positions_check(const KernelArgs& args) {
  MT_CHECK(expectDType(args.out[0], DType::I32, "positions result"));
  if (args.out[0].rank() != 2) return "positions result must be (B, T)";
  return "";
}

void positions_cpu(const KernelArgs& args) {
  const Tensor& out = args.out[0];
  const int64_t rows = out.dim(0), seq = out.dim(1);
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t t = 0; t < seq; ++t) out.i32()[b * seq + t] = static_cast<int32_t>(t);
}

}  // namespace mt
