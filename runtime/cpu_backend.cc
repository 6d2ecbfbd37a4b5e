// The CPU backend. Streams are persistent threads; a step starts every stream's program and
// waits for all of them. Events carry the step's generation number, so one recorded in an
// earlier step never satisfies a wait of this one.
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <variant>

#include "runtime/backend.h"
#include "runtime/error.h"
#include "runtime/kernel_registry.h"
#include "runtime/verifier.h"

namespace mt {
namespace {

struct KernelOp {
  KernelId id;
  KernelCpuFn fn;
  KernelArgs args;
};
struct CopyOp {
  void* dst;
  const void* src;
  int64_t bytes;
};
struct RecordOp {
  uint32_t event;
};
struct WaitOp {
  uint32_t event;
};
struct HostTaskOp {
  plan::HostTask::Kind kind;
  std::vector<int> tensors;
};
using Op = std::variant<KernelOp, CopyOp, RecordOp, WaitOp, HostTaskOp>;

class CpuBackend final : public Backend {
 public:
  CpuBackend(const plan::Plan& plan, HostStore& store);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  int64_t arenaBytes() const override { return arena_bytes_; }
  StepResult runStep(const StepOptions& options) override;
  void applyPendingUpdate() override;
  void enableProfile() override { profile_ = true; }
  std::vector<double> kernelSeconds() const override { return kernel_seconds_; }

 private:
  void streamMain(int stream);
  void execute(const Op& op);
  void runHostTask(const HostTaskOp& task);
  // This step's AdamW settings: the options' with the clipping coefficient of its norm.
  AdamWParams stepAdamW() const;
  void update(const std::vector<int>& params, const AdamWParams& adamw);

  HostStore& store_;
  const plan::Plan& plan_;
  int64_t arena_bytes_;
  // Page-aligned, so every buffer has the same alignment in every run and every plan: the
  // vectorised kernels then sum in the same order (bit-identical results across schedules).
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], FreeDeleter> arena_;
  std::vector<std::vector<Op>> programs_;

  std::mutex mutex_;
  std::condition_variable cv_;
  int64_t generation_ = 0;  // the step being run; 0 before the first
  int running_ = 0;         // streams still running the current step
  bool shutdown_ = false;
  std::vector<int64_t> event_generation_;
  std::vector<std::thread> threads_;

  bool profile_ = false;
  std::vector<double> kernel_seconds_ = std::vector<double>(kNumKernels, 0.0);  // compute stream only
  StepOptions options_;      // of the current step, read by host tasks
  double grad_sq_sum_ = 0.0;  // written by the (single) host stream
  int first_nonfinite_ = -1;  // host tensor; written by the host stream
  // The deferred update (ADAMW_PREVIOUS plans): set between steps, read by the host stream.
  bool deferred_ = false;
  bool pending_ = false;
  AdamWParams pending_adamw_;
  // The on-arrival update (ADAMW_ON_ARRIVAL plans): whether this step updated anything yet.
  bool on_arrival_ = false;
  bool updated_ = false;  // written by the host stream
};

CpuBackend::CpuBackend(const plan::Plan& plan, HostStore& store)
    : store_(store), plan_(plan), arena_bytes_(plan.arena_bytes()) {
  const int64_t available = availableHostMemory();
  if (available >= 0 && arena_bytes_ > available)
    throw Error("the plan's device arena needs " + std::to_string(arena_bytes_) +
                " bytes; the CPU backend holds it in host memory and only " +
                std::to_string(available) + " are available");
  constexpr int64_t kPage = 4096;
  const int64_t rounded = (std::max<int64_t>(arena_bytes_, 1) + kPage - 1) / kPage * kPage;
  arena_.reset(static_cast<std::byte*>(std::aligned_alloc(kPage, rounded)));
  if (!arena_) throw Error("cannot allocate the device arena of " + std::to_string(arena_bytes_) + " bytes");
  std::memset(arena_.get(), 0, rounded);
  for (const auto& stream : plan.streams()) {
    std::vector<Op> program;
    for (const auto& in : stream.instructions()) {
      switch (in.op_case()) {
        case plan::Instruction::kKernel:
          program.push_back(KernelOp{static_cast<KernelId>(in.kernel().kernel()),
                                     kernelCpu(static_cast<KernelId>(in.kernel().kernel())),
                                     bindKernelCall(plan, in.kernel(), arena_.get())});
          break;
        case plan::Instruction::kCopy: {
          const auto& c = in.copy();
          std::byte* device = arena_.get() + plan.buffers(c.buffer()).offset();
          void* host = store.data(c.host_tensor());
          const int64_t bytes = store.bytes(c.host_tensor());
          if (c.direction() == plan::Copy::HOST_TO_DEVICE)
            program.push_back(CopyOp{device, host, bytes});
          else
            program.push_back(CopyOp{host, device, bytes});
          break;
        }
        case plan::Instruction::kRecordEvent: program.push_back(RecordOp{in.record_event()}); break;
        case plan::Instruction::kWaitEvent: program.push_back(WaitOp{in.wait_event()}); break;
        case plan::Instruction::kHostTask:
          deferred_ |= in.host_task().kind() == plan::HostTask::ADAMW_PREVIOUS;
          on_arrival_ |= in.host_task().kind() == plan::HostTask::ADAMW_ON_ARRIVAL;
          program.push_back(HostTaskOp{in.host_task().kind(), {in.host_task().tensors().begin(),
                                                               in.host_task().tensors().end()}});
          break;
        default: throw Error("internal: unverified plan given to the CPU backend");
      }
    }
    programs_.push_back(std::move(program));
  }
  event_generation_.assign(plan.num_events(), 0);
  for (size_t s = 0; s < programs_.size(); ++s) threads_.emplace_back(&CpuBackend::streamMain, this, s);
}

CpuBackend::~CpuBackend() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutdown_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

StepResult CpuBackend::runStep(const StepOptions& options) {
  if (on_arrival_ && options.grad_clip > 0.0)
    throw Error("this plan updates each parameter as its gradient lands, before the global norm is known: "
                "it cannot clip by the global norm (use --grad-clip 0, or compile with mtc --update deferred)");
  options_ = options;
  grad_sq_sum_ = 0.0;
  first_nonfinite_ = -1;
  updated_ = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    ++generation_;
    running_ = static_cast<int>(programs_.size());
    cv_.notify_all();
    cv_.wait(lock, [&] { return running_ == 0; });
  }
  StepResult result;
  if (store_.loss() >= 0) result.loss = store_.f32(store_.loss())[0];
  result.grad_norm = std::sqrt(grad_sq_sum_);
  if (first_nonfinite_ >= 0) result.nonfinite_grad = plan_.host_tensors(first_nonfinite_).name();
  result.partially_updated = updated_ && (first_nonfinite_ >= 0 || !std::isfinite(result.loss));
  // The previous pending update ran at the start of this step; this step's is pending now,
  // unless it is not to be applied (NaN/Inf gradients or loss, or no update asked for).
  pending_ = deferred_ && options.update && first_nonfinite_ < 0 && std::isfinite(result.loss);
  if (pending_) pending_adamw_ = stepAdamW();
  return result;
}

void CpuBackend::applyPendingUpdate() {
  if (!pending_) return;
  update(store_.params(), pending_adamw_);
  pending_ = false;
}

void CpuBackend::streamMain(int stream) {
  int64_t done_generation = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return shutdown_ || generation_ > done_generation; });
      if (shutdown_) return;
      done_generation = generation_;
    }
    for (const Op& op : programs_[stream]) execute(op);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --running_;
    }
    cv_.notify_all();
  }
}

void CpuBackend::execute(const Op& op) {
  if (const auto* k = std::get_if<KernelOp>(&op)) {
    if (!profile_) return k->fn(k->args);
    const auto start = std::chrono::steady_clock::now();
    k->fn(k->args);
    kernel_seconds_[static_cast<size_t>(k->id)] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } else if (const auto* c = std::get_if<CopyOp>(&op)) {
    std::memcpy(c->dst, c->src, c->bytes);
  } else if (const auto* r = std::get_if<RecordOp>(&op)) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      event_generation_[r->event] = generation_;
    }
    cv_.notify_all();
  } else if (const auto* w = std::get_if<WaitOp>(&op)) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return event_generation_[w->event] == generation_; });
  } else {
    runHostTask(std::get<HostTaskOp>(op));
  }
}

void CpuBackend::runHostTask(const HostTaskOp& task) {
  if (task.kind == plan::HostTask::GRAD_NORM) {
    for (int g : task.tensors) {
      const double sum = sum_squares_cpu(store_.f32(g), store_.numel(g));
      if (!std::isfinite(sum) && first_nonfinite_ < 0) first_nonfinite_ = g;
      grad_sq_sum_ += sum;
    }
    return;
  }
  if (task.kind == plan::HostTask::ADAMW_PREVIOUS) {
    if (pending_) update(task.tensors, pending_adamw_);
    return;
  }
  if (first_nonfinite_ >= 0) return;  // NaN/Inf gradients would poison the weights: no update
  if (!options_.update) return;
  if (task.kind == plan::HostTask::ADAMW_ON_ARRIVAL) {
    update(task.tensors, options_.adamw);  // no clipping: the norm is not complete yet
    updated_ = true;
    return;
  }
  update(task.tensors, stepAdamW());
}

AdamWParams CpuBackend::stepAdamW() const {
  AdamWParams p = options_.adamw;
  if (options_.grad_clip > 0.0) {
    // torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6), clamped to 1.
    const double coeff = options_.grad_clip / (std::sqrt(grad_sq_sum_) + 1e-6);
    p.grad_scale = static_cast<float>(std::min(coeff, 1.0));
  }
  return p;
}

void CpuBackend::update(const std::vector<int>& params, const AdamWParams& adamw) {
  for (int param : params) {
    AdamWParams q = adamw;
    if (!plan_.host_tensors(param).weight_decay()) q.weight_decay = 0.0;
    adamw_cpu(store_.f32(param), store_.f32(store_.gradOf(param)), store_.f32(store_.moment1Of(param)),
              store_.f32(store_.moment2Of(param)), store_.numel(param), q);
  }
}

}  // namespace

std::unique_ptr<Backend> createCpuBackend(const plan::Plan& plan, HostStore& store) {
  return std::make_unique<CpuBackend>(plan, store);
}

}  // namespace mt
