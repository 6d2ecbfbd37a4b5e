// Token and position lookups.
//   mt.embedding:      (ids (...) i32, table (V, C)) -> (..., C); an id outside [0, V) gives a
//                      zero row (the data loader rejects such ids before they get here).
//   mt.embedding_grad: (ids (...) i32, dout (..., C)) -> dtable (V, C), scatter-added;
//                      int[(padding_id)] (plan 1.36): the tokens of that id add nothing.
//   mt.positions:      () -> (B, T) i32 with out[b][t] = t.
// The table in chunks of rows (plan 1.5; a vocabulary too large for the device, streamed by
// row slices), int[first]: the chunk holds ids [first, first + Vc):
//   mt.embedding_chunk:      (ids, table chunk (Vc, C), in (..., C)) -> (..., C): the chunk's
//                            rows where the id is in the chunk, `in` elsewhere.
//   mt.embedding_grad_chunk: (ids, dout (..., C)) -> dtable chunk (Vc, C); int[first(, padding_id)],
//                            the padding id one of the whole table.
#pragma once
#include "kernels/adamw/master_weights.h"
#include "kernels/kernel_args.h"

namespace mt {
std::string embedding_check(const KernelArgs& args);
void embedding_cpu(const KernelArgs& args);
std::string embedding_grad_check(const KernelArgs& args);
void embedding_grad_cpu(const KernelArgs& args);
std::string positions_check(const KernelArgs& args);
void positions_cpu(const KernelArgs& args);
std::string embedding_chunk_check(const KernelArgs& args);
void embedding_chunk_cpu(const KernelArgs& args);
std::string embedding_grad_chunk_check(const KernelArgs& args);
void embedding_grad_chunk_cpu(const KernelArgs& args);

// The padding id of an embedding_grad call, int attribute `at` (embedding_grad's 0, the chunk's 1;
// plan 1.36), or -1 (no token has it) where the call has none.
inline int64_t embeddingPaddingId(const KernelArgs& args, size_t at) {
  return at < args.ints.size() ? args.ints[at] : -1;
}

// The token embedding on the host (plan 1.6 host tasks EMBEDDING_LOOKUP / EMBEDDING_GRAD, run
// by the host stream of every backend): rows = table[ids] as mt.embedding, from the (V, C)
// table's master weights (restored if split); grad[ids] += rows as mt.embedding_grad, onto
// grad's contents if `accumulate` (else from zeros), the tokens of `padding_id` left out (-1: none).
void embedding_lookup_host(const Tensor& ids, const MasterWeights& table, int64_t vocab, const Tensor& rows);
void embedding_grad_host(const Tensor& ids, const Tensor& rows, const Tensor& grad, bool accumulate,
                         int64_t padding_id = -1);

// CUDA twins (kernels/embedding/embedding_cuda.cu), built when CUDA is enabled.
void embedding_cuda(const KernelArgs& args, const CudaLaunch& launch);
void embedding_grad_cuda(const KernelArgs& args, const CudaLaunch& launch);
void positions_cuda(const KernelArgs& args, const CudaLaunch& launch);
void embedding_chunk_cuda(const KernelArgs& args, const CudaLaunch& launch);
void embedding_grad_chunk_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
