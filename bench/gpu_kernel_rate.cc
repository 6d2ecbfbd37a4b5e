// mt_gpu_kernel_rate: the CUDA kernels a bf16 plan spends its time in, timed alone at the models'
// shapes against a ceiling measured in the same run (issue 28, items 2 and 3):
//   - cuBLAS bf16 products through matmul_cuda: 8192³ first (the ceiling), then every linear layer
//     of llama-1b and qwen2.5-7b as the plans run it: forward, input gradient, weight gradient
//     (f32 result);
//   - causal bf16 attention, forward and backward, checked against a float64 reference on sampled
//     rows before it is timed: our tensor-core kernels (kernels/attention/attention_mma_cuda.cu)
//     and cuDNN's fused flash attention (attention_cudnn.cc, mtrun --attention cudnn) side by side.
// Random inputs (never zeros), CUDA events, the median of 9 timed launches (each region repeated
// until it lasts ~1 ms) after a warm-up. One line per case; bench/gpu/kernel_peer.py prints
// PyTorch's lines for the same cases, and bench/gpu/run.sh puts the two side by side.
// usage: mt_gpu_kernel_rate [all|attention]   (attention: the products left out)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cudnn.h"
#include "kernels/cuda_check.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/matmul/matmul.h"
#include "runtime/backends/cuda_device.h"

namespace mt {
namespace {

// A device tensor filled with uniform values in [-scale, scale] (bf16 or f32). A 4M-element
// random pattern is tiled over larger tensors: still random-looking data to the tensor cores,
// and no minutes spent drawing billions of numbers on the host.
class DeviceTensor {
 public:
  DeviceTensor(std::vector<int64_t> shape, DType dtype, uint64_t seed, float scale = 1.0f) {
    t_.shape = std::move(shape);
    t_.dtype = dtype;
    MT_CUDA_CHECK(cudaMalloc(&t_.data, t_.bytes()));
    const int64_t n = t_.numel(), pattern = std::min<int64_t>(n, int64_t{1} << 22);
    std::vector<uint16_t> halves(dtype == DType::BF16 ? pattern : 0);
    std::vector<float> floats(dtype == DType::F32 ? pattern : 0);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < pattern; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const float v = scale * (static_cast<float>(x >> 40) / 8388608.0f - 1.0f);
      if (dtype == DType::BF16) halves[i] = bf16Bits(v);
      else floats[i] = v;
    }
    const void* src = dtype == DType::BF16 ? static_cast<const void*>(halves.data()) : floats.data();
    const size_t elem = dtypeSize(dtype);
    for (int64_t at = 0; at < n; at += pattern)
      MT_CUDA_CHECK(cudaMemcpy(static_cast<char*>(t_.data) + at * elem, src, std::min(pattern, n - at) * elem,
                               cudaMemcpyHostToDevice));
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  ~DeviceTensor() { cudaFree(t_.data); }
  const Tensor& tensor() const { return t_; }
  // The values back on the host, widened to float.
  std::vector<float> toHost() const {
    std::vector<float> out(t_.numel());
    if (t_.dtype == DType::F32) {
      MT_CUDA_CHECK(cudaMemcpy(out.data(), t_.data, t_.bytes(), cudaMemcpyDeviceToHost));
      return out;
    }
    std::vector<uint16_t> halves(t_.numel());
    MT_CUDA_CHECK(cudaMemcpy(halves.data(), t_.data, t_.bytes(), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < halves.size(); ++i) out[i] = bf16Value(halves[i]);
    return out;
  }

 private:
  Tensor t_;
};

// Milliseconds one call of `launch` takes on `stream`: the median of 9 timed regions, each
// repeating the call until it lasts about a millisecond, after two warm-up calls.
double medianMs(const std::function<void()>& launch, cudaStream_t stream) {
  cudaEvent_t start, stop;
  MT_CUDA_CHECK(cudaEventCreate(&start));
  MT_CUDA_CHECK(cudaEventCreate(&stop));
  auto timeRegion = [&](int calls) {
    MT_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < calls; ++i) launch();
    MT_CUDA_CHECK(cudaEventRecord(stop, stream));
    MT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    MT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms) / calls;
  };
  timeRegion(2);
  const int calls = std::clamp(static_cast<int>(1.0 / std::max(timeRegion(1), 1e-3)), 1, 100);
  std::vector<double> times;
  for (int r = 0; r < 9; ++r) times.push_back(timeRegion(calls));
  std::sort(times.begin(), times.end());
  MT_CUDA_CHECK(cudaEventDestroy(start));
  MT_CUDA_CHECK(cudaEventDestroy(stop));
  return times[times.size() / 2];
}

// out (M, N) = op(a) · op(b) through matmul_cuda; `flops` 2·M·N·K.
double gemmTflops(int64_t m, int64_t n, int64_t k, bool weight_grad, const CudaLaunch& launch) {
  // forward / input gradient: a (M, K), b (N, K) transposed or (K, N); weight gradient:
  // aᵀ with a = dy (K=tokens, M), b = x (K=tokens, N), the result f32 as the plans keep it.
  DeviceTensor a(weight_grad ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, DType::BF16, 1);
  DeviceTensor b(weight_grad ? std::vector<int64_t>{k, n} : std::vector<int64_t>{n, k}, DType::BF16, 2, 0.05f);
  DeviceTensor out({m, n}, weight_grad ? DType::F32 : DType::BF16, 3);
  KernelArgs args;
  args.in = {a.tensor(), b.tensor()};
  args.out = {out.tensor()};
  args.ints = {weight_grad ? 1 : 0, weight_grad ? 0 : 1};
  const double ms = medianMs([&] { matmul_cuda(args, launch); }, launch.stream);
  return 2.0 * m * n * k / (ms * 1e-3) / 1e12;
}

struct Linear {
  const char* name;
  int64_t in, out;
};
struct Model {
  const char* name;
  int64_t tokens;  // rows of every product: the plan's batch × sequence
  std::vector<Linear> linears;
};

void benchGemms(const CudaLaunch& launch) {
  const double peak = gemmTflops(8192, 8192, 8192, false, launch);
  std::printf("gemm 8192^3 bf16: %.1f TFLOP/s (the ceiling below)\n", peak);
  // llama-1b: width 2048, 32 heads of 64 (8 key/value), ffn 8192, vocabulary 128256, batch 4 x 1024.
  // qwen2.5-7b: width 3584, 28 heads of 128 (4 key/value), ffn 18944, vocabulary 152064; 16 x 1024
  // rows (the plan's --batch auto runs more sequences, in products at least this tall).
  const Model models[] = {
      {"llama-1b", 4096,
       {{"q/o", 2048, 2048}, {"k/v", 2048, 512}, {"gate/up", 2048, 8192}, {"down", 8192, 2048}, {"head", 2048, 128256}}},
      {"qwen2.5-7b", 16384,
       {{"q/o", 3584, 3584}, {"k/v", 3584, 512}, {"gate/up", 3584, 18944}, {"down", 18944, 3584}, {"head", 3584, 152064}}}};
  for (const Model& model : models) {
    double flops = 0, seconds = 0;
    for (const Linear& l : model.linears) {
      // forward y (T, out) = x (T, in) · Wᵀ; input gradient dx (T, in) = dy (T, out) · W;
      // weight gradient dW (out, in) = dyᵀ · x, f32.
      const double fwd = gemmTflops(model.tokens, l.out, l.in, false, launch);
      const double dgrad = gemmTflops(model.tokens, l.in, l.out, false, launch);
      const double wgrad = gemmTflops(l.out, l.in, model.tokens, true, launch);
      const double f = 2.0 * model.tokens * l.in * l.out;
      flops += 3 * f;
      seconds += f / (fwd * 1e12) + f / (dgrad * 1e12) + f / (wgrad * 1e12);
      std::printf("gemm %s %s (%lld x %lld, %lld rows): forward %.1f, input grad %.1f, weight grad %.1f TFLOP/s "
                  "(%.0f%% %.0f%% %.0f%% of 8192^3)\n",
                  model.name, l.name, static_cast<long long>(l.in), static_cast<long long>(l.out),
                  static_cast<long long>(model.tokens), fwd, dgrad, wgrad, 100 * fwd / peak, 100 * dgrad / peak,
                  100 * wgrad / peak);
    }
    std::printf("gemm %s all linears: %.1f TFLOP/s, %.0f%% of 8192^3\n", model.name, flops / seconds / 1e12,
                100 * flops / seconds / 1e12 / peak);
  }
}

struct AttentionCase {
  const char* name;
  int64_t batch, seq, heads, kv_heads, head_dim;
};

// The largest relative error of sampled rows of the forward (out, lse) and backward (dq, dk, dv)
// against float64 sums over the same bf16 inputs, and where it is: the kernels' result at this
// length, not only at the twin tests' short ones.
struct SampledError {
  double error = 0;
  std::string where;
};
SampledError sampledError(const AttentionCase& c, const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, const std::vector<float>& dout, const std::vector<float>& out,
                    const std::vector<float>& lse, const std::vector<float>& dq, const std::vector<float>& dk,
                    const std::vector<float>& dv) {
  const int64_t T = c.seq, D = c.head_dim, H = c.heads, group = c.heads / c.kv_heads;
  const int64_t qs = H * D, kvs = c.kv_heads * D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  SampledError worst;
  auto note = [&](double error, const std::string& where) {
    if (!(error <= worst.error)) worst = {error, where};  // NaN counts as the worst
  };
  auto compare = [&](const std::vector<double>& want, const float* got, const std::string& where) {
    double diff = 0, norm = 0;
    for (int64_t d = 0; d < D; ++d) diff += std::pow(got[d] - want[d], 2), norm += want[d] * want[d];
    note(std::sqrt(diff / std::max(norm, 1e-30)), where);
  };
  auto dot = [&](const float* a, const float* b) {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += static_cast<double>(a[d]) * b[d];
    return s;
  };
  const int64_t b = c.batch - 1;
  for (int64_t h : {int64_t{0}, H - 1}) {
    const int64_t kh = h / group;
    auto qRow = [&](int64_t t) { return &q[(b * T + t) * qs + h * D]; };
    auto kRow = [&](int64_t t) { return &k[(b * T + t) * kvs + kh * D]; };
    auto vRow = [&](int64_t t) { return &v[(b * T + t) * kvs + kh * D]; };
    auto doRow = [&](int64_t t) { return &dout[(b * T + t) * qs + h * D]; };
    auto oRow = [&](int64_t t) { return &out[(b * T + t) * qs + h * D]; };
    // The reference's own log-sum-exp of row i (sampled rows only: all T would take seconds).
    auto refLse = [&](int64_t i) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j <= i; ++j) m = std::max(m, scale * dot(qRow(i), kRow(j)));
      for (int64_t j = 0; j <= i; ++j) s += std::exp(scale * dot(qRow(i), kRow(j)) - m);
      return m + std::log(s);
    };
    // The reference's out_i and the weights p_ij = exp(scale q_i·k_j − lse_i).
    auto refOut = [&](int64_t i, double row_lse) {
      std::vector<double> o(D, 0.0);
      for (int64_t j = 0; j <= i; ++j) {
        const double w = std::exp(scale * dot(qRow(i), kRow(j)) - row_lse);
        for (int64_t d = 0; d < D; ++d) o[d] += w * vRow(j)[d];
      }
      return o;
    };
    for (int64_t i : {int64_t{0}, int64_t{63}, int64_t{64}, T / 2 + 1, T - 1}) {
      const double row_lse = refLse(i);
      const std::string at = " head " + std::to_string(h) + " row " + std::to_string(i);
      note(std::abs(row_lse - lse[(b * H + h) * T + i]) / std::max(std::abs(row_lse), 1.0), "lse" + at);
      const std::vector<double> o = refOut(i, row_lse);
      compare(o, oRow(i), "out" + at);
      // dq of row 0 is zero but for rounding (one key: p = 1, out = v, dS = dout·(v - out)):
      // no relative error means anything there.
      if (i == 0) continue;
      double di = 0;
      for (int64_t d = 0; d < D; ++d) di += o[d] * doRow(i)[d];
      std::vector<double> g(D, 0.0);
      for (int64_t j = 0; j <= i; ++j) {
        const double ds = std::exp(scale * dot(qRow(i), kRow(j)) - row_lse) * (dot(doRow(i), vRow(j)) - di) * scale;
        for (int64_t d = 0; d < D; ++d) g[d] += ds * kRow(j)[d];
      }
      compare(g, &dq[(b * T + i) * qs + h * D], "dq" + at);
    }
    // Key rows: dk_j and dv_j sum over every query head of the group and every i >= j.
    if (group == 1 || h == 0)
      for (int64_t j : {int64_t{0}, int64_t{65}, T / 2, T - 1}) {
        std::vector<double> gk(D, 0.0), gv(D, 0.0);
        for (int64_t hq = kh * group; hq < (kh + 1) * group; ++hq) {
          auto q2 = [&](int64_t t) { return &q[(b * T + t) * qs + hq * D]; };
          auto do2 = [&](int64_t t) { return &dout[(b * T + t) * qs + hq * D]; };
          auto o2 = [&](int64_t t) { return &out[(b * T + t) * qs + hq * D]; };
          for (int64_t i = j; i < T; ++i) {
            // This head's log-sum-exp from the kernel (checked above for heads 0 and H-1).
            const double pij = std::exp(scale * dot(q2(i), kRow(j)) - lse[(b * H + hq) * T + i]);
            const double ds = pij * (dot(do2(i), vRow(j)) - dot(do2(i), o2(i))) * scale;
            for (int64_t d = 0; d < D; ++d) gv[d] += pij * do2(i)[d], gk[d] += ds * q2(i)[d];
          }
        }
        const std::string at = " kv head " + std::to_string(kh) + " row " + std::to_string(j);
        compare(gv, &dv[(b * T + j) * kvs + kh * D], "dv" + at);
        compare(gk, &dk[(b * T + j) * kvs + kh * D], "dk" + at);
      }
  }
  return worst;
}

// `launch.cudnn_attention` set: cuDNN's; else ours.
void benchAttention(const AttentionCase& c, const CudaLaunch& launch) {
  const int64_t B = c.batch, T = c.seq, wq = c.heads * c.head_dim, wkv = c.kv_heads * c.head_dim;
  DeviceTensor q({B, T, wq}, DType::BF16, 11), k({B, T, wkv}, DType::BF16, 12), v({B, T, wkv}, DType::BF16, 13);
  DeviceTensor dout({B, T, wq}, DType::BF16, 14), out({B, T, wq}, DType::BF16, 15, 1e4f);
  DeviceTensor lse({B, c.heads, T}, DType::F32, 16, 1e4f);
  DeviceTensor dq({B, T, wq}, DType::BF16, 17, 1e4f), dk({B, T, wkv}, DType::BF16, 18, 1e4f);
  DeviceTensor dv({B, T, wkv}, DType::BF16, 19, 1e4f);
  KernelArgs fwd, bwd;
  fwd.in = {q.tensor(), k.tensor(), v.tensor()};
  fwd.out = {out.tensor(), lse.tensor()};
  fwd.ints = {c.heads, c.kv_heads};
  bwd.in = {dout.tensor(), q.tensor(), k.tensor(), v.tensor(), out.tensor(), lse.tensor()};
  bwd.out = {dq.tensor(), dk.tensor(), dv.tensor()};
  bwd.ints = fwd.ints;
  // Outputs start poisoned (1e4-scale values): a row the kernels leave unwritten fails the check.
  attention_cuda(fwd, launch);
  attention_grad_cuda(bwd, launch);
  MT_CUDA_CHECK(cudaStreamSynchronize(launch.stream));
  const SampledError error = sampledError(c, q.toHost(), k.toHost(), v.toHost(), dout.toHost(), out.toHost(), lse.toHost(),
                                    dq.toHost(), dk.toHost(), dv.toHost());
  const double fwd_ms = medianMs([&] { attention_cuda(fwd, launch); }, launch.stream);
  const double bwd_ms = medianMs([&] { attention_grad_cuda(bwd, launch); }, launch.stream);
  // Causal: half of the T² scores. Forward 2 products (QKᵀ, PV), backward 5 (the FlashAttention
  // count, whatever the kernel recomputes).
  const double fwd_flops = 2.0 * B * c.heads * T * T * c.head_dim, bwd_flops = 2.5 * fwd_flops;
  std::printf("attention %s %s (batch %lld, T %lld, %lld/%lld heads of %lld): forward %.3f ms %.1f TFLOP/s, backward "
              "%.3f ms %.1f TFLOP/s; sampled rows' error %.2e (%s, worst: %s)\n",
              c.name, launch.cudnn_attention ? "cudnn" : "ours", static_cast<long long>(B), static_cast<long long>(T), static_cast<long long>(c.heads),
              static_cast<long long>(c.kv_heads), static_cast<long long>(c.head_dim), fwd_ms,
              fwd_flops / (fwd_ms * 1e-3) / 1e12, bwd_ms, bwd_flops / (bwd_ms * 1e-3) / 1e12, error.error,
              error.error <= 2e-2 ? "ok" : "WRONG", error.where.c_str());
}

int run(bool products) {
  const GpuInfo gpu = probeGpu();
  if (!gpu.available) {
    std::printf("mt_gpu_kernel_rate: nothing timed: %s\n", gpu.description.c_str());
    return 0;
  }
  std::printf("GPU: %s\n", gpu.description.c_str());
  cudaStream_t stream;
  MT_CUDA_CHECK(cudaStreamCreate(&stream));
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cannot create a cuBLAS handle");
  const CudaLaunch launch{stream, blas};
  {
    CudnnAttention cudnn(stream);  // gone before its stream
    std::printf("cuDNN %lld\n", static_cast<long long>(CudnnAttention::version()));
    for (const AttentionCase& c : {AttentionCase{"T4096-d128", 4, 4096, 32, 8, 128},
                                   AttentionCase{"qwen2.5-7b", 16, 1024, 28, 4, 128},
                                   AttentionCase{"llama-1b", 16, 1024, 32, 8, 64}}) {
      benchAttention(c, launch);
      try {
        benchAttention(c, CudaLaunch{stream, blas, &cudnn, true});
      } catch (const std::exception& e) {  // cuDNN's refusal: said, and the products still timed
        std::printf("attention %s cudnn: %s\n", c.name, e.what());
        MT_CUDA_CHECK(cudaDeviceSynchronize());
      }
    }
  }
  if (products) benchGemms(launch);
  cublasDestroy(blas);
  MT_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace
}  // namespace mt

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "all";
  if (what != "all" && what != "attention") {
    std::fprintf(stderr, "usage: mt_gpu_kernel_rate [all|attention]\n");
    return 2;
  }
  try {
    return mt::run(what == "all");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mt_gpu_kernel_rate: %s\n", e.what());
    return 1;
  }
}
