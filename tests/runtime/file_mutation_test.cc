// Every file the runtime reads besides the plan — token files, weights (safetensors) and
// checkpoints — mutated at random (byte flips and truncations): each mutant either loads or
// is refused with mt::Error, never a crash or a stray access (this file is also built into
// the AddressSanitizer + UBSan executable).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "runtime/training/checkpoint.h"
#include "runtime/io/error.h"
#include "runtime/io/safetensors.h"
#include "runtime/data/token_data.h"
#include "runtime/plan/verifier.h"
#include "tests/runtime/scratch_path.h"

namespace mt {
namespace {

using test::scratchPath;

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

struct Tally {
  int tried = 0, loaded = 0, refused = 0;
};

// Feeds `mutants` mutated copies of `original`, and ~300 truncations of it, to `load`.
template <typename Load>
Tally mutate(const std::string& original, const std::string& path, int mutants, Load load) {
  std::mt19937_64 rng(99);
  Tally tally;
  auto attempt = [&](const std::string& bytes) {
    writeAll(path, bytes);
    ++tally.tried;
    try {
      load(path);
      ++tally.loaded;
    } catch (const Error&) {
      ++tally.refused;
    }
  };
  for (int i = 0; i < mutants; ++i) {
    std::string bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 6);
    for (int f = 0; f < flips; ++f) {
      // Half of the flips land in the first 64 bytes, where the headers are.
      const size_t at = rng() % 2 ? rng() % std::min<size_t>(64, bytes.size()) : rng() % bytes.size();
      bytes[at] = static_cast<char>(rng());
    }
    attempt(bytes);
  }
  const size_t stride = std::max<size_t>(37, original.size() / 300);
  for (size_t len = 0; len < original.size(); len += stride) attempt(original.substr(0, len));
  return tally;
}

TEST(FileMutation, TokenFiles) {
  const std::string path = scratchPath("mut.tok");
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 3000; ++i) ids.push_back(i * 31 % 256);
  writeTokenFile(path, ids, 256);
  const std::string original = readAll(path);
  Tally t = mutate(original, path, 1500, [](const std::string& p) {
    TokenFile file(p);
    const std::vector<uint32_t> all = file.read(0, file.size());
    for (uint32_t id : all) EXPECT_LT(id, file.vocabSize());
    if (file.size() > 20) {
      BatchSampler sampler(file, 2, 8, 1);
      std::vector<int32_t> x(16), y(16);
      sampler.fill(3, x.data(), y.data());
    }
  });
  std::printf("token files: %d inputs, %d loaded, %d refused\n", t.tried, t.loaded, t.refused);
  EXPECT_GT(t.refused, 100);
}

// The test plan (MT_TEST_PLAN), its host store initialised, and a checkpoint of it.
class CheckpointFile : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* plan_path = std::getenv("MT_TEST_PLAN");
    if (!plan_path) GTEST_SKIP() << "MT_TEST_PLAN is not set (ctest sets it; it needs mtc)";
    plan_ = readPlan(plan_path);
    verifyPlan(plan_);
    store_ = std::make_unique<HostStore>(plan_);
    store_->initialize(5);
    const std::string dir = scratchPath("ckpt_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    CheckpointDir(dir).write(plan_, *store_, {7, 3, 10}, 1);
    checkpoint_ = *latestCheckpoint(dir);
  }
  plan::Plan plan_;
  std::unique_ptr<HostStore> store_;
  std::string checkpoint_;
};

TEST_F(CheckpointFile, MutatedWeightsAndCheckpointsAreRejectedOrLoad) {
  const plan::Plan& plan = plan_;
  HostStore& store = *store_;
  const std::string original = readAll(checkpoint_);
  const std::string path = scratchPath("mutant.safetensors");
  Tally weights = mutate(original, path, 1000, [](const std::string& p) {
    SafetensorsFile file(p);
    uint64_t sum = 0;
    for (const auto& [name, entry] : file.entries())
      for (int64_t i = 0; i < entry.bytes; ++i) sum += static_cast<unsigned char>(entry.data[i]);
  });
  std::printf("safetensors: %d inputs, %d loaded, %d refused\n", weights.tried, weights.loaded, weights.refused);
  Tally checkpoints = mutate(original, path, 1000, [&](const std::string& p) { loadCheckpoint(p, plan, store); });
  std::printf("checkpoints: %d inputs, %d loaded, %d refused\n", checkpoints.tried, checkpoints.loaded,
              checkpoints.refused);
  EXPECT_GT(weights.refused, 100);
  EXPECT_GT(checkpoints.refused, 100);
}

// Issue 18 #6: a checkpoint whose second moment held -1 or +Inf (or whose weights held NaN)
// resumed and poisoned the weights. Loaded parameters and moments are finite, second moments
// non-negative, or the load is refused naming the tensor.
TEST_F(CheckpointFile, NonFiniteOrNegativeOptimizerStateIsRefused) {
  const plan::Plan& plan = plan_;
  HostStore& store = *store_;
  const SafetensorsFile original(checkpoint_);
  const int param = store.params().front();
  const std::string weight = plan.host_tensors(param).name();
  const std::string moment2 = plan.host_tensors(store.moment2Of(param)).name();
  struct Poison {
    std::string tensor;
    float value;
    std::string needle;
  };
  for (const Poison& poison : {Poison{moment2, -1.0f, "negative"}, Poison{moment2, INFINITY, "not finite"},
                               Poison{weight, NAN, "not finite"}, Poison{moment2, NAN, "not finite"}}) {
    std::vector<std::vector<float>> copies;
    std::vector<SafetensorsTensor> tensors;
    for (const auto& [name, entry] : original.entries()) {
      const float* values = reinterpret_cast<const float*>(entry.data);
      copies.emplace_back(values, values + entry.bytes / 4);
      if (name == poison.tensor) copies.back()[copies.back().size() / 2] = poison.value;
      tensors.push_back({name, "F32", entry.shape, copies.back().data(), entry.bytes});
    }
    const std::string path = scratchPath("poisoned.ckpt.safetensors");
    writeSafetensors(path, tensors, original.metadata());
    try {
      loadCheckpoint(path, plan, store);
      ADD_FAILURE() << poison.tensor << " holding " << poison.value << " was loaded";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(poison.tensor), std::string::npos) << message;
      EXPECT_NE(message.find(poison.needle), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace mt
