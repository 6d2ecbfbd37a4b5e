#include "runtime/training/lora_merge.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "kernels/matmul/lora_merge.h"
#include "runtime/io/error.h"

namespace mt {
namespace {

// Whether A (r, in) and B (out, r) fit a weight (out, in), or A (E, r, in) and B (E, out, r) a
// stack of experts (E, out, in) or (E, in, out).
bool adaptersFit(const google::protobuf::RepeatedField<int64_t>& w, const google::protobuf::RepeatedField<int64_t>& a,
                 const google::protobuf::RepeatedField<int64_t>& b) {
  if (w.size() == 2) return a.size() == 2 && b.size() == 2 && a[1] == w[1] && b[0] == w[0] && b[1] == a[0];
  if (w.size() != 3 || a.size() != 3 || b.size() != 3 || a[0] != w[0] || b[0] != w[0] || b[2] != a[1]) return false;
  return (w[1] == b[1] && w[2] == a[2]) || (w[1] == a[2] && w[2] == b[1]);
}

}  // namespace

std::vector<LoraAdapter> loraAdapters(const plan::Plan& plan) {
  std::map<std::string, int> params;
  for (int i = 0; i < plan.host_tensors_size(); ++i)
    if (plan.host_tensors(i).role() == plan::ROLE_PARAM) params[plan.host_tensors(i).name()] = i;
  std::vector<LoraAdapter> adapters;
  for (const auto& [name, a] : params) {
    if (!name.ends_with(kLoraASuffix)) continue;
    const std::string stem = name.substr(0, name.size() - std::strlen(kLoraASuffix));
    auto weight = params.find(stem + ".weight"), b = params.find(stem + kLoraBSuffix);
    if (weight == params.end() || b == params.end())
      throw Error("the plan's LoRA adapter '" + name + "' has no " +
                  (b == params.end() ? stem + kLoraBSuffix : stem + ".weight") +
                  " beside it (recompile it with mtc --lora)");
    const auto &w = plan.host_tensors(weight->second).shape(), &sa = plan.host_tensors(a).shape(),
               &sb = plan.host_tensors(b->second).shape();
    if (!adaptersFit(w, sa, sb))
      throw Error("the plan's LoRA adapters of '" + stem + ".weight' do not fit it: A (r, in) and B (out, r) for a "
                  "weight (out, in), A (E, r, in) and B (E, out, r) for a stack of experts");
    auto magnitude = params.find(stem + kDoraMagnitudeSuffix);
    if (magnitude != params.end()) {
      const auto& sm = plan.host_tensors(magnitude->second).shape();
      if (w.size() != 2 || sm.size() != 1 || sm[0] != w[0])
        throw Error("the plan's DoRA magnitude of '" + stem + ".weight' does not fit it: one element per output");
    }
    // Its own alpha (mtc --lora-alpha-pattern), else the plan's.
    const float own = plan.host_tensors(a).lora_alpha();
    adapters.push_back({weight->second, a, b->second, magnitude == params.end() ? -1 : magnitude->second,
                        own != 0.0f ? own : plan.model().lora_alpha()});
  }
  for (const auto& [name, index] : params)
    for (const char* suffix : {kLoraBSuffix, kDoraMagnitudeSuffix})
      if (name.ends_with(suffix) && !params.count(name.substr(0, name.size() - std::strlen(suffix)) + kLoraASuffix))
        throw Error("the plan's LoRA adapter '" + name + "' has no lora_A beside it (recompile it with mtc --lora)");
  const auto dora = std::count_if(adapters.begin(), adapters.end(), [](const LoraAdapter& a) { return a.magnitude >= 0; });
  if (dora != 0 && dora != static_cast<long>(adapters.size()))
    throw Error("the plan's LoRA adapters have DoRA magnitudes on " + std::to_string(dora) + " of " +
                std::to_string(adapters.size()) + " weights, not all or none (recompile it with mtc --lora)");
  for (const LoraAdapter& adapter : adapters)
    if (!(adapter.alpha > 0.0 && std::isfinite(adapter.alpha)))
      throw Error("the plan's LoRA adapter '" + plan.host_tensors(adapter.a).name() + "' has no alpha to scale it " +
                  "by (ModelInfo.lora_alpha " + std::to_string(plan.model().lora_alpha()) +
                  "): recompile it with mtc --lora");
  return adapters;
}

SafetensorsTensor mergedWeight(const plan::Plan& plan, const HostStore& store, const LoraAdapter& adapter,
                               bool experts_in_out) {
  SafetensorsTensor out = store.savedTensor(adapter.weight);
  const SafetensorsTensor base = out;
  const auto &sa = plan.host_tensors(adapter.a).shape(), &sb = plan.host_tensors(adapter.b).shape();
  const auto& w = plan.host_tensors(adapter.weight).shape();
  const bool stack = w.size() == 3;
  const int64_t experts = stack ? w[0] : 1, r = sa[sa.size() - 2], in = sa[sa.size() - 1], o = sb[sb.size() - 2];
  const bool in_out = stack && experts_in_out;  // each expert stored (in, out): its merge transposed
  if (stack && (in_out ? w[1] != in || w[2] != o : w[1] != o || w[2] != in))
    throw Error("the plan's LoRA adapters of '" + plan.host_tensors(adapter.weight).name() + "' do not fit its " +
                "experts' layout, (in, out) " + (in_out ? "here" : "not here"));
  out.data = nullptr;
  const double scale = loraScale(adapter.alpha, r, plan.model().lora_rslora());
  out.produce = [&store, adapter, scale, base, stack, experts, r, in, o, in_out](void* buffer) {
    std::vector<float> staged_w, staged_a, staged_b, staged_m;  // where a tensor is produced, not held
    const float* w = f32Values(base, staged_w);
    const float* a = f32Values(store.savedTensor(adapter.a), staged_a);
    const float* b = f32Values(store.savedTensor(adapter.b), staged_b);
    float* merged = static_cast<float*>(buffer);
    if (stack) {  // no DoRA magnitude: loraAdapters refuses one on a stack
      loraMergeExperts(w, a, b, experts, o, in, r, scale, in_out, merged);
      return;
    }
    const float* m = adapter.magnitude < 0 ? nullptr : f32Values(store.savedTensor(adapter.magnitude), staged_m);
    loraMerge(w, a, b, o, in, r, scale, merged, m);
  };
  return out;
}

}  // namespace mt
