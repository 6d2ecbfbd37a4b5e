#include "runtime/host/host_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "runtime/io/error.h"
#include "runtime/io/format_bytes.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

// Above this a cgroup v1 limit means "none" (the kernel writes 2^63 rounded down to a page).
constexpr int64_t kNoLimit = int64_t{1} << 62;


// The first whitespace-separated number in `path`, or -1 (missing, "max", malformed).
int64_t readNumber(const std::string& path) {
  std::ifstream in(path);
  long long value = -1;
  if (!(in >> value) || value < 0) return -1;
  return value;
}

// `key value` from a memory.stat or /proc/meminfo file, or 0.
int64_t readStat(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  long long value;
  while (in >> k >> value) {
    if (k == key) return value;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

// A mounted cgroup hierarchy holding the memory controller.
struct MemoryHierarchy {
  bool v2 = false;
  std::string root;   // the cgroup path the mount shows as its top
  std::string mount;  // where it is mounted
};

std::vector<MemoryHierarchy> memoryHierarchies(const std::string& root) {
  std::vector<MemoryHierarchy> found;
  std::ifstream in(root + "/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS"
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, device, cgroup_root, mount, fs_type, source, options;
    head >> id >> parent >> device >> cgroup_root >> mount;
    tail >> fs_type >> source >> options;
    const bool v1_memory = fs_type == "cgroup" && ("," + options + ",").find(",memory,") != std::string::npos;
    if (fs_type == "cgroup2" || v1_memory) found.push_back({fs_type == "cgroup2", cgroup_root, root + mount});
  }
  return found;
}

// Tightens `memory` by the cgroup at `dir` and each ancestor up to the mount `top`: limit less
// usage, plus the reclaimable page cache. `shown` is `dir`'s cgroup path, for the message.
void tightenByCgroups(std::string dir, const std::string& top, bool v2, std::string shown, HostMemory& memory) {
  while (true) {
    const int64_t limit = readNumber(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    if (limit >= 0 && limit < kNoLimit) {
      const int64_t usage = std::max<int64_t>(0, readNumber(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes")));
      const int64_t cache = readStat(dir + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file");
      const int64_t free = std::max<int64_t>(0, limit - usage + cache);
      if (memory.available < 0 || free < memory.available)
        memory = {free, fmt::format("the memory cgroup {} limits it to {}, {} in use", shown.empty() ? "/" : shown,
                                    formatBytes(limit), formatBytes(usage))};
    }
    if (dir.size() <= top.size()) return;
    dir.resize(dir.rfind('/'));
    shown.resize(shown.rfind('/') == std::string::npos ? 0 : shown.rfind('/'));
  }
}

}  // namespace

HostMemory availableHostMemory(const std::string& root) {
  HostMemory memory;
  const int64_t meminfo_kib = readStat(root + "/proc/meminfo", "MemAvailable:");
  if (meminfo_kib > 0) memory = {meminfo_kib * 1024, "MemAvailable"};
  const std::vector<MemoryHierarchy> hierarchies = memoryHierarchies(root);
  std::ifstream cgroups(root + "/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    // "ID:CONTROLLERS:PATH": v2 is "0::PATH", v1 names its controllers.
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",", path = line.substr(b + 1);
    const bool v2 = controllers == ",,";
    if (!v2 && controllers.find(",memory,") == std::string::npos) continue;
    for (const MemoryHierarchy& h : hierarchies) {
      if (h.v2 != v2) continue;
      // Inside a container the mount's top is the container's own cgroup: strip it from the path.
      std::string relative = path;
      if (h.root != "/" && relative.compare(0, h.root.size(), h.root) == 0) relative = relative.substr(h.root.size());
      if (relative == "/") relative.clear();
      tightenByCgroups(h.mount + relative, h.mount, v2, path == "/" ? "" : path, memory);
    }
  }
  return memory;
}

bool heldBySlices(plan::HostRole role, bool gradients_apart) {
  return role == plan::ROLE_MOMENT1 || role == plan::ROLE_MOMENT2 || (gradients_apart && role == plan::ROLE_GRAD);
}

int64_t shardedHostBytes(const plan::Plan& plan, const Shard& shard, HostUse use) {
  if (use == HostUse::kEvaluation) {  // the tensors a loss-only run touches, each whole
    const int64_t bytes =
        unsplitHostBytes(plan, [](const plan::HostTensor& t) { return !isOptimizerRole(t.role()); });
    return shard.shared_copy && !shard.writes_copy ? bytes - masterBytes(plan) : bytes;
  }
  int64_t bytes = planHostBytes(plan);
  const bool apart = gradientsKeptApart(plan);
  for (const auto& t : plan.host_tensors())
    if (heldBySlices(t.role(), apart)) {
      const int64_t n = checkedNumel(t.shape(), t.name());
      bytes -= (n - shard.of(n, t.param_index()).size()) * dtypeBytes(t.dtype());
    }
  // One host copy: the host's writer holds the masters and their bf16 copies for its ranks.
  if (shard.shared_copy && !shard.writes_copy) bytes -= masterBytes(plan);
  return bytes;
}

int64_t gradientSumBytes(const plan::Plan& plan, int64_t accumulate, const Shard& shard) {
  if (accumulate == 1) return 0;
  int64_t bytes = 0;
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_GRAD)
      bytes += shard.of(checkedNumel(t.shape(), t.name()), t.param_index()).size() * dtypeBytes(t.dtype());
  return bytes;
}

int64_t hostBytesNeeded(const plan::Plan& plan, const HostExtras& extras) {
  return shardedHostBytes(plan, extras.shard, extras.use) + (extras.arena_on_host ? plan.arena_bytes() : 0) +
         extras.gradient_sums + extras.exchange_buffers;
}

void checkHostMemory(const plan::Plan& plan, const HostExtras& extras, const HostMemory& memory) {
  const int64_t host = shardedHostBytes(plan, extras.shard, extras.use);
  const int64_t arena = extras.arena_on_host ? plan.arena_bytes() : 0;
  const int64_t sums = extras.gradient_sums + extras.exchange_buffers;
  const int64_t others = extras.host_peers_bytes;
  if (memory.available < 0 || host + arena + sums + others <= memory.available) return;
  throw Error(fmt::format(
      "the plan needs {} of host memory ({} of host tensors{}{}{}) but only {} is available ({}): run on a machine "
      "(or in a cgroup) with more memory, or compile a smaller model{}{}{}",
      formatBytes(host + arena + sums + others), formatBytes(host),
      arena ? fmt::format(" + the {} arena the CPU backend holds in host memory", formatBytes(arena)) : "",
      (extras.gradient_sums ? fmt::format(" + {} of --accumulate's gradient sums", formatBytes(extras.gradient_sums))
                            : "") +
          (extras.exchange_buffers
               ? fmt::format(" + {} of the ranks' exchange buffers", formatBytes(extras.exchange_buffers))
               : ""),
      others ? fmt::format(" + {} for the other {} rank(s) of this host", formatBytes(others), extras.host_peers) : "",
      formatBytes(memory.available),
      memory.bound, arena ? ", or a plan for a smaller --device-mem (the CPU backend's arena)" : "",
      extras.gradient_sums ? ", or train without --accumulate (a plan of a larger batch instead)" : "",
      others ? ", or fewer ranks per host" : ""));
}

}  // namespace mt
