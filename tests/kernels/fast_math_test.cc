// The fast elementwise math of the CPU kernels (kernels/fast_math.h) against libm, built with
// UndefinedBehaviorSanitizer: NaN and infinities pass through without undefined behaviour
// (issue 18: a NaN converted to int in fastExp), NaN in gives NaN out.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/fast_math.h"

namespace mt {
namespace {

TEST(FastMath, ExpMatchesLibmAndKeepsNaN) {
  double worst = 0.0;
  for (float x = -80.0f; x <= 80.0f; x += 0.01f) {
    const double want = std::exp(double(x));
    worst = std::max(worst, std::abs(fastExp(x) - want) / want);
  }
  EXPECT_LT(worst, 4e-7) << "worst relative error " << worst;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(fastExp(std::nanf(""))));
  EXPECT_TRUE(std::isnan(fastExp(-std::nanf(""))));
  EXPECT_EQ(fastExp(-inf), fastExp(-87.3f)) << "clamped below, as before";
  EXPECT_GT(fastExp(inf), 1e38f) << "clamped above, as before";
  EXPECT_TRUE(std::isnan(fastSigmoid(std::nanf(""))));
  EXPECT_TRUE(std::isnan(fastTanh(std::nanf(""))));
}

}  // namespace
}  // namespace mt
