#include <cmath>

#include "kernels/rope/rope.h"

namespace mt {

namespace {

// What rope and rope_at share: x (B, T, H*D) f32, the result of its shape, int attr 0 the
// head_dim, float attr 0 theta, the scaling kind at int attr `kind_at` (if there) and its
// parameters, the rotary dimension at `rotary_at` (if there). `op` names the kernel.
std::string checkRotation(const KernelArgs& args, const std::string& op, size_t kind_at, size_t rotary_at) {
  const Tensor &x = args.in[0], &out = args.out[0];
  MT_CHECK(expectDType(x, DType::F32, (op + " input").c_str()));
  MT_CHECK(expectDType(out, DType::F32, (op + " result").c_str()));
  if (x.rank() != 3) return op + " input must be (B, T, H*D), got " + shapeString(x.shape);
  const int64_t head_dim = args.ints[0];
  if (head_dim <= 0 || head_dim % 2 != 0 || x.dim(2) % head_dim != 0)
    return op + " head_dim " + std::to_string(head_dim) + " must be even and divide " + std::to_string(x.dim(2));
  const int64_t rotary = args.intOrZero(rotary_at);
  if (rotary < 0 || rotary > head_dim || rotary % 2 != 0)
    return op + " rotary dimension " + std::to_string(rotary) + " must be even and at most head_dim " +
           std::to_string(head_dim) + " (0: head_dim)";
  if (args.floats.empty() || !(args.floats[0] > 0.0f)) return op + " theta must be positive";
  const int64_t kind = args.intOrZero(kind_at);
  if (kind < 0 || kind >= kRopeScalingKinds) return op + " scaling kind " + std::to_string(kind) + " is unknown";
  if (kind == static_cast<int64_t>(RopeScalingKind::kLongRope) && ropeRotaryDim(args, rotary_at) / 2 > kMaxRopePairs)
    return op + " longrope scaling covers at most " + std::to_string(kMaxRopePairs) + " pairs";
  const size_t values = ropeScalingValues(kind, ropeRotaryDim(args, rotary_at));
  if (args.floats.size() != 1 + values)
    return op + " takes " + std::to_string(1 + values) + " float attributes (theta" + (values ? " and a scaling's" : "") +
           "), got " + std::to_string(args.floats.size());
  if (const std::string problem = ropeScalingProblem(ropeFrequencies(args, kind_at, rotary_at)); !problem.empty())
    return op + " " + problem;
  return expectShape(out, x.shape, (op + " result").c_str());
}

}  // namespace

std::string rope_check(const KernelArgs& args) {
  if (args.ints.size() < 2 || args.ints.size() > 5)
    return "rope takes 2 to 5 int attributes (head_dim, inverse, position offset, scaling kind, rotary dimension), "
           "got " + std::to_string(args.ints.size());
  MT_CHECK(checkRotation(args, "rope", kRopeKindAt, kRopeRotaryAt));
  if (args.ints[1] != 0 && args.ints[1] != 1) return "rope inverse flag must be 0 or 1";
  // Positions stay exact in the float angle's int32 range, as the compiler's verifier says.
  const int64_t offset = ropePositionOffset(args);
  if (offset < 0 || offset > INT32_MAX - args.in[0].dim(1))
    return "rope position offset " + std::to_string(offset) + " must lie in [0, 2^31 - 1 - T]";
  return "";
}

namespace {

// Turns each head's pairs of token (b, t) by the angle position(b, t) * f_i (scaled by
// f.attention), the pairs of its first `rotary_dim` elements; the rest pass unchanged.
template <typename PositionOf>
void rotate(const Tensor& x, const Tensor& out, int64_t head_dim, int64_t rotary_dim, const RopeFrequencies& f,
            float sign, PositionOf position) {
  const int64_t batch = x.dim(0), seq = x.dim(1), width = x.dim(2);
  const int64_t half = rotary_dim / 2, heads = width / head_dim;
  int64_t largest = -1;  // the call's largest position (LongRoPE's choice)
  for (int64_t token = 0; token < batch * seq && f.kind == RopeScalingKind::kLongRope; ++token)
    largest = std::max(largest, position(token / seq, token % seq));
  const bool long_factors = f.kind == RopeScalingKind::kLongRope && ropeLongFactors(f, largest);
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = ropeInverseFrequency(f, i, rotary_dim, long_factors);
#pragma omp parallel for schedule(static)
  for (int64_t token = 0; token < batch * seq; ++token) {
    const float at = static_cast<float>(position(token / seq, token % seq));
    std::vector<float> cos_t(half), sin_t(half);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = at * inv_freq[i];
      cos_t[i] = std::cos(angle) * f.attention;
      sin_t[i] = sign * (std::sin(angle) * f.attention);
    }
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t base = token * width + h * head_dim;
      const float* xi = x.f32() + base;
      float* yi = out.f32() + base;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = xi[i], x2 = xi[i + half];
        yi[i] = x1 * cos_t[i] - x2 * sin_t[i];
        yi[i + half] = x2 * cos_t[i] + x1 * sin_t[i];
      }
      for (int64_t i = rotary_dim; i < head_dim; ++i) yi[i] = xi[i];
    }
  }
}

}  // namespace

void rope_cpu(const KernelArgs& args) {
  const int64_t offset = ropePositionOffset(args);
  rotate(args.in[0], args.out[0], args.ints[0], ropeRotaryDim(args, kRopeRotaryAt),
         ropeFrequencies(args, kRopeKindAt, kRopeRotaryAt), args.ints[1] ? -1.0f : 1.0f,
         [offset](int64_t, int64_t t) { return offset + t; });
}

std::string rope_at_check(const KernelArgs& args) {
  if (args.ints.empty() || args.ints.size() > 4)
    return "rope_at takes 1 to 4 int attributes (head_dim, scaling kind, inverse, rotary dimension), got " +
           std::to_string(args.ints.size());
  MT_CHECK(checkRotation(args, "rope_at", kRopeAtKindAt, kRopeAtRotaryAt));
  if (args.intOrZero(2) != 0 && args.intOrZero(2) != 1) return "rope_at inverse flag must be 0 or 1";
  MT_CHECK(expectDType(args.in[1], DType::I32, "rope_at positions"));
  return expectShape(args.in[1], {args.in[0].dim(0), args.in[0].dim(1)}, "rope_at positions");
}

void rope_at_cpu(const KernelArgs& args) {
  const int32_t* positions = args.in[1].i32();
  const int64_t seq = args.in[0].dim(1);
  rotate(args.in[0], args.out[0], args.ints[0], ropeRotaryDim(args, kRopeAtRotaryAt),
         ropeFrequencies(args, kRopeAtKindAt, kRopeAtRotaryAt), args.intOrZero(2) ? -1.0f : 1.0f,
         [&](int64_t b, int64_t t) { return int64_t{positions[b * seq + t]}; });
}

}  // namespace mt
