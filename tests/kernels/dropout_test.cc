// mt.dropout on the CPU: the fraction it drops, the scale of what it keeps, a mask that is a
// function of (seed, run, site, element) only, its gradient, evaluation, and its checks. The
// mask's bits against an independent implementation (Python's, drawing the PyTorch twin's
// masks) are compared end to end by tests/e2e/onnx_parity.py (train-dropout).
#include <cmath>

#include "kernels/random/dropout.h"
#include "tests/kernels/kernel_harness.h"

namespace mt::test {
namespace {

constexpr int64_t kN = 200'000;

// Nonzero values: an output 0 then means "dropped".
std::vector<float> nonzero(int64_t n, std::mt19937& rng) {
  std::vector<float> v = randomFloats(n, rng);
  for (float& x : v)
    if (x == 0.0f) x = 1.0f;
  return v;
}

std::vector<bool> droppedOf(const HostTensor& out) {
  std::vector<bool> dropped(out.floats.size());
  for (size_t i = 0; i < dropped.size(); ++i) dropped[i] = out.floats[i] == 0.0f;
  return dropped;
}

HostTensor dropout(const HostTensor& x, int64_t site, float ratio, const StepRandomness& random = kTestRandomness) {
  return runKernel(KernelId::Dropout, {x}, {HostTensor::f32(x.shape)}, {site}, {ratio}, random)[0];
}

double fraction(const std::vector<bool>& bits) {
  int64_t n = 0;
  for (bool b : bits) n += b;
  return double(n) / double(bits.size());
}

// Within 5 standard deviations of a binomial proportion p over kN draws.
void expectProportion(double got, double p, const std::string& what) {
  EXPECT_NEAR(got, p, 5 * std::sqrt(p * (1 - p) / kN)) << what;
}

class DropoutTest : public ::testing::Test {
 protected:
  std::mt19937 rng{77};
};

TEST_F(DropoutTest, DropsTheRatioAndScalesTheRestByItsInverse) {
  const auto x = HostTensor::f32({4, 50, 1000}, nonzero(kN, rng));
  for (float ratio : {0.1f, 0.25f, 0.5f, 0.9f}) {
    const HostTensor y = dropout(x, 0, ratio);
    expectProportion(fraction(droppedOf(y)), ratio, "dropped fraction at ratio " + std::to_string(ratio));
    const float scale = 1.0f / (1.0f - ratio);
    for (int64_t i = 0; i < kN; ++i)
      if (y.floats[i] != 0.0f) ASSERT_EQ(y.floats[i], x.floats[i] * scale) << "element " << i;
  }
}

TEST_F(DropoutTest, TheMaskIsAFunctionOfSeedRunSiteAndElement) {
  const auto x = HostTensor::f32({kN}, nonzero(kN, rng));
  const std::vector<bool> mask = droppedOf(dropout(x, 3, 0.5f));
  EXPECT_EQ(droppedOf(dropout(x, 3, 0.5f)), mask) << "the same call drew another mask";
  // Other values, same mask: it depends on positions, not data.
  const auto other = HostTensor::f32({kN}, nonzero(kN, rng));
  EXPECT_EQ(droppedOf(dropout(other, 3, 0.5f)), mask) << "the mask depends on the values";
  // Another site, run or seed: an independent mask (both drop a quarter of the elements).
  StepRandomness next_run = kTestRandomness, other_seed = kTestRandomness;
  ++next_run.pass;
  ++other_seed.seed;
  const std::pair<const char*, std::vector<bool>> others[] = {{"site", droppedOf(dropout(x, 4, 0.5f))},
                                                              {"run", droppedOf(dropout(x, 3, 0.5f, next_run))},
                                                              {"seed", droppedOf(dropout(x, 3, 0.5f, other_seed))}};
  for (const auto& [what, m] : others) {
    std::vector<bool> both(kN);
    for (int64_t i = 0; i < kN; ++i) both[i] = mask[i] && m[i];
    expectProportion(fraction(both), 0.25, std::string("masks of another ") + what + " drop together");
  }
}

TEST_F(DropoutTest, TheGradientIsTheSameCallOnTheIncomingGradient) {
  const auto x = HostTensor::f32({7, 301}, nonzero(7 * 301, rng));
  const auto dy = HostTensor::f32({7, 301}, nonzero(7 * 301, rng));
  const HostTensor y = dropout(x, 2, 0.3f), dx = dropout(dy, 2, 0.3f);
  // d(keep * scale * x)/dx = keep * scale: zero where the forward dropped, scale elsewhere.
  for (size_t i = 0; i < y.floats.size(); ++i)
    ASSERT_EQ(dx.floats[i], y.floats[i] == 0.0f ? 0.0f : dy.floats[i] * (1.0f / 0.7f)) << "element " << i;
}

TEST_F(DropoutTest, IsTheIdentityInEvaluationAndAtRatioZero) {
  const auto x = HostTensor::f32({3, 5, 17}, randomFloats(3 * 5 * 17, rng));
  StepRandomness evaluation = kTestRandomness;
  evaluation.training = false;
  EXPECT_EQ(dropout(x, 0, 0.5f, evaluation).floats, x.floats);
  EXPECT_EQ(dropout(x, 0, 0.0f).floats, x.floats);
}

TEST_F(DropoutTest, ChecksRefuseRatiosOutsideTheUnitIntervalAndNegativeSites) {
  Tensor x{nullptr, {4, 8}, DType::F32};
  auto problem = [&](int64_t site, float ratio) {
    return checkKernelCall(KernelId::Dropout, KernelArgs{{x}, {x}, {site}, {ratio}});
  };
  EXPECT_EQ(problem(0, 0.5f), "");
  EXPECT_NE(problem(0, 1.0f).find("outside [0, 1)"), std::string::npos);
  EXPECT_NE(problem(0, -0.1f).find("outside [0, 1)"), std::string::npos);
  EXPECT_NE(problem(0, std::nanf("")).find("outside [0, 1)"), std::string::npos);
  EXPECT_NE(problem(-1, 0.5f).find("negative"), std::string::npos);
  Tensor wrong{nullptr, {4, 9}, DType::F32};
  EXPECT_NE(checkKernelCall(KernelId::Dropout, KernelArgs{{x}, {wrong}, {0}, {0.5f}}), "");
}

}  // namespace
}  // namespace mt::test
