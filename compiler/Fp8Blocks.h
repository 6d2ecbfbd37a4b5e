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

// compressed-tensors' float-quantized FP8 (quant_method "compressed-tensors", format
// "float-quantized": the -FP8 and -FP8-dynamic checkpoints llm-compressor writes): each quantized
// linear weight (rows, cols) stored as E4M3 codes beside `<name>_scale`, one scale for the tensor
// ([] or [1]) or [s0, s1] dividing it: per output channel [rows, 1], per group [rows, cols / group],
// per block [rows / h, cols / w]. compressed-tensors' decompression infers the scheme from that
// shape alone, so each scale covers a (rows / s0) x (cols / s1) block, whatever the config's groups
// say. "" and the block into `block`, or what is wrong with the scales' shape.
std::string compressedFp8Block(const std::vector<int64_t>& weight, const std::vector<int64_t>& scales,
                               Fp8BlockSize* block);

// compressed-tensors dequantizes in the scales' own type: the code cast to it (exact) times the
// scale, a product rounded to BF16 or F16 where the scales are (the f32 product of dequantizeFp8Blocks
// is exact for them: 4 significant bits times 8 or 11). `dtype` is the scales' ("F32", "BF16" or
// "F16"); "" or the first element `values` (a weight of `shape`) rounds past its range at.
std::string roundToScaleType(float* values, const std::vector<int64_t>& shape, const std::string& dtype);

}  // namespace mt
