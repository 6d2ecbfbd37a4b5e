#include "runtime/training/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "runtime/backends/cuda_device.h"
#include "runtime/data/token_data.h"
#include "runtime/io/error.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/version.h"

namespace mt {

void checkRanksAgree(const World& world, const TrainConfig& config, const plan::Plan& plan, const TokenFile& data) {
  if (!world.distributed()) return;
  const std::pair<const char*, std::string> fields[] = {
      {"plan (fingerprint)", planFingerprint(plan)},
      {"data (tokens and CRC-32C of --data)", fmt::format("{} tokens, {:08x}", data.size(), data.checksum())},
      {"flags", config.command_line},
      {"code (MegaTrain version)", kVersion},
  };
  for (const auto& [field, mine] : fields) {
    const std::vector<std::string> all = world.allgather(mine);
    for (int r = 1; r < world.size(); ++r)
      if (all[r] != all[0])
        throw Error("rank " + std::to_string(r) + " runs another " + field + " than rank 0: '" + all[r] + "' vs '" +
                    all[0] + "'; every rank of the job must run the same plan, data, flags and code");
  }
}

int rankDevice(const World& world, bool on_gpu) {
  const int gpus = on_gpu ? gpuCount() : 0;
  const int device = on_gpu && gpus > 0 ? world.localRank() % gpus : -1;
  if (!world.distributed()) return std::max(device, 0);
  const std::vector<int64_t> devices = world.allgather(static_cast<int64_t>(device));
  const auto gpu_rank = std::find_if(devices.begin(), devices.end(), [](int64_t d) { return d >= 0; });
  const auto cpu_rank = std::find(devices.begin(), devices.end(), int64_t{-1});
  if (gpu_rank != devices.end() && cpu_rank != devices.end())
    throw Error(fmt::format("rank {} runs on a GPU and rank {} on the CPU: every rank of the job must run on the same "
                            "backend (give --backend cpu or cuda, on hosts that all have GPUs for cuda)",
                            gpu_rank - devices.begin(), cpu_rank - devices.begin()));
  if (world.rank() == 0 && gpu_rank != devices.end()) {
    std::string where;
    for (size_t r = 0; r < devices.size(); ++r) where += fmt::format("{}rank {}: GPU {}", r ? ", " : "", r, devices[r]);
    std::printf("ranks on their host's GPUs by local rank (%s)\n", where.c_str());
  }
  return std::max(device, 0);
}

TrainConfig forRank(TrainConfig config, int rank) {
  if (rank == 0) return config;
  config.sends_grads = !config.grads_path.empty();  // the summed gradients are sharded: rank 0 gathers them
  for (std::string* path : {&config.log_path, &config.export_path, &config.export_hf_dir, &config.export_peft_dir,
                            &config.grads_path, &config.trace_path, &config.report_path, &config.scores_path})
    path->clear();
  config.writes_checkpoints = false;
  return config;
}

RankShares shareStep(const World& world, int64_t counted, bool masked) {
  RankShares shares;
  shares.counted = world.allgather(counted);
  for (int64_t c : shares.counted) {
    shares.total += c;
    shares.weights.push_back(masked ? static_cast<float>(c) : 1.0f);
  }
  return shares;
}

void addLosses(const World& world, const RankShares& shares, float loss, bool masked, double& loss_sum) {
  const std::vector<float> losses = world.allgather(loss);
  for (size_t r = 0; r < losses.size(); ++r)
    loss_sum += masked ? static_cast<double>(shares.counted[r]) * losses[r] : losses[r];
}

void printRanks(const World& world, const HostStore& store, int64_t batch, int64_t accumulate,
                std::optional<double> rank_timeout) {
  const int64_t micro_batches = world.size() * accumulate;
  std::printf("  data parallel over %d ranks: rank r runs micro-batch%s of each step (%lld sequences per update), "
              "each gradient summed across the ranks in micro-batch order as it lands (as --accumulate %lld: bit for "
              "bit on the cpu backend, on cuda to the rounding of its kernels' atomic sums); rank 0 prints, logs, "
              "checkpoints and exports; to stop with a checkpoint, kill -USR1 mpirun "
              "(it forwards SIGUSR1; SIGTERM and SIGINT it follows with SIGKILL a second later)\n",
              world.size(), accumulate > 1 ? fmt::format("es r, r + {}, ... ({} of them)", world.size(), accumulate).c_str() : " r",
              static_cast<long long>(micro_batches * batch), static_cast<long long>(micro_batches));
  // The moments are sharded (and the summed gradients, where the plan keeps them apart); the
  // master weights are whole on every rank or host.
  const std::vector<int64_t> local_ranks = world.allgather(static_cast<int64_t>(world.localRank()));
  const std::vector<int64_t> held = world.allgather(store.totalBytes());
  const auto hosts = std::count(local_ranks.begin(), local_ranks.end(), 0);
  const int64_t on_host = world.sumOnHost(store.totalBytes());  // rank 0 prints its host's
  const auto [least, most] = std::minmax_element(held.begin(), held.end());
  const double params = static_cast<double>(store.numParams());
  const bool apart = store.gradientsApart();
  std::printf("  host memory: %.1f to %.1f MiB per rank (%.1f to %.1f bytes/param: the AdamW moments%s sharded over "
              "the ranks, each updating its slice; %s; %s), %.1f MiB on rank 0's host (%d ranks); %lld host(s)\n",
              *least / 1048576.0, *most / 1048576.0, *least / params, *most / params,
              apart ? " and summed gradients" : "",
              store.shard().shared_copy ? "one copy of the master weights per host, in memory its ranks share"
                                        : "the master weights whole on each",
              apart ? "the gradients land in a buffer of a few blocks' (a plan for ranks: mtc --ranks)"
                    : "the gradients whole on each rank (mtc --ranks N compiles a plan that keeps only slices)",
              on_host / 1048576.0, world.localSize(), static_cast<long long>(hosts));
  const std::string bound = rank_timeout ? fmt::format("{:g} s (--rank-timeout)", *rank_timeout)
                                         : fmt::format("{:g} s until the first step is done, then {:g} s + {:g}x the "
                                                       "slowest step (--rank-timeout auto)",
                                                       kRankWaitAtStart, kRankWaitBase, kRankWaitPerStep);
  std::printf("  a rank waits for the others at most %s, then ends the job (one hung, stopped or gone)\n",
              bound.c_str());
}

int stopSignalOfRanks(const World& world, int mine) {
  const std::vector<int64_t> all = world.allgather(static_cast<int64_t>(mine));
  const auto first = std::find_if(all.begin(), all.end(), [](int64_t s) { return s != 0; });
  return first == all.end() ? 0 : static_cast<int>(*first);
}

}  // namespace mt
