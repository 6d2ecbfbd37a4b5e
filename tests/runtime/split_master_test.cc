// The split master (plan 1.7: a parameter streamed as bf16 is held as its bf16 copy + a 16-bit
// residual, no fp32 copy) changes where the master's bytes live, never the numbers: the same
// plan with its residuals removed (plan 1.6's layout: an fp32 master beside a bf16 staging copy)
// trains to bit-identical losses, master weights and moments, and takes 2 bytes per parameter
// more. A checkpoint of the split master (fp32, restored as it is written) loads back exactly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "runtime/backends/backend.h"
#include "runtime/host/host_store.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/plan/verifier.h"
#include "tests/runtime/scratch_path.h"
#include "tests/runtime/test_steps.h"

namespace mt {
namespace {

// `split` with its residual tensors removed and every host tensor index renumbered.
plan::Plan withoutResiduals(const plan::Plan& split) {
  plan::Plan plan = split;
  std::vector<int> renumbered(split.host_tensors_size(), -1);
  plan.clear_host_tensors();
  for (int i = 0; i < split.host_tensors_size(); ++i) {
    if (split.host_tensors(i).role() == plan::ROLE_RESIDUAL) continue;
    renumbered[i] = plan.host_tensors_size();
    *plan.add_host_tensors() = split.host_tensors(i);
  }
  for (auto& t : *plan.mutable_host_tensors())
    if (t.role() == plan::ROLE_GRAD || t.role() == plan::ROLE_MOMENT1 || t.role() == plan::ROLE_MOMENT2 ||
        t.role() == plan::ROLE_STAGING)
      t.set_param_index(renumbered[t.param_index()]);
  for (auto& stream : *plan.mutable_streams())
    for (auto& in : *stream.mutable_instructions()) {
      if (in.has_copy()) in.mutable_copy()->set_host_tensor(renumbered[in.copy().host_tensor()]);
      if (in.has_host_task())
        for (auto& t : *in.mutable_host_task()->mutable_tensors()) t = renumbered[t];
    }
  return plan;
}

struct TrainedRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> state;  // every master and moment, in plan order
};

std::vector<std::vector<float>> stateOf(const HostStore& store) {
  std::vector<std::vector<float>> state;
  for (int p : store.params()) {
    state.push_back(store.readParam(p));
    for (int t : {store.moment1Of(p), store.moment2Of(p)}) state.emplace_back(store.f32(t), store.f32(t) + store.numel(t));
  }
  return state;
}

// Four steps with clipping, the third without an update (a validation step); `checkpoint`, if
// given, receives the state after them.
TrainedRun train(const plan::Plan& plan, const std::string& checkpoint = "") {
  HostStore store(plan);
  store.initialize(5);
  auto backend = createCpuBackend(plan, store);
  TrainedRun run;
  for (int step = 1; step <= 4; ++step) {
    test::fillStepTokens(store, plan, step);
    StepOptions options = test::stepOptions(step);
    options.update = step != 3;
    run.losses.push_back(backend->runStep(options).loss);
  }
  backend->applyPendingUpdate();
  run.state = stateOf(store);
  if (!checkpoint.empty()) store.saveState(checkpoint, {});
  return run;
}

class SplitMaster : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("MT_TEST_PLAN");
    if (!path) GTEST_SKIP() << "MT_TEST_PLAN is not set (ctest sets it; it needs mtc)";
    split_ = readPlan(path);
    verifyPlan(split_);
    plain_ = withoutResiduals(split_);
    verifyPlan(plain_);
    ASSERT_LT(plain_.host_tensors_size(), split_.host_tensors_size()) << "the test plan has no split master";
  }
  plan::Plan split_, plain_;
};

TEST_F(SplitMaster, TakesTwoBytesPerStreamedParameterLessThanAnFp32MasterBesideItsCopy) {
  int64_t streamed = 0;  // weights of the split parameters: those with a staging copy
  for (const auto& t : split_.host_tensors())
    if (t.role() == plan::ROLE_STAGING) {
      EXPECT_TRUE(isSplitMaster(split_, t.param_index())) << split_.host_tensors(t.param_index()).name();
      streamed += checkedNumel(t.shape(), "staging");
    }
  ASSERT_GT(streamed, 0) << "the test plan streams no parameter as bf16";
  EXPECT_EQ(planHostBytes(split_) + 2 * streamed, planHostBytes(plain_));
  HostStore store(split_);
  EXPECT_EQ(store.totalBytes(), planHostBytes(split_));
  for (int p : store.params())
    EXPECT_EQ(store.data(p) == nullptr, isSplitMaster(split_, p)) << split_.host_tensors(p).name();
}

TEST_F(SplitMaster, TrainsBitIdenticallyToAnFp32Master) {
  const std::string checkpoint = test::scratchPath("split_master_checkpoint.safetensors");
  const TrainedRun split = train(split_, checkpoint), plain = train(plain_);
  ASSERT_EQ(split.losses.size(), plain.losses.size());
  for (size_t step = 0; step < split.losses.size(); ++step)
    EXPECT_EQ(std::memcmp(&split.losses[step], &plain.losses[step], sizeof(float)), 0)
        << "step " << step + 1 << ": " << split.losses[step] << " vs " << plain.losses[step];
  EXPECT_NE(split.losses.front(), split.losses.back()) << "the run did not train";
  ASSERT_EQ(split.state.size(), plain.state.size());
  int differing = 0;
  for (size_t t = 0; t < split.state.size(); ++t)
    if (std::memcmp(split.state[t].data(), plain.state[t].data(), split.state[t].size() * sizeof(float)) != 0 &&
        ++differing <= 5)
      ADD_FAILURE() << "state tensor " << t << " differs";
  EXPECT_EQ(differing, 0);

  // The checkpoint holds the exact fp32 master; loading it splits it again.
  HostStore store(split_);
  store.initialize(6);
  store.loadState(SafetensorsFile(checkpoint));
  const auto loaded = stateOf(store);
  ASSERT_EQ(loaded.size(), split.state.size());
  for (size_t t = 0; t < loaded.size(); ++t)
    EXPECT_EQ(std::memcmp(loaded[t].data(), split.state[t].data(), loaded[t].size() * sizeof(float)), 0)
        << "state tensor " << t << " differs after a checkpoint round trip";
  std::filesystem::remove(checkpoint);
}

}  // namespace
}  // namespace mt
