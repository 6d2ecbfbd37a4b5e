// Modes the passes take as options, parsed once where the driver reads its flags (compiler/
// CompileOptions.h) and passed to the passes as these enums, never as strings.
#pragma once

#include "kernels/loss/loss.h"  // DpoLossKind: what mt.dpo_loss makes of a pair's margin

namespace mt {

// When AdamW runs (mtc --update; mt-schedule-streamed's `update`): one step late, overlapped with
// the next forward (exact global-norm clipping; 16 host bytes per parameter), or as each
// gradient lands (no clipping, ~12 bytes; streamed schedules only).
enum class UpdateKind { kDeferred, kOnArrival };

// What the loss trains (mtc --objective; mt-attach-loss's `objective`): the next token's
// cross-entropy, or direct preference optimisation over rows in (chosen, rejected) pairs
// against the reference model's log-probabilities (compiler/dialect/MtPreferenceOps.td).
enum class LossObjective { kNextToken, kDpo };

}  // namespace mt
