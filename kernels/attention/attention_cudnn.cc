// cuDNN's fused flash attention through the backend graph API (attention_cudnn.h). The graphs
// are the patterns cuDNN's documentation gives for its fused attention engines ("flash
// attention" forward and backward): products, a causal mask built from generated row and
// column indices, the softmax as reductions and pointwise steps, the probabilities rounded to
// bf16 as the second product's operand. cuDNN fuses each graph into one kernel or declines it;
// a declined graph is an error naming cuDNN's reason, never a silent fallback.
#include "kernels/attention/attention_cudnn.h"

#include <cudnn.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "kernels/cuda_check.h"

// The handle attributes of the operation graph and the execution plan are deprecated (since 9.8)
// in favour of device properties, which older 9.x libraries lack: the graph's handle works on all.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace mt {
namespace {

[[noreturn]] void fail(const std::string& what, cudnnStatus_t status) {
  char detail[1024] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  throw std::runtime_error("cuDNN attention: " + what + ": " + cudnnGetErrorString(status) +
                           (detail[0] ? std::string(" (") + detail + ")" : std::string()) +
                           "; mtrun --attention ours runs this project's kernels instead");
}

void check(cudnnStatus_t status, const std::string& what) {
  if (status != CUDNN_STATUS_SUCCESS) fail(what, status);
}

// A backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, const char* what) : what_(what) {
    check(cudnnBackendCreateDescriptor(type, &d_), std::string("creating ") + what);
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  template <typename T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, int64_t count = 1) {
    check(cudnnBackendSetAttribute(d_, name, type, count, values),
          std::string("setting attribute ") + std::to_string(name) + " of " + what_);
    return *this;
  }
  Desc& setDesc(cudnnBackendAttributeName_t name, const Desc& other) {
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &other.d_);
  }
  Desc& finalize() {
    check(cudnnBackendFinalize(d_), std::string("finalizing ") + what_);
    return *this;
  }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  const char* what_;
};

enum class Kind { Bf16, F32, I32, Bool };

cudnnDataType_t cudnnType(Kind kind) {
  switch (kind) {
    case Kind::Bf16: return CUDNN_DATA_BFLOAT16;
    case Kind::F32: return CUDNN_DATA_FLOAT;
    case Kind::I32: return CUDNN_DATA_INT32;
    case Kind::Bool: return CUDNN_DATA_BOOLEAN;
  }
  return CUDNN_DATA_FLOAT;
}

using Dims = std::vector<int64_t>;

// Packed strides of dims, the last fastest.
Dims packed(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

}  // namespace

// A graph being built, then its execution plan: every descriptor stays alive as long as the plan.
struct CudnnAttention::Plan {
  std::vector<std::unique_ptr<Desc>> descs;
  std::vector<cudnnBackendDescriptor_t> ops;
  std::unique_ptr<Desc> plan;
  int64_t workspace = 0;
  int64_t next_uid = 1;
  // The uids of the tensors the caller binds, by the kernel's operand (in, then out); the
  // scalars passed by value (uid, value); tensors of the graph that live in the workspace, ahead
  // of cuDNN's own share (uid, offset, bytes), zeroed before each run.
  std::vector<int64_t> bound;
  std::vector<std::pair<int64_t, float>> by_value;
  struct Internal {
    int64_t uid, offset, bytes;
  };
  std::vector<Internal> internal;
  int64_t internal_bytes = 0;

  Desc& make(cudnnBackendDescriptorType_t type, const char* what) {
    descs.push_back(std::make_unique<Desc>(type, what));
    return *descs.back();
  }

  // A tensor: real (bound to memory at run time), virtual (inside the fused kernel only), or a
  // scalar passed by value. Returns its descriptor; its uid is next_uid - 1.
  const Desc& tensor(Kind kind, const Dims& dims, const Dims& strides, bool is_virtual, bool by_value = false) {
    const cudnnDataType_t type = cudnnType(kind);
    const int64_t uid = next_uid++, alignment = 16;
    const bool virt = is_virtual, value = by_value;
    Desc& t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "a tensor");
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), static_cast<int64_t>(dims.size()))
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), static_cast<int64_t>(strides.size()))
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &virt);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &value);
    return t.finalize();
  }
  int64_t lastUid() const { return next_uid - 1; }
  // A tensor the caller binds: operand `slot` of the kernel (its inputs, then its outputs).
  const Desc& operand(size_t slot, Kind kind, const Dims& dims, const Dims& strides) {
    const Desc& t = tensor(kind, dims, strides, false);
    if (bound.size() <= slot) bound.resize(slot + 1, 0);
    bound[slot] = lastUid();
    return t;
  }
  const Desc& inner(Kind kind, const Dims& dims) { return tensor(kind, dims, packed(dims), true); }
  const Desc& scalar(float value) {
    const Dims one{1, 1, 1, 1};
    const Desc& t = tensor(Kind::F32, one, one, false, true);
    by_value.emplace_back(lastUid(), value);
    return t;
  }
  // A tensor of the graph kept in the workspace (f32, packed or as given).
  const Desc& inWorkspace(const Dims& dims, const Dims& strides) {
    const Desc& t = tensor(Kind::F32, dims, strides, false);
    int64_t elements = 1;
    for (int64_t n : dims) elements *= n;
    internal.push_back({lastUid(), internal_bytes, elements * 4});
    internal_bytes += (elements * 4 + 255) / 256 * 256;
    return t;
  }

  void matmul(const Desc& a, const Desc& b, const Desc& c) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    Desc& mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "a product");
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32).finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "a product's operation");
    op.setDesc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .setDesc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .setDesc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .setDesc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm)
        .finalize();
    ops.push_back(op.get());
  }

  // y = mode(x[, b][, t]); precision: the arithmetic's type; axis >= 0 for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y, const Desc* t = nullptr,
                 Kind precision = Kind::F32, int64_t axis = -1) {
    const cudnnDataType_t prec = cudnnType(precision);
    Desc& pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "a pointwise step");
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec);
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    pw.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "a pointwise operation");
    op.setDesc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw).setDesc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) op.setDesc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    op.setDesc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (t) op.setDesc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    const float one = 1.0f;
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, &one)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &one)
        .finalize();
    ops.push_back(op.get());
  }

  void reduction(cudnnReduceTensorOp_t reduce, const Desc& x, const Desc& y) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    Desc& r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "a reduction");
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &reduce)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32);
    if (cudnnGetVersion() >= 91100) {  // the attribute is 9.11's
      const bool deterministic = false;
      r.set(CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, &deterministic);
    }
    r.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "a reduction's operation");
    op.setDesc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .setDesc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .setDesc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r)
        .finalize();
    ops.push_back(op.get());
  }

  // The causal mask of scores (B, H, T, T): keys after the query's position become -inf.
  const Desc& causalMask(const Desc& scores, const Dims& dims) {
    const Desc& row = inner(Kind::I32, dims);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, row, nullptr, Kind::F32, 2);
    const Desc& col = inner(Kind::I32, dims);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, col, nullptr, Kind::F32, 3);
    const Desc& keep = inner(Kind::Bool, dims);
    pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, keep, nullptr, Kind::Bool);
    // -inf, as cuDNN 9.10 and later want it (the lowest float before).
    const Desc& minus_inf = scalar(cudnnGetVersion() >= 91000 ? -std::numeric_limits<float>::infinity()
                                                              : std::numeric_limits<float>::lowest());
    const Desc& masked = inner(Kind::F32, dims);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, &minus_inf, masked, &keep);
    return masked;
  }

  // Scores Q K^T times the scale (the scalar `scale`), minus `stats` where given (the backward's
  // log-probabilities), causally masked: (B, H, T, T) f32, virtual.
  const Desc& maskedScores(const Desc& q, const Desc& kt, const Desc& scale, const Dims& scores_dims,
                           const Desc* stats = nullptr) {
    const Desc& raw = inner(Kind::F32, scores_dims);
    matmul(q, kt, raw);
    const Desc* scores = &inner(Kind::F32, scores_dims);
    pointwise(CUDNN_POINTWISE_MUL, raw, &scale, *scores);
    if (stats) {
      const Desc& shifted = inner(Kind::F32, scores_dims);
      pointwise(CUDNN_POINTWISE_SUB, *scores, stats, shifted);
      scores = &shifted;
    }
    return causalMask(*scores, scores_dims);
  }
  // y: x's elements seen through y's dims and strides (a transpose, for the products).
  void reshape(const Desc& x, const Desc& y) {
    Desc& op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "a reshape");
    op.setDesc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x).setDesc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y).finalize();
    ops.push_back(op.get());
  }

  void build(cudnnHandle_t handle);
};

namespace {

// Q, O and their gradients (B, T, H*D) as cuDNN's (b, h, s, d); K, V (B, T, Hkv*D) likewise.
Dims tokenMajorStrides(const AttentionShape& d, int64_t heads) {
  return {d.seq * heads * d.head_dim, d.head_dim, heads * d.head_dim, 1};
}

}  // namespace

void CudnnAttention::Plan::build(cudnnHandle_t handle) {
  Desc& graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "the operation graph");
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), static_cast<int64_t>(ops.size()))
      .finalize();
  // The heuristics' engine configurations, best first (mode A, then the fallback list): the
  // first whose plan builds is used; why each failed is kept for the error.
  std::string reasons;
  auto reason = [&](const std::string& what, cudnnStatus_t status) {
    char detail[512] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    reasons += " " + what + ": " + cudnnGetErrorString(status) + (detail[0] ? std::string(" ") + detail : "") + ";";
  };
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const std::string heuristics = "heuristics mode " + std::to_string(mode);
    cudnnBackendDescriptor_t heur_raw = nullptr;
    if (const cudnnStatus_t status = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur_raw);
        status != CUDNN_STATUS_SUCCESS) {
      reason(heuristics, status);
      continue;
    }
    std::unique_ptr<void, void (*)(void*)> heur_owner(heur_raw, [](void* d) {
      cudnnBackendDestroyDescriptor(static_cast<cudnnBackendDescriptor_t>(d));
    });
    const cudnnBackendDescriptor_t graph_raw = graph.get();
    int64_t count = 0;
    cudnnStatus_t status = cudnnBackendSetAttribute(heur_raw, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph_raw);
    if (status == CUDNN_STATUS_SUCCESS)
      status = cudnnBackendSetAttribute(heur_raw, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (status == CUDNN_STATUS_SUCCESS) status = cudnnBackendFinalize(heur_raw);
    if (status == CUDNN_STATUS_SUCCESS)
      status = cudnnBackendGetAttribute(heur_raw, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                        nullptr);
    if (status != CUDNN_STATUS_SUCCESS) {
      reason(heuristics, status);
      continue;
    }
    std::vector<std::unique_ptr<Desc>> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      configs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "an engine configuration"));
      raw.push_back(configs.back()->get());
    }
    int64_t got = 0;
    if (count > 0)
      check(cudnnBackendGetAttribute(heur_raw, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                     raw.data()),
            "reading the heuristics' engines");
    for (int64_t i = 0; i < got; ++i) {
      auto candidate = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "an execution plan");
      const cudnnBackendDescriptor_t config = raw[i];
      // The plan's handle: required before cuDNN 9.8, deprecated since.
      cudnnStatus_t built = CUDNN_STATUS_SUCCESS;
      if (cudnnGetVersion() < 90800)
        built = cudnnBackendSetAttribute(candidate->get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      if (built == CUDNN_STATUS_SUCCESS)
        built = cudnnBackendSetAttribute(candidate->get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config);
      if (built == CUDNN_STATUS_SUCCESS) built = cudnnBackendFinalize(candidate->get());
      if (built != CUDNN_STATUS_SUCCESS) {
        reason(heuristics + " engine " + std::to_string(i), built);
        continue;
      }
      int64_t values = 0;
      check(cudnnBackendGetAttribute(candidate->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                     &values, &workspace),
            "reading the plan's workspace size");
      for (auto& c : configs) descs.push_back(std::move(c));
      plan = std::move(candidate);
      return;
    }
    reasons += " " + heuristics + " offered " + std::to_string(got) + " engines;";
  }
  throw std::runtime_error("cuDNN attention: no engine runs this graph (cuDNN " + std::to_string(cudnnGetVersion()) +
                           "):" + reasons + " mtrun --attention ours runs this project's kernels instead");
}

CudnnAttention::CudnnAttention(CudaStream stream, int64_t workspace_cap)
    : stream_(stream), workspace_cap_(workspace_cap) {
  cudnnHandle_t handle = nullptr;
  check(cudnnCreate(&handle), "creating a handle");
  if (const cudnnStatus_t status = cudnnSetStream(handle, stream); status != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(handle);  // the destructor does not run for a constructor that throws
    fail("binding the handle to its stream", status);
  }
  handle_ = handle;
}

CudnnAttention::~CudnnAttention() {
  plans_.clear();  // the plans before the handle they were built with
  if (workspace_) cudaFree(workspace_);
  if (handle_) cudnnDestroy(handle_);
}

std::string CudnnAttention::unsupported(const Tensor& q, const AttentionShape& d) {
  if (q.dtype != DType::BF16) return "cuDNN's fused attention takes bf16 plans (mtc --precision bf16)";
  if (d.head_dim % 8 != 0 || d.head_dim > 128)
    return "cuDNN's fused attention takes head_dim a multiple of 8 up to 128, not " + std::to_string(d.head_dim);
  if (d.seq < 2) return "cuDNN's fused attention refuses sequences of fewer than two tokens";
  if (d.window != 0) return "this graph of cuDNN's fused attention has no sliding window (our kernels take it)";
  if (d.positions) return "this graph of cuDNN's fused attention does not keep packed examples apart (our kernels do)";
  if (d.softcap > 0.0f) return "this graph of cuDNN's fused attention does not softcap the scores (our kernels do)";
  // Before 9.16 the backward needs a padding mask where T is not a multiple of 128 (cuDNN's own
  // frontend adds one); this graph has none, so those versions take multiples of 128 only.
  if (version() < 91600 && d.seq % 128 != 0)
    return "cuDNN " + std::to_string(version()) + "'s fused attention takes sequences of a multiple of 128 tokens "
           "here, not " + std::to_string(d.seq) + " (cuDNN 9.16 or later takes any)";
  return "";
}

int64_t CudnnAttention::version() { return static_cast<int64_t>(cudnnGetVersion()); }

char* CudnnAttention::workspace(int64_t bytes) {
  if (bytes <= workspace_bytes_) return static_cast<char*>(workspace_);
  // Grown before the first run of a larger plan: the stream's earlier work may still use it.
  MT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (workspace_) MT_CUDA_CHECK(cudaFree(workspace_));
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  if (cudaMalloc(&workspace_, bytes) != cudaSuccess) {
    cudaGetLastError();  // cleared: the error is reported here, not at the next launch
    workspace_ = nullptr;
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw std::runtime_error("cuDNN attention needs " + std::to_string(bytes >> 20) +
                             " MiB of device workspace beside the plan's arena (dq summed in f32), but the GPU has " +
                             std::to_string(free_bytes >> 20) + " MiB free: compile the plan with a --device-mem " +
                             "that much smaller, or run with mtrun --attention ours");
  }
  workspace_bytes_ = bytes;
  return static_cast<char*>(workspace_);
}
}  // namespace mt

namespace mt {
namespace {

struct Shapes {
  Dims q, kv, kt, scores, stats, q_strides, kv_strides, kt_strides, stats_strides;
};

Shapes shapesOf(const AttentionShape& d) {
  const int64_t B = d.batch, T = d.seq, H = d.heads, Hk = d.kv_heads, D = d.head_dim;
  Shapes s;
  s.q = {B, H, T, D};
  s.kv = {B, Hk, T, D};
  s.kt = {B, Hk, D, T};  // K as the first product's right operand: its strides transposed
  s.scores = {B, H, T, T};
  s.stats = {B, H, T, 1};
  s.q_strides = tokenMajorStrides(d, H);
  s.kv_strides = tokenMajorStrides(d, Hk);
  s.kt_strides = {T * Hk * D, D, 1, Hk * D};
  s.stats_strides = {H * T, T, 1, 1};  // lse (B, H, T)
  return s;
}

// out = softmax(masked scores) V, with lse = max + log(sum exp(scores - max)).
void buildForward(CudnnAttention::Plan& g, const AttentionShape& d) {
  const Shapes s = shapesOf(d);
  // Operands: q, k, v -> out, lse.
  const Desc& q = g.operand(0, Kind::Bf16, s.q, s.q_strides);
  const Desc& kt = g.operand(1, Kind::Bf16, s.kt, s.kt_strides);
  const Desc& v = g.operand(2, Kind::Bf16, s.kv, s.kv_strides);
  const Desc& scores = g.maskedScores(q, kt, g.scalar(d.scale), s.scores);
  const Desc& max = g.tensor(Kind::F32, s.stats, s.stats_strides, true);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, max);
  const Desc& shifted = g.inner(Kind::F32, s.scores);
  g.pointwise(CUDNN_POINTWISE_SUB, scores, &max, shifted);
  const Desc& exps = g.inner(Kind::F32, s.scores);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, exps);
  const Desc& sum = g.tensor(Kind::F32, s.stats, s.stats_strides, true);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, sum);
  const Desc& log_sum = g.tensor(Kind::F32, s.stats, s.stats_strides, true);
  g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, log_sum);
  const Desc& lse = g.operand(4, Kind::F32, s.stats, s.stats_strides);
  g.pointwise(CUDNN_POINTWISE_ADD, max, &log_sum, lse);
  const Desc& probs = g.inner(Kind::Bf16, s.scores);  // rounded to bf16: the product's operand
  g.pointwise(CUDNN_POINTWISE_DIV, exps, &sum, probs);
  g.matmul(probs, v, g.operand(3, Kind::Bf16, s.q, s.q_strides));
}

// Operand `slot` (dk or dv, (B, Hkv, T, D)) = x^T b: x (B, H, T, T) f32 seen transposed and
// rounded to bf16 as the product's operand; with grouped heads computed per query head, then
// summed over each key/value head's group.
void transposedProduct(CudnnAttention::Plan& g, const Desc& x, const Desc& b, size_t slot, const Shapes& s,
                       const AttentionShape& d) {
  const int64_t B = d.batch, T = d.seq, H = d.heads, D = d.head_dim;
  const Desc& x_t = g.tensor(Kind::Bf16, {B, H, T, T}, {H * T * T, T * T, 1, T}, true);
  g.reshape(x, x_t);
  const Desc& out = g.operand(slot, Kind::Bf16, s.kv, s.kv_strides);
  if (H == d.kv_heads) return g.matmul(x_t, b, out);
  const Desc& per_head = g.tensor(Kind::Bf16, {B, H, T, D}, {H * T * D, T * D, D, 1}, true);
  g.matmul(x_t, b, per_head);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, per_head, out);
}

// dq, dk, dv from dout, q, k, v, out and lse, as cuDNN's flash backward wants its graph:
//   delta = rowsum(dout * out) (kept in the workspace);  P = exp(masked(scale Q K^T - lse))
//   dV = P^T dO;  dS = P (dO V^T - delta) scale;  dK = dS^T Q;  dQ = dS K (summed in f32 in the
//   workspace, then rounded). With grouped heads, dK and dV are computed per query head and
//   summed over each key/value head's group.
void buildBackward(CudnnAttention::Plan& g, const AttentionShape& d) {
  const Shapes s = shapesOf(d);
  const int64_t B = d.batch, T = d.seq, H = d.heads, D = d.head_dim;
  // Operands: dout, q, k, v, out, lse -> dq, dk, dv.
  const Desc& dout = g.operand(0, Kind::Bf16, s.q, s.q_strides);
  const Desc& q = g.operand(1, Kind::Bf16, s.q, s.q_strides);
  const Desc& kt = g.operand(2, Kind::Bf16, s.kt, s.kt_strides);
  const Desc& vt = g.operand(3, Kind::Bf16, s.kt, s.kt_strides);  // V transposed like K
  const Desc& out = g.operand(4, Kind::Bf16, s.q, s.q_strides);
  const Desc& lse = g.operand(5, Kind::F32, s.stats, s.stats_strides);

  // delta = rowsum(dO * O) (times 1: the place of the dropout's inverse scale). The products'
  // strides are those cuDNN's frontend gives this virtual tensor (the pattern cuDNN matches).
  const Desc& products = g.tensor(Kind::F32, s.q, {H * T * D, T * D, H * D, 1}, true);
  g.pointwise(CUDNN_POINTWISE_MUL, dout, &out, products);
  const Desc& row_sums = g.tensor(Kind::F32, s.stats, s.stats_strides, true);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, products, row_sums);
  const Desc& delta = g.inWorkspace(s.stats, s.stats_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, row_sums, &g.scalar(1.0f), delta);

  // P = exp(masked(scale Q K^T - lse)), f32.
  const Desc& scale = g.scalar(d.scale);
  const Desc& log_probs = g.maskedScores(q, kt, scale, s.scores, &lse);
  const Desc& probs = g.inner(Kind::F32, s.scores);
  g.pointwise(CUDNN_POINTWISE_EXP, log_probs, nullptr, probs);

  transposedProduct(g, probs, dout, 8, s, d);  // dV = P^T dO

  // dS = P (dO V^T - delta) scale, f32.
  const Desc& dprobs = g.inner(Kind::F32, s.scores);
  g.matmul(dout, vt, dprobs);
  const Desc& centred = g.inner(Kind::F32, s.scores);
  g.pointwise(CUDNN_POINTWISE_SUB, dprobs, &delta, centred);
  const Desc& dscores_unscaled = g.inner(Kind::F32, s.scores);
  g.pointwise(CUDNN_POINTWISE_MUL, centred, &probs, dscores_unscaled);
  const Desc& dscores = g.inner(Kind::F32, s.scores);
  g.pointwise(CUDNN_POINTWISE_MUL, dscores_unscaled, &scale, dscores);

  transposedProduct(g, dscores, q, 7, s, d);  // dK = dS^T Q

  // dQ = dS K, summed in f32 in the workspace, then rounded into dq.
  // f32 as cuDNN's own frontend declares this view (the type of the graph's intermediates).
  const Desc& k = g.tensor(Kind::F32, s.kv, s.kv_strides, true);
  g.reshape(kt, k);
  const Desc& dq_sum = g.inWorkspace({B, H, T, D}, {H * T * D, T * D, D, 1});
  g.matmul(dscores, k, dq_sum);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_sum, nullptr, g.operand(6, Kind::Bf16, s.q, s.q_strides));
}

}  // namespace

CudnnAttention::Plan& CudnnAttention::planFor(bool backward, const AttentionShape& d) {
  const Key key{backward, d.batch, d.seq, d.heads, d.kv_heads, d.head_dim};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  if (backward)
    buildBackward(*plan, d);
  else
    buildForward(*plan, d);
  plan->build(handle_);
  return *plans_.emplace(key, std::move(plan)).first->second;
}

namespace {
// Runs a built plan on the caller's tensors (`pointers`, in g.bound's order); `workspace` holds
// g.internal_bytes and then cuDNN's g.workspace.
void run(cudnnHandle_t handle, CudnnAttention::Plan& g, const std::vector<void*>& pointers, char* workspace,
         cudaStream_t stream) {
  std::vector<int64_t> uids = g.bound;
  std::vector<void*> data = pointers;
  std::vector<float> values;
  values.reserve(g.by_value.size());  // no reallocation: data keeps pointers into it
  for (const auto& [uid, value] : g.by_value) {
    values.push_back(value);
    uids.push_back(uid);
    data.push_back(&values.back());
  }
  for (const auto& t : g.internal) {
    // Zeroed every run: cuDNN before 9.6 accumulates dq into it without clearing it first (its
    // frontend says later versions clear it themselves; the GPU runs measured it cleared here).
    MT_CUDA_CHECK(cudaMemsetAsync(workspace + t.offset, 0, t.bytes, stream));
    uids.push_back(t.uid);
    data.push_back(workspace + t.offset);
  }
  void* own = workspace + g.internal_bytes;
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "the variant pack");
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), static_cast<int64_t>(uids.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, data.data(), static_cast<int64_t>(data.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &own)
      .finalize();
  check(cudnnBackendExecute(handle, g.plan->get(), pack.get()), "running the fused attention");
}
}  // namespace

int64_t CudnnAttention::sequencesPerRun(const AttentionShape& d) const {
  // dq's f32 sum in our share, and cuDNN's own share as measured on an H200 (the grouped heads'
  // dk and dv per query head, or the like): 4 bytes per query element each, and the row sums.
  const int64_t per_sequence = std::max<int64_t>(d.heads * d.seq * (2 * 4 * d.head_dim + 4), 1);
  // Runs start 16 bytes apart at least, as the graph's tensors are declared aligned: a
  // sequence's lse is heads * seq floats (q, k, v and the rest: head_dim a multiple of 8 bf16).
  const int64_t aligned = 16 / std::gcd<int64_t>(16, d.heads * d.seq * 4);
  const int64_t sequences = std::max(workspace_cap_ / per_sequence / aligned * aligned, aligned);
  return std::min(sequences, std::max<int64_t>(d.batch, 1));
}

void CudnnAttention::prepare(const AttentionShape& d, bool backward) {
  // The backward's runs: whole ones of sequencesPerRun sequences and the rest.
  const int64_t per_run = backward ? sequencesPerRun(d) : d.batch;
  for (int64_t batch : {per_run, d.batch % per_run}) {
    if (batch == 0) continue;
    AttentionShape part = d;
    part.batch = batch;
    Plan& g = planFor(backward, part);
    workspace(g.internal_bytes + g.workspace);
  }
}

void CudnnAttention::forward(const KernelArgs& args, const AttentionShape& d) {
  if (attentionSinks(args, false)) throw std::runtime_error("cuDNN's fused attention here takes no sinks");
  if (const std::string why = unsupported(args.in[0], d); !why.empty()) throw std::runtime_error(why);
  Plan& g = planFor(false, d);
  run(handle_, g, {args.in[0].data, args.in[1].data, args.in[2].data, args.out[0].data, args.out[1].data},
      workspace(g.internal_bytes + g.workspace), stream_);
}

void CudnnAttention::backward(const KernelArgs& args, const AttentionShape& d) {
  if (const std::string why = unsupported(args.in[1], d); !why.empty()) throw std::runtime_error(why);
  // In runs of whole sequences, so the workspace stays under its cap whatever the batch: every
  // operand (dout, q, k, v, out, lse -> dq, dk, dv) has the batch as its leading dimension.
  const int64_t per_run = sequencesPerRun(d);
  for (int64_t first = 0; first < d.batch; first += per_run) {
    AttentionShape part = d;
    part.batch = std::min(per_run, d.batch - first);
    Plan& g = planFor(true, part);
    std::vector<void*> pointers;
    for (const std::vector<Tensor>* operands : {&args.in, &args.out})
      for (const Tensor& t : *operands) pointers.push_back(static_cast<char*>(t.data) + first * (t.bytes() / d.batch));
    run(handle_, g, pointers, workspace(g.internal_bytes + g.workspace), stream_);
  }
}
}  // namespace mt
