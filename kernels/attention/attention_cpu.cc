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
  MT_CHECK(attentionAttrsProblem(args, op));
  for (const Tensor& t : args.in) MT_CHECK(expectDType(t, DType::F32, op));
  for (const Tensor& t : args.out) MT_CHECK(expectDType(t, DType::F32, op));
  if (q.rank() != 3) return std::string(op) + ": q must be (B, T, H*D), got " + shapeString(q.shape);
  const int64_t heads = args.ints[0];
  if (q.dim(2) % heads != 0 || q.dim(2) == 0)
    return std::string(op) + ": q width " + std::to_string(q.dim(2)) + " is not divisible by " +
           std::to_string(heads) + " heads";
  const int64_t head_dim = q.dim(2) / heads;
  MT_CHECK(expectShape(k, {q.dim(0), q.dim(1), args.ints[1] * head_dim}, op));
  return expectShape(v, {q.dim(0), q.dim(1), args.ints[1] * head_dim}, op);
}

// Query rows per block: a block's scores against every key up to its last row are one
// matrix product, so the work runs in BLAS instead of dot-product loops.
constexpr int64_t kBlockRows = 64;

AttnDims attnDims(const Tensor& q, const KernelArgs& args, const Tensor* positions) {
  AttnDims d;
  static_cast<AttentionShape&>(d) = attentionShape(q, args, positions);
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

// probs[r][j - lo] (ld = keys - lo) = the softmax row of query i0 + r of batch row b over the
// keys it sees (firstVisibleKey .. itself), 0 elsewhere; `scores` holds the scaled scores of keys [lo, keys)
// on entry. Writes each row's log-sum-exp (counting the sink, when there is one) when
// lse_out != null, else uses the given lse (backward: P recomputed exactly as the forward
// normalised it).
void maskedSoftmax(float* scores, int64_t rows, int64_t lo, int64_t keys, int64_t b, int64_t i0, const AttnDims& d,
                   const float* sink, float* lse_out, const float* lse_in) {
  const int64_t span = keys - lo;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = scores + r * span;
    const int64_t first = firstVisibleKey(d, b, i0 + r) - lo, end = i0 + r + 1 - lo;
    std::fill(row, row + first, 0.0f);
    if (lse_in) {
      const float l = lse_in[r];
#pragma omp simd
      for (int64_t j = first; j < end; ++j) row[j] = fastExp(row[j] - l);
    } else {
      float max_score = sink ? *sink : -INFINITY;
      for (int64_t j = first; j < end; ++j) max_score = std::max(max_score, row[j]);
      float sum = sink ? fastExp(*sink - max_score) : 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = first; j < end; ++j) {
        row[j] = fastExp(row[j] - max_score);
        sum += row[j];
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = first; j < end; ++j) row[j] *= inv;
      lse_out[r] = max_score + std::log(sum);
    }
    std::fill(row + end, row + span, 0.0f);
  }
}

// Softcapping (Gemma 2): each of `n` scaled scores s becomes c * tanh(s / c), its slope
// 1 - tanh^2 into `slopes` where given (the backward's). Nothing where the call has no cap.
void capScores(float* scores, int64_t n, const AttnDims& d, float* slopes) {
  if (d.softcap <= 0.0f) return;
  for (int64_t e = 0; e < n; ++e) scores[e] = attentionSoftcap(d, scores[e], slopes ? slopes + e : nullptr);
}

// sum over c < n of a[c] * b[c]: a row's dout . out (the softmax backward's delta).
float rowDot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

}  // namespace

AttentionShape attentionShape(const Tensor& q, const KernelArgs& args, const Tensor* positions) {
  AttentionShape s;
  s.batch = q.dim(0);
  s.seq = q.dim(1);
  s.heads = args.ints[0];
  s.kv_heads = args.ints[1];
  s.head_dim = q.dim(2) / s.heads;
  s.q_stride = s.heads * s.head_dim;
  s.kv_stride = s.kv_heads * s.head_dim;
  s.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  s.window = args.intOrZero(2);
  s.softcap = args.floats.empty() ? 0.0f : args.floats[0];
  s.positions = positions ? positions->i32() : nullptr;
  return s;
}

std::string attentionSinksProblem(const Tensor& sinks, int64_t heads, const char* op) {
  MT_CHECK(expectDType(sinks, DType::F32, op));
  return expectShape(sinks, {heads}, op);
}

std::string attentionAttrsProblem(const KernelArgs& args, const char* op) {
  if (args.ints.size() != 2 && args.ints.size() != 3)
    return std::string(op) + " takes 2 or 3 int attributes (num_heads, num_kv_heads, window), got " +
           std::to_string(args.ints.size());
  const int64_t heads = args.ints[0], kv_heads = args.ints[1];
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    return std::string(op) + ": num_heads " + std::to_string(heads) + " must be a positive multiple of num_kv_heads " +
           std::to_string(kv_heads);
  if (args.ints.size() == 3 && args.ints[2] < 0)
    return std::string(op) + ": window " + std::to_string(args.ints[2]) + " must not be negative (0: none)";
  if (args.floats.size() > 1)
    return std::string(op) + " takes no float attribute or one (softcap), got " + std::to_string(args.floats.size());
  if (args.floats.size() == 1 && !(args.floats[0] > 0.0f && std::isfinite(args.floats[0])))
    return std::string(op) + ": softcap " + std::to_string(args.floats[0]) + " must be positive and finite";
  return "";
}

std::string attention_check(const KernelArgs& args) {
  const Tensor& q = args.in[0];
  MT_CHECK(checkQKV(args, q, args.in[1], args.in[2], "attention"));
  if (args.in.size() == 4) MT_CHECK(attentionSinksProblem(args.in[3], args.ints[0], "attention sinks"));
  MT_CHECK(expectShape(args.out[0], q.shape, "attention out"));
  return expectShape(args.out[1], {q.dim(0), args.ints[0], q.dim(1)}, "attention lse");
}

namespace {

// mt.attention(_sinks) and their packed rows: `sinks` (H) or null, `positions` (B, T) or null.
void attentionForward(const KernelArgs& args, const float* sinks, const Tensor* positions) {
  const Tensor &q = args.in[0], &k = args.in[1], &v = args.in[2];
  const AttnDims d = attnDims(q, args, positions);
  SingleThreadedBlas single;
#pragma omp parallel
  {
    std::vector<float> probs(kBlockRows * d.seq);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < d.batch * d.heads * d.blocks; ++task) {
      // Largest blocks first: the later rows of a causal block see more keys.
      const int64_t blk = d.blocks - 1 - task % d.blocks, h = (task / d.blocks) % d.heads;
      const int64_t b = task / (d.blocks * d.heads), kvh = h / d.group;
      // The block's queries see keys [lo, keys): all before them, or a window's worth.
      const int64_t i0 = blk * kBlockRows, rows = std::min(kBlockRows, d.seq - i0), keys = i0 + rows;
      const int64_t lo = firstKeyOfRows(d, b, i0, rows);
      const float* qb = q.f32() + (b * d.seq + i0) * d.q_stride + h * d.head_dim;
      const float* kb = k.f32() + (b * d.seq + lo) * d.kv_stride + kvh * d.head_dim;
      const float* vb = v.f32() + (b * d.seq + lo) * d.kv_stride + kvh * d.head_dim;
      const int span = static_cast<int>(keys - lo);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), span, d.hd, d.scale, qb,
                  d.q_stride, kb, d.kv_stride, 0.0f, probs.data(), span);
      capScores(probs.data(), rows * span, d, nullptr);
      float* lse = args.out[1].f32() + (b * d.heads + h) * d.seq + i0;
      maskedSoftmax(probs.data(), rows, lo, keys, b, i0, d, sinks ? sinks + h : nullptr, lse, nullptr);
      float* ob = args.out[0].f32() + (b * d.seq + i0) * d.q_stride + h * d.head_dim;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), d.hd, span, 1.0f,
                  probs.data(), span, vb, d.kv_stride, 0.0f, ob, d.q_stride);
    }
  }
}

// A packed call's arguments without its positions (the last input): the unpacked call's.
KernelArgs withoutPositions(const KernelArgs& args) {
  KernelArgs rest = args;
  rest.in.pop_back();
  return rest;
}

// "" or what is wrong with a packed call's positions: (B, T) i32 of q's (B, T, H*D).
std::string positionsProblem(const Tensor& positions, const Tensor& q, const char* op) {
  MT_CHECK(expectDType(positions, DType::I32, op));
  return expectShape(positions, {q.dim(0), q.dim(1)}, op);
}

}  // namespace

void attention_cpu(const KernelArgs& args) {
  attentionForward(args, attentionSinks(args, false), nullptr);
}

std::string attention_packed_check(const KernelArgs& args) {
  if (args.in.size() < 4) return "attention_packed takes q, k, v, (sinks,) positions";
  MT_CHECK(attention_check(withoutPositions(args)));
  return positionsProblem(args.in.back(), args.in[0], "attention positions");
}

void attention_packed_cpu(const KernelArgs& args) {
  attentionForward(args, attentionSinks(args, true), &args.in.back());
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

namespace {

// mt.attention_grad and its packed row (`positions` (B, T) or null).
void attentionBackward(const KernelArgs& args, const Tensor* positions) {
  const Tensor &dout = args.in[0], &q = args.in[1], &k = args.in[2], &v = args.in[3];
  const Tensor &out = args.in[4], &lse = args.in[5];
  const AttnDims d = attnDims(q, args, positions);
  SingleThreadedBlas single;
  // One task per (batch, kv head): it owns dk/dv of that head and dq of its query heads, so
  // no two threads write the same element and every sum runs in a fixed order.
#pragma omp parallel
  {
    std::vector<float> probs(kBlockRows * d.seq), dprobs(kBlockRows * d.seq);
    std::vector<float> slopes(d.softcap > 0.0f ? kBlockRows * d.seq : 0);  // the capped scores' 1 - tanh^2
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
          const int64_t lo = firstKeyOfRows(d, b, i0, rows);
          const int r = static_cast<int>(rows), span = static_cast<int>(keys - lo);
          const int64_t q_off = (b * d.seq + i0) * d.q_stride + h * d.head_dim, k_off = lo * d.kv_stride;
          const float* qb = q.f32() + q_off;
          const float* dob = dout.f32() + q_off;
          const float* ob = out.f32() + q_off;
          float* dqb = args.out[0].f32() + q_off;
          // P, recomputed from the saved log-sum-exp.
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, span, d.hd, d.scale, qb, d.q_stride, kb + k_off,
                      d.kv_stride, 0.0f, probs.data(), span);
          capScores(probs.data(), rows * span, d, slopes.data());
          maskedSoftmax(probs.data(), rows, lo, keys, b, i0, d, nullptr, nullptr,
                        lse.f32() + (b * d.heads + h) * d.seq + i0);
          // dV += P^T dO;  dP = dO V^T
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, span, d.hd, r, 1.0f, probs.data(), span, dob,
                      d.q_stride, 1.0f, dvb + k_off, d.kv_stride);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, span, d.hd, 1.0f, dob, d.q_stride, vb + k_off,
                      d.kv_stride, 0.0f, dprobs.data(), span);
          // dS = P * (dP - rowsum(dO * O)) * scale (times the cap's slope where the scores are capped)
          for (int64_t row = 0; row < rows; ++row) {
            const float delta = rowDot(dob + row * d.q_stride, ob + row * d.q_stride, d.head_dim);
            float* ds = dprobs.data() + row * span;
            const float* p = probs.data() + row * span;
#pragma omp simd
            for (int64_t j = 0; j < span; ++j) ds[j] = p[j] * (ds[j] - delta) * d.scale;
            if (d.softcap > 0.0f) {
              const float* slope = slopes.data() + row * span;
#pragma omp simd
              for (int64_t j = 0; j < span; ++j) ds[j] *= slope[j];
            }
          }
          // dQ = dS K;  dK += dS^T Q
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, d.hd, span, 1.0f, dprobs.data(), span, kb + k_off,
                      d.kv_stride, 0.0f, dqb, d.q_stride);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, span, d.hd, r, 1.0f, dprobs.data(), span, qb,
                      d.q_stride, 1.0f, dkb + k_off, d.kv_stride);
        }
      }
    }
  }
}

}  // namespace

void attention_grad_cpu(const KernelArgs& args) { attentionBackward(args, nullptr); }

std::string attention_packed_grad_check(const KernelArgs& args) {
  if (args.in.size() < 7) return "attention_packed_grad takes dout, q, k, v, out, lse, positions";
  MT_CHECK(attention_grad_check(withoutPositions(args)));
  return positionsProblem(args.in.back(), args.in[1], "attention_grad positions");
}

void attention_packed_grad_cpu(const KernelArgs& args) { attentionBackward(args, &args.in.back()); }

std::string attention_sinks_grad_check(const KernelArgs& args) {
  if (!args.ints.empty()) return "attention_sinks_grad takes no int attributes";
  for (const Tensor& t : args.in) MT_CHECK(expectDType(t, DType::F32, "attention_sinks_grad"));
  const Tensor &dout = args.in[0], &out = args.in[1], &lse = args.in[2], &sinks = args.in[3];
  if (sinks.rank() != 1 || sinks.dim(0) <= 0)
    return "attention_sinks_grad: sinks must be (H) with H > 0, got " + shapeString(sinks.shape);
  const int64_t heads = sinks.dim(0);
  if (dout.rank() != 3 || dout.dim(2) == 0 || dout.dim(2) % heads != 0)
    return "attention_sinks_grad: dout must be (B, T, H*D) for " + std::to_string(heads) + " heads, got " +
           shapeString(dout.shape);
  MT_CHECK(expectShape(out, dout.shape, "attention_sinks_grad out"));
  MT_CHECK(expectShape(lse, {dout.dim(0), heads, dout.dim(1)}, "attention_sinks_grad lse"));
  MT_CHECK(expectDType(args.out[0], DType::F32, "attention_sinks_grad dsinks"));
  return expectShape(args.out[0], {heads}, "attention_sinks_grad dsinks");
}

void attention_sinks_grad_cpu(const KernelArgs& args) {
  const Tensor &dout = args.in[0], &out = args.in[1], &lse = args.in[2], &sinks = args.in[3];
  const int64_t heads = sinks.dim(0), batch = dout.dim(0), seq = dout.dim(1), width = dout.dim(2);
  const int64_t head_dim = width / heads;
  // A head per task, its rows summed in a fixed order (in double: B*T terms).
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < heads; ++h) {
    double sum = 0.0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t off = (b * seq + t) * width + h * head_dim;
        const float p_sink = std::exp(sinks.f32()[h] - lse.f32()[(b * heads + h) * seq + t]);
        sum += static_cast<double>(p_sink) * rowDot(dout.f32() + off, out.f32() + off, head_dim);
      }
    args.out[0].f32()[h] = static_cast<float>(-sum);
  }
}

}  // namespace mt
