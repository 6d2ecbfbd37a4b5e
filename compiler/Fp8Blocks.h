// Fine-grained FP8 (transformers' FineGrainedFP8Config, quant_method "fp8"; DeepSeek-V3's, Kimi
// K2's and Qwen3's -FP8 checkpoints): each linear weight (..., rows, cols) stored as E4M3 codes
// (F8_E4M3: float8_e4m3fn, 1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no infinities,
// 0x7f and 0xff NaN, at most 448) beside `<name>_scale_inv`, one scale per block of
// weight_block_size (block_rows x block_cols; the last blocks of an axis not a multiple of it
// shorter, as DeepSeek-V3's kv_a_proj_with_mqa's 576 rows in 128s): (..., ceil(rows / block_rows),
// ceil(cols / block_cols)). Dequantized as transformers' Fp8Dequantize and DeepSeek's
// weight_dequant compute it: the code's value (exact in f32) times its block's scale, one f32
// product; transformers then casts to the model's dtype, DeepSeek's fp8_cast_bf16.py to bf16,
// mtc keeps the f32 product as the master weight.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

struct Fp8BlockSize {
  int64_t rows = 0, cols = 0;  // weight_block_size: [rows, cols] of the weight each scale covers
};

// The value of an E4M3 (float8_e4m3fn) code; NaN for 0x7f and 0xff.
float e4m3Value(uint8_t code);

// "" or what is wrong with scales of shape `scales` for an E4M3 weight of shape `weight` in blocks
// of `block`: the weight at least two-dimensional, the scales the same but for its last two axes,
// each the count of blocks along it.
std::string fp8ScaleShapeProblem(const std::vector<int64_t>& weight, const std::vector<int64_t>& scales,
                                 Fp8BlockSize block);

// The weight of checked shape `weight` from its E4M3 `codes` and f32 `scales` into `out`; "" or what
// is wrong with the data, naming the element: a NaN code, a scale that is not finite, a product past
// f32's range.
std::string dequantizeFp8Blocks(const std::byte* codes, const float* scales, const std::vector<int64_t>& weight,
                                Fp8BlockSize block, float* out);

}  // namespace mt
