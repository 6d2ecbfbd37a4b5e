#include "runtime/plan/initializer.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul/lora_merge.h"
#include "kernels/random/counter_rng.h"
#include "runtime/io/error.h"

namespace mt {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

void initializeTensor(float* data, int64_t n, const plan::Initializer& init, uint64_t seed,
                      const std::string& name, int64_t first) {
  switch (init.kind()) {
    case plan::Initializer::ZEROS: std::fill(data, data + n, 0.0f); return;
    case plan::Initializer::ONES: std::fill(data, data + n, 1.0f); return;
    case plan::Initializer::NORMAL:
    case plan::Initializer::UNIFORM: break;
    case plan::Initializer::WEIGHTS: std::fill(data, data + n, 0.0f); return;  // loadParams fills it
    case plan::Initializer::ROW_NORMS:
      throw Error(name + "'s ROW_NORMS initializer needs its source's values (initializeRowNorms)");
    default: throw Error("unknown initializer for " + name);
  }
  const uint64_t key = splitmix64(seed ^ fnv1a(name));
  if (init.kind() == plan::Initializer::UNIFORM) {
    const double bound = init.bound();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {  // a uniform in [0, 1) from the counter (key, element)
      const double u = double(splitmix64(key + uint64_t(first + i)) >> 11) * 0x1.0p-53;
      data[i] = static_cast<float>(bound * (2.0 * u - 1.0));
    }
    return;
  }
  const double std_dev = init.std();
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    // Box-Muller on two uniforms in (0, 1] drawn from the counter (key, element).
    const uint64_t element = uint64_t(first + i);
    const double u1 = double((splitmix64(key + 2 * element) >> 11) + 1) * 0x1.0p-53;
    const double u2 = double((splitmix64(key + 2 * element + 1) >> 11) + 1) * 0x1.0p-53;
    data[i] = static_cast<float>(std_dev * std::sqrt(-2.0 * std::log(u1)) *
                                 std::cos(6.283185307179586 * u2));
  }
}

int rowNormSource(const plan::Plan& plan, const plan::HostTensor& t) {
  if (t.role() != plan::ROLE_PARAM || t.init().kind() != plan::Initializer::ROW_NORMS) return -1;
  for (int i = 0; i < plan.host_tensors_size(); ++i)
    if (plan.host_tensors(i).role() == plan::ROLE_PARAM && plan.host_tensors(i).name() == t.init().of()) return i;
  throw Error(t.name() + "'s ROW_NORMS initializer names no parameter '" + t.init().of() + "'");
}

void initializeRowNorms(const plan::HostTensor& t, const plan::HostTensor& source, const float* values, float* out) {
  rowNorms(values, t.shape(0), source.shape(1), out);
}

}  // namespace mt
