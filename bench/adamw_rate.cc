// The host optimizer against the machine's memory bandwidth. AdamW streams 7 fp32 words per
// parameter (reads gradient, weight, both moments; writes weight and moments) and the norm pass
// 1 (reads the gradient): both are bandwidth-bound, so their rate is compared with a STREAM-style
// triad (a = b + s*c: 3 words per element) on the same threads and array sizes. A split master
// (bf16 copy + 16-bit residual, mtc --stream-dtype bf16) moves the same bytes as an fp32 one and
// writes the streamed copy with them; it is restored and split again in cache. Prints a table.
// usage: mt_adamw_rate [MILLIONS_OF_PARAMETERS]   (default 64: 1.8 GiB of optimizer state)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/adamw/adamw.h"

namespace {

// Best of `reps` timed runs of `f` (after one warm-up), in seconds.
template <typename F>
double bestSeconds(int reps, F f) {
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

std::unique_ptr<float[]> filled(int64_t n, float value) {
  std::unique_ptr<float[]> a(new float[n]);
#pragma omp parallel for schedule(static)  // first touch by the threads that will use it
  for (int64_t i = 0; i < n; ++i) a[i] = value + 1e-7f * static_cast<float>(i % 1000);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const double millions = argc > 1 ? std::atof(argv[1]) : 64.0;
  const int64_t n = static_cast<int64_t>(millions * 1e6);
  if (n <= 0) {
    std::fprintf(stderr, "usage: %s [MILLIONS_OF_PARAMETERS]\n", argv[0]);
    return 2;
  }
  auto param = filled(n, 0.5f), grad = filled(n, 0.01f), m = filled(n, 0.0f), v = filled(n, 0.0f);
  const float s = 0.5f;
  float* a = m.get();
  const float *b = param.get(), *c = grad.get();
  const double triad = bestSeconds(5, [&] {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
  });
  mt::AdamWParams p;
  p.lr = 1e-4, p.weight_decay = 0.1, p.step = 10;
  const mt::MasterWeights plain{param.get()};
  const double adamw = bestSeconds(5, [&] { mt::adamw_cpu(plain, grad.get(), m.get(), v.get(), n, p); });
  volatile double sink = 0;
  const double norm = bestSeconds(5, [&] { sink = sink + mt::sum_squares_cpu(grad.get(), n); });
  const double fused = bestSeconds(5, [&] {
    sink = sink + mt::adamw_with_norm_cpu(plain, grad.get(), m.get(), v.get(), n, p);
  });
  // A GRAD_NORM task over a LoRA's adapters: qwen2.5-7b's rank-16 A and B of its 196 projections
  // (392 gradients, 40.3 M elements, most under one 65,536-element chunk), one at a time as before
  // session 46 (the peer) and in one pass over all their chunks.
  std::vector<const float*> adapters;
  std::vector<int64_t> adapter_sizes;
  int64_t adapter_elements = 0;
  for (int layer = 0; layer < 28; ++layer)
    for (auto [in, out] : {std::pair{3584, 3584}, {3584, 512}, {3584, 512}, {3584, 3584}, {3584, 18944},
                           {3584, 18944}, {18944, 3584}})
      for (int64_t size : {int64_t{16} * in, int64_t{16} * out})
        if (adapter_elements + size <= n) {
          adapters.push_back(grad.get() + adapter_elements);
          adapter_sizes.push_back(size);
          adapter_elements += size;
        }
  const double norm_each = bestSeconds(5, [&] {
    for (size_t i = 0; i < adapters.size(); ++i) sink = sink + mt::sum_squares_cpu(adapters[i], adapter_sizes[i]);
  });
  int64_t adapter_chunks = 0;
  for (int64_t size : adapter_sizes) adapter_chunks += mt::adamw_chunks(size);
  std::vector<double> partials(static_cast<size_t>(adapter_chunks));
  const double norm_many = bestSeconds(5, [&] {
    mt::sum_squares_chunks_many_cpu(adapters, adapter_sizes, partials.data());
    sink = sink + mt::sum_of_chunks(partials.data(), adapter_chunks);
  });
  // The plan 1.6 layout: the fp32 master beside its bf16 copy, rounded into in the same pass.
  std::vector<uint16_t> hi(n);
  const mt::MasterWeights staged{param.get(), hi.data()};
  const double fused_staged = bestSeconds(5, [&] {
    sink = sink + mt::adamw_with_norm_cpu(staged, grad.get(), m.get(), v.get(), n, p);
  });
  // The split master: the fp32 array becomes its bf16 copy and residual (the same bytes).
  std::vector<int16_t> lo(n);
  const mt::MasterWeights split{nullptr, hi.data(), lo.data()};
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) mt::splitMaster(param[i], hi[i], lo[i]);
  param.reset();
  const double fused_split = bestSeconds(5, [&] {
    sink = sink + mt::adamw_with_norm_cpu(split, grad.get(), m.get(), v.get(), n, p);
  });

  const double gb = 1e9;
  const double triad_gbs = 3.0 * 4 * n / triad / gb;
  std::printf("host optimizer vs memory bandwidth: %lld parameters, %d threads\n", static_cast<long long>(n),
              omp_get_max_threads());
  std::printf("| pass | bytes/param | time | GB/s | of triad | params/s |\n|---|---:|---:|---:|---:|---:|\n");
  std::printf("| triad a = b + s*c (peer) | 12 | %.1f ms | %.1f | 1.00 | — |\n", triad * 1e3, triad_gbs);
  for (auto [name, bytes, seconds] : {std::tuple{"AdamW (adamw_cpu)", 28, adamw}, {"norm (sum_squares_cpu)", 4, norm},
                                      {"norm then AdamW (two passes)", 32, norm + adamw},
                                      {"norm and AdamW per chunk (adamw_with_norm_cpu)", 28, fused},
                                      {"... on an fp32 master beside its bf16 copy (plan 1.6)", 30, fused_staged},
                                      {"... on a split master (bf16 copy + residual)", 28, fused_split}})
    std::printf("| %s | %d | %.1f ms | %.1f | %.2f | %.3g |\n", name, bytes, seconds * 1e3,
                double(bytes) * n / seconds / gb, double(bytes) * n / seconds / gb / triad_gbs, n / seconds);
  std::printf("\nnorm of a LoRA's %zu adapter gradients (qwen2.5-7b, rank 16: %lld elements)\n", adapters.size(),
              static_cast<long long>(adapter_elements));
  std::printf("| pass | time | GB/s | of triad | vs one at a time |\n|---|---:|---:|---:|---:|\n");
  for (auto [name, seconds] : {std::pair{"one gradient at a time (sum_squares_cpu each; peer)", norm_each},
                               {"all their chunks in one pass (sum_squares_chunks_many_cpu)", norm_many}})
    std::printf("| %s | %.2f ms | %.1f | %.2f | %.2fx |\n", name, seconds * 1e3, 4.0 * adapter_elements / seconds / gb,
                4.0 * adapter_elements / seconds / gb / triad_gbs, norm_each / seconds);
  return 0;
}
