// A plan's seeded initializers (mtc writes the initial weights with them; mtrun, without a
// weights file, starts from them): in the plan library, so the compiler needs no runtime.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/plan/plan_format.h"

namespace mt {

// Fills `n` floats per the initializer. NORMAL uses a counter-based generator keyed by
// (seed, name): the values do not depend on the order or the thread that makes them.
// Fills elements [first, first + n) of the tensor; `data` points at element `first`.
void initializeTensor(float* data, int64_t n, const plan::Initializer& init, uint64_t seed,
                      const std::string& name, int64_t first = 0);

}  // namespace mt
