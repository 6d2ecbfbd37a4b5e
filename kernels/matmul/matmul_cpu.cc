#include "kernels/matmul/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <limits>

namespace mt {
namespace {

constexpr int64_t kMaxBlasDim = std::numeric_limits<int>::max();

struct MatmulDims {
  int64_t batch, m, k, n;
  bool broadcast_b;  // b is rank 2 and shared by every batch
};

MatmulDims dims(const KernelArgs& args) {
  const Tensor &a = args.in[0], &b = args.in[1];
  bool ta = args.ints[0], tb = args.ints[1];
  MatmulDims d;
  d.m = ta ? a.dim(-1) : a.dim(-2);
  d.k = ta ? a.dim(-2) : a.dim(-1);
  d.n = tb ? b.dim(-2) : b.dim(-1);
  d.broadcast_b = b.rank() == 2;
  d.batch = a.numel() / (d.m * d.k > 0 ? d.m * d.k : 1);
  return d;
}

}  // namespace

std::string matmul_check(const KernelArgs& args) {
  const Tensor &a = args.in[0], &b = args.in[1], &out = args.out[0];
  MT_CHECK(expectDType(a, DType::F32, "matmul lhs"));
  MT_CHECK(expectDType(b, DType::F32, "matmul rhs"));
  MT_CHECK(expectDType(out, DType::F32, "matmul result"));
  MT_CHECK(expectRankAtLeast(a, 2, "matmul lhs"));
  MT_CHECK(expectRankAtLeast(b, 2, "matmul rhs"));
  for (int64_t flag : args.ints)
    if (flag != 0 && flag != 1) return "matmul transpose flags must be 0 or 1";
  bool ta = args.ints[0], tb = args.ints[1];
  if (b.rank() != 2 && b.rank() != a.rank())
    return "matmul rhs must be rank 2 or have the lhs rank, got " + shapeString(b.shape);
  int64_t k_a = ta ? a.dim(-2) : a.dim(-1);
  int64_t k_b = tb ? b.dim(-1) : b.dim(-2);
  if (k_a != k_b)
    return "matmul contraction sizes differ: lhs " + shapeString(a.shape) + ", rhs " +
           shapeString(b.shape);
  std::vector<int64_t> expected(a.shape.begin(), a.shape.end() - 2);
  if (b.rank() == a.rank()) {
    std::vector<int64_t> batch_b(b.shape.begin(), b.shape.end() - 2);
    if (batch_b != expected) return "matmul batch dims differ: " + shapeString(b.shape);
  }
  expected.push_back(ta ? a.dim(-1) : a.dim(-2));
  expected.push_back(tb ? b.dim(-2) : b.dim(-1));
  MT_CHECK(expectShape(out, expected, "matmul result"));
  // BLAS takes 32-bit sizes and leading dimensions; a product with more rows is done in chunks.
  const MatmulDims d = dims(args);
  if (d.m > kMaxBlasDim || d.n > kMaxBlasDim || d.k > kMaxBlasDim)
    return "matmul dimensions exceed 2^31 - 1 (BLAS's limit): " + shapeString(a.shape) + " x " + shapeString(b.shape);
  return "";
}

void matmul_cpu(const KernelArgs& args) {
  const Tensor &a = args.in[0], &b = args.in[1], &out = args.out[0];
  bool ta = args.ints[0], tb = args.ints[1];
  MatmulDims d = dims(args);
  if (d.m == 0 || d.n == 0) return;
  if (d.k == 0) {
    std::fill(out.f32(), out.f32() + out.numel(), 0.0f);
    return;
  }
  auto op_a = ta ? CblasTrans : CblasNoTrans;
  auto op_b = tb ? CblasTrans : CblasNoTrans;
  int lda = static_cast<int>(ta ? d.m : d.k), ldb = static_cast<int>(tb ? d.k : d.n);
  if (d.broadcast_b && !ta) {
    // Rows of every batch are contiguous: products with the batch folded into M, in chunks of
    // at most 2^30 rows (BLAS's 32-bit M).
    const int64_t rows = d.batch * d.m;
    if (rows == 1) {
      // One row (a decode step's token): a matrix-vector product reads the weight once, where
      // sgemm would first pack it (docs/perf.md, generation).
      const int n = static_cast<int>(d.n), k = static_cast<int>(d.k);
      if (tb)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, b.f32(), ldb, a.f32(), 1, 0.0f, out.f32(), 1);
      else
        cblas_sgemv(CblasRowMajor, CblasTrans, k, n, 1.0f, b.f32(), ldb, a.f32(), 1, 0.0f, out.f32(), 1);
      return;
    }
    constexpr int64_t kChunk = int64_t{1} << 30;
    for (int64_t r = 0; r < rows; r += kChunk)
      cblas_sgemm(CblasRowMajor, op_a, op_b, static_cast<int>(std::min(kChunk, rows - r)), static_cast<int>(d.n),
                  static_cast<int>(d.k), 1.0f, a.f32() + r * d.k, lda, b.f32(), ldb, 0.0f, out.f32() + r * d.n,
                  static_cast<int>(d.n));
    return;
  }
  for (int64_t i = 0; i < d.batch; ++i) {
    const float* bp = b.f32() + (d.broadcast_b ? 0 : i * d.k * d.n);
    cblas_sgemm(CblasRowMajor, op_a, op_b, static_cast<int>(d.m), static_cast<int>(d.n),
                static_cast<int>(d.k), 1.0f, a.f32() + i * d.m * d.k, lda, bp, ldb, 0.0f,
                out.f32() + i * d.m * d.n, static_cast<int>(d.n));
  }
}

}  // namespace mt
