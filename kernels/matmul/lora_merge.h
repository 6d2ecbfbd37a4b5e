// A LoRA adapter merged into its weight (PEFT's merge_and_unload): W + scale * B A, for W (out,
// in), A (r, in), B (out, r), each element's sum over r in double and rounded once to f32 (PEFT
// computes B A in f32, so the two agree within f32 rounding). With a DoRA magnitude m (out), each
// row of that is then scaled by m / its L2 norm, as PEFT merges DoRA: the norm summed in double
// and rounded to f32, the factor and the product each one f32 operation. A host routine, not a
// plan kernel: mtrun --export-hf and mtc --forward-only --lora-from call it as they write weights.
#pragma once
#include <cstdint>

namespace mt {

// `merged` may be `w`; `magnitude` null for LoRA. OpenMP over rows (out x r x in multiply-adds: a
// large model's projections in seconds across the cores).
void loraMerge(const float* w, const float* a, const float* b, int64_t out, int64_t in, int64_t r, double scale,
               float* merged, const float* magnitude = nullptr);

// Each expert of a stack merged as loraMerge merges a weight, for A (E, r, in) and B (E, out, r):
// W (E, out, in) + scale * B_e A_e, or with `in_out` W (E, in, out) + scale * (B_e A_e)^T
// (gpt-oss's layout), there with A_e^T and B_e^T as the factors: the same sums, in the same order.
void loraMergeExperts(const float* w, const float* a, const float* b, int64_t experts, int64_t out, int64_t in,
                      int64_t r, double scale, bool in_out, float* merged);

// `norms[o]`: the L2 norm of row o of `w` (rows, cols), summed in double and rounded once to f32:
// the merge's norm, and a DoRA magnitude's starting value (the plan's ROW_NORMS initializer).
void rowNorms(const float* w, int64_t rows, int64_t cols, float* norms);

}  // namespace mt
