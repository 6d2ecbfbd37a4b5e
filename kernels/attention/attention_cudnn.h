// Causal attention of a bf16 plan through cuDNN's fused flash attention (the library's
// scaled-dot-product engines, reached through its backend graph API: the operation graph of
// products, masks and softmax that cuDNN recognises and runs as one kernel). An alternative
// to our own tensor-core kernels (attention_mma_cuda.cu) chosen per run (mtrun --attention
// cudnn); the same operands and results as mt.attention / mt.attention_grad:
//   q (B, T, H*D), k, v (B, T, Hkv*D), bf16 -> out (B, T, H*D) bf16, lse (B, H, T) f32
// where lse is the natural-log log-sum-exp of each row's scaled scores, as our kernels keep it
// (cuDNN's "stats"), so either forward pairs with either backward.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "kernels/attention/attention.h"

struct cudnnContext;

namespace mt {

// One per CUDA stream that runs attention: a cuDNN handle bound to the stream, the execution
// plans built so far (one per shape and direction: building one takes milliseconds to
// seconds, running it microseconds) and the device workspace the plans need, grown on demand
// up to a cap (the backward's needs ~8 bytes per query element: 5 GB for qwen2.5-7b at batch
// 179, so it runs in chunks of whole sequences).
class CudnnAttention {
 public:
  // `workspace_cap`: the device bytes the backward's workspace may take (it runs in chunks of
  // whole sequences to stay under it; at least one sequence a run).
  explicit CudnnAttention(CudaStream stream, int64_t workspace_cap = int64_t{512} << 20);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // "" when cuDNN takes this call, else why not (bf16 only; head_dim a multiple of 8, <= 128;
  // two tokens or more; before cuDNN 9.16 a multiple of 128 tokens; no sliding window). A
  // forward with sinks (mt.attention_sinks) never goes to cuDNN; its backward is the plain one.
  static std::string unsupported(const Tensor& q, const AttentionShape& d);
  // Whether `launch` sends this call (q and its shape) through cuDNN: where the run uses it, every
  // call it takes, or with cudnn_only every call (one it cannot take is then refused by name).
  static bool runs(const CudaLaunch& launch, const Tensor& q, const AttentionShape& d) {
    return launch.cudnn_attention && (launch.cudnn_only || unsupported(q, d).empty());
  }
  // The loaded library's version (e.g. 91900; libcudnn is linked: a binary without it does not start).
  static int64_t version();

  // args as attention_cuda's / attention_grad_cuda's; both throw naming cuDNN's error.
  void forward(const KernelArgs& args, const AttentionShape& d);
  void backward(const KernelArgs& args, const AttentionShape& d);
  // Builds the graph and plan of a call, and grows the workspace for it, ahead of the first run
  // (a backend's start: cuDNN's refusals and the memory surface there, not in a step).
  void prepare(const AttentionShape& d, bool backward);
  // Device bytes held for the plans' workspaces (outside the plan's arena).
  int64_t workspaceBytes() const { return workspace_bytes_; }

  struct Plan;  // attention_cudnn.cc: a built graph, its execution plan and its tensors' ids

 private:
  using Key = std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t>;  // backward, B, T, H, Hkv, D
  Plan& planFor(bool backward, const AttentionShape& d);
  // Sequences per run of the backward: the most whose workspace (~8 bytes per query element)
  // stays under workspace_cap_ (at least one), in steps that keep each run's operands 16-byte
  // aligned.
  int64_t sequencesPerRun(const AttentionShape& d) const;
  char* workspace(int64_t bytes);

  CudaStream stream_;
  cudnnContext* handle_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  int64_t workspace_cap_;
};
}  // namespace mt
