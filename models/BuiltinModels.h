// Built-in models built directly as mt IR. No weights are materialised: parameters are
// function arguments with initializers, so even a 120B preset builds in milliseconds.
#pragma once
#include "models/ModelConfig.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mt {

// A llama model's rotary scaling as mt.rope's attributes: scaling_kind (RopeScaling::Kind, 0:
// none) and `scaling` = [factor, a, b, c, attention] (kernels/rope/rope.h), LongRoPE's short and
// long factors of each pair after them, computed from the config as transformers computes its rope
// parameters (YaRN's correction range and attention factor in double, as Python does). LongRoPE's
// choice between them: by the positions of each call (`by_position`: mt.rope_at's, a decode step's
// or packed examples', as transformers picks them by the largest position), else by the
// sequence's `seq` tokens (the long ones past the original context).
struct RopeScalingAttrs {
  int64_t kind = 0;
  std::vector<float> values;  // empty for none
};
RopeScalingAttrs ropeScalingAttrs(const ModelConfig& config, int64_t seq, bool by_position);

// Where the parameters' first values come from: the plan's seeded initializers, or a weights
// file (a pretrained model: every parameter's init is "weights").
enum class ParamInit { kSeeded, kWeightsFile };

// What the function computes: the whole sequence (evaluation), the same for training, the same
// for training on packed examples (mtc --packed-examples), or one decode step over a key/value
// cache (mtc --kv-cache: generation).
enum class ModelForm { kSequence, kTraining, kPackedTraining, kDecodeStep };

// kSequence: the forward function (tokens (batch, seq), params...) -> logits (batch, seq, vocab).
// kTraining: the same; a mixture of experts also returns its router's statistics as named
//   outputs after the logits (DESIGN.md §14): expert_load (2, experts): row 0 each expert's
//   choices over the MoE layers, row 1 its softmax probability summed over their tokens; and
//   router_aux_loss (): Hugging Face's load-balancing loss from them, carrying mt.objective_weight
//   (the config's router_aux_loss_coef) when that is above zero, so training adds it to the loss.
// kPackedTraining: kTraining whose rows hold several examples each: the input positions
//   (batch, seq) i32 is each token's position in its example (from 0 where one begins), which
//   the rotary embedding (mt.rope_at) or GPT-2's position table reads and by which attention
//   keeps each example to itself (mt.attention's positions).
// kDecodeStep: one new token per sequence at a run-time position, attending over a cache of
// `seq` earlier positions; forward-only, its inputs and outputs named:
//   tokens (batch, 1) i32, positions (batch, 1) i32 (the new token's position p: the cache holds
//   positions [0, p)), cache.L.key / cache.L.value (batch, seq, kv_heads * head_dim) per layer L
//   -> logits (batch, 1, vocab), new.L.key / new.L.value (batch, 1, kv_heads * head_dim): the new
//   token's key (after its rotary embedding) and value, for the caller to store at row p.
mlir::OwningOpRef<mlir::ModuleOp> buildModel(mlir::MLIRContext& context, const ModelConfig& config,
                                             int64_t batch, int64_t seq, ParamInit init = ParamInit::kSeeded,
                                             ModelForm form = ModelForm::kSequence);

}  // namespace mt
