#include "runtime/backends/cuda_device.h"

#if MT_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace mt {

GpuInfo probeGpu() {
#if MT_WITH_CUDA
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return {false, std::string("no GPU usable (") + cudaGetErrorString(status) + ")"};
  if (count == 0) return {false, "no GPU found"};
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return {false, "cannot read the GPU's properties"};
  return {true, std::string(prop.name) + ", " + std::to_string(prop.totalGlobalMem >> 30) + " GiB"};
#else
  return {false, "this build has no CUDA support (configured with MT_CUDA=OFF or without nvcc)"};
#endif
}

int gpuCount() {
#if MT_WITH_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
#else
  return 0;
#endif
}

}  // namespace mt
