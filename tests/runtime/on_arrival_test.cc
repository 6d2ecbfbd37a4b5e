// The on-arrival update of plan 1.4 (NORM_AND_ADAMW_ON_ARRIVAL): each task takes its gradients'
// norm share and updates their parameters in the same pass; after a gradient holding NaN no
// parameter is updated (that one neither: its only chunk is bad), the step names it, and the
// parameters updated before it are reported as such. Runs on the on-arrival test plan.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/adamw/adamw.h"
#include "runtime/host/host_optimizer.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/plan_format.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

TEST(OnArrival, EachTaskNormsAndUpdatesAndAGradientWithNaNStopsTheUpdates) {
  const char* path = std::getenv("MT_TEST_PLAN");
  if (!path) GTEST_SKIP() << "MT_TEST_PLAN is not set (ctest sets it; it needs mtc)";
  const plan::Plan plan = readPlan(path);
  ASSERT_EQ(planUpdateKind(plan), plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL);
  std::vector<std::vector<int>> tasks;  // each update task's parameters, in host-stream order (the
                                        // plan's host token lookup and scatter left out)
  for (const auto& stream : plan.streams())
    for (const auto& in : stream.instructions())
      if (in.has_host_task() && updatesParameters(in.host_task().kind())) tasks.emplace_back(in.host_task().tensors().begin(), in.host_task().tensors().end());
  ASSERT_GE(tasks.size(), 3u);

  HostStore store(plan);
  store.initialize(3);
  HostOptimizer optimizer(plan, store);
  StepOptions options;
  options.grad_clip = 0.0;
  options.adamw.lr = 1e-2;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Fills a parameter's gradient as it would land (the views share the landing buffer, so
  // each is written just before its task), with a NaN at element 0 if asked.
  auto land = [&](int param, bool nan) {
    float* g = store.f32(store.gradOf(param));
    for (int64_t i = 0; i < store.numel(param); ++i) g[i] = normal(rng);
    if (nan) g[0] = std::nanf("");
    return sum_squares_cpu(g, store.numel(param));
  };
  auto weights = [&](int param) {
    return std::vector<float>(store.f32(param), store.f32(param) + store.numel(param));
  };

  // A clean step: every parameter moves, the norm is the sum of the landed gradients' squares.
  optimizer.beginStep(options);
  double sum = 0.0;
  for (const auto& task : tasks) {
    std::vector<std::vector<float>> before;
    for (int p : task) sum += land(p, false), before.push_back(weights(p));
    optimizer.run(plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL, task);
    for (size_t i = 0; i < task.size(); ++i)
      EXPECT_NE(weights(task[i]), before[i]) << plan.host_tensors(task[i]).name() << " was not updated";
  }
  StepResult clean = optimizer.endStep();
  EXPECT_DOUBLE_EQ(clean.grad_norm, std::sqrt(sum));
  EXPECT_TRUE(clean.nonfinite_grad.empty());
  EXPECT_FALSE(clean.partially_updated);

  // The second task's gradient holds a NaN: the first task's parameters are updated, nothing
  // after (the bad parameter included: its tensor is one chunk).
  optimizer.beginStep(options);
  for (size_t t = 0; t < tasks.size(); ++t) {
    std::vector<std::vector<float>> before;
    for (int p : tasks[t]) land(p, t == 1), before.push_back(weights(p));
    optimizer.run(plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL, tasks[t]);
    for (size_t i = 0; i < tasks[t].size(); ++i)
      EXPECT_EQ(weights(tasks[t][i]) != before[i], t == 0) << "task " << t << ", " << plan.host_tensors(tasks[t][i]).name();
  }
  StepResult bad = optimizer.endStep();
  EXPECT_EQ(bad.nonfinite_grad, plan.host_tensors(store.gradOf(tasks[1][0])).name());
  EXPECT_TRUE(bad.partially_updated);
  EXPECT_TRUE(std::isnan(bad.grad_norm));
}

}  // namespace
}  // namespace mt
