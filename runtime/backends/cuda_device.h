// Whether a usable GPU is present, and why not: mtrun reports it, GPU tests skip with it.
// Compiled in every build (a build without CUDA says so).
#pragma once
#include <string>

namespace mt {

struct GpuInfo {
  bool available = false;
  std::string description;  // the device's name, or why there is none
};

GpuInfo probeGpu();
// How many GPUs this process sees (0 without CUDA or where the driver answers an error).
int gpuCount();

}  // namespace mt
