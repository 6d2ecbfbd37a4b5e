// Whether a usable GPU is present, and why not: mtrun reports it, GPU tests skip with it.
#pragma once
#include <string>

namespace mt {

struct GpuInfo {
  bool available = false;
  std::string description;  // the device's name, or why there is none
};

GpuInfo probeGpu();

}  // namespace mt
