// The device arena's layout rule, shared by the compiler's memory planner and the verifier.
#pragma once
#include <cstdint>

namespace mt {
// Every buffer offset in a plan is a multiple of this (cache lines; CUDA wants >= 256 later,
// which a plan minor version may raise for CUDA plans).
inline constexpr int64_t kArenaAlignment = 64;
}  // namespace mt
