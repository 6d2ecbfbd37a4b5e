#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/cached_attention.h"
#include "kernels/fast_math.h"

namespace mt {

std::string cached_attention_check(const KernelArgs& args) {
  const Tensor &q = args.in[0], &k = args.in[1], &v = args.in[2], &k_cache = args.in[3], &v_cache = args.in[4];
  const Tensor& positions = args.in[5];
  for (int i = 0; i < 5; ++i) MT_CHECK(expectDType(args.in[i], DType::F32, "cached_attention"));
  MT_CHECK(expectDType(positions, DType::I32, "cached_attention positions"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "cached_attention out"));
  MT_CHECK(attentionAttrsProblem(args, "cached_attention"));
  if (q.rank() != 3) return "cached_attention: q must be (B, T, H*D), got " + shapeString(q.shape);
  const int64_t heads = args.ints[0], kv_heads = args.ints[1];
  if (q.dim(2) == 0 || q.dim(2) % heads != 0)
    return "cached_attention: q width " + std::to_string(q.dim(2)) + " is not divisible by " +
           std::to_string(heads) + " heads";
  if (args.in.size() == 7) MT_CHECK(attentionSinksProblem(args.in[6], heads, "cached_attention sinks"));
  const int64_t head_dim = q.dim(2) / heads;
  if (head_dim > kCachedAttentionMaxHeadDim)
    return "cached_attention: head_dim " + std::to_string(head_dim) + " is more than " +
           std::to_string(kCachedAttentionMaxHeadDim);
  MT_CHECK(expectShape(k, {q.dim(0), q.dim(1), kv_heads * head_dim}, "cached_attention k"));
  MT_CHECK(expectShape(v, k.shape, "cached_attention v"));
  if (k_cache.rank() != 3 || k_cache.dim(0) != q.dim(0) || k_cache.dim(1) < q.dim(1) || k_cache.dim(2) != k.dim(2))
    return "cached_attention: k_cache must be (B, S >= T, Hkv*D) for k " + shapeString(k.shape) + ", got " +
           shapeString(k_cache.shape);
  MT_CHECK(expectShape(v_cache, k_cache.shape, "cached_attention v_cache"));
  MT_CHECK(expectShape(positions, {q.dim(0), q.dim(1)}, "cached_attention positions"));
  return expectShape(args.out[0], q.shape, "cached_attention out");
}

void cached_attention_cpu(const KernelArgs& args) {
  const Tensor &q = args.in[0], &k = args.in[1], &v = args.in[2], &k_cache = args.in[3], &v_cache = args.in[4];
  const int32_t* positions = args.in[5].i32();
  const AttentionShape s = attentionShape(q, args);
  const float* sinks = args.in.size() == 7 ? args.in[6].f32() : nullptr;
  const int64_t cache_rows = k_cache.dim(1), group = s.heads / s.kv_heads, tasks = s.batch * s.heads * s.seq;
#pragma omp parallel
  {
    std::vector<float> probs(static_cast<size_t>(cache_rows + s.seq));
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t t = task % s.seq, h = (task / s.seq) % s.heads, b = task / (s.seq * s.heads);
      const int64_t kv = (h / group) * s.head_dim, p0 = cachedPrefix(positions, b, s.seq, cache_rows);
      const float* qi = q.f32() + (b * s.seq + t) * s.q_stride + h * s.head_dim;
      // Key j < p0 is cache row j; key p0 + u is new token u.
      auto key = [&](int64_t j) {
        return j < p0 ? k_cache.f32() + (b * cache_rows + j) * s.kv_stride + kv
                      : k.f32() + (b * s.seq + j - p0) * s.kv_stride + kv;
      };
      auto value = [&](int64_t j) {
        return j < p0 ? v_cache.f32() + (b * cache_rows + j) * s.kv_stride + kv
                      : v.f32() + (b * s.seq + j - p0) * s.kv_stride + kv;
      };
      // Keys [first, p0 + t]: all before the token, or its window's.
      const int64_t keys = p0 + t + 1, first = firstVisibleKey(s, b, p0 + t);
      float max_score = sinks ? sinks[h] : -INFINITY;
      for (int64_t j = first; j < keys; ++j) {
        const float* kj = key(j);
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < s.head_dim; ++d) dot += qi[d] * kj[d];
        probs[j] = attentionSoftcap(s, s.scale * dot);
        max_score = std::max(max_score, probs[j]);
      }
      float sum = sinks ? fastExp(sinks[h] - max_score) : 0.0f;
      for (int64_t j = first; j < keys; ++j) {
        probs[j] = fastExp(probs[j] - max_score);
        sum += probs[j];
      }
      const float inv = 1.0f / sum;
      float* out = args.out[0].f32() + (b * s.seq + t) * s.q_stride + h * s.head_dim;
      std::fill(out, out + s.head_dim, 0.0f);
      for (int64_t j = first; j < keys; ++j) {
        const float p = probs[j] * inv;
        const float* vj = value(j);
#pragma omp simd
        for (int64_t d = 0; d < s.head_dim; ++d) out[d] += p * vj[d];
      }
    }
  }
}

}  // namespace mt
