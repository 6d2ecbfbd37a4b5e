// The CUDA backend: the plan's device arena is one cudaMalloc; every plan stream but the host
// one is a CUDA stream; the host tensors the plan copies are pinned in place. Each plan stream
// has a thread (StreamThreads) that issues its instructions in order: a kernel or copy is
// enqueued on the stream; a recorded event is a CUDA event (device streams) or the host work
// done so far (host stream); a wait first waits, on the CPU, until the event is recorded in
// this step, then on the GPU (cudaStreamWaitEvent) or, on the host stream, until the GPU
// reaches it (cudaEventSynchronize). So the GPU runs exactly the plan's order and overlap, and
// the host optimizer runs beside it as the plan says.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>

#include "runtime/backends/backend.h"
#include "runtime/backends/cuda_device.h"
#include "runtime/io/error.h"

#if MT_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/activation/activation.h"
#include "kernels/activation/clamped_swiglu.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cudnn.h"
#include "kernels/attention/cached_attention.h"
#include "kernels/checksum/checksum.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/embedding/embedding.h"
#include "kernels/layout/layout.h"
#include "kernels/loss/loss.h"
#include "kernels/matmul/matmul.h"
#include "kernels/moe/moe.h"
#include "kernels/norm/norm.h"
#include "kernels/pointwise/pointwise.h"
#include "kernels/random/dropout.h"
#include "kernels/rope/rope.h"
#include "kernels/softmax/softmax.h"
#include "runtime/backends/cuda_kernels.h"
#include "runtime/host/host_optimizer.h"
#include "runtime/backends/stream_program.h"
#include "runtime/backends/stream_threads.h"
#include "runtime/backends/transfer_check.h"
#include "runtime/plan/plan_queries.h"
#endif

namespace mt {

#if MT_WITH_CUDA
namespace {
constexpr KernelCudaFn kCuda[] = {
#define MT_KERNEL(id, name, ins, outs, iattrs, fattrs, precision, check, cpu, cuda, cuda_bf16) cuda,
#include "runtime/plan/op_table.def"
#undef MT_KERNEL
};
static_assert(std::size(kCuda) == kNumKernels);
}  // namespace

KernelCudaFn kernelCuda(KernelId id) { return kCuda[static_cast<size_t>(id)]; }

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}
void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw Error(std::string("cuBLAS: ") + what + ": " + cublasGetStatusString(status));
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const plan::Plan& plan, HostStore& store, const CudaOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  int64_t arenaBytes() const override { return arena_bytes_; }
  StepResult runStep(const StepOptions& options) override;
  void applyPendingUpdate() override { optimizer_.applyPending(); }
  const StepTimeline& lastTimeline() const override { return timeline_; }

 private:
  void setUp(const plan::Plan& plan, HostStore& store, const CudaOptions& options);
  void release();  // everything set up so far, in reverse
  // Which attention calls cuDNN takes (--attention auto: those it can; cudnn: all, or the plan is
  // refused naming the first it cannot take): their graphs built and workspace held before the
  // first step, and the split said.
  void prepareCudnnAttention();
  void runProgram(int stream);
  void execute(int stream, size_t index);
  // --verify-transfers: after copy `c` (issued on `s`), the device's checksum of its bytes into
  // mapped host memory, the host's of its source beside it; compared when the run has ended.
  void issueVerify(const CopyOp& c, cudaStream_t s);
  void compareTransfers();
  double sinceStepStart() const;

  HostOptimizer optimizer_;
  int64_t arena_bytes_;
  std::byte* arena_ = nullptr;
  std::vector<void*> pinned_;
  std::vector<cudaStream_t> streams_;    // per plan stream; null for the host stream
  std::vector<cublasHandle_t> blas_;     // per plan stream; null but for compute streams
  // per plan stream; set on compute streams where the run chose cuDNN's attention
  std::vector<std::unique_ptr<CudnnAttention>> cudnn_;
  AttentionEngine attention_ = AttentionEngine::kAuto;  // mtrun --attention
  int device_ = 0;  // CudaOptions::device
  std::vector<cudaEvent_t> events_;      // per plan event; null for those the host stream records
  StepRandomness random_;  // the current run's; every kernel call of programs_ points here
  KeptCopyState kept_;  // whether this run skips the kept copies (StepOptions::weights_unchanged)
  std::vector<std::vector<Op>> programs_;
  std::unique_ptr<TransferCheck> transfers_;
  // Per copy to the device: kChecksumPartials partial sums the GPU writes (mapped pinned host
  // memory, allocated by the first verifying run: nothing more on the device), the host's
  // checksum, whether this run issued it; and the byte a test's fault writes over a copy.
  uint64_t* partials_ = nullptr;
  std::vector<uint64_t> host_sums_;
  std::vector<char> issued_;
  unsigned char* fault_byte_ = nullptr;
  std::vector<size_t> step_lengths_, loss_lengths_;  // per stream, a whole step's and a loss-only run's
  const std::vector<size_t>* lengths_ = &step_lengths_;  // the current step's
  // The timeline: a pair of timing events around every kernel and copy (per stream, per
  // instruction; null elsewhere), measured from step_start_ (recorded on the GPU as the step
  // begins, when every stream is idle; host tasks are timed from host_start_, the same moment).
  std::vector<std::vector<std::pair<cudaEvent_t, cudaEvent_t>>> timing_;
  cudaEvent_t step_start_ = nullptr;
  std::chrono::steady_clock::time_point host_start_;
  StepTimeline timeline_;
  // Last: its threads run programs_ and must stop before anything above is destroyed.
  std::unique_ptr<StreamThreads> threads_;
};

CudaBackend::CudaBackend(const plan::Plan& plan, HostStore& store, const CudaOptions& options)
    : optimizer_(plan, store), arena_bytes_(plan.arena_bytes()) {
  try {
    setUp(plan, store, options);
  } catch (...) {
    release();  // what was set up before the failure (the destructor does not run)
    throw;
  }
}

void CudaBackend::setUp(const plan::Plan& plan, HostStore& store, const CudaOptions& options) {
  if (const std::string missing = cudaUnsupportedKernels(plan); !missing.empty())
    throw Error(missing + ": run this plan with --backend cpu");
  device_ = options.device;
  check(cudaSetDevice(device_), ("selecting GPU " + std::to_string(device_)).c_str());
  size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "reading the GPU's free memory");
  if (static_cast<size_t>(arena_bytes_) > free_bytes)
    throw Error("the plan's device arena needs " + std::to_string(arena_bytes_) + " bytes but the GPU has " +
                std::to_string(free_bytes) + " free: compile the plan with mtc --device-mem " +
                std::to_string(free_bytes >> 20) + "MiB (or less)");
  check(cudaMalloc(&arena_, std::max<int64_t>(arena_bytes_, 256)), "allocating the device arena");
  check(cudaMemset(arena_, 0, std::max<int64_t>(arena_bytes_, 256)), "clearing the device arena");

  // Pin every host tensor a copy touches (gradients that are views pin their landing buffer).
  const int landing = gradLandingTensor(plan);
  std::set<int> copied;
  for (const auto& stream : plan.streams())
    for (const auto& in : stream.instructions())
      if (in.has_copy()) {
        const int t = static_cast<int>(in.copy().host_tensor());
        copied.insert(landing >= 0 && plan.host_tensors(t).role() == plan::ROLE_GRAD ? landing : t);
      }
  for (int t : copied) {
    if (!store.data(t)) continue;  // an evaluation's store holds no optimizer tensors (HostUse::kEvaluation)
    check(cudaHostRegister(store.data(t), std::max<int64_t>(store.bytes(t), 1), cudaHostRegisterDefault),
          ("pinning host tensor " + plan.host_tensors(t).name()).c_str());
    pinned_.push_back(store.data(t));
  }

  for (const auto& stream : plan.streams()) {
    cudaStream_t s = nullptr;
    cublasHandle_t blas = nullptr;
    if (stream.kind() != plan::Stream::HOST) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating a stream");
    if (stream.kind() == plan::Stream::COMPUTE) {
      check(cublasCreate(&blas), "creating a handle");
      check(cublasSetStream(blas, s), "binding a handle to its stream");
      // fp32 products in fp32 unless the user asked for TF32: precision is their choice.
      check(cublasSetMathMode(blas, options.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
            "setting the math mode");
    }
    streams_.push_back(s);
    blas_.push_back(blas);
    cudnn_.push_back(nullptr);  // made by prepareCudnnAttention where a call uses it
  }
  attention_ = options.attention;
  events_.assign(plan.num_events(), nullptr);
  for (int s = 0; s < plan.streams_size(); ++s) {
    if (plan.streams(s).kind() == plan::Stream::HOST) continue;
    for (const auto& in : plan.streams(s).instructions())
      if (in.has_record_event() && !events_[in.record_event()])
        check(cudaEventCreateWithFlags(&events_[in.record_event()], cudaEventDisableTiming), "creating an event");
  }

  programs_ = bindPrograms(plan, store, arena_, &random_);
  prepareCudnnAttention();
  transfers_ = std::make_unique<TransferCheck>(plan, programs_);
  step_lengths_ = stepLengths(plan, false);
  loss_lengths_ = stepLengths(plan, true);
  check(cudaEventCreate(&step_start_), "creating a timing event");
  for (size_t s = 0; s < programs_.size(); ++s) {
    timeline_.emplace_back(programs_[s].size());
    timing_.emplace_back(programs_[s].size(), std::pair<cudaEvent_t, cudaEvent_t>{nullptr, nullptr});
    if (!streams_[s]) continue;
    for (size_t i = 0; i < programs_[s].size(); ++i)
      if (std::holds_alternative<KernelOp>(programs_[s][i]) || std::holds_alternative<CopyOp>(programs_[s][i])) {
        check(cudaEventCreate(&timing_[s][i].first), "creating a timing event");
        check(cudaEventCreate(&timing_[s][i].second), "creating a timing event");
      }
  }
  threads_ = std::make_unique<StreamThreads>(static_cast<int>(programs_.size()), plan.num_events(),
                                             [this](int s) { runProgram(s); });
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::prepareCudnnAttention() {
  int through_cudnn = 0, calls = 0;
  std::string why_ours;  // the first reason a call stays on our kernels
  for (size_t s = 0; s < programs_.size(); ++s)
    for (const Op& op : programs_[s]) {
      const auto* k = std::get_if<KernelOp>(&op);
      if (!k) continue;
      const KernelId id = k->id;
      const bool packed = id == KernelId::AttentionPacked || id == KernelId::AttentionPackedSinks ||
                          id == KernelId::AttentionPackedGrad;
      if (!packed && id != KernelId::Attention && id != KernelId::AttentionGrad && id != KernelId::AttentionSinks)
        continue;
      ++calls;
      if (attention_ == AttentionEngine::kOurs) continue;
      const bool backward = id == KernelId::AttentionGrad || id == KernelId::AttentionPackedGrad;
      const Tensor& q = k->args.in[backward ? 1 : 0];
      const AttentionShape d = attentionShape(q, k->args, packed ? &k->args.in.back() : nullptr);
      const std::string why = id == KernelId::AttentionSinks
                                  ? "this graph of cuDNN's fused attention has no sinks (our kernels take them)"
                                  : CudnnAttention::unsupported(q, d);
      if (!why.empty()) {
        if (attention_ == AttentionEngine::kCudnn) throw Error("--attention cudnn: " + why + "; run with --attention auto or ours");
        if (why_ours.empty()) why_ours = why;
        continue;
      }
      // A handle only where a call uses it: a plan cuDNN takes nothing of needs no cuDNN.
      if (!cudnn_[s]) cudnn_[s] = std::make_unique<CudnnAttention>(streams_[s]);
      try {
        cudnn_[s]->prepare(d, backward);
      } catch (const std::exception& e) {  // cuDNN's refusal or the workspace's memory: the run's error
        throw Error(e.what());
      }
      ++through_cudnn;
    }
  if (calls == 0 || attention_ == AttentionEngine::kOurs) return;
  int64_t workspace = 0;  // each stream's own
  for (const auto& c : cudnn_)
    if (c) workspace += c->workspaceBytes();
  std::printf("attention: %d of %d calls through cuDNN %lld's fused flash attention (workspace %.1f MiB beside the "
              "plan's arena)%s%s\n",
              through_cudnn, calls, static_cast<long long>(CudnnAttention::version()), workspace / 1048576.0,
              why_ours.empty() ? "" : ", the rest through ours: ", why_ours.c_str());
}

void CudaBackend::release() {
  threads_.reset();
  // Teardown: errors are ignored (there is no one left to report them to).
  for (cudaStream_t s : streams_)
    if (s) cudaStreamSynchronize(s);
  for (const auto& stream : timing_)
    for (auto [start, end] : stream)
      if (start) {
        cudaEventDestroy(start);
        cudaEventDestroy(end);
      }
  if (step_start_) cudaEventDestroy(step_start_);
  for (cudaEvent_t e : events_)
    if (e) cudaEventDestroy(e);
  cudnn_.clear();
  for (cublasHandle_t h : blas_)
    if (h) cublasDestroy(h);
  for (cudaStream_t s : streams_)
    if (s) cudaStreamDestroy(s);
  for (void* p : pinned_) cudaHostUnregister(p);
  if (partials_) cudaFreeHost(partials_);
  if (fault_byte_) cudaFreeHost(fault_byte_);
  partials_ = nullptr, fault_byte_ = nullptr;
  if (arena_) cudaFree(arena_);
  streams_.clear(), timing_.clear(), events_.clear(), blas_.clear(), pinned_.clear();
  step_start_ = nullptr, arena_ = nullptr;
}

StepResult CudaBackend::runStep(const StepOptions& options) {
  optimizer_.beginStep(options);
  random_ = options.random;
  lengths_ = options.loss_only && !options.update ? &loss_lengths_ : &step_lengths_;
  const auto first_device = std::find_if(streams_.begin(), streams_.end(), [](cudaStream_t s) { return s; });
  if (first_device != streams_.end()) check(cudaEventRecord(step_start_, *first_device), "timing the step");
  host_start_ = std::chrono::steady_clock::now();
  kept_.beginRun(options.weights_unchanged);
  if (options.verify_transfers && !partials_ && transfers_->transfers() > 0) {
    check(cudaHostAlloc(reinterpret_cast<void**>(&partials_),
                        sizeof(uint64_t) * kChecksumPartials * transfers_->transfers(), cudaHostAllocMapped),
          "allocating the transfer checksums (mapped host memory)");
    check(cudaHostAlloc(reinterpret_cast<void**>(&fault_byte_), 1, cudaHostAllocDefault), "allocating a fault's byte");
    host_sums_.assign(transfers_->transfers(), 0);
  }
  transfers_->beginRun(options.verify_transfers && partials_);
  issued_.assign(transfers_->transfers(), 0);
  threads_->runStep();
  compareTransfers();
  kept_.endRun(lengths_ == &step_lengths_, transfers_->firstMismatch().empty());
  for (size_t s = 0; s < timing_.size(); ++s)
    for (size_t i = 0; i < (*lengths_)[s]; ++i) {  // the instructions this step ran
      const auto [start, end] = timing_[s][i];
      if (!start) continue;
      if (const auto* c = std::get_if<CopyOp>(&programs_[s][i]); c && c->kept && kept_.skipping()) {
        timeline_[s][i] = Interval{};  // not run: the step's report counts no bytes for it
        continue;
      }
      float start_ms = 0.0f, end_ms = 0.0f;
      check(cudaEventElapsedTime(&start_ms, step_start_, start), "reading the timeline");
      check(cudaEventElapsedTime(&end_ms, step_start_, end), "reading the timeline");
      timeline_[s][i] = {start_ms * 1e3, end_ms * 1e3};
    }
  StepResult result = optimizer_.endStep(!transfers_->firstMismatch().empty());
  result.transfers_verified = transfers_->verified();
  result.corrupt_transfer = transfers_->firstMismatch();
  return result;
}

void CudaBackend::issueVerify(const CopyOp& c, cudaStream_t s) {
  // The host's bytes do not change before the copy has run (the plan orders their writers
  // after it), so their checksum now is the checksum of what was sent.
  host_sums_[c.transfer] = checksum_cpu(c.src, c.bytes);
  if (transfers_->injectFault() && c.bytes > 0) {  // one bit of the device's bytes, after the copy
    *fault_byte_ = *static_cast<const unsigned char*>(c.src) ^ 1;
    check(cudaMemcpyAsync(c.dst, fault_byte_, 1, cudaMemcpyHostToDevice, s), "writing a test's fault");
  }
  uint64_t* partials = nullptr;
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&partials), partials_ + kChecksumPartials * c.transfer, 0),
        "mapping the transfer checksums");
  try {
    checksum_cuda(c.dst, c.bytes, partials, s);
  } catch (const std::exception& e) {
    throw Error(std::string("the transfer checksum on the GPU: ") + e.what());
  }
  issued_[c.transfer] = 1;
}

void CudaBackend::compareTransfers() {
  if (!transfers_->enabled()) return;
  for (int t = 0; t < transfers_->transfers(); ++t)
    if (issued_[t]) transfers_->compare(t, host_sums_[t], checksumOfPartials(partials_ + kChecksumPartials * t));
}

double CudaBackend::sinceStepStart() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_start_).count();
}

void CudaBackend::runProgram(int stream) {
  // A stream thread's current device is its own: this run's GPU (a rank's need not be GPU 0).
  check(cudaSetDevice(device_), "selecting the run's GPU on a stream thread");
  for (size_t i = 0; i < (*lengths_)[stream]; ++i) execute(stream, i);
  // The step ends when the GPU has done this stream's work, not when it was issued.
  if (streams_[stream]) check(cudaStreamSynchronize(streams_[stream]), "finishing a stream's step");
}

void CudaBackend::execute(int stream, size_t index) {
  cudaStream_t s = streams_[stream];
  const Op& op = programs_[stream][index];
  const auto [start, end] = timing_[stream][index];
  if (start) check(cudaEventRecord(start, s), "timing the step");
  if (const auto* k = std::get_if<KernelOp>(&op)) {
    try {
      kernelCuda(k->id)(k->args, CudaLaunch{s, blas_[stream], cudnn_[stream].get(),
                                            attention_ == AttentionEngine::kCudnn});
    } catch (const std::exception& e) {  // the kernels' own errors (they do not link the runtime)
      throw Error(std::string(kKernelTable[static_cast<size_t>(k->id)].op_name) + " on the GPU: " + e.what());
    }
  } else if (const auto* c = std::get_if<CopyOp>(&op)) {
    if (!(c->kept && kept_.skipping())) {
      check(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDefault, s), "copying");
      if (c->transfer >= 0 && transfers_->enabled()) issueVerify(*c, s);
    }
  } else if (const auto* r = std::get_if<RecordOp>(&op)) {
    if (s) check(cudaEventRecord(events_[r->event], s), "recording an event");
    threads_->record(r->event);
  } else if (const auto* w = std::get_if<WaitOp>(&op)) {
    threads_->waitFor(w->event);
    if (cudaEvent_t e = events_[w->event]) {  // recorded on a device stream
      if (s)
        check(cudaStreamWaitEvent(s, e, 0), "waiting for an event");
      else
        check(cudaEventSynchronize(e), "waiting for the GPU");
    }
  } else {
    const auto& task = std::get<HostTaskOp>(op);
    Interval& interval = timeline_[stream][index];
    interval.start_us = sinceStepStart();
    optimizer_.run(task.kind, task.tensors, task.accumulate, task.padding_id);
    interval.end_us = sinceStepStart();
  }
  if (end) check(cudaEventRecord(end, s), "timing the step");
}

}  // namespace

std::unique_ptr<Backend> createCudaBackend(const plan::Plan& plan, HostStore& store, const CudaOptions& options) {
  return std::make_unique<CudaBackend>(plan, store, options);
}

#else

std::unique_ptr<Backend> createCudaBackend(const plan::Plan&, HostStore&, const CudaOptions&) {
  throw Error("the CUDA backend is not in this build: " + probeGpu().description);
}

#endif

}  // namespace mt
