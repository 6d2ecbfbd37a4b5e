#include "runtime/backends/stream_threads.h"

namespace mt {
namespace {
// Thrown into a stream whose wait can never be satisfied because another stream failed.
struct StepAbandoned {};
}  // namespace

StreamThreads::StreamThreads(int num_streams, int num_events, std::function<void(int)> program,
                             std::function<void(int)> thread_setup)
    : program_(std::move(program)), thread_setup_(std::move(thread_setup)), event_generation_(num_events, 0) {
  for (int s = 0; s < num_streams; ++s) threads_.emplace_back(&StreamThreads::threadMain, this, s);
}

StreamThreads::~StreamThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutdown_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void StreamThreads::runStep() {
  std::exception_ptr failure;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    ++generation_;
    running_ = static_cast<int>(threads_.size());
    failure_ = nullptr;
    cv_.notify_all();
    cv_.wait(lock, [&] { return running_ == 0; });
    failure = failure_;
  }
  if (failure) std::rethrow_exception(failure);
}

void StreamThreads::record(uint32_t event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    event_generation_[event] = generation_;
  }
  cv_.notify_all();
}

void StreamThreads::waitFor(uint32_t event) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return event_generation_[event] == generation_ || failure_; });
  if (event_generation_[event] != generation_) throw StepAbandoned{};
}

void StreamThreads::threadMain(int stream) {
  if (thread_setup_) thread_setup_(stream);
  int64_t done_generation = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return shutdown_ || generation_ > done_generation; });
      if (shutdown_) return;
      done_generation = generation_;
    }
    std::exception_ptr failure;
    try {
      program_(stream);
    } catch (const StepAbandoned&) {
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure && !failure_) failure_ = failure;
      --running_;
    }
    cv_.notify_all();
  }
}

}  // namespace mt
