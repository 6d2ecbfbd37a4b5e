#include "runtime/training/run_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "runtime/io/atomic_folder.h"
#include "runtime/io/checksum.h"
#include "runtime/io/error.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/training/huggingface.h"
#include "runtime/training/peft_export.h"
#include "runtime/training/run_setup.h"
#include "runtime/version.h"

namespace mt {
namespace {

// Where this run's weights come from: recorded in every checkpoint and export, and carried over
// from the checkpoint a run resumes (with a note where the code or the data changed).
std::map<std::string, std::string> provenance(const TrainConfig& config, const plan::Plan& plan,
                                              const TokenFile& data, const std::string& initial_weights,
                                              const CheckpointState& resumed) {
  const std::string p = kProvenancePrefix;
  const std::string code = std::string("MegaTrain ") + kVersion;
  const std::string data_now = data.path() + ": " + std::to_string(data.size()) + " tokens, crc32c " +
                               hex32(data.checksum());
  if (resumed.provenance.empty())
    return {{p + "code", code},
            {p + "plan", config.plan_path + ": model " + plan.model().name() + ", fingerprint " + planFingerprint(plan)},
            {p + "data", data_now},
            {p + "initial_weights", initial_weights}};
  std::map<std::string, std::string> kept = resumed.provenance;
  const std::string since = "; from step " + std::to_string(resumed.step + 1) + ": ";
  if (kept[p + "code"].find(code) == std::string::npos) kept[p + "code"] += since + code;
  const std::string& data_then = kept[p + "data"];
  // (--eval-only scores held-out data, not the run's: nothing to note, nothing is written.)
  if (data_then.find("crc32c " + hex32(data.checksum())) == std::string::npos && !config.eval_only) {
    std::printf("note: the data differs from the checkpointed run's (%s; now %s)\n", data_then.c_str(),
                data_now.c_str());
    kept[p + "data"] += since + data_now;
  }
  return kept;
}

}  // namespace

void JsonLog::Close::operator()(std::FILE* f) const {
  struct stat st {};
  const bool empty = fstat(fileno(f), &st) == 0 && st.st_size == 0;
  std::fclose(f);
  if (empty && !remove_if_empty.empty()) ::unlink(remove_if_empty.c_str());
}

JsonLog::JsonLog(const std::string& path, bool append) : path_(path) {
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  // Only a regular file with lines in it is emptied (at the first line); a device (/dev/null) is
  // written as it is.
  truncate_first_ = !append && existed && S_ISREG(st.st_mode) && st.st_size > 0;
  std::FILE* f = std::fopen(path.c_str(), "a");  // created if missing, an earlier log kept for now
  if (!f) throw Error("cannot write log " + path + ": " + std::strerror(errno));
  std::fseek(f, 0, SEEK_END);  // ftell then tells where the whole lines end (write's rollback)
  file_ = std::unique_ptr<std::FILE, Close>(f, Close{existed ? std::string() : path});
}

void JsonLog::write(const nlohmann::json& line) {
  if (truncate_first_) {
    if (ftruncate(fileno(file_.get()), 0) != 0) throw IoFault("cannot write log " + path_ + ": " + std::strerror(errno));
    std::fseek(file_.get(), 0, SEEK_SET);
    truncate_first_ = false;
  }
  const std::string text = line.dump() + "\n";
  const long whole = std::ftell(file_.get());  // where the last whole line ends
  if (std::fwrite(text.data(), 1, text.size(), file_.get()) != text.size() || std::fflush(file_.get()) != 0) {
    const int err = errno;
    // No torn last line: the log is cut back to its whole lines (where the disk lets it).
    std::clearerr(file_.get());
    if (whole >= 0 && ftruncate(fileno(file_.get()), whole) == 0) std::fseek(file_.get(), whole, SEEK_SET);
    throw IoFault("cannot write log " + path_ + ": " + std::strerror(err));
  }
}

namespace {

// The lock of an export (PATH.lock beside it, gone with the run): a second run exporting to the
// same place is refused rather than silently replacing the first one's weights.
std::unique_ptr<FileLock> lockExport(const std::string& path, const char* flag) {
  const std::string target = withoutTrailingSlashes(path);
  try {
    return std::make_unique<FileLock>(target + ".lock", /*remove_when_released=*/true);
  } catch (const FileLock::Busy& busy) {
    throw Error(std::string(flag) + " " + path + " is being written by another run (" + busy.holder() +
                "): one would replace the other's weights; give this run another " + flag);
  } catch (const Error& e) {
    throw Error(std::string(flag) + ": " + e.what());
  }
}

// --export-hf's folder (--export-peft's: `peft`) locked and checked before the run starts.
std::unique_ptr<FileLock> lockExportFolder(const std::string& dir, bool peft) {
  const std::string flag = peft ? "--export-peft" : "--export-hf";
  std::unique_ptr<FileLock> lock = lockExport(dir, flag.c_str());
  try {
    checkHuggingFaceExportFolder(dir, peft);
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error(what.rfind(flag, 0) == 0 ? what : flag + ": " + what + " (checked before the run starts)");
  }
  return lock;
}

}  // namespace

RunOutputs openOutputs(const TrainConfig& config, const plan::Plan& plan) {
  RunOutputs outputs;
  for (auto [path, flag] : {std::pair{&config.export_path, "--export"}, {&config.trace_path, "--trace"},
                            {&config.grads_path, "--dump-grads"}, {&config.report_path, "--report"},
                            {&config.scores_path, "--scores"}})
    if (!path->empty()) checkWritable(*path, flag);
  if (!config.export_path.empty()) {
    outputs.export_lock = lockExport(config.export_path, "--export");
    const std::filesystem::path path(config.export_path);
    const std::string name = path.filename().string();
    removeStaleTemporaries(path.parent_path().empty() ? "." : path.parent_path().string(),
                           [&](const std::string& stem) { return stem == name; });
  }
  if (!config.export_hf_dir.empty()) {
    checkHuggingFaceExport(plan);
    outputs.export_hf_lock = lockExportFolder(config.export_hf_dir, false);
  }
  if (!config.export_peft_dir.empty()) {
    checkPeftExport(plan, config.peft_experts);
    outputs.export_peft_lock = lockExportFolder(config.export_peft_dir, true);
  }
  const std::string& dir = checkpointFolder(config);
  if (!dir.empty() && config.writes_checkpoints) {
    outputs.checkpoints = std::make_unique<CheckpointDir>(dir);
    if (outputs.checkpoints->removedLeftovers())
      std::printf("removed %d temporary file(s) of checkpoints interrupted while written in %s\n",
                  outputs.checkpoints->removedLeftovers(), dir.c_str());
  }
  if (!config.log_path.empty()) outputs.log = JsonLog(config.log_path, /*append=*/!config.resume_dir.empty());
  return outputs;
}

std::unique_ptr<TokenFile> openTokens(const std::string& path, const plan::Plan& plan) {
  auto file = std::make_unique<TokenFile>(path);
  const int64_t vocab = plan.model().vocab();
  // A tokenizer may have ids past the model's vocabulary that no text uses (Gemma 3 1B's
  // <image_soft_token>): the ids the file holds are what must fit.
  if (file->vocabSize() > vocab && file->largestId() >= vocab)
    throw Error("token file " + path + " holds token id " + std::to_string(file->largestId()) + " (its vocab size is " +
                std::to_string(file->vocabSize()) + ") but the model's vocabulary is " + std::to_string(vocab) +
                ": tokenise with the model's " +
                (isImported(plan) ? std::string("own tokenizer (an imported model's vocabulary is fixed)")
                                  : "tokenizer, or compile with --vocab " + std::to_string(file->vocabSize())));
  if (file->vocabSize() > vocab) file->limitIds(static_cast<uint32_t>(vocab));
  return file;
}

const std::string& checkpointFolder(const TrainConfig& config) {
  return config.checkpoint_dir.empty() ? config.resume_dir : config.checkpoint_dir;
}

std::string loadWeights(const plan::Plan& plan, const std::string& path, HostStore& store, const char* what) {
  store.initialize(plan.init_seed());
  if (path.empty()) return "the plan's seeded initializers (seed " + std::to_string(plan.init_seed()) + ")";
  return loadParamsFrom(plan, path, store, what);
}

std::string loadParamsFrom(const plan::Plan& plan, const std::string& path, HostStore& store, const char* what) {
  const SafetensorsFile weights(path);
  const std::vector<std::string> seeded = store.loadParams(weights);
  const auto magnitudes = std::count_if(seeded.begin(), seeded.end(), [](const std::string& n) { return isDoraMagnitude(n); });
  const auto adapters =
      std::count_if(seeded.begin(), seeded.end(), [](const std::string& n) { return isLoraAdapter(n); }) - magnitudes;
  for (const std::string& name : seeded)
    if (!isLoraAdapter(name))
      std::printf("note: %s holds no %s: a reward model's new score head, from its seeded initializer (seed %llu)\n",
                  path.c_str(), name.c_str(), static_cast<unsigned long long>(plan.init_seed()));
  if (adapters)
    std::printf("note: %s holds no LoRA adapters: the plan's %lld start from their seeded initializers (seed %llu; "
                "B zeros: the model as these weights give it)\n",
                path.c_str(), static_cast<long long>(adapters), static_cast<unsigned long long>(plan.init_seed()));
  if (magnitudes)
    std::printf("note: %s holds no DoRA magnitudes: the plan's %lld start at their weights' row norms, as PEFT starts "
                "them (with B zero, the model as these weights give it)\n",
                path.c_str(), static_cast<long long>(magnitudes));
  uint32_t crc = 0;  // of the parameters' bytes in plan order (those from the file)
  std::set<std::string> used;
  for (int p : store.params()) {
    if (std::find(seeded.begin(), seeded.end(), plan.host_tensors(p).name()) != seeded.end()) continue;
    const SafetensorsEntry& e = weights.entries().at(plan.host_tensors(p).name());
    crc = crc32c(e.data, static_cast<size_t>(e.bytes), crc);
    used.insert(plan.host_tensors(p).name());
  }
  std::string unused;
  int unused_count = 0;
  for (const auto& entry : weights.entries())
    if (!used.count(entry.first) && ++unused_count <= 3) unused += (unused.empty() ? "" : ", ") + entry.first;
  if (unused_count)
    std::printf("note: %s holds %d tensor%s the plan does not use (%s%s): not loaded\n", path.c_str(), unused_count,
                unused_count == 1 ? "" : "s", unused.c_str(), unused_count > 3 ? ", ..." : "");
  std::printf("%s: %s\n", what, path.c_str());
  return path + " (crc32c " + hex32(crc) + " of its parameters' bytes in plan order)";
}

CheckpointState loadStartingState(const TrainConfig& config, const plan::Plan& plan, const TokenFile& data,
                                  const std::string& path, HostStore& store) {
  const std::string initial_weights = loadWeights(plan, path, store, "initial weights");
  CheckpointState resumed;
  resumed.seed = config.seed;
  if (config.resume_dir.empty()) {
    resumed.provenance = provenance(config, plan, data, initial_weights, resumed);
    return resumed;
  }
  const std::optional<std::string> latest = latestCheckpoint(config.resume_dir);
  if (!latest) throw Error("no checkpoint in " + config.resume_dir + " to resume from (write them with --checkpoint-dir)");
  resumed = loadCheckpoint(*latest, plan, store);
  std::printf("resuming from %s: step %lld done, data seed %llu\n", latest->c_str(),
              static_cast<long long>(resumed.step), static_cast<unsigned long long>(resumed.seed));
  if (resumed.total_steps != config.steps && !config.eval_only)
    std::printf("note: the checkpointed run had --steps %lld, this one %lld: the learning-rate schedule "
                "differs from the uninterrupted run's\n",
                static_cast<long long>(resumed.total_steps), static_cast<long long>(config.steps));
  resumed.provenance = provenance(config, plan, data, initial_weights, resumed);
  return resumed;
}

// --export, --export-hf and --export-peft of the weights in `store` after `steps_done`, with the run's provenance.
void exportStore(const TrainConfig& config, const plan::Plan& plan, const HostStore& store,
                 const std::map<std::string, std::string>& provenance, int64_t steps_done) {
  std::map<std::string, std::string> metadata = provenance;
  metadata[std::string(kProvenancePrefix) + "step"] = std::to_string(steps_done);
  if (!config.export_path.empty()) {
    store.saveParams(config.export_path, metadata);
    std::printf("weights written to %s\n", config.export_path.c_str());
  }
  if (!config.export_hf_dir.empty()) {
    const HuggingFaceExport exported = exportHuggingFace(plan, store, config.export_hf_dir, config.export_dtype, metadata);
    std::string carried;
    for (const std::string& name : exported.carried) carried += (carried.empty() ? "" : ", ") + name;
    std::printf("Hugging Face folder written to %s (%s)%s\n", config.export_hf_dir.c_str(),
                config.export_dtype == ExportDtype::kBf16 ? "bf16" : "f32",
                !carried.empty()          ? ("; with " + carried + " from " + exported.source).c_str()
                : !exported.note.empty() ? ("; " + exported.note).c_str()
                                          : "");
    if (!exported.padding.empty()) std::printf("  a reward model: %s\n", exported.padding.c_str());
    if (!exported.elsewhere.empty()) std::printf("  note: %s\n", exported.elsewhere.c_str());
  }
  if (!config.export_peft_dir.empty()) {
    exportPeft(plan, store, config.export_peft_dir, metadata, config.peft_experts);
    std::printf("LoRA adapters written to %s (PEFT's adapter folder: PeftModel.from_pretrained(%s, folder))\n",
                config.export_peft_dir.c_str(),
                hasScoreHead(plan)
                    ? "AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)"
                    : "base");
  }
}

// --export-only: the --resume checkpoint's weights exported (its provenance kept), nothing trained.
int exportCheckpoint(const TrainConfig& config, const plan::Plan& plan) {
  RunOutputs outputs = openOutputs(config, plan);  // the exports' paths checked and locked
  HostStore store(plan);
  store.initialize(plan.init_seed());
  const std::optional<std::string> latest = latestCheckpoint(config.resume_dir);
  if (!latest) throw Error("no checkpoint in " + config.resume_dir + " to export (write them with --checkpoint-dir)");
  const CheckpointState state = loadCheckpoint(*latest, plan, store);
  std::printf("--export-only: the weights after step %lld, from %s\n", static_cast<long long>(state.step),
              latest->c_str());
  exportStore(config, plan, store, state.provenance, state.step);
  return 0;
}

}  // namespace mt
