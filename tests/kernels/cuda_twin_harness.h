// The CUDA twin tests' fixture (tests/kernels/cuda_twin_test.cc, cuda_twin_attention_test.cc): a
// kernel's CUDA twin run on device copies of its inputs, its outputs poisoned first, against the
// CPU kernel's; as a bf16 plan calls it too. Skips, saying why, where no GPU is usable.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/attention/attention_cudnn.h"
#include "kernels/cuda_check.h"
#include "kernels/elementwise/elementwise.h"
#include "runtime/backends/cuda_device.h"
#include "runtime/backends/cuda_kernels.h"
#include "tests/kernels/kernel_harness.h"

namespace mt::test {

// A decode step: `fresh` new tokens at positions p0.. of sequences with a cache of `rows`.
struct CachedCase {
  int64_t batch, fresh, rows, heads, kv_heads, head_dim, p0;
};
inline constexpr CachedCase kCachedCases[] = {{1, 1, 300, 8, 2, 128, 299}, {2, 1, 64, 4, 4, 64, 17},
                                              {1, 3, 40, 2, 1, 256, 20},   {2, 1, 50, 3, 3, 12, 0},
                                              {1, 2, 90, 2, 1, 160, 88}};

class CudaTwinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuInfo gpu = probeGpu();
    if (!gpu.available) GTEST_SKIP() << "CUDA kernels not run: " << gpu.description;
    ASSERT_EQ(cublasCreate(&blas_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    if (blas_) cublasDestroy(blas_);
  }

  // Runs kernel `id`'s CUDA twin on device copies of the inputs (outputs start as given, so a
  // kernel that leaves elements unwritten is caught) and returns the outputs.
  std::vector<HostTensor> runOnGpu(KernelId id, std::vector<HostTensor> inputs, std::vector<HostTensor> outputs,
                                   const std::vector<int64_t>& ints, const std::vector<float>& floats) {
    const KernelCudaFn cuda = kernelCuda(id);
    EXPECT_NE(cuda, nullptr) << kKernelTable[static_cast<size_t>(id)].op_name << " has no CUDA twin";
    if (!cuda) return outputs;
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
    args.ints = ints;
    args.floats = floats;
    args.random = &kTestRandomness;
    cuda(args, CudaLaunch{nullptr, blas_, cudnn_, cudnn_ != nullptr});
    MT_CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < outputs.size(); ++i)
      MT_CUDA_CHECK(cudaMemcpy(outputs[i].view().data, args.out[i].data, args.out[i].bytes(), cudaMemcpyDeviceToHost));
    for (void* d : device) MT_CUDA_CHECK(cudaFree(d));
    return outputs;
  }

  // The twin's outputs against the CPU kernel's: f32 within `tol`, i32 exactly.
  void expectTwin(KernelId id, const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& outputs,
                  const std::vector<int64_t>& ints = {}, const std::vector<float>& floats = {},
                  double tol = kF32Tol) {
    const std::string op(kKernelTable[static_cast<size_t>(id)].op_name);
    std::vector<HostTensor> poisoned = outputs;
    for (auto& t : poisoned) {
      std::fill(t.floats.begin(), t.floats.end(), 12345.0f);
      std::fill(t.halves.begin(), t.halves.end(), bf16Bits(12345.0f));
    }
    const auto want = runKernel(id, inputs, outputs, ints, floats);
    const auto got = runOnGpu(id, inputs, poisoned, ints, floats);
    for (size_t i = 0; i < want.size(); ++i) {
      const std::string what = op + " (cuda) output " + std::to_string(i);
      if (want[i].dtype == DType::I32)
        EXPECT_EQ(got[i].ints, want[i].ints) << what;
      else
        expectClose(got[i].values(), want[i].asDoubles(), tol, what);
    }
  }

  HostTensor randomF32(Shape shape, float scale = 1.0f) {
    const int64_t n = numelOf(shape);
    return HostTensor::f32(std::move(shape), randomFloats(n, rng, scale));
  }

  // mt.cached_attention's inputs for case `c`: random q, k, v and caches, positions from p0.
  std::vector<HostTensor> cachedAttentionInputs(const CachedCase& c) {
    const int64_t wq = c.heads * c.head_dim, wkv = c.kv_heads * c.head_dim;
    std::vector<int32_t> positions;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t i = 0; i < c.fresh; ++i) positions.push_back(static_cast<int32_t>(c.p0 + i));
    return {randomF32({c.batch, c.fresh, wq}),   randomF32({c.batch, c.fresh, wkv}),
            randomF32({c.batch, c.fresh, wkv}),  randomF32({c.batch, c.rows, wkv}),
            randomF32({c.batch, c.rows, wkv}),   HostTensor::i32({c.batch, c.fresh}, positions)};
  }

  // expectTwin of kernel `id` as a bf16 plan calls it: its activations (the inputs and outputs
  // its precision column does not keep f32) rounded to bf16; an output that may be either
  // (a weight gradient) stays f32 when `f32_any`.
  void expectBf16Twin(KernelId id, std::vector<HostTensor> inputs, std::vector<HostTensor> outputs,
                      const std::vector<int64_t>& ints = {}, const std::vector<float>& floats = {},
                      bool f32_any = false) {
    toBf16(id, inputs, outputs, f32_any);
    expectTwin(id, inputs, outputs, ints, floats, kBf16Tol);
  }
  static void toBf16(KernelId id, std::vector<HostTensor>& inputs, std::vector<HostTensor>& outputs, bool f32_any) {
    const KernelPrecision& p = kKernelTable[static_cast<size_t>(id)].precision;
    if (p.kind != KernelPrecision::kMixed) return;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].dtype == DType::F32 && !p.f32Input(int(i))) inputs[i] = HostTensor::bf16Of(inputs[i].shape, inputs[i].floats);
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i].dtype == DType::F32 && !p.f32Output(int(i)) && !(p.anyOutput(int(i)) && f32_any))
        outputs[i] = HostTensor::bf16(outputs[i].shape, {});
  }
  // Kernel `id`'s outputs on the CPU for a bf16 call (what a backward kernel then reads).
  std::vector<HostTensor> runBf16(KernelId id, std::vector<HostTensor> inputs, std::vector<HostTensor> outputs,
                                  const std::vector<int64_t>& ints = {}, const std::vector<float>& floats = {}) {
    toBf16(id, inputs, outputs, false);
    return runKernel(id, inputs, outputs, ints, floats);
  }

  static constexpr double kBf16Tol = 1e-2;
  cublasHandle_t blas_ = nullptr;
  CudnnAttention* cudnn_ = nullptr;  // set: attention runs through cuDNN (mtrun --attention cudnn)
  std::mt19937 rng{99};
};

// mt.rope's float attributes for LongRoPE over 9 pairs: theta, factor, the choice (0 short, 1 long,
// 2 by position), the original context, the attention factor, then the short and the long factors.
inline std::vector<float> longRopeValues(float choice, float original) {
  return {10000.0f, 32.0f, choice, 0.0f, original, 1.19f, 1.0f, 1.1f, 1.3f, 1.7f, 2.5f, 4.0f, 6.0f, 9.0f, 12.0f,
          1.0f, 1.2f, 1.6f, 2.4f, 3.9f, 6.5f, 11.0f, 19.0f, 33.0f};
}

}  // namespace mt::test
