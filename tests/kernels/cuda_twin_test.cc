// Every CUDA kernel against its CPU twin on random inputs (fp32: relative error <= 1e-5).
// Skips, saying why, where no GPU is usable.
#include <cuda_runtime.h>

#include "kernels/cuda_check.h"
#include "kernels/elementwise/elementwise.h"
#include "runtime/cuda_device.h"
#include "tests/kernels/kernel_harness.h"

namespace mt::test {
namespace {

class CudaTwinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuInfo gpu = probeGpu();
    if (!gpu.available) GTEST_SKIP() << "CUDA kernels not run: " << gpu.description;
  }
  // Runs `cuda` on device copies of the inputs and returns the outputs.
  std::vector<HostTensor> runOnGpu(KernelCudaFn cuda, std::vector<HostTensor> inputs, std::vector<HostTensor> outputs,
                                   std::vector<float> floats = {}) {
    KernelArgs args;
    std::vector<void*> device;
    auto upload = [&](HostTensor& t) {
      Tensor view = t.view();
      void* d = nullptr;
      MT_CUDA_CHECK(cudaMalloc(&d, std::max<int64_t>(view.bytes(), 4)));
      MT_CUDA_CHECK(cudaMemcpy(d, view.data, view.bytes(), cudaMemcpyHostToDevice));
      device.push_back(d);
      view.data = d;
      return view;
    };
    for (auto& t : inputs) args.in.push_back(upload(t));
    for (auto& t : outputs) args.out.push_back(upload(t));
    args.floats = floats;
    cuda(args, nullptr);
    MT_CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < outputs.size(); ++i)
      MT_CUDA_CHECK(cudaMemcpy(outputs[i].view().data, args.out[i].data, args.out[i].bytes(), cudaMemcpyDeviceToHost));
    for (void* d : device) MT_CUDA_CHECK(cudaFree(d));
    return outputs;
  }
  std::mt19937 rng{99};
};

TEST_F(CudaTwinTest, BroadcastAddMulAndScaleMatchTheCpu) {
  auto a = HostTensor::f32({4, 33, 70}, randomFloats(4 * 33 * 70, rng));
  auto b = HostTensor::f32({70}, randomFloats(70, rng));
  const HostTensor out = HostTensor::f32({4, 33, 70});
  struct Twin {
    KernelId id;
    KernelCudaFn cuda;
  };
  for (auto [id, cuda] : {Twin{KernelId::Add, add_cuda}, Twin{KernelId::Mul, mul_cuda}}) {
    const auto want = runKernel(id, {a, b}, {out})[0].asDoubles();
    expectClose(runOnGpu(cuda, {a, b}, {out})[0].floats, want, kF32Tol, "cuda twin");
  }
  const auto want = runKernel(KernelId::Scale, {a}, {out}, {}, {0.3f})[0].asDoubles();
  expectClose(runOnGpu(scale_cuda, {a}, {out}, {0.3f})[0].floats, want, kF32Tol, "scale cuda twin");
}

}  // namespace
}  // namespace mt::test
