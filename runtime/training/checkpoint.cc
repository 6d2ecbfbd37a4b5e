#include "runtime/training/checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "runtime/io/error.h"
#include "runtime/io/safetensors.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

constexpr char kSuffix[] = ".ckpt.safetensors";
constexpr char kFormat[] = "megatrain-checkpoint-1";
constexpr char kLockName[] = ".mtrun.lock";
// --keep-best's checkpoint (no step-<N> name: never pruned, never resumed from by default).
constexpr char kBestName[] = "best.ckpt.safetensors";
constexpr char kValLossKey[] = "val_loss";

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

CheckpointDir::CheckpointDir(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create checkpoint directory " + dir + ": " + ec.message());
  try {
    lock_ = std::make_unique<FileLock>((fs::path(dir) / kLockName).string(), /*remove_when_released=*/false);
  } catch (const FileLock::Busy& busy) {
    throw Error("checkpoint directory " + dir + " is in use by " + busy.holder() +
                ": two runs would interleave their checkpoints and prune each other's; wait for it to end, or "
                "give this run another --checkpoint-dir");
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (give a --checkpoint-dir this user can write)");
  }
  removed_ = removeStaleTemporaries(dir, [](const std::string& name) {
    return name.size() > sizeof(kSuffix) && name.compare(0, 5, "step-") == 0 &&
           name.compare(name.size() - sizeof(kSuffix) + 1, std::string::npos, kSuffix) == 0;
  });
}

namespace {

// The checkpoint file `name` in `dir`, its metadata `state`'s and `extra`.
void writeCheckpointFile(const std::string& dir, const std::string& name, const plan::Plan& plan,
                         const HostStore& store, const CheckpointState& state,
                         const std::map<std::string, std::string>& extra) {
  const std::string path = (fs::path(dir) / name).string();
  std::map<std::string, std::string> metadata = state.provenance;
  metadata.insert(extra.begin(), extra.end());
  metadata.insert({{"format", kFormat},
                   {"step", std::to_string(state.step)},
                   {"seed", std::to_string(state.seed)},
                   {"total_steps", std::to_string(state.total_steps)},
                   {"model", plan.model().name()},
                   {kPlanFingerprintKey, planFingerprint(plan)}});
  store.saveState(path, metadata);
  syncDirectory(dir);
}

}  // namespace

void CheckpointDir::write(const plan::Plan& plan, const HostStore& store, const CheckpointState& state,
                          int keep) const {
  char name[64];
  std::snprintf(name, sizeof name, "step-%09lld%s", static_cast<long long>(state.step), kSuffix);
  writeCheckpointFile(dir_, name, plan, store, state, {});
  std::error_code ec;
  auto all = checkpoints(dir_);
  for (size_t i = 0; keep > 0 && i + keep < all.size(); ++i) fs::remove(all[i].second, ec);
}

void CheckpointDir::writeBest(const plan::Plan& plan, const HostStore& store, const CheckpointState& state,
                              double val_loss) const {
  writeCheckpointFile(dir_, kBestName, plan, store, state, {{kValLossKey, fmt::format("{}", val_loss)}});
}

std::optional<BestCheckpoint> bestCheckpoint(const std::string& dir) {
  const std::string path = (fs::path(dir) / kBestName).string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  SafetensorsFile file(path);
  const auto& meta = file.metadata();
  auto loss = meta.find(kValLossKey);
  double val_loss = 0.0;
  try {
    size_t used = 0;
    if (loss != meta.end()) val_loss = std::stod(loss->second, &used);
    if (loss == meta.end() || used != loss->second.size() || !std::isfinite(val_loss)) throw Error("");
  } catch (...) {
    throw Error("checkpoint " + path + " is corrupt: metadata '" + std::string(kValLossKey) +
                "' is missing or not a finite number");
  }
  return BestCheckpoint{path, static_cast<int64_t>(parseNumber(meta, "step", path)), val_loss};
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
  auto fingerprint = meta.find(kPlanFingerprintKey);
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
  for (const auto& [key, value] : meta)
    if (key.rfind(kProvenancePrefix, 0) == 0) state.provenance[key] = value;
  store.loadState(file);
  return state;
}

}  // namespace mt
