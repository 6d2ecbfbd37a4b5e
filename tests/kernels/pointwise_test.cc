// The generic pointwise kernels' edge cases that ONNX's node tests and finite differences do not
// reach: NaN, values on a bound, crossed bounds, ties. (Their values on ordinary inputs are
// checked by tests/onnx/conformance.cc, their gradients by tests/compiler/gradient_rule_test.cc.)
#include <cmath>

#include "kernels/pointwise/pointwise.h"
#include "tests/kernels/kernel_harness.h"

namespace mt::test {
namespace {

const float kNaN = std::nanf("");

TEST(PointwiseTest, ClampKeepsNaNIncludesItsBoundsAndGivesMaxWhereTheyCross) {
  const auto x = HostTensor::f32({6}, {-2.0f, -1.0f, 0.0f, 1.0f, 2.0f, kNaN});
  const auto dy = HostTensor::f32({6}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f});
  const auto y = runKernel(KernelId::Clamp, {x}, {HostTensor::f32({6})}, {}, {-1.0f, 1.0f})[0].floats;
  EXPECT_EQ(std::vector<float>(y.begin(), y.end() - 1), (std::vector<float>{-1.0f, -1.0f, 0.0f, 1.0f, 1.0f}));
  EXPECT_TRUE(std::isnan(y[5])) << "NaN clamped to " << y[5];
  // torch.clamp's backward: the bounds pass the gradient, NaN does not.
  EXPECT_EQ(runKernel(KernelId::ClampGrad, {dy, x}, {HostTensor::f32({6})}, {}, {-1.0f, 1.0f})[0].floats,
            (std::vector<float>{0.0f, 2.0f, 3.0f, 4.0f, 0.0f, 0.0f}));
  // min > max: everything is max (numpy's and torch's rule), and no gradient passes.
  const auto crossed = runKernel(KernelId::Clamp, {x}, {HostTensor::f32({6})}, {}, {1.0f, -1.0f})[0].floats;
  EXPECT_EQ(std::vector<float>(crossed.begin(), crossed.end() - 1), std::vector<float>(5, -1.0f));
  EXPECT_EQ(runKernel(KernelId::ClampGrad, {dy, x}, {HostTensor::f32({6})}, {}, {1.0f, -1.0f})[0].floats,
            std::vector<float>(6, 0.0f));
}

TEST(PointwiseTest, MaxAndMinPropagateNaNAndSplitATiesGradient) {
  const auto a = HostTensor::f32({4}, {1.0f, 3.0f, 2.0f, kNaN});
  const auto b = HostTensor::f32({4}, {2.0f, 1.0f, 2.0f, 0.0f});
  const auto dy = HostTensor::f32({4}, {1.0f, 1.0f, 1.0f, 1.0f});
  for (BinaryFn fn : {BinaryFn::Max, BinaryFn::Min}) {
    const bool max = fn == BinaryFn::Max;
    const int64_t id = static_cast<int64_t>(fn);
    const auto y = runKernel(KernelId::Binary, {a, b}, {HostTensor::f32({4})}, {id})[0].floats;
    EXPECT_EQ(y[0], max ? 2.0f : 1.0f);
    EXPECT_EQ(y[1], max ? 3.0f : 1.0f);
    EXPECT_EQ(y[2], 2.0f);
    EXPECT_TRUE(std::isnan(y[3])) << kBinaryFnNames[id] << " dropped a NaN";
    EXPECT_TRUE(std::isnan(applyBinary(fn, 0.0f, kNaN))) << kBinaryFnNames[id] << " dropped a NaN on the right";
    const auto grads = runKernel(KernelId::BinaryGrad, {dy, a, b}, {HostTensor::f32({4}), HostTensor::f32({4})}, {id});
    EXPECT_EQ(std::vector<float>(grads[0].floats.begin(), grads[0].floats.begin() + 3),
              (max ? std::vector<float>{0.0f, 1.0f, 0.5f} : std::vector<float>{1.0f, 0.0f, 0.5f}));
    EXPECT_EQ(std::vector<float>(grads[1].floats.begin(), grads[1].floats.begin() + 3),
              (max ? std::vector<float>{1.0f, 0.0f, 0.5f} : std::vector<float>{0.0f, 1.0f, 0.5f}));
  }
}

}  // namespace
}  // namespace mt::test
