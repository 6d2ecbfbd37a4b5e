// Human-readable views of a plan (mtdump).
#pragma once
#include <ostream>

#include "runtime/plan_format.h"

namespace mt {

struct DumpOptions {
  bool header = true;
  bool tensors = true;
  bool memory = true;    // the arena map
  bool schedule = true;  // per-stream instruction lists
};

void dumpPlan(const plan::Plan& plan, const DumpOptions& options, std::ostream& out);

}  // namespace mt
