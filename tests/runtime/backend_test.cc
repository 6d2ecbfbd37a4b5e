// The parts of the backends that run without a GPU: the stream threads both backends share,
// and the CUDA backend's refusal of plans it has no kernels for.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/plan/op_table.h"
#include "runtime/backends/stream_threads.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

TEST(StreamThreads, AWaitSeesTheWorkBeforeTheRecordOfTheSameStep) {
  std::atomic<int> produced{0};
  std::vector<int> seen;
  StreamThreads* self = nullptr;
  StreamThreads threads(2, 1, [&](int stream) {
    if (stream == 0) {
      produced.fetch_add(1);
      self->record(0);
    } else {
      self->waitFor(0);
      seen.push_back(produced.load());
    }
  });
  self = &threads;
  for (int step = 0; step < 50; ++step) threads.runStep();
  ASSERT_EQ(seen.size(), 50u);
  // Step k's wait saw step k's record: an event of an earlier step never satisfies it.
  for (int step = 0; step < 50; ++step) EXPECT_EQ(seen[step], step + 1) << "step " << step;
}

TEST(StreamThreads, AStreamThatThrowsEndsTheStepForAllAndTheErrorReachesTheCaller) {
  bool fail = true;
  int completed = 0;
  StreamThreads* self = nullptr;
  StreamThreads threads(3, 1, [&](int stream) {
    if (stream == 0) {
      if (fail) throw std::runtime_error("kernel failed");
      self->record(0);
    } else {
      self->waitFor(0);  // would wait forever for the failed stream's record
      if (stream == 1) ++completed;
    }
  });
  self = &threads;
  EXPECT_THROW(
      {
        try {
          threads.runStep();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "kernel failed");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_EQ(completed, 0);
  fail = false;  // the threads survive a failed step
  threads.runStep();
  EXPECT_EQ(completed, 1);
}

TEST(StreamThreads, EachStreamThreadIsSetUpOnceOnItselfBeforeItsFirstStep) {
  // The CPU backend gives each stream thread its OpenMP share this way: the setup must run on
  // the thread that then runs the stream's programs.
  std::vector<std::thread::id> setup_on(3), ran_on(3);
  std::vector<int> setups(3, 0);
  StreamThreads threads(
      3, 0, [&](int stream) { ran_on[stream] = std::this_thread::get_id(); },
      [&](int stream) {
        setup_on[stream] = std::this_thread::get_id();
        ++setups[stream];
      });
  for (int step = 0; step < 5; ++step) threads.runStep();
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(setups[s], 1) << "stream " << s;
    EXPECT_EQ(setup_on[s], ran_on[s]) << "stream " << s;
    EXPECT_NE(ran_on[s], std::this_thread::get_id()) << "stream " << s;
  }
}

void addKernel(plan::Plan& plan, KernelId id) {
  plan.mutable_streams(0)->add_instructions()->mutable_kernel()->set_kernel(static_cast<uint32_t>(id));
}

// Every row of the op table names a CUDA twin (the generic ONNX ops since session 7; the
// mixtures of experts' since plan 1.15): no plan is refused by the CUDA backend for a kernel it
// lacks. A row added without one would be named, with its calls, by cudaUnsupportedKernels.
TEST(CudaSupport, EveryKernelHasACudaTwin) {
  plan::Plan plan;
  plan.add_streams()->set_kind(plan::Stream::COMPUTE);
  for (size_t id = 0; id < kNumKernels; ++id) {
    EXPECT_TRUE(kKernelTable[id].has_cuda) << kKernelTable[id].op_name << " has no CUDA twin";
    addKernel(plan, static_cast<KernelId>(id));
  }
  EXPECT_EQ(cudaUnsupportedKernels(plan), "");
}

// A bf16 call of a kernel whose CUDA twin does not take bf16 (op_table.def's cuda_bf16) is named,
// "on bf16", by cudaUnsupportedKernels; one whose twin does is not.
TEST(CudaSupport, NamesKernelsWithoutABf16TwinOnBf16Calls) {
  for (size_t id = 0; id < kNumKernels; ++id) {
    const KernelInfo& info = kKernelTable[id];
    if (info.precision.kind != KernelPrecision::kMixed || info.num_outputs == 0) continue;
    plan::Plan plan;
    plan.add_streams()->set_kind(plan::Stream::COMPUTE);
    auto* buffer = plan.add_buffers();
    buffer->set_dtype(plan::DTYPE_BF16);
    auto* call = plan.mutable_streams(0)->add_instructions()->mutable_kernel();
    call->set_kernel(static_cast<uint32_t>(id));
    call->add_outputs(0);
    const std::string named = cudaUnsupportedKernels(plan);
    EXPECT_EQ(named.find(std::string(info.op_name) + " on bf16") != std::string::npos, !info.cuda_bf16)
        << info.op_name << ": " << named;
  }
}

TEST(CudaSupport, CoversEveryFusedKernelOfTheBuiltInModels) {
  // The first 25 rows are the fused kernels built-in models and fused imports run; the CUDA
  // backend must have all of them.
  for (size_t i = 0; i <= static_cast<size_t>(KernelId::SoftmaxXentGrad); ++i)
    EXPECT_TRUE(kKernelTable[i].has_cuda) << kKernelTable[i].op_name;
  // And the decode step's (mtc --kv-cache).
  for (KernelId id : {KernelId::RopeAt, KernelId::CachedAttention})
    EXPECT_TRUE(kKernelTable[static_cast<size_t>(id)].has_cuda) << kKernelTable[static_cast<size_t>(id)].op_name;
}

}  // namespace
}  // namespace mt
