// The plan verifier: the runtime trusts nothing in a plan. After verifyPlan returns, every
// offset, size, index, event and kernel call in the plan is in bounds and well-formed, and the
// streams cannot deadlock, so executing the plan cannot touch memory outside its buffers.
#pragma once
#include "runtime/plan/plan_format.h"

namespace mt {

// Throws mt::Error naming the first problem found.
void verifyPlan(const plan::Plan& plan);

}  // namespace mt
