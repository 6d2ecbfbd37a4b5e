#include "runtime/training/lora_merge.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "kernels/matmul/lora_merge.h"
#include "runtime/io/error.h"

namespace mt {
namespace {

constexpr char kA[] = ".lora_A.weight", kB[] = ".lora_B.weight";

}  // namespace

std::vector<LoraAdapter> loraAdapters(const plan::Plan& plan) {
  std::map<std::string, int> params;
  for (int i = 0; i < plan.host_tensors_size(); ++i)
    if (plan.host_tensors(i).role() == plan::ROLE_PARAM) params[plan.host_tensors(i).name()] = i;
  std::vector<LoraAdapter> adapters;
  for (const auto& [name, a] : params) {
    if (!name.ends_with(kA)) continue;
    const std::string stem = name.substr(0, name.size() - std::strlen(kA));
    auto weight = params.find(stem + ".weight"), b = params.find(stem + kB);
    if (weight == params.end() || b == params.end())
      throw Error("the plan's LoRA adapter '" + name + "' has no " + (b == params.end() ? stem + kB : stem + ".weight") +
                  " beside it (recompile it with mtc --lora)");
    const auto &w = plan.host_tensors(weight->second).shape(), &sa = plan.host_tensors(a).shape(),
               &sb = plan.host_tensors(b->second).shape();
    if (w.size() != 2 || sa.size() != 2 || sb.size() != 2 || sa[1] != w[1] || sb[0] != w[0] || sb[1] != sa[0])
      throw Error("the plan's LoRA adapters of '" + stem + ".weight' do not fit it: A (r, in) and B (out, r) for a "
                  "weight (out, in)");
    auto magnitude = params.find(stem + kDoraMagnitudeSuffix);
    if (magnitude != params.end()) {
      const auto& sm = plan.host_tensors(magnitude->second).shape();
      if (sm.size() != 1 || sm[0] != w[0])
        throw Error("the plan's DoRA magnitude of '" + stem + ".weight' does not fit it: one element per output");
    }
    adapters.push_back({weight->second, a, b->second, magnitude == params.end() ? -1 : magnitude->second});
  }
  for (const auto& [name, index] : params)
    for (const char* suffix : {kB, kDoraMagnitudeSuffix})
      if (name.ends_with(suffix) && !params.count(name.substr(0, name.size() - std::strlen(suffix)) + kA))
        throw Error("the plan's LoRA adapter '" + name + "' has no lora_A beside it (recompile it with mtc --lora)");
  const auto dora = std::count_if(adapters.begin(), adapters.end(), [](const LoraAdapter& a) { return a.magnitude >= 0; });
  if (dora != 0 && dora != static_cast<long>(adapters.size()))
    throw Error("the plan's LoRA adapters have DoRA magnitudes on " + std::to_string(dora) + " of " +
                std::to_string(adapters.size()) + " weights, not all or none (recompile it with mtc --lora)");
  const float alpha = plan.model().lora_alpha();
  if (!adapters.empty() && !(alpha > 0.0f && std::isfinite(alpha)))
    throw Error("the plan has LoRA adapters but no alpha to scale them by (ModelInfo.lora_alpha " +
                std::to_string(alpha) + "): recompile it with mtc --lora");
  return adapters;
}

SafetensorsTensor mergedWeight(const plan::Plan& plan, const HostStore& store, const LoraAdapter& adapter) {
  SafetensorsTensor out = store.savedTensor(adapter.weight);
  const SafetensorsTensor base = out;
  const auto& shape = plan.host_tensors(adapter.a).shape();
  const int64_t r = shape[0], in = shape[1];
  out.data = nullptr;
  const double scale = loraScale(plan.model().lora_alpha(), r, plan.model().lora_rslora());
  out.produce = [&store, adapter, scale, base, r, in](void* buffer) {
    std::vector<float> staged_w, staged_a, staged_b, staged_m;  // where a tensor is produced, not held
    const float* w = f32Values(base, staged_w);
    const float* a = f32Values(store.savedTensor(adapter.a), staged_a);
    const float* b = f32Values(store.savedTensor(adapter.b), staged_b);
    const float* m = adapter.magnitude < 0 ? nullptr : f32Values(store.savedTensor(adapter.magnitude), staged_m);
    loraMerge(w, a, b, base.bytes / 4 / in, in, r, scale, static_cast<float*>(buffer), m);
  };
  return out;
}

}  // namespace mt
