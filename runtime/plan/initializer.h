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
// Not for ROW_NORMS, whose values are initializeRowNorms' from its source's.
void initializeTensor(float* data, int64_t n, const plan::Initializer& init, uint64_t seed,
                      const std::string& name, int64_t first = 0);

// The host tensor whose rows a ROW_NORMS parameter's values are the norms of (the verifier
// checked that it is one parameter of fitting shape); -1 for any other initializer or a tensor
// that is no parameter. Initialize a ROW_NORMS parameter after the others: its source's starting
// values come first.
int rowNormSource(const plan::Plan& plan, const plan::HostTensor& t);
// ROW_NORMS parameter `t`'s values into `out`: the norms of the rows of `source` (its
// rowNormSource, 2-D) whose values are `values` (kernels/matmul/lora_merge.h's rowNorms).
void initializeRowNorms(const plan::HostTensor& t, const plan::HostTensor& source, const float* values, float* out);

}  // namespace mt
