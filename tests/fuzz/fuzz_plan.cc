// Plans: parse (with template expansion) and verify; a plan the verifier accepts must then bind
// and run one CPU step without a sanitizer report (DESIGN §6: a hostile plan gives an error,
// never a crash or an out-of-bounds access).
#include "runtime/backends/backend.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/plan_format.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/plan/verifier.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mt::fuzz::refusalIsFine([&] {
    mt::plan::Plan plan = mt::parsePlan(std::string(reinterpret_cast<const char*>(data), size), "input.plan");
    mt::verifyPlan(plan);
    constexpr int64_t kRunnable = int64_t{64} << 20;  // a verified plan larger than this is not run here
    if (plan.arena_bytes() > kRunnable || mt::planHostBytes(plan) > kRunnable) return;
    mt::HostStore store(plan);
    store.initialize(1);
    mt::createCpuBackend(plan, store)->runStep({});
  });
  return 0;
}
