// The emitter's last step: from instructions in program order, each with the stream it runs on,
// the earlier instructions it depends on and its predicted time, the plan's streams: the fewest
// events (a stream waits only for the latest instruction it depends on in each other stream,
// and only once), the predicted timeline of one step (the cost model's step time and what the
// compute stream waits for), and identical layer blocks as templates.
#pragma once
#include <cstdint>
#include <vector>

#include "compiler/Emitter.h"
#include "runtime/plan/plan_format.h"

namespace mt {

enum StreamIndex { kCompute = 0, kH2D = 1, kD2H = 2, kHost = 3, kNumStreams = 4 };

struct Instr {
  int stream;
  int64_t segment = -1;  // 3 * layer block + (0 forward, 1 recompute, 2 backward); -1 outside blocks
  plan::Instruction body;
  std::vector<int> deps;  // global indices of instructions it must follow
  double micros = 0;
};

// Writes `instrs` into `plan`'s streams with their events and (with `templates`) block
// templates, and the predicted busy, wait and step times into `stats` (a training plan's: a
// later step's, where the first copies frozen weights the device then keeps).
void assembleStreams(std::vector<Instr>& instrs, bool templates, plan::Plan& plan, PlanStats& stats);

}  // namespace mt
