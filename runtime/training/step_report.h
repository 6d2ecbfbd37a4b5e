// What mtrun reports about the steps it ran, from the backends' measured timelines: the step
// time against the plan's prediction, model TFLOP/s (6 · params · tokens / step time, the
// convention MegaTrain and most papers use), how busy the compute stream was, the rates the
// copies achieved, and (--profile) the time per kernel.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/host/host_store.h"
#include "runtime/plan/plan_dump.h"

namespace mt {

// "m:ss", or "h:mm:ss" from an hour (a run's time left).
std::string formatDuration(double seconds);
// The width of the terminal on stdout (80 if it does not say).
size_t terminalColumns();

class StepReport {
 public:
  StepReport(const plan::Plan& plan, const HostStore& store);

  // One finished step: its wall time and the backend's timeline of it. The first step warms
  // up (first touches of memory, library handles): it counts only if it is the only one.
  void add(double seconds, const StepTimeline& timeline);
  // Prints the summary (and, with `per_kernel`, the time per kernel) to stdout. `micro_batches`:
  // each run of the plan was one micro-batch of an accumulated step (mtrun --accumulate).
  void print(bool per_kernel, bool micro_batches = false) const;
  // The steps measured (after the first, unless it is the only one) and their mean time, against
  // the plan's prediction (0: none).
  struct Measured {
    int64_t steps = 0;
    double step_s = 0.0, model_tflops = 0.0, predicted_s = 0.0, compute_busy = 0.0;
  };
  Measured measured() const;

 private:
  struct Totals {
    int64_t steps = 0;
    double seconds = 0.0;
    double compute_us = 0.0, h2d_us = 0.0, d2h_us = 0.0, host_us = 0.0;  // busy time per stream kind
    double h2d_bytes = 0.0, d2h_bytes = 0.0;
    std::vector<double> kernel_us;  // per op-table row
  };
  void accumulate(Totals& totals, double seconds, const StepTimeline& timeline) const;

  const plan::Plan& plan_;
  double model_flops_;               // 6 · (active) params · tokens per step
  Totals first_, rest_;
};

}  // namespace mt
