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

// The cost model's predicted timeline of one step as Chrome / Perfetto trace JSON: one track
// per stream, one slice per instruction (its predicted time), each waiting for its events,
// and a counter of the device memory in use (each buffer live from its first to its last use).
// The plan must be verified (its events cannot deadlock).
void writeTrace(const plan::Plan& plan, std::ostream& out);

}  // namespace mt
