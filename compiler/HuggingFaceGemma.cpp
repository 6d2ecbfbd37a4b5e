#include <fmt/format.h>

#include "compiler/HuggingFaceConfigReader.h"

// Gemma's configs: Gemma3ForCausalLM's (the text models, 270M and 1B, and the language model of
// Gemma3ForConditionalGeneration's 4B-27B: compiler/HuggingFaceMultimodal.cpp), Gemma2ForCausalLM's (2B-27B) and
// GemmaForCausalLM's (Gemma 1, 2B and 7B, and CodeGemma).
namespace mt::hf {
namespace {

// hidden_act's legacy value in Gemma 1's configs (readGemmaActivation).
constexpr char kGemmaLegacyActivation[] = "gelu";

// A softcap (Gemma 2's; Gemma 3's config has the keys too): `fallback` where the key is absent,
// none where it is null (transformers caps only where the key is not None), else a positive number.
double gemmaSoftcap(ConfigReader& r, const char* key, double fallback) {
  if (r.isNull(key)) {
    r.take(key);
    return 0.0;
  }
  return r.number(key, fallback);
}

// The scores' scale query_pre_attn_scalar^-1/2 (256 where absent, both config classes' default); a
// null one, with which transformers fails, refused.
double queryPreAttnScalar(ConfigReader& r) {
  if (r.isNull("query_pre_attn_scalar")) throw r.error("'query_pre_attn_scalar' is null: the scores' scale is unknown");
  return r.number("query_pre_attn_scalar", 256.0);
}

// Gemma 3's two rotary embeddings: the full-attention layers' (rope_theta, 1e6 unless given, and
// rope_scaling) and the sliding layers' (rope_local_base_freq, 10,000 unless given, unscaled), as
// transformers 4 writes them, or transformers 5's rope_parameters keyed by layer type, each
// entry's rope_theta where it has one, else the top-level key's (as transformers 5 reads them;
// where both are given they agree).
void readGemma3Rotary(ConfigReader& r, ModelConfig& c) {
  const double theta = r.number("rope_theta", 0.0), local_theta = r.number("rope_local_base_freq", 0.0);  // 0: not given
  if (!r.has("rope_parameters")) {
    r.take("rope_parameters");  // absent or null
    c.rope_theta = theta > 0 ? theta : 1e6;
    c.rope_local_theta = local_theta > 0 ? local_theta : 10000.0;
    if (r.has("rope_scaling")) {
      if (!r.value("rope_scaling").is_object()) throw r.error("'rope_scaling' is not an object");
      ConfigReader s = r.nested("rope_scaling");
      readRopeScaling(s, c);
      s.finish();
    }
    return r.take("rope_scaling");
  }
  ConfigReader p = rotaryParameters(r);
  readRotaryPerLayerType(p, c, {theta, "rope_theta", 1e6}, {local_theta, "rope_local_base_freq", 10000.0}, "Gemma 3");
  p.finish();
}

// Gemma 3's sliding_window_pattern, or transformers 4.53's _sliding_window_pattern (the two agree
// where both are given); 6 where neither is.
int64_t gemma3WindowPattern(ConfigReader& r) {
  std::optional<int64_t> pattern;
  for (const char* key : {"sliding_window_pattern", "_sliding_window_pattern"}) {
    if (r.has(key)) {
      const int64_t p = r.integer(key);
      if (pattern && *pattern != p) throw r.error("'sliding_window_pattern' and '_sliding_window_pattern' differ");
      pattern = p;
    }
    r.take(key);
  }
  return pattern.value_or(6);
}

// The config class's defaults where the Gemmas' differ, and the model's name for messages.
struct GemmaDefaults {
  const char* name;  // for messages
  int64_t width, ffn, layers, heads, kv_heads, vocab, context;
};
constexpr GemmaDefaults kGemma1Defaults{.name = "Gemma", .width = 3072, .ffn = 24576, .layers = 28, .heads = 16,
                                        .kv_heads = 16, .vocab = 256000, .context = 8192};
constexpr GemmaDefaults kGemma2Defaults{.name = "Gemma 2", .width = 2304, .ffn = 9216, .layers = 26, .heads = 8,
                                        .kv_heads = 4, .vocab = 256000, .context = 8192};
constexpr GemmaDefaults kGemma3Defaults{.name = "Gemma 3", .width = 2304, .ffn = 9216, .layers = 26, .heads = 8,
                                        .kv_heads = 4, .vocab = 262208, .context = 131072};

// What every Gemma's config gives alike, each with its config class's defaults: the shape, norms of
// 1 + weight, the embedding times sqrt(width), GeGLU (GELU's tanh form), the biases, dropout (off),
// bidirectional attention (refused: EmbeddingGemma's; transformers 5's configs have the key, null
// where unset).
ModelConfig readGemmaBody(ConfigReader& r, const GemmaDefaults& d) {
  ModelConfig c;
  c.family = ModelFamily::kLlama;
  c.width = r.integer("hidden_size", d.width);
  c.ffn = r.integer("intermediate_size", d.ffn);
  c.layers = r.layerCount("num_hidden_layers", d.layers);
  c.heads = r.integer("num_attention_heads", d.heads);
  c.kv_heads = r.integer("num_key_value_heads", d.kv_heads);
  c.vocab = r.integer("vocab_size", d.vocab);
  c.context = r.integer("max_position_embeddings", d.context);
  c.norm_eps = r.number("rms_norm_eps", 1e-6);
  c.tied = r.boolean("tie_word_embeddings", true);
  c.padding_id = r.paddingId(c.vocab, 0);  // every config class's default
  c.head_dim = r.headDim(c.width, c.heads, 256);
  c.norm_plus_one = c.embed_scaled = true;
  c.gate_activation = ModelConfig::GateActivation::kGeluTanh;
  if (r.boolean("attention_bias", false)) c.qkv_bias = c.o_bias = true;
  r.require("attention_dropout", 0.0, "dropout is not supported; training is deterministic");
  r.require("use_bidirectional_attention", false, "bidirectional attention is not supported (EmbeddingGemma's)");
  return c;
}

// Gemma 2's and 3's body: Gemma's (readGemmaBody) with norms after each sublayer too, the scores
// scaled by query_pre_attn_scalar, the MLP's activation in hidden_activation (which their config
// classes read), and softcaps (none where null; `attn_softcap` and `final_softcap` where absent).
ModelConfig readSandwichedGemma(ConfigReader& r, const GemmaDefaults& d, double attn_softcap, double final_softcap) {
  ModelConfig c = readGemmaBody(r, d);
  c.sandwich_norms = true;
  c.query_pre_attn_scalar = queryPreAttnScalar(r);
  if (r.text("hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh")
    throw r.error(std::string("'hidden_activation' is not gelu_pytorch_tanh: ") + d.name +
                  "'s MLP is GeGLU with GELU's tanh form");
  c.attn_softcap = gemmaSoftcap(r, "attn_logit_softcapping", attn_softcap);
  c.final_softcap = gemmaSoftcap(r, "final_logit_softcapping", final_softcap);
  r.take("cache_implementation");  // the cache generate() builds ("hybrid"), not the model's arithmetic
  return c;
}

// Gemma 1's and 2's one rotary embedding (readRotary). LongRoPE's original context is settled per
// architecture (Phi-3's alone): theirs is refused.
void readGemmaRotary(ConfigReader& r, Architecture architecture, const GemmaDefaults& d, ModelConfig& c) {
  readRotary(r, architecture, c);
  if (c.rope_scaling.kind == RopeScaling::Kind::kLongRope)
    throw r.error(std::string("longrope rotary scaling is Phi-3's: ") + d.name + "'s rotary embedding is not scaled so");
}

// Gemma 1's activation, GELU's tanh form, which its weights were trained with. Google's configs
// name it "gelu" in hidden_act, a legacy name: transformers 4.39-4.47 read hidden_activation alone
// (the tanh form where null), 4.48 and later hidden_act alone (exact GELU for "gelu"). Either key
// naming another activation is refused; the legacy name is said in a note (gemmaConfigToKeep
// renames it in the config the plan keeps).
void readGemmaActivation(ConfigReader& r, std::vector<std::string>& notes) {
  const std::string activation = r.text("hidden_activation", "gelu_pytorch_tanh");
  if (activation != "gelu_pytorch_tanh")
    throw r.error("'hidden_activation' is \"" + activation + "\": Gemma's MLP is GeGLU with GELU's tanh form "
                  "(gelu_pytorch_tanh)");
  const std::string act = r.text("hidden_act", "gelu_pytorch_tanh");
  if (act == kGemmaLegacyActivation)
    notes.push_back("config.json's hidden_act \"gelu\" is Gemma's legacy name for GELU's tanh form, which its "
                    "weights were trained with and transformers 4.39-4.47 compute (4.48 and later compute exact GELU "
                    "for it): mtc computes the tanh form, and the config the plan keeps (--export-hf writes it) "
                    "names it gelu_pytorch_tanh");
  else if (act != "gelu_pytorch_tanh")
    throw r.error("'hidden_act' is \"" + act + "\": Gemma's MLP is GeGLU with GELU's tanh form (gelu_pytorch_tanh, "
                  "or Google's legacy \"gelu\")");
}

}  // namespace

// Gemma3ForCausalLM's config.json (model_type gemma3_text: Gemma 3's text models, 270M and 1B)
// into the llama family's with Gemma 2's and 3's differences (readSandwichedGemma), q and k normed per head, and
// sliding layers with a rotary base of their own. The defaults are transformers'
// Gemma3TextConfig's (a multimodal folder's text_config writes only the keys that differ from
// them); softcaps only where it sets them, as Gemma 2's.
ModelConfig readGemma3Config(ConfigReader& r) {
  ModelConfig c = readSandwichedGemma(r, kGemma3Defaults, 0.0, 0.0);
  c.qk_norm = true;
  readGemma3Rotary(r, c);
  readPatternSlidingWindows(r, c, gemma3WindowPattern(r));
  return c;
}

// Gemma2ForCausalLM's config.json (model_type gemma2: Gemma 2 2B, 9B, 27B) into the llama family's:
// Gemma 2's and 3's differences (readSandwichedGemma) without q/k norms and with one rotary base for every
// layer; its every other layer sliding (the even ones); its attention scores capped at
// attn_logit_softcapping (50) and its logits at final_logit_softcapping (30), c * tanh(x / c). The
// defaults are transformers' Gemma2Config's.
ModelConfig readGemma2Config(ConfigReader& r) {
  ModelConfig c = readSandwichedGemma(r, kGemma2Defaults, 50.0, 30.0);
  // The published configs carry hidden_act beside hidden_activation, and the 9B's config
  // sliding_window_size beside sliding_window: transformers' Gemma 2 reads neither.
  r.take("hidden_act");
  r.take("sliding_window_size");
  readGemmaRotary(r, Architecture::kGemma2, kGemma2Defaults, c);
  readPatternSlidingWindows(r, c, 2);  // Gemma2Config's layer types: every other layer slides
  return c;
}

// GemmaForCausalLM's config.json (model_type gemma: Gemma 1 2B and 7B, CodeGemma) into the llama
// family's: Gemma's body (readGemmaBody) with norms before each sublayer alone, as Llama's, the
// scores scaled by head_dim^-1/2 and one rotary embedding; no windows, no softcaps. The defaults
// are transformers' GemmaConfig's.
ModelConfig readGemmaConfig(ConfigReader& r, std::vector<std::string>& notes) {
  ModelConfig c = readGemmaBody(r, kGemma1Defaults);
  readGemmaActivation(r, notes);
  readGemmaRotary(r, Architecture::kGemma, kGemma1Defaults, c);
  return c;
}

std::string gemmaConfigToKeep(const std::string& config_json) {
  nlohmann::ordered_json config = parseOrderedJsonInput(config_json, "the model's Hugging Face config");
  if (!config.contains("hidden_act") || config["hidden_act"] != kGemmaLegacyActivation) return "";
  config["hidden_act"] = "gelu_pytorch_tanh";
  return config.dump(2) + "\n";
}

}  // namespace mt::hf
