// mtgen DIR: a Hugging Face model folder sampled directly. mtgen compiles the folder's
// forward-only key/value-cache plan with the mtc beside it (a process of its own: the runtime
// does not link the compiler) into a cache folder, once per folder state and context, and
// reuses it after: the plan and the folder's weights converted beside it.
#pragma once
#include <cstdint>
#include <string>

namespace mt {

struct FolderPlan {
  std::string plan;  // the plan's path (its weights beside it: PLAN.safetensors)
  bool cached = false;  // compiled by an earlier mtgen
};

// Whether `path` is a model folder (a directory holding config.json).
bool isModelFolder(const std::string& path);

// The forward-only plan of model folder `dir` with a key/value cache of `context` tokens for
// `batch` rows: $XDG_CACHE_HOME/megatrain/mtgen (or ~/.cache/...), one subfolder per folder path,
// folder files' sizes and times, context, batch and MegaTrain version; compiled there by `mtc` from
// mtgen's own folder when absent (its summary on stderr), published by a rename so that a failed
// or interrupted compile leaves nothing. Throws mt::Error naming the cause and the fix.
FolderPlan folderPlan(const std::string& dir, int64_t context, int64_t batch = 1);

}  // namespace mt
