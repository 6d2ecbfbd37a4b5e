// The names of the mt dialect's discardable attributes: what the passes write on functions,
// arguments, results and ops, and the emitter reads. One place, beside the dialect.
#pragma once

namespace mt {

// Attribute names shared by the passes and the emitter.
// arg: {name, init, std, bound, of, decay, origin, frozen, lora, lora_rank, lora_alpha, adapter_alpha,
//       bf16_values};
// init "weights": from the weights file
inline constexpr char kParamAttr[] = "mt.param";
inline constexpr char kInputAttr[] = "mt.input";         // arg: "tokens" | "targets" | a named input
inline constexpr char kConstAttr[] = "mt.const";         // arg: its value (DenseElementsAttr)
inline constexpr char kOutputAttr[] = "mt.output";       // result of a forward-only function: its name
inline constexpr char kLossAttr[] = "mt.loss";           // result: the loss
// An output of a training function added to the loss with this weight (F32) for the gradient
// (the router's auxiliary loss); the loss result itself stays without it.
inline constexpr char kObjectiveWeightAttr[] = "mt.objective_weight";
inline constexpr char kGradAttr[] = "mt.grad";           // result: gradient of the named param
inline constexpr char kParamRowsKey[] = "rows";          // in mt.param of a piece: [first row, all rows]
// In mt.param: the parameter is read but never trained (mtc --frozen / --trainable): no gradient,
// no moments, no update.
inline constexpr char kParamFrozenKey[] = "frozen";
// In mt.param: the weight takes low-rank adapters (mtc --lora; mt-lora adds them).
inline constexpr char kParamLoraKey[] = "lora";
// In mt.param of such a weight: its adapters' own rank (i64) and alpha (f32), where not mt-lora's
// (PEFT's rank_pattern and alpha_pattern).
inline constexpr char kParamLoraRankKey[] = "lora_rank";
inline constexpr char kParamLoraAlphaKey[] = "lora_alpha";
// In mt.param: the parameter's starting values are all bf16 values (a folder's BF16 tensor): frozen
// in a bf16 plan, it is held as its staging copy alone (plan 1.32's HostTensor.bf16_only).
inline constexpr char kParamBf16ValuesKey[] = "bf16_values";
// In mt.param of an adapter's A: its own alpha (f32), the plan's HostTensor.lora_alpha.
inline constexpr char kParamAdapterAlphaKey[] = "adapter_alpha";
inline constexpr char kGradRowAttr[] = "mt.grad_row";    // result: first row of a piece's gradient
// mt-host-embedding: the token lookup of a table parameter runs on the host.
inline constexpr char kEmbeddedTokensAttr[] = "mt.embedded_tokens";  // arg: the step's tokens' rows of the named table
inline constexpr char kGradTokensAttr[] = "mt.grad_tokens";  // result: per-token rows of the named table's gradient
// result with kGradTokensAttr, and its "embedding_grad" host task: the id whose tokens add nothing
// (mt.embedding_grad's padding_id)
inline constexpr char kPaddingIdAttr[] = "mt.padding_id";
inline constexpr char kAccumulateAttr[] = "mt.accumulate";   // "embedding_grad" task: add to what landed before
inline constexpr char kStagingAttr[] = "mt.staging";  // arg: the bf16 staging copy of the parameter (its mt.param)
// h2d: copied in the first step only (a schedule's keep-frozen: a frozen weight, its staging copy, a
// constant); mt-plan-memory keeps its bytes to the end of the step, so the next finds it there.
inline constexpr char kKeptAttr[] = "mt.kept";
inline constexpr char kOffsetsAttr[] = "mt.offsets";     // op: arena offset of each result
inline constexpr char kArenaBytesAttr[] = "mt.arena_bytes";  // func: arena size
inline constexpr char kArenaMinBytesAttr[] = "mt.arena_min_bytes";  // func: smallest arena that works
inline constexpr char kLandingOffsetAttr[] = "mt.landing_offset";  // d2h: offset in the gradient landing buffer
inline constexpr char kLandingBytesAttr[] = "mt.landing_bytes";    // func: gradient landing buffer size
inline constexpr char kActivationBytesAttr[] = "mt.activation_bytes";  // func: bytes of activations offloaded per step (both ways)
inline constexpr char kVocabSplitAttr[] = "mt.vocab_split";    // func: the parameters split by vocabulary rows
inline constexpr char kExpertSplitAttr[] = "mt.expert_split";  // func: the stacked expert weights split into groups
inline constexpr char kPinnedBytesAttr[] = "mt.pinned_bytes";      // func: shared weights kept on the device
inline constexpr char kModelAttr[] = "mt.model";         // func: model name
inline constexpr char kPrecisionAttr[] = "mt.precision"; // func: "bf16" once mt-mixed-precision ran
inline constexpr char kBlockAttr[] = "mt.block";         // op: layer block index
inline constexpr char kTemplatesAttr[] = "mt.block_templates";  // func: block -> template block
inline constexpr char kBackwardAttr[] = "mt.backward";   // op: made by autodiff
// op: its results are constants to mt-autodiff, no gradient passes through it (torch's detach:
// DoRA's weight norm).
inline constexpr char kStopGradientAttr[] = "mt.stop_gradient";
inline constexpr char kRecomputeAttr[] = "mt.recompute"; // op: a forward op cloned for backward
inline constexpr char kTileAttr[] = "mt.tile";           // op: its token tile (mt-tile-tokens), from its location
inline constexpr char kTokenTilesAttr[] = "mt.token_tiles";  // func: the token tiles per layer block

}  // namespace mt
