// mtrun over several ranks (mpirun; DESIGN.md §13, docs/distributed.md): what the trainer does
// differently when World::get() has more than one rank. Rank r runs micro-batch r of each step
// (the sequences one process with --accumulate N runs as its micro-batch r), its gradients summed
// with the others' in rank order into their owners' slices as they land (rank_exchange.h); each
// rank updates its slices, every rank then holds the same norm and weights, and rank 0 alone
// prints, logs, checkpoints and exports.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/distributed/world.h"
#include "runtime/host/host_store.h"
#include "runtime/host/rank_exchange.h"
#include "runtime/plan/plan_format.h"
#include "runtime/training/trainer.h"

namespace mt {

class TokenFile;

// Throws mt::Error unless every rank runs the same plan, data, flags and code, naming the first
// rank and field that differ from rank 0's. A world of one agrees with itself.
void checkRanksAgree(const World& world, const TrainConfig& config, const plan::Plan& plan, const TokenFile& data);

// The GPU this rank runs on where the run landed on CUDA (`on_gpu`): its local rank modulo the
// host's GPUs (ranks beyond them share one, each with its own arena); 0 on the CPU. Collective:
// every rank calls it; a world whose ranks landed on different backends (a host without a GPU
// among hosts with one) is refused, naming a rank of each kind; rank 0 says where each rank runs.
int rankDevice(const World& world, bool on_gpu);

// `config` as rank `rank` runs it: rank 0 as given; the others write nothing (no log, exports,
// dumped gradients, trace, scores or checkpoints: their state is rank 0's), resuming from the same
// checkpoint folder.
TrainConfig forRank(TrainConfig config, int rank);

// One micro-step's shares: each rank's counted targets, in rank order, and what they make.
struct RankShares {
  std::vector<int64_t> counted;  // rank r's counted targets
  int64_t total = 0;
  // The weight of rank r's gradient, as --accumulate weighs its micro-batches: 1, or (with a loss
  // mask) its counted targets.
  std::vector<float> weights;
};
RankShares shareStep(const World& world, int64_t counted, bool masked);

// Every rank's loss of this micro-step added to `loss_sum` in rank order (times its counted
// targets with a loss mask), as --accumulate adds its micro-batches' one after the other.
void addLosses(const World& world, const RankShares& shares, float loss, bool masked, double& loss_sum);

// mtrun's header lines of a data-parallel job (rank 0 prints): the ranks, the sequences per
// update, the host bytes per rank (least and most) and on rank 0's host. Every rank calls it.
void printRanks(const World& world, const HostStore& store, int64_t batch, int64_t accumulate,
                std::optional<double> rank_timeout);

// The signal that asked the job to stop, if any rank got one (0: none): the lowest rank's. The
// signals reach the ranks at different moments (or one rank alone); they stop after the same
// step, all of them, naming the same signal.
int stopSignalOfRanks(const World& world, int mine);

}  // namespace mt
