// Test harness for kernels: host tensors, running a kernel through the op table (its check
// first), double-precision references, comparisons that print the first mismatches, and
// central finite differences.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/elementwise/elementwise.h"
#include "kernels/kernel_args.h"
#include "runtime/plan/kernel_registry.h"

namespace mt::test {

using Shape = std::vector<int64_t>;
using Doubles = std::vector<double>;

inline int64_t numelOf(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// A tensor owning its data; i32 tensors keep their values in `ints`.
struct HostTensor {
  Shape shape;
  DType dtype = DType::F32;
  std::vector<float> floats;
  std::vector<int32_t> ints;
  std::vector<uint16_t> halves;  // bf16 bit patterns

  static HostTensor f32(Shape shape, std::vector<float> data = {}) {
    HostTensor t{std::move(shape), DType::F32, std::move(data), {}};
    if (t.floats.empty()) t.floats.assign(numelOf(t.shape), 0.0f);
    return t;
  }
  static HostTensor i32(Shape shape, std::vector<int32_t> data) {
    return HostTensor{std::move(shape), DType::I32, {}, std::move(data)};
  }
  static HostTensor bf16(Shape shape, std::vector<uint16_t> bits) {
    if (bits.empty()) bits.assign(numelOf(shape), 0);
    return HostTensor{std::move(shape), DType::BF16, {}, {}, std::move(bits)};
  }
  // `values` rounded to bf16 (to nearest even).
  static HostTensor bf16Of(Shape shape, const std::vector<float>& values) {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = bf16Bits(values[i]);
    return bf16(std::move(shape), std::move(bits));
  }
  // The values, widened if bf16.
  std::vector<float> values() const {
    if (dtype != DType::BF16) return floats;
    std::vector<float> out(halves.size());
    for (size_t i = 0; i < halves.size(); ++i) out[i] = bf16Value(halves[i]);
    return out;
  }
  Tensor view() {
    Tensor t;
    t.shape = shape;
    t.dtype = dtype;
    t.data = dtype == DType::I32    ? static_cast<void*>(ints.data())
             : dtype == DType::BF16 ? static_cast<void*>(halves.data())
                                    : static_cast<void*>(floats.data());
    return t;
  }
  Doubles asDoubles() const {
    const std::vector<float> v = values();
    return Doubles(v.begin(), v.end());
  }
};

inline std::vector<float> randomFloats(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<int32_t> randomInts(int64_t n, int32_t bound, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, bound - 1);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// The step's randomness random kernels (mt.dropout) see unless a test gives its own.
inline constexpr StepRandomness kTestRandomness{2026, 3, true};

// Runs kernel `id` (its check must accept the call) and returns its outputs.
inline std::vector<HostTensor> runKernel(KernelId id, std::vector<HostTensor> inputs,
                                         std::vector<HostTensor> outputs, std::vector<int64_t> ints = {},
                                         std::vector<float> floats = {},
                                         const StepRandomness& random = kTestRandomness) {
  KernelArgs args;
  for (auto& t : inputs) args.in.push_back(t.view());
  for (auto& t : outputs) args.out.push_back(t.view());
  args.ints = ints;
  args.floats = floats;
  args.random = &random;
  const std::string problem = checkKernelCall(id, args);
  EXPECT_EQ(problem, "") << kKernelTable[static_cast<size_t>(id)].op_name;
  if (problem.empty()) runKernelCpu(id, args);
  return outputs;
}

// ||got - want|| / ||want|| <= tol; on failure prints the first mismatching elements.
inline void expectClose(const std::vector<float>& got, const Doubles& want, double tol,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  const double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
  if (rel <= tol) return;
  std::string detail;
  int shown = 0;
  for (size_t i = 0; i < got.size() && shown < 5; ++i) {
    if (std::abs(got[i] - want[i]) > tol * std::max(1.0, std::abs(want[i]))) {
      detail += "\n  [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " +
                std::to_string(want[i]);
      ++shown;
    }
  }
  ADD_FAILURE() << what << ": relative error " << rel << " > " << tol << detail;
}

// Central finite differences of L(x) = sum(weights . f(x)) with respect to every element of x,
// where f is a double-precision reference.
inline Doubles finiteDifferences(const std::function<Doubles(const Doubles&)>& f, Doubles x,
                                 const Doubles& weights, double h = 1e-5) {
  Doubles grad(x.size());
  auto loss = [&](const Doubles& at) {
    const Doubles y = f(at);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += weights[i] * y[i];
    return l;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss(x);
    x[i] = saved - h;
    const double down = loss(x);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

inline constexpr double kF32Tol = 1e-5;    // forward vs double reference
inline constexpr double kGradTol = 1e-4;   // float backward vs double finite differences

// The kernel tests' fixture (kernel_test.cc, sequence_kernel_test.cc): one seeded generator.
class KernelTest : public ::testing::Test {
 protected:
  std::mt19937 rng{1234};
};

inline Doubles slice(const Doubles& v, size_t begin, size_t n) {
  return Doubles(v.begin() + begin, v.begin() + begin + n);
}

inline std::vector<float> toFloats(const Doubles& v) { return std::vector<float>(v.begin(), v.end()); }

}  // namespace mt::test
