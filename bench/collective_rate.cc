// The data-parallel gradient sum against MPI's own allreduce of the same bytes, in the same run
// (issue 31): what our fixed-order exchange (runtime/distributed/rank_exchange.h: slices to
// their owners, summed in rank order; the sharded optimizer's update then gathers the weights
// back, here the sums themselves) costs over the engine's fastest sum, which
// adds in an order of its own choosing. Run it under mpirun; rank 0 prints a table: per size,
// the bytes each rank sends (2 (N-1)/N of the tensor for both), the best time of each, their
// ratio and the algorithmic bandwidth (tensor bytes over time).
// With --plan, a training step's collectives instead: every parameter's gradient of PLAN, one
// exchange each as mtrun runs them (summed to its owners, the updated slices gathered back), the
// step's bytes and time against one MPI_Allreduce per gradient.
// usage: mpirun -np 2 mt_collective_rate [MAX_MIB]   (default 256: 1, 4, 16, 64, 256 MiB tensors)
//        mpirun -np 2 mt_collective_rate --plan PLAN...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "runtime/backends/cpu_libraries.h"
#include "runtime/distributed/rank_exchange.h"
#include "runtime/io/error.h"
#include "runtime/plan/plan_format.h"

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

// One training step's exchanges of `plan_path`'s gradients (every ROLE_PARAM's, in plan order),
// ours against MPI_Allreduce per gradient: a table row on rank 0.
void stepRow(mt::World& world, mt::MpiRankExchange& exchange, const std::string& plan_path) {
  const mt::plan::Plan plan = mt::readPlan(plan_path);
  std::vector<std::vector<float>> grads;
  int64_t elements = 0;
  for (const auto& tensor : plan.host_tensors()) {
    if (tensor.role() != mt::plan::ROLE_PARAM) continue;
    int64_t n = 1;
    for (int64_t d : tensor.shape()) n *= d;
    if (n > INT32_MAX) throw mt::Error(tensor.name() + " has more elements than MPI_Allreduce's int count");
    grads.emplace_back(static_cast<size_t>(n), 1.0f + world.rank());
    elements += n;
  }
  const int reps = elements > (int64_t{1} << 24) ? 3 : 10;
  const double ours = bestSeconds(reps, [&] {
    for (size_t i = 0; i < grads.size(); ++i) {
      const int64_t n = static_cast<int64_t>(grads[i].size());
      exchange.reduceToOwner(grads[i].data(), n, static_cast<int>(i));
      exchange.gatherWhole(grads[i].data(), n, static_cast<int>(i));
    }
  });
  const double theirs = bestSeconds(reps, [&] {
    for (auto& grad : grads)
      MPI_Allreduce(MPI_IN_PLACE, grad.data(), static_cast<int>(grad.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  const double bytes = 4.0 * static_cast<double>(elements);
  const double sent = 2.0 * (world.size() - 1) / world.size() * bytes;
  if (world.rank() == 0)
    std::printf("| %s | %zu | %.1f MiB | %.1f MiB | %.2f ms | %.2f ms | %.2fx |\n", plan.model().name().c_str(),
                grads.size(), bytes / 1048576.0, sent / 1048576.0, ours * 1e3, theirs * 1e3, ours / theirs);
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
    mt::MpiRankExchange exchange(world);
    exchange.setStep(0, 1, std::vector<float>(static_cast<size_t>(world.size()), 1.0f), static_cast<float>(world.size()));
    if (argc > 1 && std::strcmp(argv[1], "--plan") == 0) {
      if (argc == 2) throw mt::Error("--plan takes one or more plans (mtc MODEL ... -o PLAN)");
      if (world.rank() == 0)
        std::printf("%d ranks (%d on this host): a step's exchanges, one per gradient, each rank sending 2(N-1)/N of "
                    "the gradients\n| plan | gradients | their bytes | sent per rank | ours (fixed order) | "
                    "MPI_Allreduce | ours / MPI |\n|---|---|---|---|---|---|---|\n",
                    world.size(), world.localSize());
      for (int i = 2; i < argc; ++i) stepRow(world, exchange, argv[i]);
      return 0;
    }
    const int64_t max_mib = argc > 1 ? std::atoll(argv[1]) : 256;
    if (world.rank() == 0)
      std::printf("%d ranks (%d on this host); each sends and receives 2(N-1)/N of the tensor in both\n"
                  "| tensor | sent per rank | ours (fixed order) | MPI_Allreduce | ours / MPI | ours GB/s | MPI GB/s |\n"
                  "|---|---|---|---|---|---|---|\n",
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
      const double sent = 2.0 * (world.size() - 1) / world.size() * bytes;
      if (world.rank() == 0)
        std::printf("| %lld MiB | %.1f MiB | %.2f ms | %.2f ms | %.2fx | %.2f | %.2f |\n", static_cast<long long>(mib),
                    sent / 1048576.0, ours * 1e3, theirs * 1e3, ours / theirs, bytes / ours * 1e-9,
                    bytes / theirs * 1e-9);
    }
    return 0;
  } catch (const mt::Error& e) {
    std::fprintf(stderr, "mt_collective_rate: error: %s\n", e.what());
    return 1;
  }
}
