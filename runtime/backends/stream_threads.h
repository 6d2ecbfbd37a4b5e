// Runs one program per stream of a plan, each on its own persistent thread, one step at a
// time. Events carry the step's generation number, so an event recorded in an earlier step
// never satisfies a wait of this one. Both backends run their streams this way: the CPU
// backend's threads execute their instructions, the CUDA backend's issue them to CUDA streams.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mt {

class StreamThreads {
 public:
  // `program(stream)` runs stream `stream`'s instructions once; it may call record/waitFor.
  // `thread_setup(stream)`, if given, runs once on each stream's thread before its first step.
  StreamThreads(int num_streams, int num_events, std::function<void(int)> program,
                std::function<void(int)> thread_setup = {});
  ~StreamThreads();
  StreamThreads(const StreamThreads&) = delete;
  StreamThreads& operator=(const StreamThreads&) = delete;

  // Runs every stream's program once and returns when all have finished. If one throws, the
  // others' waits give up and the first exception is rethrown here.
  void runStep();
  // Marks `event` recorded in this step and wakes its waiters.
  void record(uint32_t event);
  // Blocks until `event` is recorded in this step.
  void waitFor(uint32_t event);

 private:
  void threadMain(int stream);

  std::function<void(int)> program_;
  std::function<void(int)> thread_setup_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int64_t generation_ = 0;  // the step being run; 0 before the first
  int running_ = 0;         // streams still running the current step
  bool shutdown_ = false;
  std::exception_ptr failure_;  // the first exception of this step
  std::vector<int64_t> event_generation_;
  std::vector<std::thread> threads_;
};

}  // namespace mt
