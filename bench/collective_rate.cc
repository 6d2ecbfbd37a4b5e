// The data-parallel gradient sum against MPI's own allreduce of the same bytes, in the same run
// (issue 31): what our fixed-order exchange (runtime/distributed/rank_exchange.h: slices to
// their owners, summed in rank order; the sharded optimizer's update then gathers the weights
// back, here the sums themselves) costs over the engine's fastest sum, which
// adds in an order of its own choosing. Run it under mpirun; rank 0 prints a table: per size,
// the bytes each rank sends (2 (N-1)/N of the tensor for both), the best time of each, their
// ratio and the algorithmic bandwidth (tensor bytes over time).
// usage: mpirun -np 2 mt_collective_rate [MAX_MIB]   (default 256: 1, 4, 16, 64, 256 MiB tensors)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "runtime/backends/cpu_libraries.h"
#include "runtime/distributed/rank_exchange.h"
#include "runtime/io/error.h"

namespace {

// Best of `reps` timed runs of `f` (after one warm-up), in seconds; every rank starts each run
// together and the slowest rank's time counts.
template <typename F>
double bestSeconds(int reps, F f) {
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    f();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), slowest = 0;
    MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    best = std::min(best, slowest);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  mt::configureCpuLibraries(argv);  // as mtrun: OpenMP threads wait passively (ranks share the cores)
  try {
    mt::World& world = mt::World::start(&argc, &argv);
    if (!world.distributed()) {
      std::fprintf(stderr, "mt_collective_rate: run it under mpirun with at least 2 ranks (mpirun -np 2 ...)\n");
      return 2;
    }
    const int64_t max_mib = argc > 1 ? std::atoll(argv[1]) : 256;
    mt::MpiRankExchange exchange(world);
    exchange.setStep(0, 1, std::vector<float>(static_cast<size_t>(world.size()), 1.0f), static_cast<float>(world.size()));
    if (world.rank() == 0)
      std::printf("%d ranks (%d on this host); each sends and receives 2(N-1)/N of the tensor in both\n"
                  "| tensor | ours (fixed order) | MPI_Allreduce | ours / MPI | ours GB/s | MPI GB/s |\n"
                  "|---|---|---|---|---|---|\n",
                  world.size(), world.localSize());
    for (int64_t mib = 1; mib <= max_mib; mib *= 4) {
      const int64_t n = mib << 18;  // floats
      std::vector<float> grad(static_cast<size_t>(n), 1.0f + world.rank());
      const int reps = mib >= 64 ? 3 : 10;
      const double ours = bestSeconds(reps, [&] {
        exchange.reduceToOwner(grad.data(), n, 0);
        exchange.gatherWhole(grad.data(), n, 0);
      });
      const double theirs = bestSeconds(reps, [&] {
        MPI_Allreduce(MPI_IN_PLACE, grad.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      });
      const double bytes = 4.0 * static_cast<double>(n);
      if (world.rank() == 0)
        std::printf("| %lld MiB | %.2f ms | %.2f ms | %.2fx | %.2f | %.2f |\n", static_cast<long long>(mib), ours * 1e3,
                    theirs * 1e3, ours / theirs, bytes / ours * 1e-9, bytes / theirs * 1e-9);
    }
    return 0;
  } catch (const mt::Error& e) {
    std::fprintf(stderr, "mt_collective_rate: error: %s\n", e.what());
    return 1;
  }
}
