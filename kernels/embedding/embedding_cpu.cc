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

namespace {

// out[i] = table[ids[i] - first] where that row is in the table's `rows` rows, else `in`'s row
// (zeros if null); `readRow(row, dst)` copies a row of the table.
template <typename ReadRow>
void lookupRows(const Tensor& ids, int64_t rows, int64_t width, int64_t first, const float* in, const Tensor& out,
                ReadRow readRow) {
  const int64_t n = ids.numel();
#pragma omp parallel for schedule(static) if (n * width > 32768)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = ids.i32()[i] - first;
    float* dst = out.f32() + i * width;
    if (row >= 0 && row < rows)
      readRow(row, dst);
    else if (in)
      std::copy(in + i * width, in + (i + 1) * width, dst);
    else
      std::fill(dst, dst + width, 0.0f);
  }
}

// ... from a table on the device (a kernel's operand).
void lookupRows(const Tensor& ids, const Tensor& table, int64_t first, const float* in, const Tensor& out) {
  const int64_t width = table.dim(1);
  lookupRows(ids, table.dim(0), width, first, in, out, [&](int64_t row, float* dst) {
    std::copy(table.f32() + row * width, table.f32() + (row + 1) * width, dst);
  });
}

// dtable[row] = sum of dout over the tokens whose id is first + row, but not `padding` (added
// to dtable's contents if `accumulate`).
void scatterRows(const Tensor& ids, const Tensor& dout, int64_t first, int64_t padding, const Tensor& dtable,
                 bool accumulate = false) {
  const int64_t n = ids.numel(), rows = dtable.dim(0), width = dtable.dim(1);
  float* table = dtable.f32();
  // Parallel over column blocks: every table element accumulates its rows in token order,
  // so the result does not depend on the thread count.
  constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < width; c0 += kBlock) {
    const int64_t c1 = std::min(width, c0 + kBlock);
    if (!accumulate)
      for (int64_t v = 0; v < rows; ++v) std::fill(table + v * width + c0, table + v * width + c1, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = ids.i32()[i] - first;
      if (row < 0 || row >= rows || ids.i32()[i] == padding) continue;
      const float* src = dout.f32() + i * width;
      float* dst = table + row * width;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  }
}

}  // namespace

void embedding_cpu(const KernelArgs& args) { lookupRows(args.in[0], args.in[1], 0, nullptr, args.out[0]); }

void embedding_lookup_host(const Tensor& ids, const MasterWeights& table, int64_t vocab, const Tensor& rows) {
  const int64_t width = rows.shape.back();
  lookupRows(ids, vocab, width, 0, nullptr, rows,
             [&](int64_t row, float* dst) { read_master(table, row * width, width, dst); });
}

void embedding_grad_host(const Tensor& ids, const Tensor& rows, const Tensor& grad, bool accumulate,
                         int64_t padding_id) {
  scatterRows(ids, rows, 0, padding_id, grad, accumulate);
}

namespace {

// A table gradient's operands: mt.embedding_grad's and mt.embedding_grad_chunk's.
std::string checkTableGradient(const KernelArgs& args) {
  const Tensor &ids = args.in[0], &dout = args.in[1], &dtable = args.out[0];
  MT_CHECK(expectDType(ids, DType::I32, "embedding_grad ids"));
  MT_CHECK(expectDType(dout, DType::F32, "embedding_grad dout"));
  MT_CHECK(expectDType(dtable, DType::F32, "embedding_grad result"));
  if (dtable.rank() != 2) return "embedding_grad result must be rank 2";
  std::vector<int64_t> expected = ids.shape;
  expected.push_back(dtable.dim(1));
  return expectShape(dout, expected, "embedding_grad dout");
}

}  // namespace

std::string embedding_grad_check(const KernelArgs& args) {
  if (args.ints.size() > 1) return "embedding_grad takes int[(padding_id)]";
  MT_CHECK(checkTableGradient(args));
  const int64_t padding = embeddingPaddingId(args, 0);
  return args.ints.size() == 1 && (padding < 0 || padding >= args.out[0].dim(0))
             ? "embedding_grad: padding_id " + std::to_string(padding) + " is not a row of the table"
             : "";
}

void embedding_grad_cpu(const KernelArgs& args) {
  scatterRows(args.in[0], args.in[1], 0, embeddingPaddingId(args, 0), args.out[0]);
}

std::string embedding_chunk_check(const KernelArgs& args) {
  MT_CHECK(embedding_check(args));
  MT_CHECK(expectDType(args.in[2], DType::F32, "embedding_chunk in"));
  MT_CHECK(expectShape(args.in[2], args.out[0].shape, "embedding_chunk in"));
  return args.ints[0] < 0 ? "embedding_chunk: the chunk's first id must not be negative" : "";
}

void embedding_chunk_cpu(const KernelArgs& args) {
  lookupRows(args.in[0], args.in[1], args.ints[0], args.in[2].f32(), args.out[0]);
}

std::string embedding_grad_chunk_check(const KernelArgs& args) {
  if (args.ints.empty() || args.ints.size() > 2) return "embedding_grad_chunk takes int[first(, padding_id)]";
  MT_CHECK(checkTableGradient(args));
  if (args.ints[0] < 0) return "embedding_grad_chunk: the chunk's first id must not be negative";
  return args.ints.size() == 2 && args.ints[1] < 0 ? "embedding_grad_chunk: padding_id must not be negative" : "";
}

void embedding_grad_chunk_cpu(const KernelArgs& args) {
  scatterRows(args.in[0], args.in[1], args.ints[0], embeddingPaddingId(args, 1), args.out[0]);
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
