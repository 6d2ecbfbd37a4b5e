// Questions about a plan that the runtime's parts ask (the backends, the host store, the
// trainer, mtdump): what a step runs, what the update is, how many bytes the host holds, which
// kernels CUDA lacks, a kernel call's operands. Answers assume a verified plan unless said.
#pragma once
#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kernels/kernel_args.h"
#include "runtime/plan/plan_format.h"
#include "runtime/plan/precision.h"

namespace mt {

// Whether the plan is a training step (it has a loss) rather than a forward-only evaluation.
bool isTrainingPlan(const plan::Plan& plan);
// Whether the plan has a host tensor of `role` named `name` (a named input or output).
bool hasHostTensor(const plan::Plan& plan, plan::HostRole role, const std::string& name);
// Whether the plan trains on pairs of rows (mtc --objective dpo, kto or reward: --rows pairs):
// it gives each row's log-probability or reward as a named output.
bool trainsOnPairs(const plan::Plan& plan);

// Per stream, per instruction: whether it is a copy the device keeps between runs — of a
// forward-only plan, a weight, its bf16 staging copy or a constant; of a training plan, a frozen
// weight, its staging copy or a constant (host tensors that do not change from run to run) —
// copied to device bytes that no instruction of any stream writes otherwise (mtc lays such
// bytes out: mt-plan-memory, keep-frozen in training). A run on unchanged weights may skip it
// (StepOptions::weights_unchanged).
std::vector<std::vector<bool>> keptCopies(const plan::Plan& plan);
// The bytes those copies move.
int64_t keptCopyBytes(const plan::Plan& plan);
// Whether host tensor `t` is a frozen parameter (HostTensor.frozen) or the staging copy of one.
bool isFrozenWeight(const plan::Plan& plan, int t);

// How many of each stream's instructions a step runs: all of them, or with `loss_only` the
// plan's loss prefixes (plan 1.9: what the loss needs; all of them in a plan that has none).
std::vector<size_t> stepLengths(const plan::Plan& plan, bool loss_only);

// The plan's ROLE_GRAD_LANDING tensor (every gradient lands at its landing_offset there), or -1.
int gradLandingTensor(const plan::Plan& plan);
// Whether the plan's gradients are kept apart from where they land (plan 1.17): they land in
// the landing buffer, and the host task that takes each one's norm keeps it (summed over
// micro-batches and ranks; a rank its slice) in the gradient's own tensor, which the deferred
// update reads — a plan compiled for data-parallel ranks (mtc --ranks). In an on-arrival plan
// the gradients are views into the landing buffer; without one, they land in their own tensors.
bool gradientsKeptApart(const plan::Plan& plan);

// The kind of the plan's AdamW tasks (ADAMW when it has none).
plan::HostTask::Kind planUpdateKind(const plan::Plan& plan);
// Whether `kind` updates each parameter as its gradient lands (no global-norm clipping).
bool updatesOnArrival(plan::HostTask::Kind kind);
// Whether `kind` is an AdamW task (not the norm, not the host's token embedding).
bool updatesParameters(plan::HostTask::Kind kind);

// Whether parameter host tensor `param` is a split master (it has a ROLE_RESIDUAL, or it is
// HostTensor.bf16_only: no bytes of its own).
bool isSplitMaster(const plan::Plan& plan, int param);
// The split masters' host tensor indices.
std::set<int> splitMasters(const plan::Plan& plan);
// Whether a host tensor of this role holds master-weight bytes: a parameter's fp32 master (unless
// split: then none), its bf16 staging copy or its residual. What the ranks of a host share one
// copy of (data parallel).
bool isMasterRole(plan::HostRole role);
// Whether a host tensor of this role is the optimizer's: a gradient, their landing buffer, an AdamW moment.
bool isOptimizerRole(plan::HostRole role);
// Whether a loss-only run of the plan (its loss prefixes, stepLengths(plan, true)) touches no
// optimizer tensor: no copy of one, no host task that reads one (only the embedding's lookup, and
// the deferred update, which runs only where a step left one pending). A plan without loss
// prefixes (before 1.9) runs whole, its backward included: not such a plan.
bool lossRunSparesOptimizer(const plan::Plan& plan);
// The bytes of those tensors: the master weights as the host holds them.
int64_t masterBytes(const plan::Plan& plan);
// The bytes of the host tensors `counted` accepts, each whole, split masters left out (their bf16
// staging copy and residual hold them).
int64_t unsplitHostBytes(const plan::Plan& plan, const std::function<bool(const plan::HostTensor&)>& counted);

// Whether parameter `name` is a LoRA adapter (mtc --lora): "X.lora_A.weight" or "X.lora_B.weight",
// or a DoRA magnitude "X.lora_magnitude_vector" (mtc --lora-dora), as mt-lora and PEFT name them.
bool isLoraAdapter(const std::string& name);
// An adapter's A and B: its weight's stem + these.
inline constexpr char kLoraASuffix[] = ".lora_A.weight";
inline constexpr char kLoraBSuffix[] = ".lora_B.weight";
// A DoRA magnitude's name: its weight's stem + this, PEFT's key (without ".weight").
inline constexpr char kDoraMagnitudeSuffix[] = ".lora_magnitude_vector";
bool isDoraMagnitude(const std::string& name);
// Whether parameter `t` learns at LoRA+'s raised rate (mtrun --lora-plus-ratio): an adapter's B, or
// any 1-D parameter (a DoRA magnitude, a norm, a bias), as PEFT's create_loraplus_optimizer groups
// them.
bool takesLoraPlusRate(const plan::HostTensor& t);
// Whether parameter `name` is the token embedding of either family ("embed.weight", "wte.weight").
bool isEmbeddingParam(const std::string& name);
// Whether the plan's LM head is its embedding: no head of its own (nor a reward model's score head).
bool headIsEmbedding(const plan::Plan& plan);
// Whether the plan is a reward model's: it has the score head parameter (kScoreHeadParam).
bool hasScoreHead(const plan::Plan& plan);
// The scale of a rank-`rank` adapter's update B A: alpha / rank, or alpha / sqrt(rank) with
// rank-stabilised LoRA (PEFT's use_rslora). What mt-lora computes with and an export merges in.
double loraScale(double alpha, int64_t rank, bool rslora);

// Model FLOPs per token as MegaTrain reports them: 6 x the parameters (a mixture of experts: its
// `active` ones, where nonzero). With `frozen` of them frozen (mtc --frozen, --trainable), a
// convention: (2 + 4 x the trained share of all parameters) x them, the forward of every weight
// and the backward (its input's gradient and its own) of the trained ones. It leaves out the
// input gradients of frozen weights above trained ones and counts that of the lowest trained
// layer, which runs none; for a mixture of experts the share is of all parameters, not the
// active ones.
double modelFlopsPerToken(double params, double active, double frozen);

// Bytes of host memory the plan's host tensors take (gradients that are views into the landing
// buffer not counted twice, split masters counted as their staging copies and residuals): what the host
// store allocates.
int64_t planHostBytes(const plan::Plan& plan);

// "" if the CUDA backend has a kernel for every kernel call of the plan (the op table's CUDA
// column), else a message naming the ones it lacks, with their numbers of calls.
std::string cudaUnsupportedKernels(const plan::Plan& plan);

// Shapes and (when `arena` is given) data pointers of a kernel call's operands. The call must
// belong to a verified plan.
KernelArgs bindKernelCall(const plan::Plan& plan, const plan::KernelCall& call, std::byte* arena);

// The tensor view of a buffer / host tensor (shape and dtype, no data).
Tensor bufferTensor(const plan::DeviceBuffer& buffer);

// Metadata key, in checkpoints and in the initial weights mtc writes, of planFingerprint.
inline constexpr char kPlanFingerprintKey[] = "plan_fingerprint";

// A digest of what the plan trains (host tensors' names, shapes, roles, and the model's
// batch/seq/vocab): a checkpoint only loads into a plan with the same fingerprint.
std::string planFingerprint(const plan::Plan& plan);

// What the plan's device computes in (ModelInfo.precision; plans before 1.7 wrote none: fp32).
// Throws mt::Error for a name that is neither.
ComputePrecision planPrecision(const plan::Plan& plan);

}  // namespace mt
