// How much host memory this process may still take, and the one check before a run allocates:
// the least of the kernel's MemAvailable and, for every memory cgroup the process is in (v1 or
// v2, each ancestor too), its limit less its usage (reclaimable page cache counted as free). A
// container or a systemd slice with a memory limit then refuses a plan that would be OOM-killed.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/host/rank_exchange.h"
#include "runtime/plan/plan_format.h"

namespace mt {

struct HostMemory {
  int64_t available = -1;  // bytes; -1 if unknown
  std::string bound;       // what sets it: "MemAvailable", or the cgroup, its limit and usage
};

// `root` prefixes /proc and /sys (tests point it at a made-up tree).
HostMemory availableHostMemory(const std::string& root = "");

// What a process holds a training plan's host tensors for: its steps (every tensor), or to score
// weights alone (mtrun --eval-only on a plan whose loss-only run spares the optimizer,
// lossRunSparesOptimizer: its tensors — gradients, their landing buffer, the AdamW moments,
// isOptimizerRole — are never touched, so never allocated: 4 bytes per parameter, not 16).
enum class HostUse { kTraining, kEvaluation };

// The plan's host tensors' bytes on this process: all of them (planHostBytes), less the moments'
// slices other ranks hold when the optimizer is sharded (and the summed gradients' where the
// plan keeps them apart: gradientsKeptApart), and less the master weights where
// another rank of the host holds the host's shared copy; for kEvaluation, less the optimizer's.
int64_t shardedHostBytes(const plan::Plan& plan, const Shard& shard, HostUse use = HostUse::kTraining);
// Whether a rank holds only its slice (Shard::of) of a host tensor of this role: the AdamW moments,
// and the summed gradients where the plan keeps them apart (`gradients_apart`). What the host
// store allocates and shardedHostBytes counts.
bool heldBySlices(plan::HostRole role, bool gradients_apart);

// What a run holds in host memory beside the plan's host tensors.
struct HostExtras {
  bool arena_on_host = false;    // the CPU backend holds the device arena in host memory
  int64_t gradient_sums = 0;     // bytes of gradient accumulation's running sums (mtrun --accumulate)
  Shard shard;                   // this rank's share of a sharded optimizer (the moments)
  int64_t exchange_buffers = 0;  // bytes of the data-parallel exchange's buffers
  // Data parallel: what the host's other ranks need of the same memory (hostBytesNeeded of each),
  // and how many they are. Every rank of a host then checks the host's total.
  int64_t host_peers_bytes = 0;
  int host_peers = 0;
  HostUse use = HostUse::kTraining;
};

// What this process needs: the plan's host tensors here and the extras, the other ranks aside.
int64_t hostBytesNeeded(const plan::Plan& plan, const HostExtras& extras);

// Host bytes of --accumulate's running gradient sums: one f32 per gradient element (of this
// rank's slices when the optimizer is sharded), none without accumulation.
int64_t gradientSumBytes(const plan::Plan& plan, int64_t accumulate, const Shard& shard = {});

// Throws mt::Error, naming each part and what bounds the memory, if the plan's host tensors and
// the extras do not fit what is available. Called before anything is allocated.
void checkHostMemory(const plan::Plan& plan, const HostExtras& extras,
                     const HostMemory& memory = availableHostMemory());

}  // namespace mt
