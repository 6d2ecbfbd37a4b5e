#include "compiler/Fp8Blocks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "kernels/elementwise/elementwise.h"
#include "runtime/io/safetensors.h"

namespace mt {
namespace {

int64_t blocksAlong(int64_t extent, int64_t block) { return extent / block + (extent % block != 0); }

// The weight's element `i` (of its values in order) as "[a,b,...]".
std::string elementText(const std::vector<int64_t>& shape, int64_t i) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) index[d] = i % shape[d], i /= shape[d];
  return "[" + shapeText(index) + "]";
}

// `x` rounded to the nearest F16 (ties to even, 11 significant bits, subnormals in steps of 2^-24)
// and widened back; +-inf from 65520 on, as a conversion to F16 overflows.
float roundToHalf(float x) {
  if (!(std::fabs(x) < 65520.0f)) return std::isnan(x) ? x : std::copysign(std::numeric_limits<float>::infinity(), x);
  int exponent;
  std::frexp(x, &exponent);  // |x| in [2^(exponent - 1), 2^exponent)
  const int quantum = std::max(exponent - 11, -24);
  return std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);
}

}  // namespace

float e4m3Value(uint8_t code) {
  const int exponent = (code >> 3) & 0x0f, mantissa = code & 0x07;
  if (exponent == 0x0f && mantissa == 0x07) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)  // subnormal: m/8 * 2^-6
                                        : std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  return code & 0x80 ? -magnitude : magnitude;
}

std::string fp8ScaleShapeProblem(const std::vector<int64_t>& weight, const std::vector<int64_t>& scales,
                                 Fp8BlockSize block) {
  if (weight.size() < 2) return fmt::format("an FP8 weight must have two axes or more, not [{}]", shapeText(weight));
  std::vector<int64_t> want = weight;
  want[want.size() - 2] = blocksAlong(weight[weight.size() - 2], block.rows);
  want.back() = blocksAlong(weight.back(), block.cols);
  if (scales != want)
    return fmt::format("its scales are [{}], not the [{}] that blocks of {}x{} (the config's weight_block_size) of a "
                       "[{}] weight have",
                       shapeText(scales), shapeText(want), block.rows, block.cols, shapeText(weight));
  return "";
}

std::string compressedFp8Block(const std::vector<int64_t>& weight, const std::vector<int64_t>& scales,
                               Fp8BlockSize* block) {
  if (weight.size() != 2) return fmt::format("a compressed FP8 weight must have two axes, not [{}]", shapeText(weight));
  const int64_t rows = weight[0], cols = weight[1];
  if (scales.size() < 2 && std::accumulate(scales.begin(), scales.end(), int64_t{1}, std::multiplies<>()) == 1) {
    *block = {rows, cols};  // one scale for the tensor
    return "";
  }
  if (scales.size() != 2 || scales[0] < 1 || scales[1] < 1 || rows % scales[0] != 0 || cols % scales[1] != 0)
    return fmt::format("its scales are [{}], which do not split a [{}] weight into equal blocks (one scale, or "
                       "[rows, 1] per channel, [rows, groups] per group, [rows / h, cols / w] per block)",
                       shapeText(scales), shapeText(weight));
  *block = {rows / scales[0], cols / scales[1]};
  return "";
}

std::string roundToScaleType(float* values, const std::vector<int64_t>& shape, const std::string& dtype) {
  if (dtype == "F32") return "";
  const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  const bool bf16 = dtype == "BF16";
  for (int64_t i = 0; i < n; ++i) {
    values[i] = bf16 ? bf16Value(bf16Bits(values[i])) : roundToHalf(values[i]);
    if (!std::isfinite(values[i]))
      return "element " + elementText(shape, i) + " dequantizes past " + dtype + "'s range, its scales' type";
  }
  return "";
}

std::string dequantizeFp8Blocks(const std::byte* codes, const float* scales, const std::vector<int64_t>& weight,
                                Fp8BlockSize block, float* out) {
  static const std::array<float, 256> values = [] {
    std::array<float, 256> v{};
    for (int code = 0; code < 256; ++code) v[code] = e4m3Value(static_cast<uint8_t>(code));
    return v;
  }();
  const int64_t rows = weight[weight.size() - 2], cols = weight.back();
  const int64_t block_cols = blocksAlong(cols, block.cols), block_rows = blocksAlong(rows, block.rows);
  int64_t matrices = 1;
  for (size_t d = 0; d + 2 < weight.size(); ++d) matrices *= weight[d];
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t r = 0; r < rows; ++r) {
      const float* scale_row = scales + (m * block_rows + r / block.rows) * block_cols;
      const int64_t first = (m * rows + r) * cols;
      for (int64_t b = 0; b < block_cols; ++b) {
        const float scale = scale_row[b];
        const int64_t end = std::min(cols, (b + 1) * block.cols);
        for (int64_t c = b * block.cols; c < end; ++c)
          out[first + c] = values[std::to_integer<uint8_t>(codes[first + c])] * scale;
      }
      for (int64_t c = 0; c < cols; ++c) {
        if (std::isfinite(out[first + c])) continue;
        const std::string at = elementText(weight, first + c);
        const float scale = scale_row[c / block.cols];
        const auto code = std::to_integer<uint8_t>(codes[first + c]);
        if (!std::isfinite(scale)) return "the scale of element " + at + fmt::format(" is {}", scale);
        if (std::isnan(values[code])) return "element " + at + fmt::format(" is an E4M3 NaN (code {:#04x})", code);
        return "element " + at + fmt::format(" dequantizes past f32's range (its scale {})", scale);
      }
    }
  return "";
}

}  // namespace mt
