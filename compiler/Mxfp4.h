// MXFP4 (the OCP microscaling format gpt-oss's official checkpoints store their experts in):
// blocks of 32 FP4 (E2M1) values, two a byte (the low nibble first), each block scaled by a
// power of two (an E8M0 byte, bias 127). Dequantized exactly as transformers' integrations/mxfp4.py
// (convert_moe_packed_tensors) does: the FP4 value times 2^(scale - 127), then the last two
// axes swapped, so that (experts, out, in / 32, 16) blocks give the (experts, in, out) weight
// GptOssExperts multiplies by. Every value is exact in f32 (an FP4 value has two significant
// bits); one past f32's range is infinite, and the import refuses it as any non-finite weight;
// the scale byte 255 is E8M0's NaN (transformers' dequantization gives NaN or infinities there).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

inline constexpr int64_t kMxfp4BlockValues = 32;  // values per scale

// "" or what is wrong with blocks / scales of these shapes for a weight of shape `weight`
// (experts, in, out): blocks (experts, out, in / 32, 16) and scales (experts, out, in / 32).
std::string mxfp4ShapeProblem(const std::vector<int64_t>& blocks, const std::vector<int64_t>& scales,
                              const std::vector<int64_t>& weight);

// The weight (experts, in, out) from checked blocks and scales (U8 bytes) into `out`; "" or what
// is wrong with the data (a NaN scale, a value past f32's range), naming the element.
std::string dequantizeMxfp4(const std::byte* blocks, const std::byte* scales, const std::vector<int64_t>& weight,
                            float* out);

}  // namespace mt
