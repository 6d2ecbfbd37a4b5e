// Measures OpenBLAS sgemm throughput at the shapes of a transformer layer (rows = batch*seq),
// for the compute floor in bench/cpu_train.sh. Prints GFLOP/s as a single number.
// usage: mt_sgemm_rate ROWS WIDTH FFN
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime/backends/cpu_libraries.h"

int main(int argc, char** argv) {
  mt::configureCpuLibraries(argv);
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ROWS WIDTH FFN\n", argv[0]);
    return 2;
  }
  const int rows = std::atoi(argv[1]), width = std::atoi(argv[2]), ffn = std::atoi(argv[3]);
  std::vector<float> a(size_t(rows) * ffn, 0.5f), w(size_t(ffn) * width, 0.25f), c(size_t(rows) * ffn);
  struct Shape { int m, n, k; };
  const Shape shapes[] = {{rows, width, width}, {rows, ffn, width}, {rows, width, ffn}};
  double flops = 0, seconds = 0;
  for (int rep = 0; rep < 4; ++rep) {
    for (const auto& s : shapes) {
      const auto start = std::chrono::steady_clock::now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k, w.data(), s.k,
                  0.0f, c.data(), s.n);
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (rep > 0) {  // the first round warms up
        flops += 2.0 * s.m * s.n * s.k;
        seconds += t;
      }
    }
  }
  std::printf("%.1f\n", flops / seconds / 1e9);
  return 0;
}
