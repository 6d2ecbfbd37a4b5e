#include "compiler/HardwareProfile.h"

namespace mt {

const std::vector<HardwareProfile>& hardwareProfiles() {
  // fp32 plans: the CPU backend's numbers are measured on the 2-core development machine
  // (docs/perf.md); the GPU numbers are vendor peaks at TF32 for fp32 storage, except two rates
  // measured on the lent H100: the optimizer's on its 16-core host (AdamW 117-125 GB/s at 28
  // bytes/param in training runs; 200 GB/s, assumed before, predicted half its time) and our
  // attention kernels' (exact fp32 on CUDA cores: 20 TFLOP/s forward, 14 backward at context
  // 8192; priced at the matmul peak they were predicted at a tenth of their time).
  static const std::vector<HardwareProfile> profiles = {
      {"cpu", 170e9, 170e9, 12e9, 12e9, 12e9, 35e9,
       "2-core x86 development machine, OpenBLAS sgemm, AdamW at 39 GB/s (docs/perf.md)"},
      {"h100-pcie5", 494e12, 16e12, 3.35e12, 50e9, 50e9, 120e9,
       "H100 SXM TF32 dense peak, HBM3, PCIe Gen5 x16 pinned, 16-core host"},
      {"h200", 494e12, 16e12, 4.8e12, 50e9, 50e9, 120e9,
       "H200 TF32 dense peak, HBM3e, PCIe Gen5 x16 pinned, 16-core host"},
      {"gh200", 494e12, 16e12, 4.0e12, 400e9, 400e9, 400e9, "GH200 TF32 dense peak, NVLink-C2C"},
  };
  return profiles;
}

const HardwareProfile* findHardwareProfile(const std::string& name) {
  for (const auto& p : hardwareProfiles())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace mt
