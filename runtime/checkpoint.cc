#include "runtime/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "runtime/error.h"
#include "runtime/safetensors.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

constexpr char kSuffix[] = ".ckpt.safetensors";
constexpr char kFormat[] = "megatrain-checkpoint-1";

// Steps of the complete checkpoints in `dir`, ascending (temporary files do not match).
std::vector<std::pair<int64_t, fs::path>> checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    long long step;
    char tail[32];
    if (name.size() > sizeof(kSuffix) && name.compare(name.size() - sizeof(kSuffix) + 1, std::string::npos, kSuffix) == 0 &&
        std::sscanf(name.c_str(), "step-%lld%31s", &step, tail) == 2 && std::string(tail) == kSuffix)
      found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

void syncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

uint64_t parseNumber(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  try {
    size_t used = 0;
    if (it != meta.end()) {
      const uint64_t value = std::stoull(it->second, &used);
      if (used == it->second.size()) return value;
    }
  } catch (...) {
  }
  throw Error("checkpoint " + path + " is corrupt: metadata '" + key + "' is missing or not a number");
}

}  // namespace

std::string planFingerprint(const plan::Plan& plan) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;
  };
  mix(std::to_string(plan.model().batch()) + "x" + std::to_string(plan.model().seq()) + "v" +
      std::to_string(plan.model().vocab()));
  for (const auto& t : plan.host_tensors()) {
    std::string shape;
    for (auto d : t.shape()) shape += std::to_string(d) + ",";
    mix(t.name() + "|" + shape + "|" + std::to_string(t.role()) + "|" + std::to_string(t.dtype()));
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void writeCheckpoint(const std::string& dir, const plan::Plan& plan, const HostStore& store,
                     const CheckpointState& state, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create checkpoint directory " + dir + ": " + ec.message());
  char name[64];
  std::snprintf(name, sizeof name, "step-%09lld%s", static_cast<long long>(state.step), kSuffix);
  const std::string path = (fs::path(dir) / name).string();
  store.saveState(path, {{"format", kFormat},
                         {"step", std::to_string(state.step)},
                         {"seed", std::to_string(state.seed)},
                         {"total_steps", std::to_string(state.total_steps)},
                         {"model", plan.model().name()},
                         {"plan_fingerprint", planFingerprint(plan)}});
  syncDirectory(dir);
  auto all = checkpoints(dir);
  for (size_t i = 0; keep > 0 && i + keep < all.size(); ++i) fs::remove(all[i].second, ec);
}

std::optional<std::string> latestCheckpoint(const std::string& dir) {
  auto all = checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().second.string();
}

CheckpointState loadCheckpoint(const std::string& path, const plan::Plan& plan, HostStore& store) {
  SafetensorsFile file(path);
  const auto& meta = file.metadata();
  auto format = meta.find("format");
  if (format == meta.end() || format->second != kFormat)
    throw Error(path + " is not a MegaTrain checkpoint (format '" +
                (format == meta.end() ? std::string("none") : format->second) + "')");
  auto fingerprint = meta.find("plan_fingerprint");
  if (fingerprint == meta.end() || fingerprint->second != planFingerprint(plan)) {
    auto model = meta.find("model");
    throw Error("checkpoint " + path + " was written for another plan (model '" +
                (model == meta.end() ? std::string("?") : model->second) + "') and cannot resume '" +
                plan.model().name() + "': resume with the plan it was written for, or start a new checkpoint directory");
  }
  CheckpointState state;
  state.step = static_cast<int64_t>(parseNumber(meta, "step", path));
  state.seed = parseNumber(meta, "seed", path);
  state.total_steps = static_cast<int64_t>(parseNumber(meta, "total_steps", path));
  store.loadState(file);
  return state;
}

}  // namespace mt
