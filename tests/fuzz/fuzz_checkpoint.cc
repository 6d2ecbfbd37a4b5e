// Checkpoints, loaded into the plan named by MT_FUZZ_PLAN (a real plan; its checkpoints are the
// seeds): metadata, fingerprint, every tensor's shape, checksum and values (finite, second
// moments >= 0).
#include <cstdio>
#include <memory>

#include "runtime/training/checkpoint.h"
#include "runtime/plan/verifier.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

struct Target {
  mt::plan::Plan plan;
  std::unique_ptr<mt::HostStore> store;
};

Target& target() {
  static Target t = [] {
    const char* path = std::getenv("MT_FUZZ_PLAN");
    if (!path) {
      std::fprintf(stderr, "fuzz_checkpoint: set MT_FUZZ_PLAN to the plan the checkpoints are for\n");
      std::exit(2);
    }
    Target made;
    made.plan = mt::readPlan(path);
    mt::verifyPlan(made.plan);
    made.store = std::make_unique<mt::HostStore>(made.plan);
    made.store->initialize(1);
    return made;
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Target& t = target();
  const std::string path = mt::fuzz::asFile(data, size, "input.ckpt.safetensors");
  mt::fuzz::refusalIsFine([&] { mt::loadCheckpoint(path, t.plan, *t.store); });
  return 0;
}
