#include "compiler/Mxfp4.h"

#include <cmath>

namespace mt {
namespace {

constexpr float kFp4Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::string mxfp4ShapeProblem(const std::vector<int64_t>& blocks, const std::vector<int64_t>& scales,
                              const std::vector<int64_t>& weight) {
  if (weight.size() != 3 || weight[1] % kMxfp4BlockValues != 0)
    return "an MXFP4 weight must be (experts, in, out) with `in` a multiple of 32, not " + shapeText(weight);
  const int64_t experts = weight[0], in = weight[1], out = weight[2], groups = in / kMxfp4BlockValues;
  const std::vector<int64_t> want_blocks = {experts, out, groups, kMxfp4BlockValues / 2};
  const std::vector<int64_t> want_scales = {experts, out, groups};
  if (blocks != want_blocks || scales != want_scales)
    return "MXFP4 blocks " + shapeText(blocks) + " and scales " + shapeText(scales) + " do not hold a " +
           shapeText(weight) + " weight (blocks " + shapeText(want_blocks) + " and scales " + shapeText(want_scales) +
           " do)";
  return "";
}

void dequantizeMxfp4(const std::byte* blocks, const std::byte* scales, const std::vector<int64_t>& weight, float* out) {
  const int64_t experts = weight[0], in = weight[1], cols = weight[2], groups = in / kMxfp4BlockValues;
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t o = 0; o < cols; ++o)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t row = (e * cols + o) * groups + g;
        const int exponent = static_cast<int>(std::to_integer<uint8_t>(scales[row])) - 127;
        const std::byte* block = blocks + row * (kMxfp4BlockValues / 2);
        for (int64_t b = 0; b < kMxfp4BlockValues / 2; ++b) {
          const auto byte = std::to_integer<uint8_t>(block[b]);
          const int64_t i = g * kMxfp4BlockValues + 2 * b;  // the input index of the low nibble's value
          // out[e][i][o]: the transpose of the dequantized (out, in) rows.
          out[(e * in + i) * cols + o] = std::ldexp(kFp4Values[byte & 0x0f], exponent);
          out[(e * in + i + 1) * cols + o] = std::ldexp(kFp4Values[byte >> 4], exponent);
        }
      }
}

}  // namespace mt
