// Every CUDA call is checked: a failure throws with the call, the file and the line.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace mt {

inline void cudaCheck(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(status) + " in " + call + " at " +
                             file + ":" + std::to_string(line));
}

}  // namespace mt

#define MT_CUDA_CHECK(call) ::mt::cudaCheck((call), #call, __FILE__, __LINE__)
