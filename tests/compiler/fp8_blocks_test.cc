// Fine-grained FP8's decoder (compiler/Fp8Blocks.h): every E4M3 code against the format's fixed
// points and order, a weight of several matrices with short last blocks against the block each
// element lies in, and the refusals (a NaN code, a scale that is not finite, a product past f32's
// range, scales of the wrong shape).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "compiler/Fp8Blocks.h"
#include "runtime/io/safetensors.h"

namespace mt {
namespace {

TEST(Fp8Blocks, E4m3CodesAreFloat8E4m3fn) {
  EXPECT_EQ(e4m3Value(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(e4m3Value(0x80)));
  EXPECT_EQ(e4m3Value(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3Value(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3Value(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_EQ(e4m3Value(0x38), 1.0f);
  EXPECT_EQ(e4m3Value(0x39), 1.125f);
  EXPECT_EQ(e4m3Value(0xb8), -1.0f);
  EXPECT_EQ(e4m3Value(0x7e), 448.0f);  // the largest: no infinities
  EXPECT_EQ(e4m3Value(0x78), 256.0f);
  EXPECT_TRUE(std::isnan(e4m3Value(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3Value(0xff)));
  std::set<float> finite;
  for (int code = 0; code < 0x7f; ++code) {
    if (code > 0) EXPECT_LT(e4m3Value(code - 1), e4m3Value(code)) << code;  // the codes in order of value
    EXPECT_EQ(e4m3Value(code | 0x80), -e4m3Value(code)) << code;             // the sign bit alone
    finite.insert(e4m3Value(code));
  }
  EXPECT_EQ(finite.size(), 127u);
}

TEST(Fp8Blocks, EachElementTimesItsBlocksScale) {
  const std::vector<int64_t> weight = {2, 5, 7};  // two matrices; blocks of 2x3 leave short last ones
  const Fp8BlockSize block{2, 3};
  const std::vector<int64_t> scale_shape = {2, 3, 3};
  EXPECT_EQ(fp8ScaleShapeProblem(weight, scale_shape, block), "");
  std::vector<std::byte> codes(2 * 5 * 7);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::byte>((i * 37 + 11) % 0x7f | (i % 3 ? 0 : 0x80));
  std::vector<float> scales(2 * 3 * 3);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = std::ldexp(1.0f + 0.1f * i, -8 + static_cast<int>(i % 5));
  std::vector<float> out(codes.size());
  ASSERT_EQ(dequantizeFp8Blocks(codes.data(), scales.data(), weight, block, out.data()), "");
  for (int64_t m = 0; m < 2; ++m)
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t c = 0; c < 7; ++c) {
        const size_t i = static_cast<size_t>((m * 5 + r) * 7 + c);
        const float scale = scales[static_cast<size_t>((m * 3 + r / 2) * 3 + c / 3)];
        EXPECT_EQ(out[i], e4m3Value(std::to_integer<uint8_t>(codes[i])) * scale) << m << "," << r << "," << c;
      }
}

TEST(Fp8Blocks, Refusals) {
  const std::vector<int64_t> weight = {3, 4};
  const Fp8BlockSize block{2, 2};
  EXPECT_NE(fp8ScaleShapeProblem(weight, {1, 2}, block).find("not the [2,2] that blocks of 2x2"), std::string::npos);
  EXPECT_NE(fp8ScaleShapeProblem({4}, {2}, block).find("two axes or more"), std::string::npos);
  std::vector<std::byte> codes(12, std::byte{0x38});
  std::vector<float> scales(4, 1.0f), out(12);
  codes[6] = std::byte{0x7f};
  EXPECT_EQ(dequantizeFp8Blocks(codes.data(), scales.data(), weight, block, out.data()),
            "element [1,2] is an E4M3 NaN (code 0x7f)");
  codes[6] = std::byte{0x38};
  scales[3] = INFINITY;
  EXPECT_EQ(dequantizeFp8Blocks(codes.data(), scales.data(), weight, block, out.data()),
            "the scale of element [2,2] is inf");
  scales[3] = 1e38f;
  codes[11] = std::byte{0x7e};  // 448 x 1e38
  EXPECT_EQ(dequantizeFp8Blocks(codes.data(), scales.data(), weight, block, out.data()).rfind(
                "element [2,3] dequantizes past f32's range", 0),
            0u);
}

// compressed-tensors' scales: one for the tensor, or a shape dividing the weight, each scale a block of
// it, as compressed-tensors' dequantize infers the strategy from the shape.
TEST(Fp8Blocks, CompressedScalesCoverEqualBlocksByTheirShape) {
  const std::vector<int64_t> weight = {6, 8};
  const std::vector<std::pair<std::vector<int64_t>, std::pair<int64_t, int64_t>>> cases = {
      {{}, {6, 8}}, {{1}, {6, 8}}, {{6, 1}, {1, 8}}, {{6, 4}, {1, 2}}, {{1, 4}, {6, 2}}, {{3, 2}, {2, 4}}};
  for (const auto& [scales, want] : cases) {
    Fp8BlockSize block;
    ASSERT_EQ(compressedFp8Block(weight, scales, &block), "") << shapeText(scales);
    EXPECT_EQ(std::make_pair(block.rows, block.cols), want) << shapeText(scales);
  }
  Fp8BlockSize block;
  for (const std::vector<int64_t>& bad : std::vector<std::vector<int64_t>>{{4, 1}, {2}, {6, 3}, {6, 8, 1}, {0, 8}})
    EXPECT_NE(compressedFp8Block(weight, bad, &block).find("which do not split a [6,8] weight into equal blocks"),
              std::string::npos)
        << shapeText(bad);
  EXPECT_NE(compressedFp8Block({2, 6, 8}, {1}, &block).find("must have two axes"), std::string::npos);
}

// Products rounded to the scales' type as torch rounds a BF16 or F16 product: to nearest, ties to
// even, F16's subnormals in steps of 2^-24, past 65504 (from 65520) out of range.
TEST(Fp8Blocks, RoundsProductsToTheScalesType) {
  const float u8 = std::ldexp(1.0f, -8), u11 = std::ldexp(1.0f, -11);
  std::vector<float> bf16 = {1 + u8, 1 + 3 * u8, -(1 + 3 * u8), 3.0f};
  ASSERT_EQ(roundToScaleType(bf16.data(), {2, 2}, "BF16"), "");
  EXPECT_EQ(bf16, (std::vector<float>{1.0f, 1 + 4 * u8, -(1 + 4 * u8), 3.0f}));
  std::vector<float> f16 = {1 + u11, 1 + 3 * u11, 3 * std::ldexp(1.0f, -26), std::ldexp(1.0f, -25), 65519.0f, 0.0f};
  ASSERT_EQ(roundToScaleType(f16.data(), {6}, "F16"), "");
  EXPECT_EQ(f16, (std::vector<float>{1.0f, 1 + 4 * u11, std::ldexp(1.0f, -24), 0.0f, 65504.0f, 0.0f}));
  std::vector<float> f32 = {1 + u11, 1e30f};
  ASSERT_EQ(roundToScaleType(f32.data(), {2}, "F32"), "");
  EXPECT_EQ(f32, (std::vector<float>{1 + u11, 1e30f}));
  std::vector<float> past = {1.0f, 65520.0f};
  EXPECT_EQ(roundToScaleType(past.data(), {1, 2}, "F16"),
            "element [0,1] dequantizes past F16's range, its scales' type");
}

}  // namespace
}  // namespace mt
