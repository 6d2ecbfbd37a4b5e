// Reading and writing plan files, and the plan format's identity.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/plan/arena.h"
#include "runtime/plan.pb.h"

namespace mt {

inline constexpr char kPlanMagic[] = "MTPLAN";
// The named input of a training plan that says which tokens the router's load-balancing
// statistics count (B, T) f32, 1 kept, 0 left out (the padding of --rows examples; plan 1.21).
inline constexpr char kTokenMaskInput[] = "token_mask";
// The named input that gives each token's position (B, T) i32: in a decode step, after the cache;
// in a training plan of packed examples (plan 1.22), in its example, from 0 where it begins.
inline constexpr char kPositionsInput[] = "positions";
// A preference-training plan's (mtc --objective dpo; plan 1.23; rows in (chosen, rejected) pairs):
// the named input of the reference model's log-probability of each row's targets (B) f32, and
// the named output of the policy's, the same sums under the weights being trained.
inline constexpr char kReferenceLogprobsInput[] = "reference_logps";
inline constexpr char kPolicyLogprobsOutput[] = "policy_logps";
// A KTO plan's (mtc --objective kto; plan 1.26; rows in pairs of an example and its KL row): the
// named input of each example's label (B/2) f32, 1 where its completion is desirable, 0 where not.
inline constexpr char kKtoLabelsInput[] = "kto_labels";
// A reward model's plan (mtc --objective reward; plan 1.26; rows in (chosen, rejected) pairs): the
// named input of each row's position (B) i32, its example's last token, where its score is its
// reward, and the named output of the rewards (B) f32.
inline constexpr char kRewardPositionsInput[] = "reward_positions";
inline constexpr char kPolicyRewardsOutput[] = "policy_rewards";
// And since plan 1.27 the named input of each pair's margin (B/2) f32 (TRL's "margin" column: the
// chosen reply's reward must beat the rejected one's by it; 0 where the data has none).
inline constexpr char kRewardMarginsInput[] = "reward_margins";
// Its score head's parameter (1, width), as Hugging Face names it.
inline constexpr char kScoreHeadParam[] = "score.weight";
// Major: incompatible change. Minor: additions a reader of the same major may ignore.
inline constexpr uint32_t kPlanVersionMajor = 1;
inline constexpr uint32_t kPlanVersionMinor = 39;  // 1.1: inputs, outputs, constants, generic kernels;
                                                  // 1.2: the deferred and the on-arrival update,
                                                  // the gradient landing buffer; 1.3: block templates;
                                                  // 1.4: the on-arrival update with its norm;
                                                  // 1.5: copies of row slices (Copy.host_offset),
                                                  // the vocabulary-split cross-entropy;
                                                  // 1.6: the token embedding on the host
                                                  // (EMBEDDING_LOOKUP/_GRAD host tasks);
                                                  // 1.7: the split master (ROLE_RESIDUAL);
                                                  // 1.8: ModelInfo.hf_config;
                                                  // 1.9: Stream.loss_prefix;
                                                  // 1.10: mt.dropout, mt.clamp(_grad),
                                                  // binary max and min;
                                                  // 1.11: mt.rope_at, mt.cached_attention;
                                                  // 1.12: mt.rope's position offset (token tiles);
                                                  // 1.13: mt.count_targets, mt.xent_tile(_grad);
                                                  // 1.14: ModelInfo.hf_source;
                                                  // 1.15: mixtures of experts (mt.moe_*,
                                                  // mt.grouped_matmul(_weight_grad));
                                                  // 1.16: mt.moe_balance_stats(_grad),
                                                  // mt.moe_balance_loss(_grad);
                                                  // 1.17: a deferred update's gradients land
                                                  // in the landing buffer, kept apart;
                                                  // 1.18: mt.rope(_at)'s frequency scaling;
                                                  // 1.19: attention's sliding window and
                                                  // sinks (mt.attention_sinks(_grad),
                                                  // mt.cached_attention_sinks), gpt-oss's
                                                  // experts (mt.clamped_swiglu(_grad),
                                                  // mt.grouped_add_bias, mt.grouped_bias_grad);
                                                  // 1.20: experts in groups
                                                  // (mt.grouped_matmul_into, a first expert
                                                  // in mt.grouped_matmul_weight_grad);
                                                  // 1.21: the router's statistics over the
                                                  // tokens a mask keeps
                                                  // (mt.moe_balance_stats(_grad)_masked,
                                                  // top_k in mt.moe_balance_loss(_grad));
                                                  // 1.22: packed examples (the "positions"
                                                  // input of a training plan,
                                                  // mt.attention_packed(_sinks|_grad),
                                                  // mt.rope_at's inverse);
                                                  // 1.23: preference training
                                                  // (mt.sequence_logprob(_grad),
                                                  // mt.dpo_loss(_grad));
                                                  // 1.24: its vocabulary split
                                                  // (mt.sequence_logprob_finish,
                                                  // mt.sequence_logprob_chunk_grad), the IPO
                                                  // loss (mt.sequence_logprob(_grad)'s
                                                  // average, mt.dpo_loss's kind 3), SimPO
                                                  // (kind 4, its gamma a third float, no
                                                  // reference_logps input), mt.pair_nll(_grad);
                                                  // 1.25: ORPO (mt.dpo_loss's kind 5), TRL's
                                                  // other losses (kinds 6 to 13, DiscoPOP's tau
                                                  // a third float); 1.26: KTO (mt.kto_loss(_grad),
                                                  // the kto_labels input), reward models
                                                  // (mt.row_score(_grad), mt.reward_loss(_grad),
                                                  // reward_positions, policy_rewards); 1.27:
                                                  // a reward model's margins
                                                  // (mt.reward_margin_loss(_grad),
                                                  // reward_margins); 1.28: frozen
                                                  // parameters (HostTensor.frozen),
                                                  // the initializer UNIFORM and
                                                  // ModelInfo.lora_alpha (LoRA); 1.29:
                                                  // ModelInfo.lora_rslora, lora_dropout;
                                                  // 1.30: the initializer ROW_NORMS (DoRA);
                                                  // 1.31: HostTensor.lora_alpha (an adapter's
                                                  // own alpha); 1.32: HostTensor.bf16_only
                                                  // (a frozen bf16 weight's staging copy alone);
                                                  // 1.33: mt.rmsnorm(_grad)'s offset (Gemma's
                                                  // norms of 1 + weight);
                                                  // 1.34: ModelInfo.hf_module_prefix;
                                                  // 1.35: mt.rope(_at)'s rotary dimension
                                                  // and LongRoPE's scaling kind (4);
                                                  // 1.36: the embedding gradient's padding id
                                                  // (mt.embedding_grad(_chunk), HostTask);
                                                  // 1.37: the attention calls' softcap (a
                                                  // float) and mt.softcap(_grad) (Gemma 2);
                                                  // 1.38: mt.moe_route's sigmoid routings,
                                                  // groups and scale, mt.moe_route_biased
                                                  // (GLM-4.5, DeepSeek-V3's routers); 1.39:
                                                  // its softmax routings within groups
                                                  // (DeepSeek-V2's group_limited_greedy)


// Reads and parses a plan and expands its template launches; throws mt::Error for an
// unreadable or unparsable file, a plan of another format version, or a launch that does not
// fit its template. Does not verify the contents (see verifier.h).
plan::Plan readPlan(const std::string& path);
// The same for a plan's bytes already read; `path` names it in the messages.
plan::Plan parsePlan(const std::string& bytes, const std::string& path);

// Where mtc writes a plan's initial weights unless told otherwise, and where mtrun looks for them:
// the plan's path up to ".plan", then ".safetensors".
std::string weightsBesidePlan(const std::string& plan_path);

// Replaces every template launch by the template's kernel calls on the launch's buffers, with
// the launch's waits and records between them (the templates stay, for the record); throws
// mt::Error ("invalid plan: ...") for a launch of a template that does not exist, binds another
// number of buffers, or places a wait or record out of range or order, or a template holding
// other than kernel calls.
void expandTemplates(plan::Plan& plan);

// Serialises atomically (temporary file + rename).
void writePlan(const plan::Plan& plan, const std::string& path);

// Byte sizes of plan shapes, with overflow checks: throws mt::Error naming `what` when the
// shape has negative dims or more than 2^48 elements.
int64_t checkedNumel(const google::protobuf::RepeatedField<int64_t>& shape, const std::string& what);
int64_t dtypeBytes(plan::DType dtype);
// The bytes of a host tensor (its shape times its element size; checked like checkedNumel).
int64_t hostTensorBytes(const plan::HostTensor& tensor);
// The bytes a copy moves: its device buffer's (the host side may be larger: a row slice).
int64_t copyBytes(const plan::Plan& plan, const plan::Copy& copy);

}  // namespace mt
