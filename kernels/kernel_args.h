// The uniform launcher signature every kernel family implements: a kernel reads `in`, writes
// `out`, and takes positional attributes as runtime/plan/op_table.def declares them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct CUstream_st;
struct cublasContext;

namespace mt {

// Values match mt.plan.DType.
enum class DType : int32_t { F32 = 0, I32 = 1, BF16 = 2 };

size_t dtypeSize(DType dtype);
const char* dtypeName(DType dtype);

struct Tensor {
  void* data = nullptr;  // null while a plan is being checked
  std::vector<int64_t> shape;
  DType dtype = DType::F32;

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const;
  int64_t bytes() const { return numel() * static_cast<int64_t>(dtypeSize(dtype)); }
  // Dimension counted from the end for negative `i` (dim(-1) is the last).
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  float* f32() const { return static_cast<float*>(data); }
  int32_t* i32() const { return static_cast<int32_t*>(data); }
};

// What a step's random kernels (mt.dropout) draw from. Backends own one, set from
// StepOptions::random before each plan run; every call of the run sees the same values.
struct StepRandomness {
  uint64_t seed = 0;     // the run's seed (mtrun --seed)
  uint64_t pass = 0;     // which run of the plan: 0-based over the training's micro-batches
  bool training = true;  // false (evaluation): random kernels are the identity
};

struct KernelArgs {
  std::vector<Tensor> in;
  std::vector<Tensor> out;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  const StepRandomness* random = nullptr;  // set by the backends; read by random kernels only

  // Int attribute `i`, or 0 where the call leaves it out (the attributes an op gained in a later
  // plan version, whose 0 means what plans before it meant: no window, offset 0, expert 0).
  int64_t intOrZero(size_t i) const { return i < ints.size() ? ints[i] : 0; }
  // Input `i`'s f32 data, or null where the call leaves that optional input out (a mask).
  const float* optionalF32(size_t i) const { return i < in.size() ? in[i].f32() : nullptr; }
};

// A check returns "" when the call is well-formed, else a message naming what is wrong. It
// must accept exactly the calls the CPU implementation can run without touching memory
// outside the given tensors.
using KernelCheckFn = std::string (*)(const KernelArgs&);
using KernelCpuFn = void (*)(const KernelArgs&);

// CUDA twins take the same arguments (data pointers into device memory) and where to launch:
// a stream and that stream's cuBLAS handle. The handles are declared (outside the namespace)
// as CUDA declares them, so headers need no CUDA include.
using CudaStream = ::CUstream_st*;
class CudnnAttention;  // kernels/attention/attention_cudnn.h
struct CudaLaunch {
  CudaStream stream = nullptr;
  ::cublasContext* blas = nullptr;  // bound to `stream`; exact fp32 math unless mtrun --tf32
  // Set where the run uses cuDNN's fused attention (mtrun --attention auto or cudnn): the calls
  // of mt.attention and mt.attention_grad it takes run through it; with `cudnn_only` every call
  // does, and one it cannot take is refused.
  CudnnAttention* cudnn_attention = nullptr;
  bool cudnn_only = false;
};
using KernelCudaFn = void (*)(const KernelArgs&, const CudaLaunch&);

std::string shapeString(const std::vector<int64_t>& shape);

// Helpers for checks: each returns "" or a message.
std::string expectDType(const Tensor& t, DType dtype, const char* what);
std::string expectShape(const Tensor& t, const std::vector<int64_t>& shape, const char* what);
std::string expectRankAtLeast(const Tensor& t, int rank, const char* what);

// Returns early from a check with the first non-empty message.
#define MT_CHECK(expr)                  \
  do {                                  \
    std::string mt_check_msg_ = (expr); \
    if (!mt_check_msg_.empty()) return mt_check_msg_; \
  } while (0)

// Rows of the last dimension: numel / dim(-1) (1 for a scalar).
int64_t leadingRows(const Tensor& t);

// `shape` around dimension `axis`: the product of the dimensions before it, its own, and the
// product of those after it (an element is at (o * axis + a) * inner + i).
struct AxisExtents {
  int64_t outer = 1, axis = 1, inner = 1;
};
AxisExtents extentsAround(const std::vector<int64_t>& shape, int64_t axis);

// Scalar code shared by a CPU kernel and its CUDA twin.
#ifdef __CUDACC__
#define MT_HOST_DEVICE __host__ __device__
#else
#define MT_HOST_DEVICE
#endif

}  // namespace mt
