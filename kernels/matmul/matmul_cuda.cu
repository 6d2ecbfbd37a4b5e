// CUDA twin of mt.matmul on cuBLAS (f32 operands: default math, no TF32 unless asked; bf16
// operands: tensor cores, f32 accumulation); kernels/matmul/matmul_cpu.cc is the reference.
#include <cublas_v2.h>

#include <climits>

#include "kernels/cuda_common.cuh"
#include "kernels/matmul/matmul.h"

namespace mt {
namespace {

void cublasCheck(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error: ") + cublasGetStatusString(status) + " in " + call);
}
#define MT_CUBLAS_CHECK(call) cublasCheck((call), #call)

}  // namespace

// The cuBLAS data type of a tensor: f32, or bf16 (a bf16 plan's activations and weights).
cudaDataType_t blasType(const Tensor& t) { return t.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

// Row-major out (M, N) = op(A) (M, K) · op(B) (K, N) is, read column-major, outᵀ = op(B)ᵀ op(A)ᵀ:
// cuBLAS gets B first, with the same transpose flags and the row-major leading dimensions.
// Products accumulate in f32 (CUBLAS_COMPUTE_32F; the handle's math mode decides TF32 for f32
// operands: exact unless mtrun --tf32); bf16 operands run on the tensor cores, the result
// stored as bf16 or, for a weight's gradient, f32.
void matmul_cuda(const KernelArgs& args, const CudaLaunch& launch) {
  const Tensor &a = args.in[0], &b = args.in[1], &out = args.out[0];
  const bool ta = args.ints[0], tb = args.ints[1];
  const int64_t m = ta ? a.dim(-1) : a.dim(-2), k = ta ? a.dim(-2) : a.dim(-1), n = tb ? b.dim(-2) : b.dim(-1);
  const bool broadcast_b = b.rank() == 2;
  const int64_t batch = m * k > 0 ? a.numel() / (m * k) : out.numel() / (m * n > 0 ? m * n : 1);
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {
    MT_CUDA_CHECK(cudaMemsetAsync(out.data, 0, out.bytes(), launch.stream));
    return;
  }
  if (!launch.blas) throw std::runtime_error("matmul_cuda needs a cuBLAS handle bound to its stream");
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = static_cast<int>(ta ? m : k), ldb = static_cast<int>(tb ? k : n);
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t in_type = blasType(a), out_type = blasType(out);
  const size_t in_size = dtypeSize(a.dtype), out_size = dtypeSize(out.dtype);
  const char* a_bytes = static_cast<const char*>(a.data);
  char* out_bytes = static_cast<char*>(out.data);
  if (broadcast_b && !ta) {
    // Rows of every batch are contiguous: one product with the batch folded into M, in chunks
    // of at most INT_MAX rows (cuBLAS's sizes are int).
    const int64_t rows = batch * m;
    for (int64_t r = 0; r < rows; r += INT_MAX) {
      const int chunk = static_cast<int>(rows - r < INT_MAX ? rows - r : INT_MAX);
      MT_CUBLAS_CHECK(cublasGemmEx(launch.blas, op_b, op_a, static_cast<int>(n), chunk, static_cast<int>(k), &one,
                                   b.data, in_type, ldb, a_bytes + r * k * in_size, in_type, lda, &zero,
                                   out_bytes + r * n * out_size, out_type, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
    }
    return;
  }
  if (batch > INT_MAX) throw std::runtime_error("matmul_cuda: more than INT_MAX batched products");
  MT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      launch.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one, b.data, in_type,
      ldb, broadcast_b ? 0 : k * n, a.data, in_type, lda, m * k, &zero, out.data, out_type, static_cast<int>(n), m * n,
      static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace mt
