// Hardware profiles of the cost model: what one step's instructions cost on a machine.
#pragma once
#include <string>
#include <vector>


namespace mt {

struct HardwareProfile {
  std::string name;
  double flops_per_s;    // dense matrix throughput at the plan's precision
  double attention_flops_per_s;  // our fused causal attention kernels (fp32 on CUDA cores)
  double bf16_flops_per_s;       // dense matrix throughput with bf16 operands (a bf16 plan)
  double bf16_attention_flops_per_s;  // causal attention on bf16 operands (cuDNN's fused kernels, mtrun's default)
  // bf16 attention cuDNN's graph does not take (a sliding window, sinks, packed examples) on our
  // tensor-core kernels (heads of 64 or 128), forward and backward.
  double bf16_attention_ours_flops_per_s;
  double bf16_attention_grad_ours_flops_per_s;
  double memory_bps;     // device memory bandwidth (bounds pointwise kernels)
  double h2d_bps;        // host -> device link
  double d2h_bps;        // device -> host link
  double host_bps;       // host memory bandwidth seen by the optimizer
  double network_bps;    // between hosts, one host's link (data parallel over hosts)
  // Between the GPUs of one host, each GPU's, each way (NVLink; 0: none, as for PCIe cards): what
  // device collectives would move at (DESIGN.md §13; priced by mtc --ranks, not built).
  double nvlink_bps;
  std::string note;      // where the numbers come from
  // The device budget mtc assumes when --device-mem is not given: the card's memory less room
  // for the CUDA context, the libraries' workspaces and fragmentation (0: no device, no budget).
  int64_t device_budget_bytes = 0;
};

// The known profiles (--hw NAME).
const std::vector<HardwareProfile>& hardwareProfiles();
// The profile called `name`, or null.
const HardwareProfile* findHardwareProfile(const std::string& name);

// A profile from mtc's --hw: a known profile's name, and/or comma-separated rates overriding
// its numbers (without a name, h100-pcie5's): tflops=, attention-tflops=, bf16-tflops=,
// bf16-attention-tflops=, bf16-ours-attention-tflops=, bf16-ours-attention-grad-tflops= (TFLOP/s),
// memory-gbps=, h2d-gbps=, d2h-gbps=, link-gbps= (both directions), host-gbps=, net-gbps=,
// nvlink-gbps= (GB/s, 1e9 bytes/s). "h100-pcie5,link-gbps=25" or "tflops=312,link-gbps=25". Sets `out` (named `spec`
// when it overrides anything) and returns "", or returns what is wrong with `spec`.
std::string parseHardwareSpec(const std::string& spec, HardwareProfile& out);

}  // namespace mt
