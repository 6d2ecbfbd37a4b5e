#include <algorithm>
#include <cmath>

#include "kernels/attention/attention.h"

namespace mt {
namespace {

struct AttnDims {
  int64_t batch, seq, heads, kv_heads, head_dim;
  int64_t q_stride() const { return heads * head_dim; }    // between tokens of q / out
  int64_t kv_stride() const { return kv_heads * head_dim; }  // between tokens of k / v
};

AttnDims attnDims(const Tensor& q, const KernelArgs& args) {
  AttnDims d;
  d.batch = q.dim(0);
  d.seq = q.dim(1);
  d.heads = args.ints[0];
  d.kv_heads = args.ints[1];
  d.head_dim = q.dim(2) / d.heads;
  return d;
}

std::string checkQKV(const KernelArgs& args, const Tensor& q, const Tensor& k, const Tensor& v,
                     const char* op) {
  for (const Tensor& t : args.in) MT_CHECK(expectDType(t, DType::F32, op));
  for (const Tensor& t : args.out) MT_CHECK(expectDType(t, DType::F32, op));
  if (q.rank() != 3) return std::string(op) + ": q must be (B, T, H*D), got " + shapeString(q.shape);
  const int64_t heads = args.ints[0], kv_heads = args.ints[1];
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    return std::string(op) + ": num_heads " + std::to_string(heads) +
           " must be a positive multiple of num_kv_heads " + std::to_string(kv_heads);
  if (q.dim(2) % heads != 0 || q.dim(2) == 0)
    return std::string(op) + ": q width " + std::to_string(q.dim(2)) + " is not divisible by " +
           std::to_string(heads) + " heads";
  const int64_t head_dim = q.dim(2) / heads;
  MT_CHECK(expectShape(k, {q.dim(0), q.dim(1), kv_heads * head_dim}, op));
  return expectShape(v, {q.dim(0), q.dim(1), kv_heads * head_dim}, op);
}

// scores[j] = scale * q_i . k_j for j <= i; returns the maximum.
float causalScores(const float* qi, const float* k, int64_t i, const AttnDims& d, float scale,
                   float* scores) {
  float max_score = -INFINITY;
  for (int64_t j = 0; j <= i; ++j) {
    const float* kj = k + j * d.kv_stride();
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < d.head_dim; ++c) dot += qi[c] * kj[c];
    scores[j] = dot * scale;
    max_score = std::max(max_score, scores[j]);
  }
  return max_score;
}

}  // namespace

std::string attention_check(const KernelArgs& args) {
  const Tensor& q = args.in[0];
  MT_CHECK(checkQKV(args, q, args.in[1], args.in[2], "attention"));
  MT_CHECK(expectShape(args.out[0], q.shape, "attention out"));
  return expectShape(args.out[1], {q.dim(0), args.ints[0], q.dim(1)}, "attention lse");
}

void attention_cpu(const KernelArgs& args) {
  const Tensor &q = args.in[0], &k = args.in[1], &v = args.in[2];
  const AttnDims d = attnDims(q, args);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  const int64_t group = d.heads / d.kv_heads;
  const int64_t rows = d.batch * d.heads * d.seq;
#pragma omp parallel
  {
    std::vector<float> scores(d.seq);
#pragma omp for schedule(dynamic, 16)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t i = row % d.seq, h = (row / d.seq) % d.heads, b = row / (d.seq * d.heads);
      const int64_t kvh = h / group;
      const float* qi = q.f32() + (b * d.seq + i) * d.q_stride() + h * d.head_dim;
      const float* kb = k.f32() + b * d.seq * d.kv_stride() + kvh * d.head_dim;
      const float* vb = v.f32() + b * d.seq * d.kv_stride() + kvh * d.head_dim;
      const float max_score = causalScores(qi, kb, i, d, scale, scores.data());
      float sum = 0.0f;
      for (int64_t j = 0; j <= i; ++j) {
        scores[j] = std::exp(scores[j] - max_score);
        sum += scores[j];
      }
      float* oi = args.out[0].f32() + (b * d.seq + i) * d.q_stride() + h * d.head_dim;
      std::fill(oi, oi + d.head_dim, 0.0f);
      const float inv_sum = 1.0f / sum;
      for (int64_t j = 0; j <= i; ++j) {
        const float p = scores[j] * inv_sum;
        const float* vj = vb + j * d.kv_stride();
#pragma omp simd
        for (int64_t c = 0; c < d.head_dim; ++c) oi[c] += p * vj[c];
      }
      args.out[1].f32()[(b * d.heads + h) * d.seq + i] = max_score + std::log(sum);
    }
  }
}

std::string attention_grad_check(const KernelArgs& args) {
  const Tensor& q = args.in[1];
  MT_CHECK(checkQKV(args, q, args.in[2], args.in[3], "attention_grad"));
  MT_CHECK(expectShape(args.in[0], q.shape, "attention_grad dout"));
  MT_CHECK(expectShape(args.in[4], q.shape, "attention_grad out"));
  MT_CHECK(expectShape(args.in[5], {q.dim(0), args.ints[0], q.dim(1)}, "attention_grad lse"));
  MT_CHECK(expectShape(args.out[0], q.shape, "attention_grad dq"));
  MT_CHECK(expectShape(args.out[1], args.in[2].shape, "attention_grad dk"));
  return expectShape(args.out[2], args.in[3].shape, "attention_grad dv");
}

void attention_grad_cpu(const KernelArgs& args) {
  const Tensor &dout = args.in[0], &q = args.in[1], &k = args.in[2], &v = args.in[3];
  const Tensor &out = args.in[4], &lse = args.in[5];
  const AttnDims d = attnDims(q, args);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  const int64_t group = d.heads / d.kv_heads;
  // One task per (batch, kv head): it owns dk/dv of that head and dq of its query heads, so
  // no two threads write the same element and the sums run in a fixed order.
#pragma omp parallel
  {
    std::vector<float> probs(d.seq);
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t kvh = 0; kvh < d.kv_heads; ++kvh) {
        const int64_t kv_base = b * d.seq * d.kv_stride() + kvh * d.head_dim;
        const float* kb = k.f32() + kv_base;
        const float* vb = v.f32() + kv_base;
        float* dkb = args.out[1].f32() + kv_base;
        float* dvb = args.out[2].f32() + kv_base;
        for (int64_t j = 0; j < d.seq; ++j) {
          std::fill(dkb + j * d.kv_stride(), dkb + j * d.kv_stride() + d.head_dim, 0.0f);
          std::fill(dvb + j * d.kv_stride(), dvb + j * d.kv_stride() + d.head_dim, 0.0f);
        }
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
          for (int64_t i = 0; i < d.seq; ++i) {
            const int64_t q_off = (b * d.seq + i) * d.q_stride() + h * d.head_dim;
            const float* qi = q.f32() + q_off;
            const float* doi = dout.f32() + q_off;
            const float* oi = out.f32() + q_off;
            float* dqi = args.out[0].f32() + q_off;
            const float row_lse = lse.f32()[(b * d.heads + h) * d.seq + i];
            causalScores(qi, kb, i, d, scale, probs.data());
            float delta = 0.0f;
#pragma omp simd reduction(+ : delta)
            for (int64_t c = 0; c < d.head_dim; ++c) delta += doi[c] * oi[c];
            std::fill(dqi, dqi + d.head_dim, 0.0f);
            for (int64_t j = 0; j <= i; ++j) {
              const float p = std::exp(probs[j] - row_lse);
              const float* vj = vb + j * d.kv_stride();
              const float* kj = kb + j * d.kv_stride();
              float dp = 0.0f;
#pragma omp simd reduction(+ : dp)
              for (int64_t c = 0; c < d.head_dim; ++c) dp += doi[c] * vj[c];
              const float ds = p * (dp - delta) * scale;
              float* dkj = dkb + j * d.kv_stride();
              float* dvj = dvb + j * d.kv_stride();
#pragma omp simd
              for (int64_t c = 0; c < d.head_dim; ++c) {
                dqi[c] += ds * kj[c];
                dkj[c] += ds * qi[c];
                dvj[c] += p * doi[c];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace mt
