// The host-memory check reads the memory cgroups as well as MemAvailable (issue 18, #8: in a
// 1 GiB cgroup a 1.85 GiB plan was OOM-killed instead of refused). Each test builds a made-up
// /proc and /sys tree and points availableHostMemory at it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/io/error.h"
#include "runtime/host/host_memory.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kGiB = int64_t{1} << 30;

class FakeSystem : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/host_memory_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    write("/proc/meminfo", "MemTotal:       67108864 kB\nMemAvailable:   33554432 kB\n");  // 32 GiB
  }
  void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  std::string root_;
};

TEST_F(FakeSystem, MemAvailableWithoutCgroups) {
  const HostMemory m = availableHostMemory(root_);
  EXPECT_EQ(m.available, 32 * kGiB);
  EXPECT_EQ(m.bound, "MemAvailable");
}

TEST_F(FakeSystem, CgroupV2LimitLessUsagePlusReclaimableCache) {
  write("/proc/self/mountinfo", "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
  write("/proc/self/cgroup", "0::/user.slice/job\n");
  write("/sys/fs/cgroup/user.slice/job/memory.max", "1073741824\n");      // 1 GiB
  write("/sys/fs/cgroup/user.slice/job/memory.current", "536870912\n");   // 0.5 GiB used
  write("/sys/fs/cgroup/user.slice/job/memory.stat", "anon 1\ninactive_file 134217728\nactive_file 5\n");
  write("/sys/fs/cgroup/user.slice/memory.max", "max\n");
  const HostMemory m = availableHostMemory(root_);
  EXPECT_EQ(m.available, kGiB / 2 + kGiB / 8);
  EXPECT_NE(m.bound.find("/user.slice/job limits it to 1.00 GiB, 512.0 MiB in use"), std::string::npos) << m.bound;
}

TEST_F(FakeSystem, TheTightestAncestorBounds) {
  write("/proc/self/mountinfo", "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n");
  write("/proc/self/cgroup", "0::/a/b\n");
  write("/sys/fs/cgroup/a/b/memory.max", "8589934592\n");  // 8 GiB, 1 GiB used
  write("/sys/fs/cgroup/a/b/memory.current", "1073741824\n");
  write("/sys/fs/cgroup/a/memory.max", "4294967296\n");  // 4 GiB, 3 GiB used
  write("/sys/fs/cgroup/a/memory.current", "3221225472\n");
  const HostMemory m = availableHostMemory(root_);
  EXPECT_EQ(m.available, kGiB);
  EXPECT_NE(m.bound.find("cgroup /a limits"), std::string::npos) << m.bound;
}

TEST_F(FakeSystem, CgroupV1InAContainerWhoseMountIsItsOwnCgroup) {
  // Hybrid layout as Docker shows it: the memory hierarchy's mount root is the container's cgroup.
  write("/proc/self/mountinfo",
        "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n"
        "36 31 0:33 / /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup rw,cpu\n"
        "37 31 0:34 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
  write("/proc/self/cgroup", "4:memory:/docker/abc\n1:cpu:/docker/abc\n0::/\n");
  write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "2147483648\n");  // 2 GiB
  write("/sys/fs/cgroup/memory/memory.usage_in_bytes", "1073741824\n");
  write("/sys/fs/cgroup/memory/memory.stat", "cache 9\ninactive_file 7\ntotal_inactive_file 0\n");
  const HostMemory m = availableHostMemory(root_);
  EXPECT_EQ(m.available, kGiB);
  EXPECT_NE(m.bound.find("/docker/abc limits it to 2.00 GiB"), std::string::npos) << m.bound;
}

TEST_F(FakeSystem, UnlimitedCgroupsLeaveMemAvailable) {
  write("/proc/self/mountinfo", "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
  write("/proc/self/cgroup", "4:memory:/job\n");
  write("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", "9223372036854771712\n");
  write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(availableHostMemory(root_).available, 32 * kGiB);
}

// A plan of one host tensor: 1 GiB of f32.
plan::Plan oneGiBPlan() {
  plan::Plan plan;
  auto* t = plan.add_host_tensors();
  t->set_name("w");
  t->set_dtype(plan::DTYPE_F32);
  t->add_shape(256 << 20);
  return plan;
}

TEST(HostMemoryCheck, NamesTheHostTensorsTheArenaAndWhatBounds) {
  plan::Plan plan = oneGiBPlan();
  plan.set_arena_bytes(kGiB / 2);
  const HostMemory memory{kGiB + kGiB / 4, "the memory cgroup /job limits it to 2.00 GiB, 0.75 GiB in use"};
  checkHostMemory(plan, HostExtras{/*arena_on_host=*/false}, memory);  // 1 GiB fits 1.25
  try {
    checkHostMemory(plan, HostExtras{/*arena_on_host=*/true}, memory);  // 1.5 GiB does not
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("needs 1.50 GiB of host memory (1.00 GiB of host tensors + the 512.0 MiB arena"),
              std::string::npos) << message;
    EXPECT_NE(message.find("only 1.25 GiB is available (the memory cgroup /job"), std::string::npos) << message;
  }
  checkHostMemory(plan, HostExtras{true}, HostMemory{});  // unknown: not refused
}

TEST(HostMemoryCheck, CountsTheGradientSumsOfAccumulation) {
  const plan::Plan plan = oneGiBPlan();
  const HostMemory memory{kGiB + kGiB / 4, "MemAvailable"};
  try {
    checkHostMemory(plan, HostExtras{false, kGiB / 2}, memory);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("needs 1.50 GiB of host memory (1.00 GiB of host tensors + 512.0 MiB of --accumulate's "
                           "gradient sums)"),
              std::string::npos) << message;
    EXPECT_NE(message.find("or train without --accumulate"), std::string::npos) << message;
  }
}

TEST(HostMemoryCheck, CountsTheOtherRanksOfTheHost) {
  const plan::Plan plan = oneGiBPlan();
  const HostMemory memory{kGiB + kGiB / 4, "MemAvailable"};
  HostExtras extras;
  EXPECT_EQ(hostBytesNeeded(plan, extras), kGiB);
  checkHostMemory(plan, extras, memory);  // one rank fits
  extras.host_peers_bytes = kGiB, extras.host_peers = 1;
  try {
    checkHostMemory(plan, extras, memory);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("needs 2.00 GiB of host memory (1.00 GiB of host tensors + 1.00 GiB for the other 1 "
                           "rank(s) of this host)"),
              std::string::npos) << message;
    EXPECT_NE(message.find("or fewer ranks per host"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace mt
