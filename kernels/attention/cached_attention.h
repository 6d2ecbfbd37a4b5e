// mt.cached_attention: a decode step's attention. T new tokens of each of B sequences attend to
// the cached keys/values of the tokens before them and causally to each other (grouped-query
// heads, softmax scale 1/sqrt(D), as mt.attention, whose rows p0 .. p0 + T - 1 it reproduces).
//   (q (B, T, H*D), k (B, T, Hkv*D), v (B, T, Hkv*D), k_cache (B, S, Hkv*D), v_cache (B, S, Hkv*D),
//    positions (B, T) i32[, sinks (H)]) -> out (B, T, H*D)
//   int attrs: [num_heads, num_kv_heads(, window)], float attrs: [(softcap)]: the window, the
//   softcap and the sinks as mt.attention's (kernels/attention/attention.h); the row with sinks is
//   mt.cached_attention_sinks.
// Sequence b's new tokens sit at positions p0 = positions[b, 0] onwards: they see cache rows
// [0, p0) and new tokens [0, t]. A p0 outside [0, S - T] (the caller's error) is clamped into it,
// so no read leaves the cache. Forward only.
#pragma once
#include "kernels/kernel_args.h"

namespace mt {
// The largest head the CUDA twin keeps in registers (every published model's is at most 256).
inline constexpr int64_t kCachedAttentionMaxHeadDim = 256;

// Sequence b's p0, clamped as the header says: one definition for both implementations.
MT_HOST_DEVICE inline int64_t cachedPrefix(const int32_t* positions, int64_t b, int64_t new_tokens, int64_t cache_rows) {
  const int64_t p0 = positions[b * new_tokens];
  return p0 < 0 ? 0 : (p0 > cache_rows - new_tokens ? cache_rows - new_tokens : p0);
}

std::string cached_attention_check(const KernelArgs& args);
void cached_attention_cpu(const KernelArgs& args);

// CUDA twin (kernels/attention/cached_attention_cuda.cu), built when CUDA is enabled.
void cached_attention_cuda(const KernelArgs& args, const CudaLaunch& launch);
}  // namespace mt
