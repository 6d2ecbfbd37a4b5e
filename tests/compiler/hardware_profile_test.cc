// mtc --hw: a profile by name, explicit rates over a named profile (or h100-pcie5's), and a
// spec that is not one refused with a message naming what is wrong and what would do.
#include <gtest/gtest.h>

#include "compiler/HardwareProfile.h"

namespace mt {
namespace {

TEST(HardwareSpec, NamesRatesAndRefusals) {
  HardwareProfile p;
  ASSERT_EQ(parseHardwareSpec("h200", p), "");
  EXPECT_EQ(p.name, "h200");
  EXPECT_DOUBLE_EQ(p.memory_bps, findHardwareProfile("h200")->memory_bps);

  ASSERT_EQ(parseHardwareSpec("h100-pcie5,link-gbps=25,tflops=300", p), "");
  const HardwareProfile& h100 = *findHardwareProfile("h100-pcie5");
  EXPECT_EQ(p.name, "h100-pcie5,link-gbps=25,tflops=300");
  EXPECT_DOUBLE_EQ(p.h2d_bps, 25e9);
  EXPECT_DOUBLE_EQ(p.d2h_bps, 25e9);
  EXPECT_DOUBLE_EQ(p.flops_per_s, 300e12);
  EXPECT_DOUBLE_EQ(p.host_bps, h100.host_bps);  // not overridden
  EXPECT_NE(p.note.find("link-gbps=25,tflops=300"), std::string::npos) << p.note;

  ASSERT_EQ(parseHardwareSpec("tflops=312,host-gbps=60,attention-tflops=20,memory-gbps=2000,h2d-gbps=24,d2h-gbps=22",
                              p),
            "");
  EXPECT_DOUBLE_EQ(p.flops_per_s, 312e12);
  EXPECT_DOUBLE_EQ(p.attention_flops_per_s, 20e12);
  EXPECT_DOUBLE_EQ(p.memory_bps, 2000e9);
  EXPECT_DOUBLE_EQ(p.h2d_bps, 24e9);
  EXPECT_DOUBLE_EQ(p.d2h_bps, 22e9);
  EXPECT_DOUBLE_EQ(p.host_bps, 60e9);

  EXPECT_NE(parseHardwareSpec("a100", p).find("unknown hardware profile 'a100' (known: cpu, h100-pcie5"),
            std::string::npos);
  for (const char* bad : {"h200,link-gbps", "h200,link-gbps=", "tflops=-3", "tflops=0", "tflops=3x", "h200,"})
    EXPECT_NE(parseHardwareSpec(bad, p).find("is not KEY=POSITIVE_NUMBER"), std::string::npos) << bad;
  EXPECT_NE(parseHardwareSpec("h200,pcie=5", p).find("unknown rate 'pcie'"), std::string::npos);
  // Between a host's GPUs: NVLink's rate, or none (0) for PCIe cards; no other rate may be 0.
  ASSERT_EQ(parseHardwareSpec("h100-pcie5,nvlink-gbps=0", p), "");
  EXPECT_DOUBLE_EQ(p.nvlink_bps, 0.0);
  ASSERT_EQ(parseHardwareSpec("nvlink-gbps=300", p), "");
  EXPECT_DOUBLE_EQ(p.nvlink_bps, 300e9);
  EXPECT_NE(parseHardwareSpec("h200,net-gbps=0", p).find("is not KEY=POSITIVE_NUMBER"), std::string::npos);
}

}  // namespace
}  // namespace mt
