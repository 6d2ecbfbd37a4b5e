// What mtc is asked to do: the options of one compile and the modes in them, each an enum
// parsed once at the edge (tools/mtc.cc) and read as such by the driver (Pipeline.h), the stages
// (Stages.h), the batch search, the summary and the emitter.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "models/ModelConfig.h"
#include "passes/PassEnums.h"
#include "runtime/plan/precision.h"

namespace mt {

// PEFT's default LoRA targets for Llama-family models: attention's query and value projections.
inline constexpr char kDefaultLoraTargets[] = R"(attn\.(q|v)\.weight$)";

// PEFT's target_modules "all-linear" (mtc --lora-targets all-linear, or an adapter's config), over
// the plan's names: the layers' attention and MLP projections, Qwen2-MoE's shared expert's and its
// gate, the modules transformers makes nn.Linear (GPT-2's Conv1D too); and, by the folder's tensor
// name, GraniteMoE's router, an nn.Linear there (block_sparse_moe.router.layer). Not the
// embeddings, the LM head, a score head, another router or a stack of experts: in transformers 5
// those routers and the experts are bare parameters.
inline constexpr char kAllLinearLoraTargets[] =
    R"(^(layers|blocks)\.[0-9]+\.((attn|mlp|moe\.shared)\.[^.]+|moe\.shared_gate)\.weight$|\.block_sparse_moe\.router\.layer\.weight$)";

// What the weights cross the link as (mtc --stream-dtype): the fp32 master, or its bf16 copy
// (mt-stage-bf16; the master then held split, no host bytes added). A bf16 plan streams bf16.
enum class StreamDtype { kF32, kBf16 };
// The schedules the compiler can emit, from the most device memory to the least (mtc
// --schedule; unset: the first that fits the budget).
enum class Schedule { kResident, kStreamed, kStreamedRecompute };
// Kept activations on the host between the forward and the backward (mtc --offload-activations):
// when nothing else fits the budget, always (streamed schedules), never.
enum class Offload { kAuto, kOn, kOff };
// A training plan's frozen weights (a LoRA's base, --frozen) between steps (mtc --keep-frozen):
// kept on the device where the budget has room (copied in the first step only), or copied in
// every step like the trained ones.
enum class KeepFrozen { kAuto, kOff };
// Where the tokens are looked up in their embedding table (mtc --embedding): on the host when
// the vocabulary is split and the table is the tied LM head's, on the device, on the host.
enum class EmbeddingPlace { kAuto, kDevice, kHost };

// The stages of the pipeline, in order; --emit can stop after any of them.
enum class Stage {
  kInput, kFuse, kAttachLoss, kTileTokens, kAutodiff, kPartition,
  kHostEmbedding, kSplitVocab, kSplitExperts, kRecompute, kSchedule, kMemory
};
inline constexpr size_t kStageCount = static_cast<size_t>(Stage::kMemory) + 1;
// Their names on the command line (--emit) and in messages, indexed by the enum.
inline constexpr const char* kStageNames[kStageCount] = {
    "input", "fuse", "attach-loss", "tile-tokens", "autodiff", "partition",
    "host-embedding", "split-vocab", "split-experts", "recompute", "schedule", "memory"};
inline const char* stageName(Stage stage) { return kStageNames[static_cast<size_t>(stage)]; }

// The schedule's name on the command line and in the summary.
const char* scheduleName(Schedule schedule);

struct CompileOptions {
  std::string model;            // a preset name or a .mlir file
  ModelConfig overrides;        // non-zero fields replace the preset's
  std::optional<bool> tied;     // replaces the preset's tying when set
  int64_t batch = 8;             // 0: the largest that fits device_mem (built-in models)
  int64_t seq = 0;              // 0: the model's context length (presets)
  std::optional<Stage> emit;    // print the IR after this stage instead of writing a plan
  std::string output;           // plan path
  std::string weights;          // initial weights path; "" = beside the plan
  bool no_weights = false;
  uint64_t seed = 1;
  int64_t device_mem = 0;       // bytes; 0 = no budget
  int64_t host_mem = 0;         // bytes of host memory the training machine has; 0 = unchecked
  std::string hardware = "cpu";
  std::optional<Schedule> schedule;  // unset: the first that fits the budget
  std::optional<UpdateKind> update;  // unset: by host_mem
  int64_t vocab_chunks = 0;       // the LM head in this many vocabulary chunks; 0: only if the budget needs it
  int64_t expert_groups = 0;      // each stacked expert weight in this many groups; 0: only if the budget needs it
  int64_t token_tiles = 0;        // each layer block's token-wise work in this many tiles; 0: only if the budget needs it
  Offload offload = Offload::kAuto;
  KeepFrozen keep_frozen = KeepFrozen::kAuto;
  EmbeddingPlace embedding = EmbeddingPlace::kAuto;
  StreamDtype stream_dtype = StreamDtype::kF32;
  ComputePrecision precision = ComputePrecision::kFp32;
  bool precision_by_profile = false;  // bf16 because --hw names a GPU (no --precision given)
  // A forward-only plan (tokens in, logits out; no loss, gradients or optimizer) for sampling
  // (mtgen) and evaluation: built-in models and Hugging Face folders return their logits as the
  // output "logits"; an ONNX model is imported as an evaluation (its graph outputs).
  bool forward_only = false;
  // With forward_only: a decode step over a key/value cache of `seq` positions (built-in models
  // and Hugging Face folders; models/BuiltinModels.h, ModelForm::kDecodeStep) for mtgen.
  bool kv_cache = false;
  // A training plan whose rows hold several whole examples each (mtrun --rows packed-examples):
  // the input "positions" gives each token's position in its example, attention keeps each
  // example to itself (built-in models and Hugging Face folders; ModelForm::kPackedTraining).
  bool packed_examples = false;
  // The data-parallel job the summary prices (mpirun -np ranks mtrun). Above 1, a streamed plan
  // with the deferred update keeps its gradients apart (StageOptions::land_gradients); any plan
  // runs on any number of ranks.
  int64_t ranks = 1;
  int64_t ranks_per_host = 1;
  // A mixture of experts' router load-balancing loss coefficient (mtc --router-aux-loss),
  // replacing the preset's 0 or the folder's config; unset: theirs.
  std::optional<double> router_aux_loss;
  // What the loss trains (mtc --objective): the next token, or preferences (DPO) over rows in
  // (chosen, rejected) pairs with beta (mtc --dpo-beta), the loss of a pair's margin (--dpo-loss)
  // and its label smoothing (--dpo-label-smoothing).
  LossSpec loss;
  // Which parameters train (mtc --frozen, --trainable): those `frozen` matches are kept out of
  // training, and with `trainable` those it does not match (compiler/TrainableParams.h). An ONNX
  // import keeps such initializers as constants.
  std::optional<std::regex> frozen, trainable;
  // mtc --lora: low-rank adapters of this rank (0: none) on the weights `lora_targets` finds
  // (searched as `frozen` is), their update scaled by lora_alpha / rank, or / sqrt(rank) with
  // lora_rslora (PEFT's r, lora_alpha, use_rslora, target_modules); every other parameter frozen
  // but those `trainable` finds.
  int64_t lora_rank = 0;
  double lora_alpha = 8.0;
  bool lora_rslora = false;   // the scale alpha / sqrt(rank) instead (PEFT's use_rslora)
  double lora_dropout = 0.0;  // dropout on each adapter's input (PEFT's lora_dropout)
  bool lora_dora = false;     // weight-decomposed: a magnitude per output row too (PEFT's use_dora)
  // None: no (out, in) weight (mtc --lora-experts without --lora-targets: the stacks alone).
  std::optional<std::regex> lora_targets{std::regex(kDefaultLoraTargets, std::regex::ECMAScript)};
  // mtc --lora-experts: the stacks of experts (E, ., .) it finds get adapters too, each expert its
  // own (PEFT's target_parameters).
  std::optional<std::regex> lora_experts;
  // mtc --lora-rank-pattern / --lora-alpha-pattern: an adapted weight's own rank or alpha, from the
  // first pattern (searched as lora_targets) that finds it (PEFT's rank_pattern, alpha_pattern).
  struct LoraPattern {
    std::string text;  // as given, for messages
    std::regex pattern;
    double value;
  };
  std::vector<LoraPattern> lora_rank_pattern, lora_alpha_pattern;
  // mtc --lora-from: a PEFT adapter folder whose config sets the lora_* options, the targets and
  // `trainable` (its modules_to_save), and whose weights start the adapters (compiler/PeftAdapter.h).
  std::string lora_from;
  // What --lora-from's config selects, by plan name, resolved over the folder's module names as
  // PEFT matches them: the adapted weights (instead of lora_targets) and the tensors of the
  // modules trained whole (instead of trainable).
  std::optional<std::set<std::string>> lora_from_targets, lora_from_saved;
  // And the adapted weights' own ranks and alphas, by plan name, where its rank_pattern and
  // alpha_pattern give them.
  std::map<std::string, int64_t> lora_from_ranks;
  std::map<std::string, double> lora_from_alphas;
  // Not a flag: a Hugging Face folder's tensor name for each parameter's plan name, which the
  // two patterns match too (filled when the folder is read).
  std::map<std::string, std::string> param_source_names;
  // Not a flag: the parameters whose starting values are bf16 values (a folder's BF16 tensors,
  // compiler/HuggingFace.h bf16Params), but those --lora-from's file replaces (lora_from_replaced):
  // frozen in a bf16 plan, each is held as its staging copy alone (plan 1.32).
  std::set<std::string> bf16_params, lora_from_replaced;
  bool frozen_fp32 = false;  // mtc --frozen-fp32: none of them held as bf16 alone
};

// Parses "80GiB", "512MiB", "1.5TiB", "1000000" (bytes); returns -1 if malformed.
int64_t parseByteSize(const std::string& text);

}  // namespace mt
