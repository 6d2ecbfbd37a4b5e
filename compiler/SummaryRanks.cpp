// mtc --ranks N [--ranks-per-host R]: what the plan costs run data parallel on N ranks
// (mpirun -np N mtrun; docs/distributed.md), from the plan itself (the same plan runs on every
// rank): each rank's and each host's host bytes with the optimizer sharded (and the summed
// gradients, in a plan that keeps them apart) and one host copy of the master weights, the
// bytes each rank exchanges per step, and the job's step priced two ways — as mtrun runs it
// (the exchange on the hosts) and with device collectives (NCCL over NVLink, DESIGN.md §13; not
// built) — each bounded by the busiest of the device, a rank's host stream, the host's memory
// and the host's network link.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "compiler/Summary.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

std::string millis(double us) { return fmt::format("{:.1f} ms", us / 1e3); }

// The plan's host bytes by what the ranks do with them.
struct HostShares {
  double grads = 0;      // gradient landing buffers: whole on every rank
  double grad_sums = 0;  // summed gradients kept apart (gradientsKeptApart): sharded
  double moments = 0;    // AdamW moments: sharded
  double copy = 0;       // master weights and their bf16 copies: one per host (shared by its ranks)
  double updated = 0;    // of `copy`, the trained parameters': what the update gathers back (a frozen one never moves)
  double rest = 0;       // per-step inputs, offloaded activations, the loss: every rank's own
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
    else if (isMasterRole(t.role())) {
      const double held = split.count(i) ? 0 : bytes;
      s.copy += held;
      const bool frozen = t.role() == plan::ROLE_PARAM ? t.frozen() : plan.host_tensors(t.param_index()).frozen();
      if (!frozen) s.updated += held;
    }
    else if (t.role() != plan::ROLE_GRAD && i != landing) s.rest += bytes;
  }
  s.grads = landing >= 0 ? static_cast<double>(hostTensorBytes(plan.host_tensors(landing))) : s.gradient_values;
  if (gradientsKeptApart(plan)) s.grad_sums = s.gradient_values;
  return s;
}

// Host bytes of every rank (own), of the rank holding its host's copy, and of a host.
struct RankBytes {
  double own = 0, writer = 0, host = 0;
};

RankBytes rankBytes(const HostShares& s, int64_t n, int64_t r) {
  RankBytes b;
  b.own = s.grads + (s.moments + s.grad_sums) / n + s.rest;
  b.writer = b.own + s.copy;
  b.host = r * b.own + s.copy;
  return b;
}

// The bytes of the host optimizer's work in the plan's host tasks: AdamW and the norm (what
// sharding divides by the rank count).
double optimizerBytes(const plan::Plan& plan) {
  double bytes = 0;
  for (const auto& s : plan.streams())
    for (const auto& in : s.instructions())
      if (in.has_host_task()) {
        const auto kind = in.host_task().kind();
        if (kind != plan::HostTask::EMBEDDING_LOOKUP && kind != plan::HostTask::EMBEDDING_GRAD)
          bytes += static_cast<double>(in.bytes());
      }
  return bytes;
}

// A job's step, priced by the resources that must each fit in it when the steps overlap: the
// step is the busiest one's time.
struct JobStep {
  double device_us = 0;       // one rank's device step
  double host_stream_us = 0;  // one rank's host stream: its optimizer share, its exchanges (waits included)
  double host_memory_us = 0;  // a host's memory traffic: its ranks' copies, exchanges, updates
  double network_us = 0;      // a host's link to the others, each way
  double step_us() const { return std::max({device_us, host_stream_us, host_memory_us, network_us}); }
  // The host stream waits for the network (its exchanges' calls): a stream mostly waiting is
  // bound by the network.
  const char* bound() const {
    const double step = step_us();
    return step == device_us          ? "the devices"
           : step == host_memory_us   ? "the hosts' memory, not the GPUs"
           : network_us >= 0.5 * step ? "the network between hosts, not the GPUs"
                                      : "each rank's host stream, not the GPUs";
  }
};

// One rank's device step when its host stream takes `host_stream_us` instead of one process's
// stats.host_us: the compute's waits on the host (the plan's simulation) shrink in proportion
// (an estimate: the waits' share of a shorter host stream is not simulated again).
double deviceStep(const PlanStats& stats, double step_us, double host_stream_us) {
  const double shorter = stats.host_us > 0 ? std::max(0.0, 1.0 - host_stream_us / stats.host_us) : 0.0;
  return step_us - stats.compute_wait_us[3] * shorter;
}

// The job --ranks prices: N ranks, R per host, the plan's host bytes by share and its host
// optimizer's bytes.
struct Job {
  int64_t n = 1, r = 1, hosts = 1;
  HostShares shares;
  double optimizer_bytes = 0;  // one process's
};

Job jobOf(const CompileOptions& o, const plan::Plan& plan) {
  return {o.ranks, o.ranks_per_host, o.ranks / o.ranks_per_host, hostShares(plan), optimizerBytes(plan)};
}

// One rank's host stream without its exchanges: one process's, the optimizer's work divided
// over the ranks.
double shardedHostMicros(const Job& job, const HardwareProfile& hw, const PlanStats& stats) {
  return stats.host_us - job.optimizer_bytes / hw.host_bps * 1e6 * (1.0 - 1.0 / job.n);
}

// What each rank exchanges per step as mtrun runs it: its gradient's slices to their owners (of
// them between hosts), the updated weights back from the other hosts; the time of the slices
// that stay on the host through shared memory (read and written).
struct Exchange {
  double grad_out = 0, grad_between = 0, weights_in = 0, local_us = 0;
};

Exchange exchangeOf(const Job& job, const HardwareProfile& hw) {
  const double n = job.n, g = job.shares.gradient_values;
  Exchange e;
  e.grad_out = g * (n - 1) / n;
  e.grad_between = g * (n - job.r) / n;
  e.weights_in = job.shares.updated * (job.hosts - 1) / n;
  e.local_us = 2.0 * (e.grad_out - e.grad_between) / hw.host_bps * 1e6;
  return e;
}

// As mtrun runs it: each rank's device copies its whole gradient to its host, which sends the
// slices to their owners (between hosts over the link, within one through shared memory) and
// gets the updated weights back; every device reads every weight over its own link.
JobStep hostExchangeStep(const Job& job, const Exchange& e, const HardwareProfile& hw, const PlanStats& stats) {
  const double r = job.r;
  JobStep step;
  step.network_us = r * (e.grad_between + e.weights_in) / hw.network_bps * 1e6;
  step.host_stream_us = shardedHostMicros(job, hw, stats) + step.network_us + e.local_us;
  step.device_us = deviceStep(stats, stats.step_us, step.host_stream_us);
  // What crosses the link is read from memory as it is sent and written as the same amount is
  // received (the exchange is symmetric); the shared-memory slices are read and written.
  const double local_bytes = 2.0 * (e.grad_out - e.grad_between);
  const double memory = r * (static_cast<double>(stats.h2d_bytes + stats.d2h_bytes) + local_bytes +
                             2.0 * (e.grad_between + e.weights_in)) +
                        job.optimizer_bytes * r / job.n;
  step.host_memory_us = memory / hw.host_bps * 1e6;
  return step;
}

// With device collectives (not built): the gradients reduce-scattered over NVLink before they
// leave, so each GPU copies out its 1/R slice; each weight crosses PCIe once per host (1/R per
// GPU) and is all-gathered over NVLink; between hosts only the hosts' slices move.
JobStep deviceCollectivesStep(const Job& job, const HardwareProfile& hw, const PlanStats& stats, double& nvlink_us) {
  const double r = job.r, h = job.hosts, g = job.shares.gradient_values;
  const double weights = static_cast<double>(stats.weight_h2d_bytes);
  const double h2d = static_cast<double>(stats.h2d_bytes) - weights * (r - 1) / r;
  const double d2h = static_cast<double>(stats.d2h_bytes) - g * (r - 1) / r;
  nvlink_us = (weights + g) * (r - 1) / r / hw.nvlink_bps * 1e6;
  JobStep step;
  const double between = (g + job.shares.updated) * (h - 1) / h;  // each host's, each way
  step.network_us = between / hw.network_bps * 1e6;
  step.host_stream_us = shardedHostMicros(job, hw, stats) + step.network_us;
  // The plan's waits beyond its busiest device stream stay; the busiest is the new streams'.
  const double busiest = std::max({stats.compute_us, stats.h2d_us, stats.d2h_us});
  const double links = std::max({stats.compute_us, h2d / hw.h2d_bps * 1e6, d2h / hw.d2h_bps * 1e6, nvlink_us});
  step.device_us = deviceStep(stats, links + (stats.step_us - busiest), step.host_stream_us);
  step.host_memory_us = (r * (h2d + d2h) + 2.0 * between + job.optimizer_bytes * r / job.n) / hw.host_bps * 1e6;
  return step;
}

std::string jobRate(const JobStep& step, const Job& job, const EmitOptions& emit, const PlanStats& stats) {
  const double tokens = static_cast<double>(job.n * emit.batch * emit.seq);
  const double per_token = modelFlopsPerToken(double(stats.num_params), double(emit.active_params),
                                              double(stats.frozen_params));
  return fmt::format("step {} (device {}, host stream {}, host memory {}, network {}), bound by {}: {:.0f} tokens/s, "
                     "{:.1f} model TFLOP/s for the job",
                     millis(step.step_us()), millis(step.device_us), millis(step.host_stream_us),
                     millis(step.host_memory_us), millis(step.network_us), step.bound(),
                     tokens / (step.step_us() * 1e-6), per_token * tokens / (step.step_us() * 1e-6) / 1e12);
}

}  // namespace

double dataParallelStepMicros(const CompileOptions& o, const EmitOptions& emit, const plan::Plan& plan,
                              const PlanStats& stats) {
  if (o.ranks <= 1) return stats.step_us;
  const Job job = jobOf(o, plan);
  return hostExchangeStep(job, exchangeOf(job, emit.hardware), emit.hardware, stats).step_us();
}

double hostBytesPerHost(const plan::Plan& plan, int64_t ranks, int64_t ranks_per_host) {
  if (ranks <= 1) return static_cast<double>(planHostBytes(plan));
  return rankBytes(hostShares(plan), ranks, ranks_per_host).host;
}

void printDataParallel(const CompileOptions& o, const EmitOptions& emit, const plan::Plan& plan,
                       const PlanStats& stats) {
  if (o.ranks <= 1) return;
  const Job job = jobOf(o, plan);
  const RankBytes bytes = rankBytes(job.shares, job.n, job.r);
  const Exchange e = exchangeOf(job, emit.hardware);
  const JobStep exchange = hostExchangeStep(job, e, emit.hardware, stats);
  std::printf("  data parallel  %lld ranks (--ranks), %lld per host on %lld host%s: %lld x %lld tokens per update; "
              "host %s per rank (%s on the rank holding the host's copy of the master weights), %s per host; per "
              "step each rank sends its gradient's slices to their owners (%s, %s of them between hosts) and gets "
              "the updated weights back (%s between hosts): %s on a %.0f GB/s link per host, %s through shared "
              "memory; the host optimizer 1/%lld of one process's\n",
              (long long)job.n, (long long)job.r, (long long)job.hosts, job.hosts == 1 ? "" : "s", (long long)job.n,
              (long long)(emit.batch * emit.seq), formatBytes(bytes.own).c_str(), formatBytes(bytes.writer).c_str(),
              formatBytes(bytes.host).c_str(), formatBytes(e.grad_out).c_str(), formatBytes(e.grad_between).c_str(),
              formatBytes(e.weights_in).c_str(), millis(exchange.network_us).c_str(), emit.hardware.network_bps * 1e-9,
              millis(e.local_us).c_str(), (long long)job.n);
  std::printf("  job step       as mtrun runs it (the exchange on the hosts): %s\n",
              jobRate(exchange, job, emit, stats).c_str());
  if (emit.hardware.nvlink_bps <= 0 || job.r <= 1) return;
  double nvlink_us = 0;
  const JobStep devices = deviceCollectivesStep(job, emit.hardware, stats, nvlink_us);
  std::printf("  with NCCL      gradients reduce-scattered and weights all-gathered over NVLink (%.0f GB/s: %s per "
              "GPU), each weight over PCIe once per host (DESIGN.md §13; not built: it waits for a machine with "
              "several GPUs): %s\n",
              emit.hardware.nvlink_bps * 1e-9, millis(nvlink_us).c_str(), jobRate(devices, job, emit, stats).c_str());
}

}  // namespace mt
