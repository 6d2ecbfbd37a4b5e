// The CPU backend: the device arena is one host allocation of the planned size, each stream
// runs on its own thread (StreamThreads), events are real synchronisation.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "kernels/checksum/checksum.h"
#include "runtime/backends/backend.h"
#include "runtime/backends/transfer_check.h"
#include "runtime/io/error.h"
#include "runtime/host/host_optimizer.h"
#include "runtime/plan/kernel_registry.h"
#include "runtime/backends/stream_program.h"
#include "runtime/backends/stream_threads.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

// OpenMP threads for each stream of `plan`: its compute streams share the cores; its host
// stream (one at most: the verifier) runs the optimizer at the same time, bound by memory
// bandwidth (a few threads fill it): a quarter of them; copy streams run memcpy alone.
// Oversubscribed teams cost little because their threads sleep when idle
// (OMP_WAIT_POLICY=passive, runtime/backends/cpu_libraries.h).
std::vector<int> openmpThreadsPerStream(const plan::Plan& plan, int cores) {
  int compute_streams = 0;
  for (const auto& stream : plan.streams()) compute_streams += stream.kind() == plan::Stream::COMPUTE;
  const int compute_each = std::max(1, cores / std::max(compute_streams, 1));
  std::vector<int> threads;
  for (const auto& stream : plan.streams())
    threads.push_back(stream.kind() == plan::Stream::COMPUTE ? compute_each
                      : stream.kind() == plan::Stream::HOST  ? std::max(1, cores / 4)
                                                             : 1);
  return threads;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(const plan::Plan& plan, HostStore& store);

  std::string name() const override { return "cpu"; }
  int64_t arenaBytes() const override { return arena_bytes_; }
  StepResult runStep(const StepOptions& options) override;
  void applyPendingUpdate() override { optimizer_.applyPending(); }
  const StepTimeline& lastTimeline() const override { return timeline_; }

 private:
  void execute(int stream, size_t index);
  // --verify-transfers: the checksum of copy `c`'s bytes on the device against the host's.
  void verify(const CopyOp& c);
  double sinceStepStart() const;

  HostOptimizer optimizer_;
  int64_t arena_bytes_;
  // Page-aligned, so every buffer has the same alignment in every run and every plan: the
  // vectorised kernels then sum in the same order (bit-identical results across schedules).
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], FreeDeleter> arena_;
  StepRandomness random_;  // the current run's; every kernel call of programs_ points here
  KeptCopyState kept_;  // whether this run skips the kept copies (StepOptions::weights_unchanged)
  std::vector<std::vector<Op>> programs_;
  std::unique_ptr<TransferCheck> transfers_;
  std::vector<size_t> step_lengths_, loss_lengths_;  // per stream, a whole step's and a loss-only run's
  const std::vector<size_t>* lengths_ = &step_lengths_;  // the current step's
  std::chrono::steady_clock::time_point step_start_;
  StepTimeline timeline_;  // per stream, per instruction; each written by its stream's thread
  // Last: its threads run programs_ and must stop before anything above is destroyed.
  std::unique_ptr<StreamThreads> threads_;
};

CpuBackend::CpuBackend(const plan::Plan& plan, HostStore& store)
    : optimizer_(plan, store), arena_bytes_(plan.arena_bytes()) {
  constexpr int64_t kPage = 4096;
  const int64_t rounded = (std::max<int64_t>(arena_bytes_, 1) + kPage - 1) / kPage * kPage;
  arena_.reset(static_cast<std::byte*>(std::aligned_alloc(kPage, rounded)));
  if (!arena_) throw Error("cannot allocate the device arena of " + std::to_string(arena_bytes_) + " bytes");
  std::memset(arena_.get(), 0, rounded);
  programs_ = bindPrograms(plan, store, arena_.get(), &random_);
  transfers_ = std::make_unique<TransferCheck>(plan, programs_);
  step_lengths_ = stepLengths(plan, false);
  loss_lengths_ = stepLengths(plan, true);
  for (const auto& program : programs_) timeline_.emplace_back(program.size());
  const std::vector<int> omp_threads = openmpThreadsPerStream(plan, omp_get_max_threads());
  openblas_set_num_threads(omp_threads.empty() ? 1 : *std::max_element(omp_threads.begin(), omp_threads.end()));
  threads_ = std::make_unique<StreamThreads>(
      static_cast<int>(programs_.size()), plan.num_events(),
      [this](int s) {
        for (size_t i = 0; i < (*lengths_)[s]; ++i) execute(s, i);
      },
      [omp_threads](int s) { omp_set_num_threads(omp_threads[s]); });
}

StepResult CpuBackend::runStep(const StepOptions& options) {
  optimizer_.beginStep(options);
  random_ = options.random;
  lengths_ = options.loss_only && !options.update ? &loss_lengths_ : &step_lengths_;
  step_start_ = std::chrono::steady_clock::now();
  kept_.beginRun(options.weights_unchanged);
  transfers_->beginRun(options.verify_transfers);
  threads_->runStep();
  kept_.endRun(lengths_ == &step_lengths_, transfers_->firstMismatch().empty());
  StepResult result = optimizer_.endStep(!transfers_->firstMismatch().empty());
  result.transfers_verified = transfers_->verified();
  result.corrupt_transfer = transfers_->firstMismatch();
  return result;
}

void CpuBackend::verify(const CopyOp& c) {
  const uint64_t host = checksum_cpu(c.src, c.bytes);
  if (transfers_->injectFault() && c.bytes > 0) *static_cast<unsigned char*>(c.dst) ^= 1;
  transfers_->compare(c.transfer, host, checksum_cpu(c.dst, c.bytes));
}

double CpuBackend::sinceStepStart() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - step_start_).count();
}

void CpuBackend::execute(int stream, size_t index) {
  const Op& op = programs_[stream][index];
  if (const auto* r = std::get_if<RecordOp>(&op)) return threads_->record(r->event);
  if (const auto* w = std::get_if<WaitOp>(&op)) return threads_->waitFor(w->event);
  Interval& interval = timeline_[stream][index];
  interval.start_us = sinceStepStart();
  if (const auto* k = std::get_if<KernelOp>(&op)) {
    runKernelCpu(k->id, k->args);
  } else if (const auto* c = std::get_if<CopyOp>(&op)) {
    if (c->kept && kept_.skipping()) {
      interval = Interval{};  // not run: the step's report counts no bytes for it
      return;
    }
    std::memcpy(c->dst, c->src, c->bytes);
    if (c->transfer >= 0 && transfers_->enabled()) verify(*c);
  } else {
    const auto& task = std::get<HostTaskOp>(op);
    optimizer_.run(task.kind, task.tensors, task.accumulate, task.padding_id);
  }
  interval.end_us = sinceStepStart();
}

}  // namespace

std::unique_ptr<Backend> createCpuBackend(const plan::Plan& plan, HostStore& store) {
  return std::make_unique<CpuBackend>(plan, store);
}

}  // namespace mt
