// The training steps the runtime tests run: their token ids and targets, and their AdamW
// settings (learning rate 1e-2, weight decay 0.1, global-norm clipping at 0.5).
#pragma once
#include "runtime/backends/backend.h"
#include "runtime/host/host_store.h"

namespace mt::test {

// Fills the step's tokens and targets (step 1-based) with a fixed pattern of the plan's vocabulary.
inline void fillStepTokens(HostStore& store, const plan::Plan& plan, int step) {
  int32_t* tokens = store.i32(store.tokens());
  int32_t* targets = store.i32(store.targets());
  for (int64_t i = 0; i < store.numel(store.tokens()); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + step * 3) % plan.model().vocab());
    targets[i] = static_cast<int32_t>((i * 5 + step) % plan.model().vocab());
  }
}

inline StepOptions stepOptions(int step) {
  StepOptions options;
  options.adamw.lr = 1e-2;
  options.adamw.weight_decay = 0.1;
  options.adamw.step = step;
  options.grad_clip = 0.5;
  return options;
}

}  // namespace mt::test
