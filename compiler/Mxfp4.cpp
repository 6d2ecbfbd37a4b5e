#include "compiler/Mxfp4.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "runtime/io/safetensors.h"

namespace mt {
namespace {

constexpr float kFp4Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
constexpr uint8_t kNanScale = 255;       // E8M0's NaN
constexpr int64_t kColumnsAtOnce = 64;   // output columns decoded before they are written transposed

}  // namespace

std::string mxfp4ShapeProblem(const std::vector<int64_t>& blocks, const std::vector<int64_t>& scales,
                              const std::vector<int64_t>& weight) {
  if (weight.size() != 3 || weight[1] % kMxfp4BlockValues != 0)
    return fmt::format("an MXFP4 weight must be (experts, in, out) with `in` a multiple of 32, not [{}]",
                       shapeText(weight));
  const int64_t experts = weight[0], in = weight[1], out = weight[2], groups = in / kMxfp4BlockValues;
  const std::vector<int64_t> want_blocks = {experts, out, groups, kMxfp4BlockValues / 2};
  const std::vector<int64_t> want_scales = {experts, out, groups};
  if (blocks != want_blocks || scales != want_scales)
    return fmt::format("MXFP4 blocks [{}] and scales [{}] do not hold a [{}] weight (blocks [{}] and scales [{}] do)",
                       shapeText(blocks), shapeText(scales), shapeText(weight), shapeText(want_blocks),
                       shapeText(want_scales));
  return "";
}

std::string dequantizeMxfp4(const std::byte* blocks, const std::byte* scales, const std::vector<int64_t>& weight,
                            float* out) {
  const int64_t experts = weight[0], in = weight[1], cols = weight[2], groups = in / kMxfp4BlockValues;
  // Rows (experts, out) of `in` values decode a few at a time into `rows`, then go out by input
  // index, so that every write is a run of consecutive columns.
  std::vector<float> rows(static_cast<size_t>(kColumnsAtOnce * in));
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t o0 = 0; o0 < cols; o0 += kColumnsAtOnce) {
      const int64_t n = std::min(kColumnsAtOnce, cols - o0);
      for (int64_t o = 0; o < n; ++o)
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t group = ((e * cols + o0 + o) * groups + g);
          const auto scale = std::to_integer<uint8_t>(scales[group]);
          if (scale == kNanScale)
            return "scale " + std::to_string(group) + " is 255, E8M0's NaN (expert " + std::to_string(e) +
                   ", output " + std::to_string(o0 + o) + ", values " + std::to_string(g * kMxfp4BlockValues) + "..)";
          const std::byte* block = blocks + group * (kMxfp4BlockValues / 2);
          float* row = rows.data() + o * in + g * kMxfp4BlockValues;
          for (int64_t b = 0; b < kMxfp4BlockValues / 2; ++b) {
            const auto byte = std::to_integer<uint8_t>(block[b]);
            row[2 * b] = std::ldexp(kFp4Values[byte & 0x0f], scale - 127);  // the low nibble first
            row[2 * b + 1] = std::ldexp(kFp4Values[byte >> 4], scale - 127);
          }
        }
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < n; ++o) {
          const float v = rows[o * in + i];
          if (!std::isfinite(v))
            return "expert " + std::to_string(e) + ", input " + std::to_string(i) + ", output " +
                   std::to_string(o0 + o) + " dequantizes to " + (v > 0 ? "inf" : "-inf") +
                   ": a scale past f32's range";
          out[(e * in + i) * cols + o0 + o] = v;
        }
    }
  return "";
}

}  // namespace mt
