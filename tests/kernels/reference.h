// Naive double-precision references of the kernels, written from the math, not from the
// kernels' code.
#pragma once
#include <cmath>
#include <vector>

#include "tests/kernels/kernel_harness.h"

namespace mt::test::ref {

// a (batch, m, k) [or (batch, k, m) with ta], b (k, n) [(n, k) with tb], batch_b 1 or batch.
inline Doubles matmul(const Doubles& a, const Doubles& b, int64_t batch, int64_t m, int64_t k, int64_t n,
                      bool ta, bool tb, bool shared_b) {
  Doubles out(batch * m * n, 0.0);
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t c = 0; c < k; ++c) {
          const double av = ta ? a[z * m * k + c * m + i] : a[z * m * k + i * k + c];
          const int64_t bz = shared_b ? 0 : z * k * n;
          const double bv = tb ? b[bz + j * k + c] : b[bz + c * n + j];
          s += av * bv;
        }
        out[z * m * n + i * n + j] = s;
      }
  return out;
}

// Returns y, mean, rstd concatenated (rows * c + rows + rows).
inline Doubles layernorm(const Doubles& x, const Doubles& g, const Doubles& b, int64_t c, double eps) {
  const int64_t rows = x.size() / c;
  Doubles y(x.size()), mean(rows), rstd(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < c; ++i) m += x[r * c + i];
    m /= c;
    for (int64_t i = 0; i < c; ++i) v += (x[r * c + i] - m) * (x[r * c + i] - m);
    const double rs = 1.0 / std::sqrt(v / c + eps);
    for (int64_t i = 0; i < c; ++i) y[r * c + i] = (x[r * c + i] - m) * rs * g[i] + b[i];
    mean[r] = m;
    rstd[r] = rs;
  }
  y.insert(y.end(), mean.begin(), mean.end());
  y.insert(y.end(), rstd.begin(), rstd.end());
  return y;
}

// Returns y, rstd concatenated.
inline Doubles rmsnorm(const Doubles& x, const Doubles& g, int64_t c, double eps) {
  const int64_t rows = x.size() / c;
  Doubles y(x.size()), rstd(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t i = 0; i < c; ++i) s += x[r * c + i] * x[r * c + i];
    const double rs = 1.0 / std::sqrt(s / c + eps);
    for (int64_t i = 0; i < c; ++i) y[r * c + i] = x[r * c + i] * rs * g[i];
    rstd[r] = rs;
  }
  y.insert(y.end(), rstd.begin(), rstd.end());
  return y;
}

inline double gelu(double x, bool tanh_approx) {
  if (tanh_approx)
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
inline double silu(double x) { return x / (1 + std::exp(-x)); }

// x (b, t, heads * d): rotate-half rotary embedding.
inline Doubles rope(const Doubles& x, int64_t b, int64_t t, int64_t width, int64_t d, double theta,
                    bool inverse) {
  Doubles y(x.size());
  for (int64_t z = 0; z < b; ++z)
    for (int64_t p = 0; p < t; ++p)
      for (int64_t h = 0; h < width / d; ++h)
        for (int64_t i = 0; i < d / 2; ++i) {
          const double angle = p * std::pow(theta, -2.0 * i / d) * (inverse ? -1 : 1);
          const int64_t base = (z * t + p) * width + h * d;
          const double x1 = x[base + i], x2 = x[base + i + d / 2];
          y[base + i] = x1 * std::cos(angle) - x2 * std::sin(angle);
          y[base + i + d / 2] = x2 * std::cos(angle) + x1 * std::sin(angle);
        }
  return y;
}

// q (b, t, h*d), k/v (b, t, hk*d); returns out (b, t, h*d) then lse (b, h, t). Query i sees keys
// j <= i, within the last `window` (0: all); `sinks` (h, or empty) join each row's softmax as
// gpt-oss's eager attention has them: a column of the scores, dropped after the softmax. A
// `softcap` c > 0 takes each scaled score s to c * tanh(s / c), as Gemma 2's eager attention.
inline Doubles attention(const Doubles& q, const Doubles& k, const Doubles& v, int64_t b, int64_t t,
                         int64_t h, int64_t hk, int64_t d, int64_t window = 0, const Doubles& sinks = {},
                         double softcap = 0.0) {
  Doubles out(b * t * h * d, 0.0), lse(b * h * t);
  const double scale = 1.0 / std::sqrt(double(d));
  for (int64_t z = 0; z < b; ++z)
    for (int64_t head = 0; head < h; ++head) {
      const int64_t kvh = head / (h / hk);
      for (int64_t i = 0; i < t; ++i) {
        const int64_t first = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
        std::vector<double> s(i + 1);
        double mx = sinks.empty() ? -1e300 : sinks[head];
        for (int64_t j = first; j <= i; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += q[(z * t + i) * h * d + head * d + c] * k[(z * t + j) * hk * d + kvh * d + c];
          s[j] = softcap > 0 ? softcap * std::tanh(dot * scale / softcap) : dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = sinks.empty() ? 0.0 : std::exp(sinks[head] - mx);
        for (int64_t j = first; j <= i; ++j) sum += std::exp(s[j] - mx);
        for (int64_t j = first; j <= i; ++j)
          for (int64_t c = 0; c < d; ++c)
            out[(z * t + i) * h * d + head * d + c] +=
                std::exp(s[j] - mx) / sum * v[(z * t + j) * hk * d + kvh * d + c];
        lse[(z * h + head) * t + i] = mx + std::log(sum);
      }
    }
  out.insert(out.end(), lse.begin(), lse.end());
  return out;
}

// Mean cross-entropy over rows whose target is in [0, v); returns loss then lse per row.
inline Doubles softmaxXent(const Doubles& logits, const std::vector<int32_t>& targets, int64_t v) {
  const int64_t rows = logits.size() / v;
  Doubles lse(rows);
  double total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -1e300, s = 0;
    for (int64_t c = 0; c < v; ++c) mx = std::max(mx, logits[r * v + c]);
    for (int64_t c = 0; c < v; ++c) s += std::exp(logits[r * v + c] - mx);
    lse[r] = mx + std::log(s);
    if (targets[r] >= 0 && targets[r] < v) {
      total += lse[r] - logits[r * v + targets[r]];
      ++count;
    }
  }
  Doubles out{count ? total / count : 0.0};
  out.insert(out.end(), lse.begin(), lse.end());
  return out;
}

}  // namespace mt::test::ref
