// --batch auto: the batch of the best predicted throughput among those whose plans fit
// --device-mem and --host-mem together, found by trial compiles of the built-in model at other
// batches (each through every stage, emitted to count its host bytes).
#pragma once
#include <cstdint>
#include <string>

#include "compiler/HardwareProfile.h"
#include "compiler/CompileOptions.h"
#include "compiler/Stages.h"
#include "mlir/IR/MLIRContext.h"
#include "models/BuiltinModels.h"
#include "models/ModelConfig.h"

namespace mt {

// What the model is built as for `o`: a decode step (--kv-cache), the sequence's forward
// (--forward-only), or training's (a mixture of experts also returns its router's statistics).
ModelForm modelForm(const CompileOptions& o);

// The stages' options for `o` with AdamW run as `update`, stopping after `last` (unset: run all);
// trials priced on `hw`.
StageOptions stageOptions(const CompileOptions& o, const HardwareProfile& hw, UpdateKind update,
                          std::optional<Stage> last, bool tune_recompute);

// The batches a plan may have are multiples of this: 2 for a DPO plan (its rows come in pairs), else 1.
int64_t batchUnit(const CompileOptions& o);

// What a trial learnt that holds for every larger batch (fitting and the schedule are
// monotone in the batch; the blocks that keep their activations are fewer): where the next
// trial's searches start.
struct SearchHints {
  size_t first_schedule = 0;   // index into kSchedules
  int64_t max_keep = -1;       // -1: no bound
  bool offload_first = false;  // the activations had to be offloaded (StageOptions::offload_first)
};

struct BatchChoice {
  int64_t batch = 0;   // 0: not even the smallest batch (batchUnit) fits
  std::string note;    // why this batch (one line), or what batch 1 needs of each memory
  SearchHints hints;   // what the chosen batch's trial found: the final compile starts there
};

// The batch for `config` at `seq` tokens per sequence under o's budgets.
BatchChoice searchBatch(mlir::MLIRContext& context, const ModelConfig& config, int64_t seq, const CompileOptions& o,
                        UpdateKind update, const HardwareProfile& hw);

}  // namespace mt
