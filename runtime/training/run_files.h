// The files a training run reads and writes around its steps: its outputs, checked or taken
// before the first step so that a bad path fails at once rather than after the training it was
// to keep, and the state it starts from (initial weights or a checkpoint, and their provenance).
#pragma once
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/data/token_data.h"
#include "runtime/host/host_store.h"
#include "runtime/io/file_lock.h"
#include "runtime/plan/plan_format.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/trainer.h"

namespace mt {

// A JSON-lines log whose every line is flushed and checked: a full disk ends the run with an
// error rather than an empty log and exit 0. Opened (so checked writable) before the run, it is
// emptied only by the first line written (without append): a run that fails before its first
// step leaves an earlier log as it was, and no empty log where there was none.
class JsonLog {
 public:
  JsonLog() = default;
  JsonLog(const std::string& path, bool append);
  explicit operator bool() const { return file_ != nullptr; }
  void write(const nlohmann::json& line);

 private:
  // Closes the file, and removes it when the log created it and it is still empty.
  struct Close {
    std::string remove_if_empty;
    void operator()(std::FILE* f) const;
  };
  std::string path_;
  bool truncate_first_ = false;  // a new log replaces an earlier one's lines: at its first line
  std::unique_ptr<std::FILE, Close> file_;
};

// What the run writes beside its weights: checkpoints (the directory created and locked) and
// the log (opened).
struct RunOutputs {
  std::unique_ptr<CheckpointDir> checkpoints;
  JsonLog log;
  std::unique_ptr<FileLock> export_lock, export_hf_lock, export_peft_lock;  // held while the run may write them
};

// The run's outputs, checked or taken before its first step: the export, trace and gradient
// paths writable, the checkpoint directory created and locked (its killed writers' temporary
// files removed), the log opened.
RunOutputs openOutputs(const TrainConfig& config, const plan::Plan& plan);
// The training or held-out tokens at `path`: refused unless the model's vocabulary holds its ids
// (the error says how to tokenise or compile to match).
std::unique_ptr<TokenFile> openTokens(const std::string& path, const plan::Plan& plan);

// Where the run's checkpoints go: --checkpoint-dir, else the --resume folder ("" = none). The
// same on every rank (only rank 0 opens it).
const std::string& checkpointFolder(const TrainConfig& config);

// The store reset (HostStore::initialize) and its parameters from the weights file at `path`
// ("" : the plan's seeded initializers), said as `what` ("initial weights: PATH"); returns their
// description for a provenance: the path and a checksum of the parameters' bytes.
std::string loadWeights(const plan::Plan& plan, const std::string& path, HostStore& store, const char* what);
// Only the parameters, from the file at `path`, the rest of the store as it is; the same said and
// returned.
std::string loadParamsFrom(const plan::Plan& plan, const std::string& path, HostStore& store, const char* what);

// The initial weights (`path`, from initialWeightsPath; "" for the seeded initializers), then
// the checkpoint to resume from; the state's provenance is this run's.
CheckpointState loadStartingState(const TrainConfig& config, const plan::Plan& plan, const TokenFile& data,
                                  const std::string& path, HostStore& store);

// --export, --export-hf (--export-dtype) and --export-peft of the weights in `store` after `steps_done`, with
// `provenance` in their metadata; says where.
void exportStore(const TrainConfig& config, const plan::Plan& plan, const HostStore& store,
                 const std::map<std::string, std::string>& provenance, int64_t steps_done);

// --export-only: the newest checkpoint of --resume exported (its provenance kept), nothing trained.
int exportCheckpoint(const TrainConfig& config, const plan::Plan& plan);

}  // namespace mt
