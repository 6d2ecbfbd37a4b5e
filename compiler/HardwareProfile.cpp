#include "compiler/HardwareProfile.h"

#include <cmath>
#include <cstdlib>

namespace mt {

const std::vector<HardwareProfile>& hardwareProfiles() {
  // fp32 plans: the CPU backend's numbers are measured on the 2-core development machine
  // (docs/perf.md); the GPU numbers are vendor peaks at TF32 for fp32 storage, except two rates
  // measured on the lent H100: the optimizer's on its 16-core host (AdamW 117-125 GB/s at 28
  // bytes/param in training runs; 200 GB/s, assumed before, predicted half its time) and our
  // attention kernels' (exact fp32 on CUDA cores: 20 TFLOP/s forward, 14 backward at context
  // 8192; priced at the matmul peak they were predicted at a tenth of their time).
  // bf16 plans: products at the rate cuBLAS ran qwen2.5-7b's products at on the lent H200 (707.6
  // TFLOP/s over its linear layers at 16,384 rows, and ~714 in the 7B plan's training steps), not
  // 8192^3's 779 (the H100's 770-800), which overstated a 7B step's products by 9 % (session 40:
  // measured/predicted 1.16 with 780, 1.07 with 710; docs/perf.md), nor the 989 datasheet peak; attention
  // at 300 TFLOP/s, what cuDNN's fused flash attention (mtrun's default for bf16 plans) ran at in
  // training on an H200 in session 22 (qwen2.5-7b: ~396 forward, ~248 backward, 297 over both);
  // the calls cuDNN's graph does not take (a window, sinks, packed examples) at what our own
  // mma.sync kernels ran at there (--attention ours: ~160 forward in training, 43-62 backward:
  // 160 and 50); the CPU emulates bf16
  // storage around its f32 kernels (no faster than fp32). Between hosts (mtc --ranks):
  // assumed, not measured — 100 Gb/s Ethernet for the CPU machine, a 400 Gb/s NIC per GPU host;
  // between a host's GPUs, an HGX board's NVLink 4 (450 GB/s each way per GPU, the datasheet's;
  // none between the CPU machine's ranks or on a GH200 host of one GPU).
  static const std::vector<HardwareProfile> profiles = {
      {"cpu", 170e9, 170e9, 170e9, 170e9, 170e9, 170e9, 12e9, 12e9, 12e9, 35e9, 12.5e9, 0,
       "2-core x86 development machine, OpenBLAS sgemm, AdamW at 39 GB/s (docs/perf.md)"},
      {"h100-pcie5", 494e12, 16e12, 710e12, 300e12, 160e12, 50e12, 3.35e12, 50e9, 50e9, 120e9, 50e9, 450e9,
       "H100 SXM TF32 dense peak, bf16 products as a 7B model's measured, HBM3, PCIe Gen5 x16 pinned, 16-core host",
       int64_t{76} << 30},  // 80 GB (79.2 GiB usable)
      {"h200", 494e12, 16e12, 710e12, 300e12, 160e12, 50e12, 4.8e12, 50e9, 50e9, 120e9, 50e9, 450e9,
       "H200 TF32 dense peak, bf16 products as the H100's, HBM3e, PCIe Gen5 x16 pinned, 16-core host",
       int64_t{136} << 30},  // 141 GB (140.4 GiB usable)
      {"gh200", 494e12, 16e12, 710e12, 300e12, 160e12, 50e12, 4.0e12, 400e9, 400e9, 400e9, 50e9, 0,
       "GH200 TF32 dense peak, bf16 products as the H100's, NVLink-C2C", int64_t{90} << 30},  // 96 GB (95.6 GiB)
  };
  return profiles;
}

const HardwareProfile* findHardwareProfile(const std::string& name) {
  for (const auto& p : hardwareProfiles())
    if (p.name == name) return &p;
  return nullptr;
}

std::string parseHardwareSpec(const std::string& spec, HardwareProfile& out) {
  const std::pair<const char*, double HardwareProfile::*> rates[] = {
      {"tflops", &HardwareProfile::flops_per_s},       {"attention-tflops", &HardwareProfile::attention_flops_per_s},
      {"bf16-tflops", &HardwareProfile::bf16_flops_per_s},
      {"bf16-attention-tflops", &HardwareProfile::bf16_attention_flops_per_s},
      {"bf16-ours-attention-tflops", &HardwareProfile::bf16_attention_ours_flops_per_s},
      {"bf16-ours-attention-grad-tflops", &HardwareProfile::bf16_attention_grad_ours_flops_per_s},
      {"memory-gbps", &HardwareProfile::memory_bps},   {"h2d-gbps", &HardwareProfile::h2d_bps},
      {"d2h-gbps", &HardwareProfile::d2h_bps},         {"host-gbps", &HardwareProfile::host_bps},
      {"net-gbps", &HardwareProfile::network_bps},     {"nvlink-gbps", &HardwareProfile::nvlink_bps}};
  std::string keys, names;
  for (const auto& [key, field] : rates) keys += std::string(keys.empty() ? "" : ", ") + key;
  keys += ", link-gbps";
  for (const auto& p : hardwareProfiles()) names += (names.empty() ? "" : ", ") + p.name;
  std::vector<std::string> items;
  for (size_t start = 0;;) {
    const size_t comma = spec.find(',', start);
    items.push_back(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  size_t first = 0;
  out = *findHardwareProfile("h100-pcie5");
  if (items[0].find('=') == std::string::npos) {
    const HardwareProfile* named = findHardwareProfile(items[0]);
    if (!named) return "unknown hardware profile '" + items[0] + "' (known: " + names + "; or rates: " + keys + ")";
    out = *named;
    first = 1;
  }
  for (size_t i = first; i < items.size(); ++i) {
    const size_t eq = items[i].find('=');
    const std::string key = items[i].substr(0, eq), text = eq == std::string::npos ? "" : items[i].substr(eq + 1);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    // nvlink-gbps=0: GPUs without NVLink between them (PCIe cards); every other rate is positive.
    const bool zero_allowed = key == "nvlink-gbps" && value == 0;
    if (eq == std::string::npos || text.empty() || *end != '\0' || !(value > 0 || zero_allowed) ||
        !std::isfinite(value))
      return "'" + items[i] + "' in --hw " + spec + " is not KEY=POSITIVE_NUMBER (keys: " + keys + "; nvlink-gbps=0: "
             "no NVLink)";
    const double scale = key.find("tflops") != std::string::npos ? 1e12 : 1e9;
    bool known = key == "link-gbps";
    if (known) out.h2d_bps = out.d2h_bps = value * scale;
    for (const auto& [name, field] : rates)
      if (key == name) out.*field = value * scale, known = true;
    if (!known) return "unknown rate '" + key + "' in --hw " + spec + " (keys: " + keys + ")";
  }
  if (items.size() > first) {
    out.note = "the " + out.name + " profile with " + spec.substr(first ? items[0].size() + 1 : 0);
    out.name = spec;
  }
  return "";
}

}  // namespace mt
