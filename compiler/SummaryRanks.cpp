// mtc --ranks N [--ranks-per-host R]: what the plan costs run data parallel on N ranks
// (mpirun -np N mtrun; docs/distributed.md), from the plan itself (the same plan runs on every
// rank): each rank's and each host's host bytes with the optimizer sharded (and the summed
// gradients, in a plan that keeps them apart) and one host copy of the master weights, the bytes each rank exchanges per step, and the host stream's time
// against the predicted step.
#include <fmt/format.h>

#include <cstdio>
#include <set>

#include "compiler/Summary.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

std::string millis(double us) { return fmt::format("{:.1f} ms", us / 1e3); }

// The plan's host bytes by what the ranks do with them.
struct HostShares {
  double grads = 0;    // gradient landing buffers: whole on every rank
  double grad_sums = 0;  // summed gradients kept apart (gradientsKeptApart): sharded
  double moments = 0;  // AdamW moments: sharded
  double copy = 0;     // master weights and their bf16 copies: one per host (shared by its ranks)
  double rest = 0;     // per-step inputs, offloaded activations, the loss: every rank's own
  double gradient_values = 0;  // the gradients' bytes (each exchanged per step)
};

HostShares hostShares(const plan::Plan& plan) {
  HostShares s;
  const std::set<int> split = splitMasters(plan);
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_GRAD) s.gradient_values += static_cast<double>(hostTensorBytes(t));
  const int landing = gradLandingTensor(plan);
  for (int i = 0; i < plan.host_tensors_size(); ++i) {
    const auto& t = plan.host_tensors(i);
    const double bytes = static_cast<double>(hostTensorBytes(t));
    if (t.role() == plan::ROLE_MOMENT1 || t.role() == plan::ROLE_MOMENT2) s.moments += bytes;
    else if (isMasterRole(t.role())) s.copy += split.count(i) ? 0 : bytes;
    else if (t.role() != plan::ROLE_GRAD && i != landing) s.rest += bytes;
  }
  s.grads = landing >= 0 ? static_cast<double>(hostTensorBytes(plan.host_tensors(landing))) : s.gradient_values;
  if (gradientsKeptApart(plan)) s.grad_sums = s.gradient_values;
  return s;
}

// The host optimizer's work in the plan's host tasks: AdamW and the norm (what sharding divides
// by the rank count), at the profile's host bandwidth.
double optimizerMicros(const plan::Plan& plan, const HardwareProfile& hw) {
  double bytes = 0;
  for (const auto& s : plan.streams())
    for (const auto& in : s.instructions())
      if (in.has_host_task()) {
        const auto kind = in.host_task().kind();
        if (kind != plan::HostTask::EMBEDDING_LOOKUP && kind != plan::HostTask::EMBEDDING_GRAD)
          bytes += static_cast<double>(in.bytes());
      }
  return bytes / hw.host_bps * 1e6;
}

}  // namespace

void printDataParallel(const CompileOptions& o, const EmitOptions& emit, const plan::Plan& plan,
                       const PlanStats& stats) {
  if (o.ranks <= 1) return;
  const int64_t n = o.ranks, r = o.ranks_per_host, hosts = n / r;
  const HostShares s = hostShares(plan);
  const double own = s.grads + (s.moments + s.grad_sums) / n + s.rest;  // every rank's
  const double writer = own + s.copy;                    // the rank holding its host's copy
  const double host = r * own + s.copy;
  // Per rank per step: its gradient's slices out to their owners and the other ranks' slices of
  // its own in; the updated weights' slices back (with one host copy, only from the other hosts).
  const double grad_out = s.gradient_values * (n - 1) / n, grad_between = s.gradient_values * (n - r) / n;
  const double weights_in = s.copy * (hosts - 1) / n;
  // Each host's link carries its r ranks' traffic between hosts, both ways at once; within the
  // host the slices move through shared memory (read and written).
  const double link_us = r * (grad_between + weights_in) / emit.hardware.network_bps * 1e6;
  const double local_us = 2.0 * (grad_out - grad_between) / emit.hardware.host_bps * 1e6;
  const double optimizer_us = optimizerMicros(plan, emit.hardware);
  const double host_us = stats.host_us - optimizer_us * (1.0 - 1.0 / n) + link_us + local_us;
  const double step_us = std::max(stats.step_us, stats.step_us + host_us - stats.host_us);
  const double tokens = static_cast<double>(n * emit.batch * emit.seq);
  std::printf("  data parallel  %lld ranks (--ranks), %lld per host on %lld host%s: %lld x %lld tokens per update; "
              "host %s per rank (%s on the rank holding the host's copy of the master weights), %s per host; per "
              "step each rank sends its gradient's slices to their owners (%s, %s of them between hosts) and gets "
              "the updated weights back (%s between hosts): %s on a %.0f GB/s link per host, %s through shared "
              "memory; the host optimizer 1/%lld of one process's; host stream %s of a %s step%s: %.0f tokens/s "
              "for the job\n",
              (long long)n, (long long)r, (long long)hosts, hosts == 1 ? "" : "s", (long long)n,
              (long long)(emit.batch * emit.seq), formatBytes(static_cast<int64_t>(own)).c_str(),
              formatBytes(static_cast<int64_t>(writer)).c_str(), formatBytes(static_cast<int64_t>(host)).c_str(),
              formatBytes(static_cast<int64_t>(grad_out)).c_str(),
              formatBytes(static_cast<int64_t>(grad_between)).c_str(),
              formatBytes(static_cast<int64_t>(weights_in)).c_str(), millis(link_us).c_str(),
              emit.hardware.network_bps * 1e-9, millis(local_us).c_str(), (long long)n, millis(host_us).c_str(),
              millis(step_us).c_str(),
              host_us <= stats.step_us ? " (overlapped: the step as one process's)"
                                       : " (the host stream outlasts the step: it is the bottleneck)",
              tokens / (step_us * 1e-6));
}

}  // namespace mt
