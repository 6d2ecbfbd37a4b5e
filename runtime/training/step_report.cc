#include "runtime/training/step_report.h"
#include "runtime/plan/plan_queries.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "runtime/plan/op_table.h"
#include "runtime/plan/plan_format.h"

namespace mt {

std::string formatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

size_t terminalColumns() {
  struct winsize size {};
  if (ioctl(fileno(stdout), TIOCGWINSZ, &size) == 0 && size.ws_col > 1) return size.ws_col;
  return 80;
}

StepReport::StepReport(const plan::Plan& plan, const HostStore& store)
    : plan_(plan),
      model_flops_(modelFlopsPerToken(double(store.numParams()), double(plan.model().active_params()),
                                      double(store.numFrozen())) *
                   double(plan.model().batch() * plan.model().seq())) {
  first_.kernel_us.assign(kNumKernels, 0.0);
  rest_.kernel_us.assign(kNumKernels, 0.0);
}

void StepReport::add(double seconds, const StepTimeline& timeline) {
  accumulate(first_.steps == 0 ? first_ : rest_, seconds, timeline);
}

void StepReport::accumulate(Totals& totals, double seconds, const StepTimeline& timeline) const {
  ++totals.steps;
  totals.seconds += seconds;
  for (int s = 0; s < plan_.streams_size() && s < static_cast<int>(timeline.size()); ++s) {
    const auto& stream = plan_.streams(s);
    for (int i = 0; i < stream.instructions_size() && i < static_cast<int>(timeline[s].size()); ++i) {
      const Interval& t = timeline[s][i];
      if (t.start_us < 0) continue;
      const double us = t.end_us - t.start_us;
      const auto& in = stream.instructions(i);
      if (in.has_kernel()) {
        totals.compute_us += us;
        totals.kernel_us[in.kernel().kernel()] += us;
      } else if (in.has_copy()) {
        const double bytes = double(copyBytes(plan_, in.copy()));
        if (in.copy().direction() == plan::Copy::HOST_TO_DEVICE) {
          totals.h2d_us += us;
          totals.h2d_bytes += bytes;
        } else {
          totals.d2h_us += us;
          totals.d2h_bytes += bytes;
        }
      } else if (in.has_host_task()) {
        totals.host_us += us;
      }
    }
  }
}

StepReport::Measured StepReport::measured() const {
  const Totals& t = rest_.steps > 0 ? rest_ : first_;
  if (t.steps == 0) return {};
  const double step_s = t.seconds / t.steps;
  return {t.steps, step_s, model_flops_ / step_s * 1e-12, plan_.model().predicted_step_us() * 1e-6,
          t.compute_us * 1e-6 / t.seconds};
}

void StepReport::print(bool per_kernel, bool micro_batches) const {
  const Totals& t = rest_.steps > 0 ? rest_ : first_;
  if (t.steps == 0) return;
  const double step_s = t.seconds / t.steps;
  const double predicted_s = plan_.model().predicted_step_us() * 1e-6;
  const char* unit = micro_batches ? "micro-batch" : "step";
  std::printf("measured over %lld %s%s%s: %.1f ms/%s, %.2f model TFLOP/s", static_cast<long long>(t.steps), unit,
              t.steps == 1 ? "" : micro_batches ? "es" : "s", rest_.steps > 0 ? " (after the first)" : "", step_s * 1e3,
              unit, model_flops_ / step_s * 1e-12);
  if (predicted_s > 0)
    std::printf("; predicted %.1f ms on %s (measured/predicted %.2f)", predicted_s * 1e3,
                plan_.model().hardware().c_str(), step_s / predicted_s);
  std::printf("\n  compute busy %.0f%%", 100.0 * t.compute_us * 1e-6 / t.seconds);
  // A direction's bytes per step, the rate while copying, and the share of the step it copied.
  auto copies = [&](const char* direction, double bytes, double us) {
    if (bytes <= 0) return;
    const double per_step = bytes / t.steps;
    std::printf("; %s %.3g %s/%s at %.1f GB/s (busy %.0f%%)", direction, per_step >= 1e9 ? per_step * 1e-9 : per_step * 1e-6,
                per_step >= 1e9 ? "GB" : "MB", unit, us > 0 ? bytes / us * 1e-3 : 0.0, 100.0 * us * 1e-6 / t.seconds);
  };
  copies("h2d", t.h2d_bytes, t.h2d_us);
  copies("d2h", t.d2h_bytes, t.d2h_us);
  std::printf("; host tasks %.1f ms/%s\n", t.host_us / t.steps * 1e-3, unit);
  if (!per_kernel) return;
  std::vector<size_t> order(kNumKernels);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.kernel_us[a] > t.kernel_us[b]; });
  std::printf("kernel time per %s (compute stream):\n", unit);
  for (size_t i : order)
    if (t.kernel_us[i] > 0)
      std::printf("  %-22s %9.2f ms/%s  %5.1f%%\n", std::string(kKernelTable[i].op_name).c_str(),
                  t.kernel_us[i] / t.steps * 1e-3, unit, 100.0 * t.kernel_us[i] * 1e-6 / t.seconds);
}

}  // namespace mt
