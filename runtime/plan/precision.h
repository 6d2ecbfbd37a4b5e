// The dtype a plan's device computes in: one enum from mtc's --precision to the plan and back,
// its names written in one place. The plan records it as ModelInfo.precision (a string since plan
// 1.7: "fp32" or "bf16"); planPrecision (plan_queries.h) reads it back.
#pragma once
#include <optional>
#include <string_view>

namespace mt {

// fp32 everywhere, or a bf16 plan (bf16 weights and activations, f32 statistics, accumulation
// and gradients: mt-mixed-precision).
enum class ComputePrecision { kFp32, kBf16 };

inline const char* precisionName(ComputePrecision precision) {
  return precision == ComputePrecision::kBf16 ? "bf16" : "fp32";
}

// The precision named `name` ("" is fp32: plans from before 1.7 wrote none); nullopt for another.
inline std::optional<ComputePrecision> parsePrecision(std::string_view name) {
  if (name.empty() || name == "fp32") return ComputePrecision::kFp32;
  if (name == "bf16") return ComputePrecision::kBf16;
  return std::nullopt;
}

}  // namespace mt
