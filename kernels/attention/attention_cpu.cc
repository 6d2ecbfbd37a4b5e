#include <algorithm>
#include <cmath>

#include <cblas.h>

#include "kernels/attention/attention.h"
#include "kernels/fast_math.h"

namespace mt {
namespace {

// The shape, and what BLAS wants of it: query heads per key/value head, query blocks of
// kBlockRows rows, head_dim as int.
struct AttnDims : AttentionShape {
  int64_t group;
  int64_t blocks;
  int hd;
};

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

// Query rows per block: a block's scores against every key up to its last row are one
// matrix product, so the work runs in BLAS instead of dot-product loops.
constexpr int64_t kBlockRows = 64;

AttnDims attnDims(const Tensor& q, const KernelArgs& args) {
  AttnDims d;
  static_cast<AttentionShape&>(d) = attentionShape(q, args);
  d.group = d.heads / d.kv_heads;
  d.blocks = (d.seq + kBlockRows - 1) / kBlockRows;
  d.hd = static_cast<int>(d.head_dim);
  return d;
}

// BLAS runs single-threaded inside these kernels: the parallelism is across (batch, head)
// tasks, and two levels of threads would fight over the cores.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~SingleThreadedBlas() { openblas_set_num_threads(saved_); }

 private:
  int saved_;
};

// probs[r][j] (ld = keys) = softmax row of query i0 + r over keys j <= i0 + r, 0 beyond;
// `scores` holds the scaled scores on entry. Writes each row's log-sum-exp when lse != null,
// else uses the given lse (backward: recompute P exactly as the forward normalised it).
void causalSoftmax(float* scores, int64_t rows, int64_t keys, int64_t i0, float* lse_out,
                   const float* lse_in) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = scores + r * keys;
    const int64_t valid = i0 + r + 1;
    if (lse_in) {
      const float l = lse_in[r];
#pragma omp simd
      for (int64_t j = 0; j < valid; ++j) row[j] = fastExp(row[j] - l);
    } else {
      float max_score = -INFINITY;
      for (int64_t j = 0; j < valid; ++j) max_score = std::max(max_score, row[j]);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < valid; ++j) {
        row[j] = fastExp(row[j] - max_score);
        sum += row[j];
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j < valid; ++j) row[j] *= inv;
      lse_out[r] = max_score + std::log(sum);
    }
    std::fill(row + valid, row + keys, 0.0f);
  }
}

}  // namespace

AttentionShape attentionShape(const Tensor& q, const KernelArgs& args) {
  AttentionShape s;
  s.batch = q.dim(0);
  s.seq = q.dim(1);
  s.heads = args.ints[0];
  s.kv_heads = args.ints[1];
  s.head_dim = q.dim(2) / s.heads;
  s.q_stride = s.heads * s.head_dim;
  s.kv_stride = s.kv_heads * s.head_dim;
  s.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  return s;
}

std::string attention_check(const KernelArgs& args) {
  const Tensor& q = args.in[0];
  MT_CHECK(checkQKV(args, q, args.in[1], args.in[2], "attention"));
  MT_CHECK(expectShape(args.out[0], q.shape, "attention out"));
  return expectShape(args.out[1], {q.dim(0), args.ints[0], q.dim(1)}, "attention lse");
}

void attention_cpu(const KernelArgs& args) {
  const Tensor &q = args.in[0], &k = args.in[1], &v = args.in[2];
  const AttnDims d = attnDims(q, args);
  SingleThreadedBlas single;
#pragma omp parallel
  {
    std::vector<float> probs(kBlockRows * d.seq);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < d.batch * d.heads * d.blocks; ++task) {
      // Largest blocks first: the later rows of a causal block see more keys.
      const int64_t blk = d.blocks - 1 - task % d.blocks, h = (task / d.blocks) % d.heads;
      const int64_t b = task / (d.blocks * d.heads), kvh = h / d.group;
      const int64_t i0 = blk * kBlockRows, rows = std::min(kBlockRows, d.seq - i0), keys = i0 + rows;
      const float* qb = q.f32() + (b * d.seq + i0) * d.q_stride + h * d.head_dim;
      const float* kb = k.f32() + b * d.seq * d.kv_stride + kvh * d.head_dim;
      const float* vb = v.f32() + b * d.seq * d.kv_stride + kvh * d.head_dim;
      const int rk = static_cast<int>(keys);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), rk, d.hd, d.scale, qb,
                  d.q_stride, kb, d.kv_stride, 0.0f, probs.data(), rk);
      float* lse = args.out[1].f32() + (b * d.heads + h) * d.seq + i0;
      causalSoftmax(probs.data(), rows, keys, i0, lse, nullptr);
      float* ob = args.out[0].f32() + (b * d.seq + i0) * d.q_stride + h * d.head_dim;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), d.hd, rk, 1.0f,
                  probs.data(), rk, vb, d.kv_stride, 0.0f, ob, d.q_stride);
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
  SingleThreadedBlas single;
  // One task per (batch, kv head): it owns dk/dv of that head and dq of its query heads, so
  // no two threads write the same element and every sum runs in a fixed order.
#pragma omp parallel
  {
    std::vector<float> probs(kBlockRows * d.seq), dprobs(kBlockRows * d.seq);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < d.batch * d.kv_heads; ++task) {
      const int64_t b = task / d.kv_heads, kvh = task % d.kv_heads;
      const int64_t kv_base = b * d.seq * d.kv_stride + kvh * d.head_dim;
      const float* kb = k.f32() + kv_base;
      const float* vb = v.f32() + kv_base;
      float* dkb = args.out[1].f32() + kv_base;
      float* dvb = args.out[2].f32() + kv_base;
      for (int64_t j = 0; j < d.seq; ++j) {
        std::fill(dkb + j * d.kv_stride, dkb + j * d.kv_stride + d.head_dim, 0.0f);
        std::fill(dvb + j * d.kv_stride, dvb + j * d.kv_stride + d.head_dim, 0.0f);
      }
      for (int64_t h = kvh * d.group; h < (kvh + 1) * d.group; ++h) {
        for (int64_t blk = 0; blk < d.blocks; ++blk) {
          const int64_t i0 = blk * kBlockRows, rows = std::min(kBlockRows, d.seq - i0), keys = i0 + rows;
          const int r = static_cast<int>(rows), rk = static_cast<int>(keys);
          const int64_t q_off = (b * d.seq + i0) * d.q_stride + h * d.head_dim;
          const float* qb = q.f32() + q_off;
          const float* dob = dout.f32() + q_off;
          const float* ob = out.f32() + q_off;
          float* dqb = args.out[0].f32() + q_off;
          // P, recomputed from the saved log-sum-exp.
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, rk, d.hd, d.scale, qb, d.q_stride, kb, d.kv_stride,
                      0.0f, probs.data(), rk);
          causalSoftmax(probs.data(), rows, keys, i0, nullptr, lse.f32() + (b * d.heads + h) * d.seq + i0);
          // dV += P^T dO;  dP = dO V^T
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rk, d.hd, r, 1.0f, probs.data(), rk, dob,
                      d.q_stride, 1.0f, dvb, d.kv_stride);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, rk, d.hd, 1.0f, dob, d.q_stride, vb, d.kv_stride, 0.0f,
                      dprobs.data(), rk);
          // dS = P * (dP - rowsum(dO * O)) * scale
          for (int64_t row = 0; row < rows; ++row) {
            const float* doi = dob + row * d.q_stride;
            const float* oi = ob + row * d.q_stride;
            float delta = 0.0f;
#pragma omp simd reduction(+ : delta)
            for (int64_t c = 0; c < d.head_dim; ++c) delta += doi[c] * oi[c];
            float* ds = dprobs.data() + row * keys;
            const float* p = probs.data() + row * keys;
#pragma omp simd
            for (int64_t j = 0; j < keys; ++j) ds[j] = p[j] * (ds[j] - delta) * d.scale;
          }
          // dQ = dS K;  dK += dS^T Q
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, d.hd, rk, 1.0f, dprobs.data(), rk, kb,
                      d.kv_stride, 0.0f, dqb, d.q_stride);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rk, d.hd, r, 1.0f, dprobs.data(), rk, qb, d.q_stride,
                      1.0f, dkb, d.kv_stride);
        }
      }
    }
  }
}

}  // namespace mt
