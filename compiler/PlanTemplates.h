// Block templates (plan 1.3): a layer block's instructions written once and launched per block.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/plan/plan_format.h"

namespace mt {

// Rewrites `stream` (its instructions tagged by `segment_of`, one tag per instruction: the
// layer block and phase they belong to, -1 for none) so that every run of one tag whose
// kernel calls equal another run's up to the buffers they name becomes a launch of one
// template added to `plan`, carrying its own waits and records. expandTemplates (runtime) gives
// back exactly the input stream.
void addBlockTemplates(plan::Stream& stream, const std::vector<int64_t>& segment_of, plan::Plan& plan);

}  // namespace mt
