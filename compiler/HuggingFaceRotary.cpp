// The rotary embedding's settings in a Hugging Face config.json: its base and scaling as
// transformers 4 (rope_theta, rope_scaling) or 5 (rope_parameters) writes them, over part of each
// head where the architecture reads partial_rotary_factor, LongRoPE's original context and factor
// as transformers reads them for the architecture.
#include <fmt/format.h>

#include "compiler/HuggingFaceConfigReader.h"
#include "kernels/rope/rope.h"

namespace mt::hf {

ConfigReader rotaryParameters(ConfigReader& r) {
  if (!r.value("rope_parameters").is_object()) throw r.error("'rope_parameters' is not an object");
  if (r.has("rope_scaling"))
    throw r.error("both 'rope_scaling' (transformers 4's name) and 'rope_parameters' (transformers 5's) are given: "
                  "keep one");
  r.take("rope_scaling");
  return r.nested("rope_parameters");
}

// The scaling an object of rotary settings names into `c` (transformers' rope types linear,
// llama3 — Llama 3.1 and 3.2 —, yarn and longrope; default or none named: none). Another type is
// refused by name: it would turn other angles. `phi3`: Phi3Config's older names of LongRoPE, su
// and yarn, read as it reads them. The caller finishes `s`.
void readRopeScaling(ConfigReader& s, ModelConfig& c, bool phi3) {
  // transformers names it rope_type (older configs: type; some carry both).
  std::string type = s.has("rope_type") ? s.text("rope_type", "") : s.text("type", "default");
  if (phi3 && (type == "su" || type == "yarn")) type = "longrope";
  s.take("type");
  RopeScaling& out = c.rope_scaling;
  const auto factor = [&] {
    if (!s.has("factor")) throw s.error("no 'factor'");
    return s.number("factor", 1.0);
  };
  if (type == "default") {
  } else if (type == "linear") {
    out.kind = RopeScaling::Kind::kLinear, out.factor = factor();
  } else if (type == "llama3") {
    out.kind = RopeScaling::Kind::kLlama3, out.factor = factor();
    for (const char* key : {"low_freq_factor", "high_freq_factor"})  // transformers needs them too
      if (!s.has(key)) throw s.error(std::string("no '") + key + "'");
    out.low_freq_factor = s.number("low_freq_factor", 0.0);
    out.high_freq_factor = s.number("high_freq_factor", 0.0);
    out.original_context = s.integer("original_max_position_embeddings");
    if (!(out.high_freq_factor > out.low_freq_factor))
      throw s.error("'high_freq_factor' must be above 'low_freq_factor'");
  } else if (type == "yarn") {
    out.kind = RopeScaling::Kind::kYarn, out.factor = factor(), out.context = c.context;
    out.original_context = s.integer("original_max_position_embeddings", 0);
    out.beta_fast = s.number("beta_fast", 32.0);
    out.beta_slow = s.number("beta_slow", 1.0);
    out.truncate = s.boolean("truncate", true);
    out.attention_factor = s.number("attention_factor", 0.0);
    out.mscale = s.fraction("mscale", 0.0);
    out.mscale_all_dim = s.fraction("mscale_all_dim", 0.0);
    if (out.original_context > c.context)
      throw s.error("'original_max_position_embeddings' is above the config's max_position_embeddings");
  } else if (type == "longrope") {
    // Phi-3's: each pair's own factors (short within the original context, long past it), an
    // attention factor from the contexts unless given; the original context and the factor
    // settled by the architecture's rule (settleLongRope).
    out.kind = RopeScaling::Kind::kLongRope, out.context = c.context;
    out.short_factor = s.positiveNumbers("short_factor", kMaxRopePairs);
    out.long_factor = s.positiveNumbers("long_factor", kMaxRopePairs);
    out.factor = s.has("factor") ? s.number("factor", 1.0) : 0.0;
    out.attention_factor = s.number("attention_factor", 0.0);
    out.original_context = s.integer("original_max_position_embeddings", 0);
  } else {
    throw s.error("rope type '" + type + "' is not supported (linear, llama3, yarn and longrope are): its angles "
                  "differ");
  }
}

namespace {

// gpt-oss's YaRN where its config names no rotary settings: transformers' GptOssConfig default
// (the published checkpoints' own), a factor of 32 from a 4,096-token context.
void gptOssDefaultYarn(ModelConfig& c) {
  RopeScaling& out = c.rope_scaling;
  out.kind = RopeScaling::Kind::kYarn, out.factor = 32.0, out.context = c.context, out.original_context = 4096;
  out.beta_fast = 32.0, out.beta_slow = 1.0, out.truncate = false;
}

// The rotary embedding over the first partial_rotary_factor of each head (Phi-4-mini's 0.75,
// GLM-4.5's 0.5; `fallback` where the config names none) into `c`: transformers' int(head_dim *
// factor) elements, which must be a positive even number. The key at the top level (`r`) or in
// transformers 5's rotary settings (`inner`, where there are some), where transformers 5 saves it
// twice; both must then agree.
void readPartialRotary(ConfigReader& r, ConfigReader* inner, ModelConfig& c, double fallback) {
  const double top = r.number("partial_rotary_factor", 0.0);
  const double nested = inner ? inner->number("partial_rotary_factor", 0.0) : 0.0;
  if (top > 0.0 && nested > 0.0 && top != nested)
    throw r.error(fmt::format("'partial_rotary_factor' is {:g} here but {:g} in the rotary settings: the folder "
                              "contradicts itself", top, nested));
  const double fraction = top > 0.0 ? top : nested > 0.0 ? nested : fallback;
  if (fraction > 1.0) throw r.error(fmt::format("'partial_rotary_factor' {:g} is above 1", fraction));
  const int64_t rotary = static_cast<int64_t>(static_cast<double>(c.headDim()) * fraction);
  if (rotary <= 0 || rotary % 2 != 0)
    throw r.error(fmt::format("'partial_rotary_factor' {:g} turns {} of each head's {} elements: it must give a "
                              "positive even number", fraction, rotary, c.headDim()));
  c.rotary_dim = rotary == c.headDim() ? 0 : rotary;
}

}  // namespace

// LongRoPE's original context and factor, as transformers reads them for the architecture (after
// readRotary). Phi-3's: Phi3Config's original_max_position_embeddings beside the settings (4096 where
// the config names none), which transformers 4 uses and 5 writes over the settings' own (one there
// that differs is refused), the factor the contexts' ratio (4 takes it, 5 a factor given instead:
// one that differs is refused). Another architecture's: transformers 4 takes max_position_embeddings
// for the original, 5 the settings' own (refused unless they agree), the factor as given.
void settleLongRope(ConfigReader& r, Architecture architecture, ModelConfig& c) {
  const bool phi3 = architecture == Architecture::kPhi3;
  const int64_t top = phi3 ? r.integer("original_max_position_embeddings", 0) : 0;
  RopeScaling& s = c.rope_scaling;
  if (s.kind != RopeScaling::Kind::kLongRope) return;
  if (!phi3) {
    if (s.original_context && s.original_context != c.context)
      throw r.error(fmt::format("longrope's 'original_max_position_embeddings' {} is not max_position_embeddings {}, "
                                "which transformers 4 takes for it (5 takes the settings'): drop it",
                                s.original_context, c.context));
    s.original_context = 0;
    return;
  }
  constexpr int64_t kPhi3Original = 4096;  // Phi3Config's default
  const int64_t original = top ? top : kPhi3Original;
  if (s.original_context && s.original_context != original)
    throw r.error(fmt::format("the rotary settings' 'original_max_position_embeddings' {} is not {}{}, which "
                              "transformers uses: the folder contradicts itself",
                              s.original_context, original, top ? " (the config's own)" : " (Phi3Config's default)"));
  if (original < 2) throw r.error("'original_max_position_embeddings' must be at least 2");
  const double ratio = static_cast<double>(c.context) / static_cast<double>(original);
  if (s.factor > 0.0 && s.factor != ratio)
    throw r.error(fmt::format("longrope's 'factor' {:g} is not max_position_embeddings / original_max_position_"
                              "embeddings = {:g}: transformers 4 takes the ratio, 5 the factor; drop the factor",
                              s.factor, ratio));
  s.original_context = original;
}

// The rotary embedding's base and scaling into `c`. transformers 4 writes them as rope_theta and
// rope_scaling; transformers 5 as one object, rope_parameters (rope_theta among the scaling's
// keys), which is all the folders it saves carry. Either form is read; a base given in both must
// agree, and the scaling comes from one alone.
void readRotary(ConfigReader& r, Architecture architecture, ModelConfig& c) {
  const double theta = r.number("rope_theta", 0.0);  // 0: not given
  const bool gpt_oss = architecture == Architecture::kGptOss, phi3 = architecture == Architecture::kPhi3;
  // Over part of each head: Phi-3's where it says (Phi-4-mini), GLM-4's and GLM-4.5's half unless it says otherwise.
  const bool glm = architecture == Architecture::kGlm4Moe || architecture == Architecture::kGlm4;
  const bool partial = phi3 || glm;
  const double default_fraction = glm ? 0.5 : 1.0;  // the configs' defaults
  // transformers' configs' defaults
  const double default_theta = gpt_oss                                   ? 150000.0
                               : architecture == Architecture::kMixtral  ? 1e6
                               : architecture == Architecture::kSmolLM3  ? 2e6
                               : architecture == Architecture::kErnie45 ||
                                         architecture == Architecture::kErnie45Moe
                                   ? 500000.0
                                                                         : 10000.0;
  if (!r.has("rope_parameters")) {
    r.take("rope_parameters");  // absent or null
    c.rope_theta = theta > 0 ? theta : default_theta;
    if (partial) readPartialRotary(r, nullptr, c, default_fraction);
    if (r.has("rope_scaling")) {
      if (!r.value("rope_scaling").is_object()) throw r.error("'rope_scaling' is not an object");
      ConfigReader s = r.nested("rope_scaling");
      readRopeScaling(s, c, phi3);
      s.finish();
    } else if (gpt_oss && r.isNull("rope_scaling")) {
      throw r.error("'rope_scaling' is null, which transformers 5 reads as gpt-oss's YaRN (a factor of 32 from "
                    "4,096 tokens) and older versions as no scaling: write {\"rope_type\": \"default\"} for none, "
                    "or the YaRN settings");
    } else if (gpt_oss) {
      gptOssDefaultYarn(c);
    }
    return r.take("rope_scaling");
  }
  ConfigReader p = rotaryParameters(r);
  for (const char* layer_type : {"full_attention", "sliding_attention"})
    if (p.has(layer_type))
      throw p.error(std::string("rotary settings per layer type ('") + layer_type +
                    "') are not supported: one setting for every layer is");
  const double inner = p.number("rope_theta", 0.0);
  if (inner > 0 && theta > 0 && inner != theta)
    throw p.error(fmt::format("'rope_theta' is {:g} but the config's rope_theta is {:g}: the folder contradicts itself",
                              inner, theta));
  c.rope_theta = inner > 0 ? inner : theta > 0 ? theta : default_theta;
  if (partial)
    readPartialRotary(r, &p, c, default_fraction);
  else if (p.number("partial_rotary_factor", 1.0) != 1.0)
    throw p.error("'partial_rotary_factor' is not 1: a rotary embedding over part of each head is not supported "
                  "(Phi-3's and GLM-4.5's are)");
  readRopeScaling(p, c, phi3);
  p.finish();
}

void readRotaryPerLayerType(ConfigReader& p, ModelConfig& c, RotaryBase full, RotaryBase sliding, const char* model) {
  for (const char* type : {"full_attention", "sliding_attention"})
    if (!p.value(type).is_object())
      throw p.error(fmt::format("no '{}' object: {}'s rotary settings are given per layer type", type, model));
  const auto base = [](ConfigReader& entry, RotaryBase outer) {
    const double inner = entry.number("rope_theta", 0.0);
    if (inner > 0 && outer.given > 0 && inner != outer.given)
      throw entry.error(fmt::format("'rope_theta' is {:g} but the config's {} is {:g}: the folder contradicts itself",
                                    inner, outer.key, outer.given));
    const double theta = inner > 0 ? inner : outer.given > 0 ? outer.given : outer.fallback;
    if (theta <= 0)
      throw entry.error(fmt::format("no 'rope_theta' here nor the config's {}: the rotary base is needed (the config "
                                    "class's default differs between transformers versions)", outer.key));
    return theta;
  };
  ConfigReader full_entry = p.nested("full_attention");
  c.rope_theta = base(full_entry, full);
  readRopeScaling(full_entry, c);
  full_entry.finish();
  ConfigReader local = p.nested("sliding_attention");
  c.rope_local_theta = base(local, sliding);
  ModelConfig local_config;
  local_config.context = c.context;
  readRopeScaling(local, local_config);
  if (local_config.rope_scaling.kind != RopeScaling::Kind::kNone)
    throw local.error(fmt::format("the sliding layers' rotary embedding is scaled: mtc scales only the full-attention "
                                  "layers' (as {}'s checkpoints do)", model));
  local.finish();
}

// OLMo 3's rotary embeddings as OLMo-core trains them and transformers 4.57 computes them: the
// full-attention layers' of rope_theta and rope_scaling, the sliding layers' of the same base
// unscaled; or transformers 5's rope_parameters per layer type. rope_theta must be given: Olmo3Config's
// default is 10,000 in transformers 4 and 5.0-5.2, 500,000 in later releases. One rope_parameters
// object with a scaling is refused: transformers 5 releases before huggingface/transformers#45945
// scale every layer by it.
void readOlmo3Rotary(ConfigReader& r, ModelConfig& c) {
  const json& params = r.value("rope_parameters");
  const bool flat = params.is_object() && !params.contains("full_attention") && !params.contains("sliding_attention");
  if (params.is_object() && !flat) {
    const double theta = r.number("rope_theta", 0.0);
    ConfigReader p = rotaryParameters(r);
    readRotaryPerLayerType(p, c, {theta, "rope_theta", 0.0}, {theta, "rope_theta", 0.0}, "OLMo 3");
    return p.finish();
  }
  if (!r.has("rope_theta") && !(flat && params.contains("rope_theta") && !params["rope_theta"].is_null()))
    throw r.error("no 'rope_theta': OLMo 3's default rotary base is 10,000 in transformers 4 and 5.0-5.2, 500,000 "
                  "in later releases; name the base its checkpoint was trained with");
  readRotary(r, Architecture::kOlmo3, c);
  if (c.rope_scaling.kind == RopeScaling::Kind::kNone) return;
  if (flat)
    throw r.error("'rope_parameters' scales the rotary embedding of every layer alike: transformers 5 releases "
                  "before huggingface/transformers#45945 apply it so, OLMo-core and transformers 4.57 to the "
                  "full-attention layers alone; write it as 'rope_scaling' or per layer type (full_attention, "
                  "sliding_attention)");
  c.rope_local_theta = c.rope_theta;  // the sliding layers' unscaled
}

}  // namespace mt::hf
