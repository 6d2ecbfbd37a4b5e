// LoRA adapters (mtc --lora) in a trained plan, merged into the weights they adapt for an
// export that has no place for them (--export-hf: a model transformers loads as it is, as PEFT's
// merge_and_unload gives it).
#pragma once
#include <string>
#include <vector>

#include "runtime/host/host_store.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/plan_format.h"
#include "runtime/plan/plan_queries.h"

namespace mt {

// A weight `X.weight` (out, in) and its adapters `X.lora_A.weight` (r, in) and
// `X.lora_B.weight` (out, r) (a stack of experts (E, ., .): A (E, r, in), B (E, out, r), mtc
// --lora-experts), and with DoRA (mtc --lora-dora) its magnitude
// `X.lora_magnitude_vector` (out): host tensor indices (`magnitude` -1 without). Its alpha: A's
// own (HostTensor.lora_alpha, mtc --lora-alpha-pattern) or the plan's; its rank: A's rows.
struct LoraAdapter {
  int weight = -1, a = -1, b = -1, magnitude = -1;
  double alpha = 0.0;
};

// The plan's adapted weights (isLoraAdapter names the adapters). Throws mt::Error for an adapter
// without its weight or its partner, shapes that do not fit, magnitudes on some adapters but not
// all, or an adapter without an alpha (its own or ModelInfo.lora_alpha: its scale).
std::vector<LoraAdapter> loraAdapters(const plan::Plan& plan);

// Weight `adapter.weight` as saved (fp32, its plan name) with its adapters merged in:
// W + scale * B A (kernels/matmul/lora_merge.h), the scale the adapter's (loraScale: alpha / r, or
// alpha / sqrt(r) rank-stabilised); with DoRA each row then scaled by m / its norm. A stack of
// experts: each expert's W_e + scale * B_e A_e, each stored (in, out) where `experts_in_out`
// (gpt-oss's layout). Throws mt::Error for a stack whose shape is not of that layout.
SafetensorsTensor mergedWeight(const plan::Plan& plan, const HostStore& store, const LoraAdapter& adapter,
                               bool experts_in_out);

}  // namespace mt
