// Built-in model families (GPT-2, Llama; Qwen2 is Llama with q/k/v biases, Qwen3 Llama with a
// head width of its own and q/k norms, Mixtral and Qwen3-MoE Llama with mixtures of experts,
// Qwen2-MoE Qwen2 with experts beside a gated shared expert, OLMoE Llama with OLMo 2's q/k norms
// and experts,
// gpt-oss Llama with sinks, sliding windows and its own experts, Gemma 3 Llama with norms of
// 1 + weight around both sublayers, a scaled embedding and GeGLU) described by a small config. Plain C++ (no MLIR):
// the tools read configs and presets without the compiler's headers.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

// A built-in family; kNone for models that come as IR or ONNX (no config of ours).
enum class ModelFamily { kNone, kGpt2, kLlama };
// Its name in presets' descriptions, the IR (mt.model) and the summary ("" for kNone).
inline const char* familyName(ModelFamily family) {
  return family == ModelFamily::kGpt2 ? "gpt2" : family == ModelFamily::kLlama ? "llama" : "";
}

// Hugging Face's rope_scaling of a llama-family model: how the rotary frequencies are scaled
// for a longer context than the one trained on (kernels/rope/rope.h computes them; the kinds are
// its RopeScalingKind's).
struct RopeScaling {
  enum class Kind { kNone = 0, kLinear = 1, kLlama3 = 2, kYarn = 3, kLongRope = 4 };
  Kind kind = Kind::kNone;
  int64_t context = 0;  // yarn, longrope: the config's max_position_embeddings (mtc --context leaves the angles)
  double factor = 1.0;  // longrope: 0 where the config names none
  double low_freq_factor = 0.0, high_freq_factor = 0.0;  // llama3
  int64_t original_context = 0;  // llama3, yarn, longrope: original_max_position_embeddings
  double beta_fast = 32.0, beta_slow = 1.0;  // yarn
  bool truncate = true;          // yarn: the correction range rounded to whole pairs
  double attention_factor = 0.0;  // yarn, longrope: cos and sin scaled by it; 0: from factor (and mscale)
  double mscale = 0.0, mscale_all_dim = 0.0;  // yarn: the attention factor's ratio form
  // longrope (Phi-3): each pair's factor within the original context (short) and past it (long),
  // as transformers picks them by the sequence's length.
  std::vector<double> short_factor, long_factor;
  // YaRN's mscale(factor, m) (transformers' get_mscale): 0.1 m ln(factor) + 1, 1 where the factor
  // does not lengthen; the attention factor's ratio and DeepSeek's softmax scale are made of it.
  double yarnMscale(double m) const { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; }
};

// The rope type's name in transformers' configs ("" for none).
inline const char* ropeScalingName(RopeScaling::Kind kind) {
  switch (kind) {
    case RopeScaling::Kind::kLinear: return "linear";
    case RopeScaling::Kind::kLlama3: return "llama3";
    case RopeScaling::Kind::kYarn: return "yarn";
    case RopeScaling::Kind::kLongRope: return "longrope";
    default: return "";
  }
}

struct ModelConfig {
  ModelFamily family = ModelFamily::kNone;
  int64_t layers = 0;
  int64_t width = 0;       // model dimension C
  int64_t heads = 0;
  int64_t kv_heads = 0;    // llama: grouped-query heads; gpt2: = heads
  int64_t ffn = 0;         // hidden width of the MLP
  int64_t vocab = 0;
  int64_t context = 0;     // maximum sequence length (gpt2: rows of the position table)
  bool tied = true;        // output projection shares the token embedding
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  bool qkv_bias = false;   // llama: biases on the q, k and v projections (Qwen2's shape)
  int64_t head_dim = 0;    // llama: each head's width where it is not width / heads (Qwen3: 128); 0: width / heads
  bool qk_norm = false;    // llama: RMSNorm of each head of q and of k before the rotary embedding (Qwen3)
  // llama: a mixture of experts in place of the MLP (Qwen3-MoE, Mixtral; DESIGN.md §14). A router
  // picks `experts_per_token` of `experts` SwiGLU MLPs of width `expert_ffn` per token.
  int64_t experts = 0;            // 0: dense MLPs of width `ffn` everywhere
  int64_t experts_per_token = 0;  // k (num_experts_per_tok)
  int64_t expert_ffn = 0;         // moe_intermediate_size (Mixtral: its intermediate_size)
  bool normalize_topk = true;     // the k chosen probabilities divided by their sum (Qwen3-MoE's norm_topk_prob)
  int64_t moe_every = 1;          // decoder_sparse_step: layer l has experts when (l + 1) % moe_every == 0 ...
  std::vector<int64_t> dense_layers;  // ... and l is not one of these (mlp_only_layers): those keep the dense MLP
  // The router's load-balancing loss times this is added to the training loss (Hugging Face's
  // router_aux_loss_coef, where its config sets output_router_logits); 0: logged, not trained on.
  double router_aux_loss_coef = 0.0;
  RopeScaling rope_scaling;  // llama: none unless a Hugging Face config says (last: presets list the fields before)
  bool o_bias = false;       // llama: a bias on the attention's output projection too (Llama's attention_bias)
  // llama: sliding-window attention (Mistral, gpt-oss): the layers in `sliding_layers` let each
  // token see the last `sliding_window` tokens (itself included); the others see all before it.
  int64_t sliding_window = 0;
  std::vector<int64_t> sliding_layers;
  bool attention_sinks = false;  // llama: a learned logit per head in each softmax's denominator (gpt-oss)
  // llama: how the experts are written. kSwiglu: gate, up and down stacked as torch Linears'
  // (out, in) weights, SiLU(gate) * up (Qwen3-MoE, Mixtral). kGptOss: gpt-oss's, as its Hugging
  // Face tensors are: gate_up (E, D, 2F) with gate and up interleaved, down (E, F, D), a bias on
  // each and on the router, the clamped SwiGLU (alpha 1.702, `swiglu_limit`), and the router's
  // top k logits softmaxed (not the top k of a softmax).
  enum class ExpertForm { kSwiglu, kGptOss };
  ExpertForm expert_form = ExpertForm::kSwiglu;
  double swiglu_limit = 7.0;  // kGptOss

  // A reward model's head (mtc --objective reward): one score per token, the parameter
  // score.weight (1, width), in place of the LM head, as Hugging Face's ...ForSequenceClassification
  // with num_labels 1. kNew: new to the model (a causal LM's folder, a built-in model), from its
  // seeded initializer even where the rest comes from a weights file; kPretrained: a
  // ...ForSequenceClassification folder's own.
  enum class ScoreHead { kNone, kNew, kPretrained };
  ScoreHead score_head = ScoreHead::kNone;
  bool hasScoreHead() const { return score_head != ScoreHead::kNone; }

  // llama: Gemma 3's differences (Gemma3ForCausalLM), each off for the other architectures.
  // Every RMSNorm scales by 1 + weight (its weights stored as offsets from 1, zeros at init).
  bool norm_plus_one = false;
  bool embed_scaled = false;  // the embedding's rows times sqrt(width) (in f32, as transformers' f32 model)
  // The gated MLP's gate through SiLU (SwiGLU) or GELU's tanh form (GeGLU: gelu_pytorch_tanh).
  enum class GateActivation { kSilu, kGeluTanh };
  GateActivation gate_activation = GateActivation::kSilu;
  // RMSNorms on the attention's and the MLP's outputs too, before each residual add
  // (post_attention_layernorm, post_feedforward_layernorm; the MLP's input norm is
  // pre_feedforward_layernorm).
  bool sandwich_norms = false;
  // The RMSNorms on each sublayer's input (Llama's input_layernorm and post_attention_layernorm,
  // Gemma's pre_feedforward_layernorm); false: OLMo 2's, whose sandwich norms alone normalize.
  bool input_norms = true;
  double rope_local_theta = 0.0;  // the sliding layers' rotary base, unscaled (0: rope_theta and its scaling)
  double query_pre_attn_scalar = 0.0;  // the scores times its -1/2 power (0: head_dim's)
  // llama: the first rotary_dim elements of each head turn, the rest pass (Phi-4-mini's
  // partial_rotary_factor 0.75); 0: all of them.
  int64_t rotary_dim = 0;
  // The token whose embedding row gets no gradient from the lookup (-1: none): a folder's
  // pad_token_id, as transformers' nn.Embedding(..., padding_idx) (a tied head's gradient still
  // reaches the row).
  int64_t padding_id = -1;
  // llama: Granite's multipliers (GraniteForCausalLM), each 1 (none) for the other architectures:
  // the embedding's rows times embedding_multiplier, each sublayer's output times
  // residual_multiplier before its residual add, the scores times attention_multiplier in place
  // of head_dim^-1/2 (0: head_dim's), the LM head's logits divided by logits_scaling.
  double embedding_multiplier = 1.0, residual_multiplier = 1.0, attention_multiplier = 0.0, logits_scaling = 1.0;
  // llama: the layers whose attention turns no rotary embedding (SmolLM3's NoPE layers, its
  // no_rope_layers' zeros): q and k enter it as projected.
  std::vector<int64_t> nope_layers;
  // llama, with qk_norm: over the whole projection (OLMo 2's q_norm (heads x head_dim) and k_norm
  // (kv_heads x head_dim)), not each head.
  bool qk_norm_whole = false;
  // llama: Gemma 2's softcapping (attn_logit_softcapping, final_logit_softcapping): each attention
  // score s becomes c * tanh(s / c) before the softmax, and the LM head's logits likewise before
  // the loss (not a reward model's score); 0: none.
  double attn_softcap = 0.0, final_softcap = 0.0;
  // llama, with experts of the SwiGLU form: a shared expert in each MoE layer (Qwen2-MoE's
  // shared_expert), a SwiGLU MLP of this width that every token goes through, its output times
  // sigmoid(h . shared_expert_gate) (a gate of one output) added to the routed experts'; 0: none.
  int64_t shared_expert_ffn = 0;
  // llama, with experts of the SwiGLU form: GLM-4.5's and DeepSeek-V3's router (transformers'
  // TopkRouter). Each expert's score is its logit's sigmoid; the top k are chosen by score + a
  // bias that takes no gradient (layers.L.moe.router.score_bias (E), e_score_correction_bias:
  // frozen, as transformers' buffer); their weights are the scores (divided by their sum + 1e-20
  // where normalize_topk). False: the softmax router.
  bool sigmoid_router = false;
  // With experts of the SwiGLU form, either router: the top k chosen within the
  // `router_groups_chosen` of `router_groups` equal groups of experts that score largest (a
  // sigmoid router's group by its two best choice scores added up, DeepSeek-V3's; a softmax
  // router's by its best probability, DeepSeek-V2's group_limited_greedy), the weights times
  // `routed_scaling`.
  int64_t router_groups = 1, router_groups_chosen = 1;  // n_group, topk_group
  double routed_scaling = 1.0;                          // routed_scaling_factor
  // The shared expert's output added as it is (GLM-4.5's and DeepSeek's shared_experts), not
  // through Qwen2-MoE's sigmoid gate.
  bool shared_expert_gated = true;
  // llama: DeepSeek's multi-head latent attention (DeepseekV2/V3ForCausalLM; kv_lora_rank 0: none). q
  // comes from the hidden states through q_proj, or through a rank-`q_lora_rank` bottleneck (q_a,
  // its RMSNorm, q_b); each head's keys and values from one rank-`kv_lora_rank` latent (kv_a's
  // first rows, RMSNormed, through kv_b into each head's unrotated key part, `qk_nope_dim`, and its
  // value, `v_head_dim`) beside one rotated key part every head shares (kv_a's last `qk_rope_dim`
  // rows). Each head's q and k are a rotated part (its pairs interleaved, as DeepSeek's rope_interleave
  // turns them) and an unrotated one: head_dim is qk_nope_dim + qk_rope_dim (rotary_dim the
  // latter), kv_heads = heads, and the values are padded to head_dim for the attention kernels.
  int64_t kv_lora_rank = 0, q_lora_rank = 0, qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0;
  bool rope_interleave = true;
  // llama, not latent: each head's rotary pairs are its elements 2i and 2i + 1 (Ernie 4.5's, GLM-4's:
  // GLM's rotate_half), not i and i + d/2 (Llama's), in its rotated part (the first rotary_dim).
  bool rope_pairs_interleaved = false;
  // llama, with experts of the SwiGLU form and the softmax router: its top k chosen by probability +
  // a bias that takes no gradient (layers.L.moe.router.score_bias (E): Ernie 4.5's
  // moe_statics.e_score_correction_bias, frozen as transformers keeps it), weighed by the
  // probabilities alone. (The sigmoid router always has one.)
  bool router_choice_bias = false;
  // Whether the router chooses by its scores + a frozen bias (layers.L.moe.router.score_bias).
  bool routerScoreBias() const { return sigmoid_router || router_choice_bias; }
  bool latentAttention() const { return kv_lora_rank > 0; }
  bool rotates(int64_t l) const { return std::find(nope_layers.begin(), nope_layers.end(), l) == nope_layers.end(); }
  bool graniteForm() const {
    return embedding_multiplier != 1.0 || residual_multiplier != 1.0 || attention_multiplier != 0.0 ||
           logits_scaling != 1.0;
  }

  // Whether layer `l`'s attention slides, and over how many tokens (0: it sees all before it).
  int64_t attentionWindow(int64_t l) const {
    return sliding_window > 0 && std::find(sliding_layers.begin(), sliding_layers.end(), l) != sliding_layers.end()
               ? sliding_window
               : 0;
  }

  // Whether layer `l`'s MLP is a mixture of experts.
  bool isMoeLayer(int64_t l) const {
    return experts > 0 && moe_every > 0 && (l + 1) % moe_every == 0 &&
           std::find(dense_layers.begin(), dense_layers.end(), l) == dense_layers.end();
  }
  // How many layers are mixtures of experts.
  int64_t moeLayers() const {
    int64_t n = 0;
    for (int64_t l = 0; l < layers; ++l) n += isMoeLayer(l);
    return n;
  }

  int64_t headDim() const { return head_dim ? head_dim : width / heads; }
  // The elements of each head the rotary embedding turns (rotary_dim, else all).
  int64_t rotaryDim() const { return rotary_dim ? rotary_dim : headDim(); }
  // Whether any of Gemma's differences above is set.
  bool gemmaForm() const {
    return norm_plus_one || embed_scaled || gate_activation != GateActivation::kSilu || sandwich_norms ||
           rope_local_theta > 0 || query_pre_attn_scalar > 0 || attn_softcap != 0.0 || final_softcap != 0.0;
  }
  // Parameters of the model (exact).
  int64_t numParams() const;
  // Those one token's forward pass uses: all but the experts it is not routed to (= numParams()
  // for a dense model). Model FLOPs are 6 * active parameters * tokens.
  int64_t numActiveParams() const;
};

struct ModelPreset {
  std::string name;
  ModelConfig config;
  std::string description;
};

const std::vector<ModelPreset>& modelPresets();
// The preset `name`, or null.
const ModelPreset* findModelPreset(const std::string& name);

inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxWidth = int64_t{1} << 20;
inline constexpr int64_t kMaxContext = int64_t{1} << 24;
inline constexpr int64_t kMaxExperts = 4096;

// A parameter count as people say it: "120.6 K", "56.6 M", "7.616 B", "70.554 B".
std::string formatParamCount(int64_t count);

// Checks a config; returns "" or a message naming the problem.
std::string validateConfig(const ModelConfig& config, int64_t seq);
// Checks the tokens per step of a valid config's `seq`; returns "" or a message naming the problem.
std::string validateBatch(int64_t batch, int64_t seq);

}  // namespace mt
