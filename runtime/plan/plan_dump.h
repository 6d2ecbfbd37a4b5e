// Human-readable views of a plan (mtdump).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "runtime/plan/plan_format.h"

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

// When each instruction of one step ran on a backend, in microseconds from the step's start:
// per stream, per instruction. Events take no time and keep {-1, -1} (a wait shows as a gap).
struct Interval {
  double start_us = -1.0, end_us = -1.0;
};
using StepTimeline = std::vector<std::vector<Interval>>;

// A measured timeline as Chrome / Perfetto trace JSON, laid out as writeTrace's (one track per
// stream) in a process of its own named after the backend, so that mtdump can show it beside
// the prediction.
void writeMeasuredTrace(const plan::Plan& plan, const StepTimeline& timeline, const std::string& backend,
                        std::ostream& out);

}  // namespace mt
