// The deferred update (ADAMW_PREVIOUS: AdamW of step k at the start of step k+1, overlapped with
// its forward) changes when the host updates, never the numbers: the same plan rewritten with
// the update at the end of each step (ADAMW after GRAD_NORM, plan 1.1's form) gives bit-identical
// losses, weights and moments — across a validation step (no update), a step with NaN gradients
// (no update, nothing left pending) and the final flush.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "runtime/backends/backend.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/verifier.h"
#include "tests/runtime/test_steps.h"

namespace mt {
namespace {

// `deferred` with its ADAMW_PREVIOUS tasks replaced by one ADAMW task at the end of the host
// stream (the events they recorded stay, recorded where the tasks were; the loss prefixes
// shrink by the tasks they held).
plan::Plan immediateUpdate(const plan::Plan& deferred) {
  plan::Plan plan = deferred;
  plan::HostTask adamw;
  adamw.set_kind(plan::HostTask::ADAMW);
  for (auto& stream : *plan.mutable_streams()) {
    auto* instrs = stream.mutable_instructions();
    for (int i = instrs->size() - 1; i >= 0; --i) {
      if (!instrs->Get(i).has_host_task() || instrs->Get(i).host_task().kind() != plan::HostTask::ADAMW_PREVIOUS)
        continue;
      for (uint32_t p : instrs->Get(i).host_task().tensors()) adamw.add_tensors(p);
      instrs->DeleteSubrange(i, 1);
      // A loss-only run (plan 1.9) runs what it ran before, less the task.
      if (stream.has_loss_prefix() && static_cast<uint32_t>(i) < stream.loss_prefix())
        stream.set_loss_prefix(stream.loss_prefix() - 1);
    }
    if (stream.kind() == plan::Stream::HOST) *stream.add_instructions()->mutable_host_task() = adamw;
  }
  return plan;
}

struct TrainedRun {
  std::vector<float> losses;
  std::vector<std::string> nonfinite;
  std::vector<std::vector<float>> state;  // every parameter and moment, in plan order
};

// Five steps: two updates, a validation step, a step whose gradients are NaN (a weight set to
// NaN for it, then restored), an update; `flush` where the trainer applies a pending update.
TrainedRun train(const plan::Plan& plan, bool flush) {
  HostStore store(plan);
  store.initialize(3);
  auto backend = createCpuBackend(plan, store);
  TrainedRun run;
  const int weight = store.params().front();
  for (int step = 1; step <= 5; ++step) {
    test::fillStepTokens(store, plan, step);
    StepOptions options = test::stepOptions(step);
    options.update = step != 3;
    float saved = 0;
    if (step == 4) {
      if (flush) backend->applyPendingUpdate();
      saved = store.f32(weight)[0];
      store.f32(weight)[0] = std::nanf("");
    }
    const StepResult result = backend->runStep(options);
    if (step == 4) store.f32(weight)[0] = saved;
    run.losses.push_back(result.loss);
    run.nonfinite.push_back(result.nonfinite_grad);
  }
  if (flush) backend->applyPendingUpdate();
  for (int p : store.params())
    for (int t : {p, store.moment1Of(p), store.moment2Of(p)})
      run.state.emplace_back(store.f32(t), store.f32(t) + store.numel(t));
  return run;
}

TEST(DeferredUpdate, GivesTheSameNumbersAsTheUpdateAtTheEndOfEachStep) {
  const char* path = std::getenv("MT_TEST_PLAN");
  if (!path) GTEST_SKIP() << "MT_TEST_PLAN is not set (ctest sets it; it needs mtc)";
  const plan::Plan deferred = readPlan(path);
  verifyPlan(deferred);
  const plan::Plan immediate = immediateUpdate(deferred);
  verifyPlan(immediate);
  int previous = 0;
  for (const auto& s : deferred.streams())
    for (const auto& in : s.instructions())
      previous += in.has_host_task() && in.host_task().kind() == plan::HostTask::ADAMW_PREVIOUS;
  ASSERT_GT(previous, 0) << "the test plan does not defer its update";

  const TrainedRun a = train(deferred, /*flush=*/true), b = train(immediate, /*flush=*/false);
  EXPECT_TRUE(a.nonfinite[3] != "" && b.nonfinite[3] != "") << "step 4 should have NaN gradients";
  for (int step = 0; step < 5; ++step) {
    if (step == 3) continue;  // the NaN step's loss is NaN in both
    EXPECT_EQ(std::memcmp(&a.losses[step], &b.losses[step], sizeof(float)), 0)
        << "step " << step + 1 << ": " << a.losses[step] << " vs " << b.losses[step];
  }
  ASSERT_EQ(a.state.size(), b.state.size());
  int differing = 0;
  for (size_t t = 0; t < a.state.size(); ++t)
    if (std::memcmp(a.state[t].data(), b.state[t].data(), a.state[t].size() * sizeof(float)) != 0 &&
        ++differing <= 5)
      ADD_FAILURE() << "state tensor " << t << " differs";
  EXPECT_EQ(differing, 0);
}

}  // namespace
}  // namespace mt
