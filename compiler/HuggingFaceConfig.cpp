#include "compiler/HuggingFaceConfig.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/HuggingFaceConfigReader.h"
#include "runtime/io/error.h"
#include "runtime/io/json_input.h"

namespace mt::hf {
namespace {

// The layers a config's `layer_types` (one entry per layer, each sliding_attention or full_attention)
// names sliding_attention; another entry or length refused by name.
std::vector<int64_t> slidingLayerTypes(ConfigReader& r, const json& types, int64_t layers) {
  if (!types.is_array() || static_cast<int64_t>(types.size()) != layers)
    throw r.error("'layer_types' is not a list of the " + std::to_string(layers) + " layers' attention");
  std::vector<int64_t> sliding;
  for (int64_t l = 0; l < layers; ++l) {
    if (types[l] != "sliding_attention" && types[l] != "full_attention")
      throw r.error("'layer_types' names " + jsonBrief(types[l]) + " for layer " + std::to_string(l) +
                    ": only sliding_attention and full_attention are supported");
    if (types[l] == "sliding_attention") sliding.push_back(l);
  }
  return sliding;
}

}  // namespace

// (Gemma 3's pattern: sliding_window_pattern, 6 unless given; transformers 4.50's form, 4.53 on
// write _sliding_window_pattern beside layer_types. Gemma 2's config has no pattern key, OLMo 3's
// neither: their config classes' rules.)
void readPatternSlidingWindows(ConfigReader& r, ModelConfig& c, int64_t pattern) {
  std::vector<int64_t> from_pattern;
  for (int64_t l = 0; l < c.layers; ++l)
    if ((l + 1) % pattern != 0) from_pattern.push_back(l);
  const json& types = r.value("layer_types");
  const std::vector<int64_t> sliding = types.is_null() ? from_pattern : slidingLayerTypes(r, types, c.layers);
  if (r.isNull("sliding_window") && !sliding.empty())
    throw r.error("layers slide but 'sliding_window' is null: how far they reach back is unknown");
  const int64_t window = r.integer("sliding_window", 4096);
  if (!sliding.empty()) c.sliding_window = window, c.sliding_layers = sliding;
}

void noteUnappliedDropout(ConfigReader& r, std::initializer_list<const char*> keys, double fallback,
                          std::vector<std::string>& notes) {
  std::string asked;
  for (const char* key : keys)
    if (const bool given = r.has(key); const double p = r.probability(key, fallback))
      asked += fmt::format("{}{} {:g}{}", asked.empty() ? "" : ", ", key, p, given ? "" : " by default");
  if (!asked.empty())
    notes.push_back("config.json asks for dropout (" + asked + "); mtc trains without dropout (not supported yet)");
}

}  // namespace mt::hf

namespace mt {
namespace {

using hf::ConfigReader;
using hf::json;
using hf::Architecture;

// The classifier transformers would name for `causal` ("OlmoeForCausalLM": OlmoeForSequenceClassification),
// for the refusal of an architecture that has none.
std::string missingClassifierName(const std::string& causal) {
  constexpr std::string_view kCausalSuffix = "ForCausalLM";
  const std::string family = causal.ends_with(kCausalSuffix) ? causal.substr(0, causal.size() - kCausalSuffix.size()) : causal;
  return family + "ForSequenceClassification";
}

// The one architecture a config names (a list of one string under "architectures"), or "".
template <typename Json>
std::string oneArchitecture(const Json& config) {
  const bool one = config.is_object() && config.contains("architectures") && config["architectures"].is_array() &&
                   config["architectures"].size() == 1 && config["architectures"][0].is_string();
  return one ? config["architectures"][0].template get<std::string>() : "";
}

// A mixture of experts' settings (Qwen3MoeForCausalLM, Qwen2MoeForCausalLM with its shared expert,
// MixtralForCausalLM, GptOssForCausalLM, OlmoeForCausalLM, GraniteMoeForCausalLM, Glm4MoeForCausalLM,
// DeepSeek's, Ernie 4.5's) into `c`.
void readExperts(ConfigReader& r, Architecture architecture, ModelConfig& c) {
  using enum Architecture;
  if (architecture == kGlm4Moe) return hf::readGlm4MoeExperts(r, c);
  if (architecture == kErnie45Moe) return hf::readErnie45MoeExperts(r, c);
  if (architecture == kDeepseekV3) return hf::readDeepseekV3Keys(r, c);
  if (architecture == kDeepseekV2) return hf::readDeepseekV2Keys(r, c);
  if (architecture == kOlmoe) {
    // Qwen3-MoE's keys, each expert as wide as intermediate_size in every layer.
    c.experts = r.integer("num_experts");
    c.expert_ffn = c.ffn;
    c.normalize_topk = r.boolean("norm_topk_prob", false);
  } else if (architecture == kGraniteMoe) {
    // Mixtral's experts as Granite writes them (every layer, as wide as intermediate_size): the
    // softmax over the top k logits (JetMoe's gating) is Mixtral's renormalised top k.
    c.experts = r.integer("num_local_experts");
    c.expert_ffn = c.ffn;
    c.normalize_topk = true;
  } else if (architecture == kMixtral) {
    c.experts = r.integer("num_local_experts");
    c.expert_ffn = c.ffn;  // each expert is as wide as intermediate_size; no dense layers
    c.normalize_topk = true;
    if (const json& noise = r.value("router_jitter_noise"); !noise.is_null() && !(noise.is_number() && noise == 0))
      throw r.error("'router_jitter_noise' is not 0: random noise on the router's logits is not supported");
  } else if (architecture == kQwen3Moe || architecture == kQwen2Moe) {
    c.experts = r.integer("num_experts");
    if (architecture == kQwen2Moe) c.shared_expert_ffn = r.integer("shared_expert_intermediate_size");
    c.expert_ffn = r.integer("moe_intermediate_size");
    c.normalize_topk = r.boolean("norm_topk_prob", false);
    c.moe_every = r.integer("decoder_sparse_step", 1);
    if (const json& dense = r.value("mlp_only_layers"); !dense.is_null()) {
      if (!dense.is_array()) throw r.error("'mlp_only_layers' is not a list of layer indices");
      for (const json& l : dense) {
        if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= c.layers)
          throw r.error("'mlp_only_layers' holds " + jsonBrief(l) + ", not a layer index below " +
                        std::to_string(c.layers));
        c.dense_layers.push_back(l.get<int64_t>());
      }
    }
  } else if (architecture == kGptOss) {
    // Experts as wide as intermediate_size in every layer, written in gpt-oss's form; sinks in
    // every attention.
    c.experts = r.integer("num_local_experts");
    c.expert_ffn = c.ffn;
    c.normalize_topk = false;
    c.expert_form = ModelConfig::ExpertForm::kGptOss;
    c.swiglu_limit = r.number("swiglu_limit", 7.0);
    c.attention_sinks = true;
    // experts_per_token: the original checkpoint's name for num_experts_per_tok, which
    // transformers' config keeps too; where both are given they agree.
    const std::optional<int64_t> original =
        r.has("experts_per_token") ? std::optional<int64_t>(r.integer("experts_per_token")) : std::nullopt;
    r.take("experts_per_token");
    c.experts_per_token = r.integer("num_experts_per_tok", original);
    if (original && *original != c.experts_per_token)
      throw r.error("'experts_per_token' and 'num_experts_per_tok' differ: the config contradicts itself");
    // The context the YaRN scaling starts from, which rope_scaling names too: bookkeeping here.
    r.take("initial_context_length");
  } else {
    return;
  }
  if (c.expert_form != ModelConfig::ExpertForm::kGptOss) c.experts_per_token = r.integer("num_experts_per_tok");
  // Hugging Face adds the router's load-balancing loss (times its coefficient: by default gpt-oss's
  // 0.9, OLMoE's 0.01, the others' 0.001) only where output_router_logits is true; the loss is
  // logged either way.
  const double coef =
      r.fraction("router_aux_loss_coef", architecture == kGptOss ? 0.9 : architecture == kOlmoe ? 0.01 : 0.001);
  if (r.boolean("output_router_logits", false)) c.router_aux_loss_coef = coef;
}

// Exaone 4's attention per layer (Exaone4ForCausalLM): layer_types, else Exaone4Config's rule (all
// but every sliding_window_pattern-th layer slide, 4 where absent), over sliding_window (4096 where
// absent); where a window is given, its full-attention layers turn no rotary embedding (its "global
// NoPE": Exaone4Attention turns it only where sliding_window is null or the layer slides). Where the
// config class cannot derive the layers (a null window, a pattern of letters) transformers fails:
// refused, asking for layer_types.
void readExaone4Windows(ConfigReader& r, ModelConfig& c) {
  const bool windowed = !r.isNull("sliding_window");
  const json& types = r.value("layer_types");
  std::vector<int64_t> sliding;
  if (!types.is_null()) {
    sliding = hf::slidingLayerTypes(r, types, c.layers);
    r.take("sliding_window_pattern");  // (transformers reads layer_types alone)
  } else {
    const json& pattern = r.value("sliding_window_pattern");
    if (!windowed || r.isNull("sliding_window_pattern") || (!pattern.is_null() && !pattern.is_number_integer()))
      throw r.error(fmt::format("no 'layer_types' beside {}: Exaone4Config cannot derive which layers slide from it "
                                "(transformers fails); name each layer's attention in 'layer_types'",
                                windowed ? "'sliding_window_pattern' " + jsonBrief(pattern)
                                         : std::string("a null 'sliding_window'")));
    const int64_t every = r.integer("sliding_window_pattern", 4);
    for (int64_t l = 0; l < c.layers; ++l)
      if ((l + 1) % every != 0) sliding.push_back(l);
  }
  if (!windowed) {
    if (!sliding.empty())
      throw r.error("layers slide but 'sliding_window' is null: how far they reach back is unknown");
    return r.take("sliding_window");
  }
  const int64_t window = r.integer("sliding_window", 4096);
  if (!sliding.empty()) c.sliding_window = window, c.sliding_layers = sliding;
  for (int64_t l = 0, s = 0; l < c.layers; ++l)
    if (s < static_cast<int64_t>(sliding.size()) && sliding[s] == l)
      ++s;
    else
      c.nope_layers.push_back(l);
}

// Sliding-window attention: which layers slide (a layer_types list where the config has one, else
// the architecture's rule as transformers' configs derive it) and over how many tokens.
void readSlidingWindows(ConfigReader& r, Architecture architecture, ModelConfig& c) {
  using enum Architecture;
  // (SmolLM3 as Qwen: its use_sliding_window false, readSmolLM3Keys, its other keys read alike.)
  const bool qwen = architecture == kQwen2 || architecture == kQwen3 || architecture == kQwen3Moe ||
                    architecture == kQwen2Moe || architecture == kSmolLM3;
  // Phi-3 slides in every layer where it names a window (Phi-3-mini's 2,047 tokens), as Mistral.
  const bool mistral = architecture == kMistral || architecture == kMixtral || architecture == kPhi3;
  const bool oss = architecture == kGptOss;
  if (architecture == kOlmo3) return hf::readPatternSlidingWindows(r, c, 4);  // Olmo3Config's: every 4th is full
  if (architecture == kExaone4) return readExaone4Windows(r, c);
  if (!qwen && !mistral && !oss) return;
  // Qwen names a window it uses only with use_sliding_window, from layer max_window_layers on
  // (both keys read only then: an unused one may hold anything, as transformers ignores it).
  const bool used = !qwen || r.boolean("use_sliding_window", false);
  r.take("sliding_window");
  r.take("max_window_layers");
  const int64_t window = used && r.has("sliding_window") ? r.integer("sliding_window") : 0;
  const int64_t first_sliding = qwen && used ? r.integer("max_window_layers", c.layers) : 0;
  const json& types = r.value("layer_types");
  std::vector<int64_t> sliding;
  if (!types.is_null()) {
    sliding = hf::slidingLayerTypes(r, types, c.layers);
  } else if (window > 0) {
    // gpt-oss alternates from a sliding layer 0; Mistral slides everywhere; Qwen from max_window_layers.
    for (int64_t l = oss ? 0 : first_sliding; l < c.layers; l += oss ? 2 : 1) sliding.push_back(l);
  }
  if (!used) {
    if (!types.is_null() && !sliding.empty())
      throw r.error("'layer_types' names sliding layers but 'use_sliding_window' is false: the config contradicts "
                    "itself");
    return;
  }
  // Qwen2-MoE's sliding layers without layer_types: transformers 4 slid from max_window_layers on
  // (as Qwen2), 5 slides the even layers below it; no published model uses them.
  if (architecture == kQwen2Moe && types.is_null() && window > 0)
    throw r.error("'use_sliding_window' is true without 'layer_types': which of Qwen2-MoE's layers slide differs "
                  "between transformers 4 and 5; name each layer's attention in 'layer_types'");
  if (!sliding.empty() && window == 0)
    throw r.error("layers slide but 'sliding_window' is not given: how far they reach back is unknown");
  if (window > 0) c.sliding_window = window, c.sliding_layers = sliding;
}

// Phi-3's keys beside the llama family's (Phi3ForCausalLM: Phi-3 and Phi-4). Its projections have no
// biases; its dropout must be off, as in the published models; the custom code that auto_map names
// for transformers before 4.40 is the architecture transformers has built in since (the
// architecture decides). Its rotary keys: readRotary, settleLongRope.
void readPhi3Keys(ConfigReader& r) {
  r.require("attention_bias", false, "Phi-3's projections have no biases in transformers");
  r.require("resid_pdrop", 0.0, "dropout is not supported; training is deterministic");
  r.require("embd_pdrop", 0.0, "dropout is not supported; training is deterministic");
  r.take("auto_map");
}

// SmolLM3's keys beside the llama family's: the layers without the rotary embedding (its NoPE
// layers: no_rope_layers' zeros, else every no_rope_layer_interval-th, as SmolLM3Config derives
// them); pretraining_tp inert (transformers' SmolLM3 never slices by it); sliding windows, which it
// would put on its NoPE layers, refused unless off (no published SmolLM3 uses them).
void readSmolLM3Keys(ConfigReader& r, ModelConfig& c) {
  r.take("pretraining_tp");
  if (r.boolean("use_sliding_window", false))
    throw r.error("'use_sliding_window' is true: SmolLM3's sliding windows (on its NoPE layers) are not supported");
  const json& flags = r.value("no_rope_layers");
  const int64_t interval = r.integer("no_rope_layer_interval", 4);
  if (flags.is_null()) {
    for (int64_t l = interval - 1; l < c.layers; l += interval) c.nope_layers.push_back(l);
    return;
  }
  if (!flags.is_array() || static_cast<int64_t>(flags.size()) < c.layers)
    throw r.error("'no_rope_layers' is not a list of a 1 (the rotary embedding) or a 0 (none) for each of the " +
                  std::to_string(c.layers) + " layers");
  for (int64_t l = 0; l < c.layers; ++l) {
    if (flags[l] != 0 && flags[l] != 1)
      throw r.error("'no_rope_layers' holds " + jsonBrief(flags[l]) + " for layer " + std::to_string(l) +
                    ": 1 (the rotary embedding) or 0 (none)");
    if (flags[l] == 0) c.nope_layers.push_back(l);
  }
}

// Seed-OSS's keys beside the llama family's (SeedOssForCausalLM: Seed-OSS-36B): biases on q, k and v
// (attention_bias, true where absent) and on the output projection apart (attention_out_bias, false
// where absent); its dropout on the attention's probabilities and on each sublayer's output
// (attention_dropout, residual_dropout: 0.1 where absent, SeedOssConfig's) said in `notes` as not
// applied, as GPT-2's and Granite's.
void readSeedOssKeys(ConfigReader& r, ModelConfig& c, std::vector<std::string>& notes) {
  c.qkv_bias = r.boolean("attention_bias", true);
  c.o_bias = r.boolean("attention_out_bias", false);
  hf::noteUnappliedDropout(r, {"attention_dropout", "residual_dropout"}, 0.1, notes);
}

// Ernie 4.5's keys beside the llama family's (Ernie4_5ForCausalLM: ERNIE-4.5-0.3B): each head's
// rotary pairs interleaved, as its apply_rotary_pos_emb turns them (GLM's rotate_half: elements 2i
// and 2i + 1 by frequency i); use_bias, its one key for biases on every projection and MLP layer,
// false as in the published models (true refused), and no attention_bias, which its config class
// does not read.
void readErnie45Keys(ConfigReader& r, ModelConfig& c) {
  c.rope_pairs_interleaved = true;
  r.require("use_bias", false, "biases on Ernie 4.5's projections and MLP are not supported; the published models "
                               "have none");
  r.require("attention_bias", false, "Ernie 4.5's biases are use_bias's");
}

// Where the norms go beside Llama's two pre-norms: q and k normed (per head or over the whole
// projections), each sublayer's output normed, its input not.
void readNorms(ConfigReader& r, Architecture architecture, ModelConfig& c) {
  using enum Architecture;
  const bool olmo2 = architecture == kOlmo2 || architecture == kOlmo3;  // OLMo 2's layers (OLMo 3: with windows)
  const bool olmoe = architecture == kOlmoe, exaone4 = architecture == kExaone4;
  c.qk_norm = architecture == kQwen3 || architecture == kQwen3Moe || olmo2 || olmoe || exaone4 ||
              (architecture == kGlm4Moe && r.boolean("use_qk_norm", false));  // GLM-4.5's per head, as Qwen3's
  // OLMo 2: q and k normed over their whole projections, each sublayer's output normed before its
  // residual add, its input not (Olmo2DecoderLayer). OLMoE: the same q and k norms in Llama's
  // pre-norm layers (OlmoeAttention), and no clamp of q, k and v. Exaone 4: OLMo 2's norms around
  // the sublayers (Exaone4DecoderLayer), its q and k normed per head, as Qwen3's.
  c.qk_norm_whole = olmo2 || olmoe;
  if (olmo2 || exaone4) c.sandwich_norms = true, c.input_norms = false;
  // GLM-4 (Glm4DecoderLayer): a norm before and after each sublayer (post_self_attn_layernorm,
  // post_attention_layernorm before the MLP, post_mlp_layernorm), each head's rotated part turned in
  // interleaved pairs (its rotate_half: elements 2i and 2i + 1 by frequency i).
  if (architecture == kGlm4) c.sandwich_norms = c.rope_pairs_interleaved = true;
  if (olmoe)
    r.require("clip_qkv", nullptr, "clamping q, k and v (OLMoE's clip_qkv) is not supported; the published OLMoE "
                                   "models have none (null)");
}

// The projections' biases as each architecture's keys give them, and the keys Phi-3, Ernie 4.5 and
// Seed-OSS read beside them (readPhi3Keys, readErnie45Keys, readSeedOssKeys). No MLP has biases.
void readBiases(ConfigReader& r, Architecture architecture, ModelConfig& c, std::vector<std::string>& notes) {
  using enum Architecture;
  // Llama's and Qwen3's attention_bias: biases on q, k, v and the output projection. Qwen2 has the
  // first three whatever its config says (transformers' Qwen2Attention); Qwen2-MoE where its
  // qkv_bias says (transformers 5's key; 4 always had them); neither on the output projection.
  if (architecture == kQwen2 || architecture == kQwen2Moe) {
    c.qkv_bias = architecture == kQwen2 || r.boolean("qkv_bias", true);
    r.require("attention_bias", false, "Qwen2's output projection has no bias in transformers");
  } else if (architecture == kGlm4Moe || architecture == kGlm4) {
    // GLM's q, k and v alone (its o_proj has none); GLM-4's by default, not GLM-4.5's
    c.qkv_bias = r.boolean("attention_bias", architecture == kGlm4);
  } else if (architecture == kDeepseekV3 || architecture == kDeepseekV2) {
    r.require("attention_bias", false, "biases on DeepSeek's latent attention are not supported (no published model "
                                       "has them)");
  } else if (architecture == kPhi3) {
    readPhi3Keys(r);
  } else if (architecture == kErnie45 || architecture == kErnie45Moe) {
    readErnie45Keys(r, c);
  } else if (architecture == kSeedOss) {
    readSeedOssKeys(r, c, notes);
  } else if (architecture == kExaone4) {
    r.require("attention_bias", false, "Exaone 4's projections have no biases in transformers");
  } else if (r.boolean("attention_bias", false)) {
    c.qkv_bias = c.o_bias = true;
  }
  r.require("mlp_bias", false, "MLP biases have no place in the llama family");
}

// What a llama-family config class (transformers' ...Config, 4.57 and 5 alike) sets where
// config.json leaves a key out; LlamaConfig's where nothing else is listed.
struct ClassDefaults {
  double norm_eps = 1e-6;           // rms_norm_eps
  bool tied = false;                // tie_word_embeddings
  int64_t padding_id = -1;          // pad_token_id (-1: none)
  std::optional<int64_t> head_dim;  // (none: hidden_size / num_attention_heads)
};
ClassDefaults classDefaults(Architecture architecture) {
  using enum Architecture;
  switch (architecture) {
    case kQwen3: return {.head_dim = 128};
    case kMixtral: return {.norm_eps = 1e-5};
    case kGptOss: return {.norm_eps = 1e-5, .head_dim = 64};
    case kPhi3: return {.norm_eps = 1e-5, .padding_id = 32000};
    case kSmolLM3: return {.tied = true, .padding_id = 128004};
    case kOlmo2: case kOlmo3: case kOlmoe: return {.norm_eps = 1e-5, .padding_id = 1};
    case kGlm4Moe: case kExaone4: return {.norm_eps = 1e-5};
    case kGlm4: return {.norm_eps = 1.5625e-7, .padding_id = 151329, .head_dim = 128};
    case kErnie45: return {.norm_eps = 1e-5, .tied = true, .padding_id = 0, .head_dim = 128};
    case kErnie45Moe: return {.norm_eps = 1e-5, .tied = true, .padding_id = 0};  // (head_dim: hidden / heads)
    case kSeedOss: return {.padding_id = 1, .head_dim = 128};
    default: return {};
  }
}

ModelConfig readConfig(ConfigReader& r, Architecture architecture, WeightQuantization* quantization,
                       std::vector<std::string>& notes) {
  using enum Architecture;
  ModelConfig c;
  c.family = ModelFamily::kLlama;
  c.width = r.integer("hidden_size");
  // (Granite 4.0's MLP: readGraniteHybridKeys.)
  c.ffn = architecture == kGraniteHybrid ? 0 : r.integer("intermediate_size");
  c.layers = r.layerCount("num_hidden_layers");
  c.heads = r.integer("num_attention_heads");
  c.kv_heads = r.integer("num_key_value_heads", c.heads);
  c.vocab = r.integer("vocab_size");
  c.context = r.integer("max_position_embeddings");
  const ClassDefaults defaults = classDefaults(architecture);
  c.norm_eps = r.number("rms_norm_eps", defaults.norm_eps);
  c.tied = r.boolean("tie_word_embeddings", defaults.tied);
  c.padding_id = r.paddingId(c.vocab, defaults.padding_id);
  readNorms(r, architecture, c);
  // Heads of their own width (Qwen3's 128, Llama's head_dim): q and the output projection are
  // heads x head_dim wide, not hidden_size.
  c.head_dim = r.headDim(c.width, c.heads, defaults.head_dim);
  if (r.text("hidden_act", "silu") != "silu")
    throw r.error("'hidden_act' is not silu: the llama family's MLP is SwiGLU");
  if (architecture == kOlmo3)
    hf::readOlmo3Rotary(r, c);
  else
    hf::readRotary(r, architecture, c);
  hf::settleLongRope(r, architecture, c);
  readBiases(r, architecture, c, notes);
  if (architecture == kGranite || architecture == kGraniteMoe || architecture == kGraniteHybrid)
    hf::readGraniteKeys(r, c, notes);
  else if (architecture != kSeedOss)  // (Seed-OSS's: readSeedOssKeys)
    r.require("attention_dropout", 0.0, "dropout is not supported; training is deterministic");
  if (architecture == kSmolLM3)
    readSmolLM3Keys(r, c);
  else
    r.require("pretraining_tp", 1, "tensor-parallel slicing of the projections is not supported");
  if (architecture == kGraniteHybrid) hf::readGraniteHybridKeys(r, c);
  readExperts(r, architecture, c);
  *quantization = readQuantization(r, architecture, notes);
  readSlidingWindows(r, architecture, c);
  return c;
}

// A ...ForSequenceClassification's labels: one, a reward model's score, as transformers saves
// num_labels 1 (id2label {"0": "LABEL_0"} and label2id its inverse; a config with neither has two).
void readScoreLabels(ConfigReader& r) {
  const json& ids = r.value("id2label");
  const json& names = r.value("label2id");
  r.take("problem_type");  // the loss transformers' own Trainer would pick; mtc trains TRL's pairwise one
  for (const auto& [key, labels] : {std::pair{"id2label", &ids}, {"label2id", &names}})
    if (!labels->is_null() && !labels->is_object()) throw r.error(std::string("'") + key + "' is not an object");
  // Each way the config counts its labels (transformers' default two where it names none).
  const int64_t num_labels = r.has("num_labels") ? r.integer("num_labels") : ids.is_null() ? 2 : 1;
  r.take("num_labels");
  for (const auto& [key, count] : {std::pair{"num_labels", num_labels},
                                   {"id2label", ids.is_null() ? int64_t{1} : static_cast<int64_t>(ids.size())},
                                   {"label2id", names.is_null() ? int64_t{1} : static_cast<int64_t>(names.size())}})
    if (count != 1)
      throw r.error(fmt::format("the classifier has {} labels ({}{}): mtc trains reward models, one score per "
                                "sequence (num_labels 1: id2label {{\"0\": \"LABEL_0\"}})",
                                count, key, r.has(key) ? "" : ", transformers' default"));
}

// GPT2LMHeadModel's config.json into the gpt2 family's (pre-norm LayerNorm blocks, learned
// positions, GELU's tanh form, biases everywhere). Its dropout is not applied: `notes` says so.
ModelConfig readGpt2Config(ConfigReader& r, std::vector<std::string>& notes) {
  ModelConfig c;
  c.family = ModelFamily::kGpt2;
  c.width = r.integer("n_embd");
  c.layers = r.layerCount("n_layer");
  c.heads = c.kv_heads = r.integer("n_head");
  c.vocab = r.integer("vocab_size");
  c.context = r.integer("n_positions");
  if (r.has("n_ctx") && r.integer("n_ctx") != c.context) throw r.error("'n_ctx' is not 'n_positions'");
  r.take("n_ctx");
  c.ffn = r.integer("n_inner", 4 * c.width);
  c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
  c.tied = r.boolean("tie_word_embeddings", true);
  // GPT2Model's embedding has no padding_idx: its pad_token_id (inert) leaves every row trained.
  c.qkv_bias = false;  // a llama option: the gpt2 family always has its biases
  const std::string act = r.text("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    throw r.error("'activation_function' is " + act + ": the gpt2 family's MLP uses GELU's tanh form (gelu_new)");
  r.require("scale_attn_weights", true, "attention without the 1/sqrt(head size) scale is not supported");
  r.require("scale_attn_by_inverse_layer_idx", false, "attention scaled by the layer index is not supported");
  r.require("add_cross_attention", false, "cross-attention (an encoder-decoder) is not supported");
  r.take("reorder_and_upcast_attn");  // an fp16 safeguard: the scores are f32 here anyway
  // GPT2DoubleHeadsModel's multiple-choice head and generation settings: not this model's arithmetic.
  for (const char* key : {"summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
                          "summary_first_dropout", "task_specific_params", "n_special"})
    r.take(key);
  hf::noteUnappliedDropout(r, {"embd_pdrop", "attn_pdrop", "resid_pdrop"}, 0.1, notes);  // (GPT2Config's 0.1)
  return c;
}

}  // namespace

HuggingFaceConfig readHuggingFaceConfig(const std::string& config_json, const std::string& path) {
  HuggingFaceConfig out;
  const json config = parseJsonInput(config_json, "Hugging Face config " + path);
  if (!config.is_object()) throw Error(path + " is not a JSON object");
  ConfigReader r(config, path);
  out.architecture = oneArchitecture(config);
  if (out.architecture.empty()) throw r.error("'architectures' does not name one architecture");
  if (out.architecture == "Gemma3ForSequenceClassification")
    throw r.error("Gemma3ForSequenceClassification is the multimodal Gemma 3's classifier, which mtc does not read "
                  "(Gemma3TextForSequenceClassification, the text model's, is read)");
  // Gemma 3 4B-27B, Mistral Small 3.x: the language model beside the vision tower.
  if (const hf::MultimodalArchitecture* multimodal = hf::findMultimodal(out.architecture)) {
    const std::string language_model = hf::languageModelConfig(*multimodal, config, path);
    HuggingFaceConfig language = readHuggingFaceConfig(language_model, path + " 'text_config'");
    language.config_to_keep = language_model;
    language.multimodal = multimodal->name;
    language.notes.push_back(
        "a " + language.multimodal + " folder: its language model is read and trained (as " + language.architecture +
        "); the vision tower and projector are not read, --export-hf writes the language model alone, and "
        "--export-peft and --lora-from name its adapters as PEFT on the multimodal model does (model.language_model.)");
    return language;
  }
  // A reward model's folder is its causal LM's body under another head: read as that LM.
  const std::string causal = causalArchitecture(out.architecture);
  const hf::ArchitectureName* known = hf::findArchitecture(causal);
  if (!known) {
    std::string supported, no_classifier;
    for (const hf::ArchitectureName& a : hf::kArchitectureNames) {
      supported += (supported.empty() ? "" : ", ") + std::string(a.causal);
      if (!a.classifier) no_classifier += std::string(no_classifier.empty() ? "" : " and ") + a.causal;
    }
    throw r.error("architecture " + out.architecture + " is not supported (supported: " + supported +
                  "; each but " + no_classifier + ", whose modeling code in transformers has none, as its "
                  "...ForSequenceClassification too, a reward model)");
  }
  hf::requireModelType(r, config, out.architecture, known->model_type);
  switch (known->id) {
    case Architecture::kGpt2: out.config = readGpt2Config(r, out.notes); break;
    case Architecture::kGemma3: out.config = hf::readGemma3Config(r); break;
    case Architecture::kGemma2: out.config = hf::readGemma2Config(r); break;
    case Architecture::kGemma:
      out.config = hf::readGemmaConfig(r, out.notes);
      out.config_to_keep = hf::gemmaConfigToKeep(config_json);
      break;
    default: out.config = readConfig(r, known->id, &out.quantization, out.notes); break;
  }
  // Before anything is placed per expert: a hostile count would take all memory (the layers are
  // bounded as they are read, ConfigReader::layerCount).
  if (out.config.experts > kMaxExperts)
    throw r.error(fmt::format("{} experts: at most {} are supported", out.config.experts, kMaxExperts));
  const bool ernie_moe = known->id == Architecture::kErnie45Moe;
  const bool prediction_layers =
      known->id == Architecture::kGlm4Moe || known->id == Architecture::kDeepseekV3 || ernie_moe;
  if (prediction_layers && (out.prediction_layers = hf::readPredictionLayers(r)) > 0) {
    out.config_to_keep = hf::configWithoutPredictionLayers(config_json);
    out.notes.push_back(ernie_moe ? "the checkpoint's multi-token prediction weights (model.mtp_*) are not read, as "
                                    "transformers reads none; --export-hf writes none (num_nextn_predict_layers 0)"
                                  : fmt::format(
        "the checkpoint's {} multi-token prediction layer{} (model.layers.{}{}) {} not read, as transformers reads "
        "none; --export-hf writes none (num_nextn_predict_layers 0)",
        out.prediction_layers, out.prediction_layers == 1 ? "" : "s", out.config.layers,
        out.prediction_layers == 1 ? "" : fmt::format("-{}", out.config.layers + out.prediction_layers - 1),
        out.prediction_layers == 1 ? "is" : "are"));
  }
  if (causal != out.architecture) {
    readScoreLabels(r);
    out.config.score_head = ModelConfig::ScoreHead::kPretrained;
  }
  r.finish();
  return out;
}

std::string causalArchitecture(const std::string& architecture) {
  const hf::ArchitectureName* known = hf::findClassifier(architecture);
  return known ? known->causal : architecture;
}

std::string sequenceClassifierConfig(const std::string& config_json) {
  nlohmann::ordered_json config = parseOrderedJsonInput(config_json, "the model's Hugging Face config");
  const std::string architecture = oneArchitecture(config);
  if (hf::findClassifier(architecture)) return config_json;
  const hf::ArchitectureName* known = hf::findArchitecture(architecture);
  if (!known)
    throw Error("the Hugging Face architecture '" + architecture + "' has no ...ForSequenceClassification form");
  // (OLMo 2's and OLMoE's modeling code in transformers has none: a folder written so would load nowhere.)
  if (!known->classifier)
    throw Error("transformers has no " + missingClassifierName(architecture) + ": a reward model (--objective reward) "
                "of " + architecture + " would have no Hugging Face form to load or export; train it as a causal LM");
  config["architectures"] = {known->classifier};
  config["id2label"] = {{"0", "LABEL_0"}};
  config["label2id"] = {{"LABEL_0", 0}};
  return config.dump(2) + "\n";
}

}  // namespace mt
