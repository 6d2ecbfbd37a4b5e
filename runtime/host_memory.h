// How much host memory this process may still take, and the one check before a run allocates:
// the least of the kernel's MemAvailable and, for every memory cgroup the process is in (v1 or
// v2, each ancestor too), its limit less its usage (reclaimable page cache counted as free). A
// container or a systemd slice with a memory limit then refuses a plan that would be OOM-killed.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/plan_format.h"

namespace mt {

struct HostMemory {
  int64_t available = -1;  // bytes; -1 if unknown
  std::string bound;       // what sets it: "MemAvailable", or the cgroup, its limit and usage
};

// `root` prefixes /proc and /sys (tests point it at a made-up tree).
HostMemory availableHostMemory(const std::string& root = "");

// Throws mt::Error, naming each part and what bounds the memory, if the plan's host tensors (and
// its arena, when the CPU backend holds the arena in host memory) do not fit what is available.
// Called before anything is allocated.
void checkHostMemory(const plan::Plan& plan, bool arena_on_host, const HostMemory& memory = availableHostMemory());

}  // namespace mt
