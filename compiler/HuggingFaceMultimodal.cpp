#include "compiler/HuggingFaceConfigReader.h"

// The multimodal folders whose language model mtc reads and trains alone (the vision tower and its
// projector not read): Gemma 3's (4B-27B) and Mistral 3's (Mistral Small 3.1 and 3.2, Magistral
// Small, Devstral Small): each config's text_config is that language model's config.
namespace mt::hf {
namespace {

// The top-level keys of each multimodal config about its vision tower, projector and image tokens.
constexpr const char* kGemma3VisionKeys[] = {"vision_config", "mm_tokens_per_image", "boi_token_index",
                                             "eoi_token_index", "image_token_index"};
// Mistral3Config's (image_token_id the alias transformers 5 may save image_token_index under).
constexpr const char* kMistral3VisionKeys[] = {"vision_config",       "image_token_index",        "image_token_id",
                                               "projector_hidden_act", "vision_feature_layer",    "spatial_merge_size",
                                               "multimodal_projector_bias"};

constexpr MultimodalArchitecture kMultimodalArchitectures[] = {
    // Gemma3TextConfig ties the head to the embedding where the key is absent.
    {"Gemma3ForConditionalGeneration", "gemma3", Architecture::kGemma3, true, kGemma3VisionKeys},
    // Mistral3Config's text_config: MistralConfig (model_type "mistral" where it names none), untied where absent.
    {"Mistral3ForConditionalGeneration", "mistral3", Architecture::kMistral, false, kMistral3VisionKeys},
};

// transformers' Gemma3ForConditionalGeneration caps no logits (its Gemma3ForCausalLM does, and so
// did the multimodal model of 4.50-4.51, whose language model was one): which a cap in text_config
// means is unsure.
void refuseGemma3LogitCap(ConfigReader& r, const json& text) {
  if (text.contains("final_logit_softcapping") && !text["final_logit_softcapping"].is_null())
    throw r.error("'text_config' has final_logit_softcapping " + jsonBrief(text["final_logit_softcapping"]) +
                  ", which transformers' Gemma3ForConditionalGeneration does not apply (its Gemma3ForCausalLM "
                  "does): make it null, or the folder a Gemma3ForCausalLM's");
}

// Whether the language model ties its head to its embedding: text_config's key, else its config
// class's default. A top-level key that says otherwise is refused: transformers 4 ties by the
// language model's config (get_text_config), and a folder where the two disagree reads differently
// elsewhere.
void checkTiedHead(ConfigReader& r, const MultimodalArchitecture& m, const json& text) {
  const json& top = r.value("tie_word_embeddings");
  if (top.is_null()) return;
  const bool language = text.contains("tie_word_embeddings") && !text["tie_word_embeddings"].is_null()
                            ? text["tie_word_embeddings"] == true
                            : m.language_tied_default;
  if (!top.is_boolean() || top.get<bool>() != language)
    throw r.error("'tie_word_embeddings' is " + jsonBrief(top) + " at the top level but the language model's is " +
                  (language ? "true" : "false") +
                  (text.contains("tie_word_embeddings") ? "" : " (text_config's default)") +
                  ": the folder contradicts itself; give text_config the value its weights were trained with");
}

}  // namespace

const MultimodalArchitecture* findMultimodal(const std::string& architecture) {
  for (const MultimodalArchitecture& m : kMultimodalArchitectures)
    if (architecture == m.name) return &m;
  return nullptr;
}

std::string languageModelConfig(const MultimodalArchitecture& m, const json& config, const std::string& path) {
  ConfigReader r(config, path);
  const ArchitectureName& language = kArchitectureNames[static_cast<size_t>(m.language)];
  requireModelType(r, config, m.name, m.model_type);
  const json& text = r.value("text_config");
  if (!text.is_object()) throw r.error("no 'text_config' object: the language model's settings are unknown");
  if (text.contains("model_type") && text["model_type"] != language.model_type)
    throw r.error("'text_config' is of model_type " + jsonBrief(text["model_type"]) + ": mtc reads a " + m.name +
                  "'s language model of model_type \"" + language.model_type + "\" (" + language.causal + ") alone");
  if (m.language == Architecture::kGemma3) refuseGemma3LogitCap(r, text);
  checkTiedHead(r, m, text);
  for (const char* key : m.vision_keys) r.take(key);  // the vision tower's: not read
  json out = text;
  out["architectures"] = {language.causal};
  out["model_type"] = language.model_type;
  // What the top level says for the whole model and text_config leaves out. Not pad_token_id: the
  // language model takes text_config's (its config class's default where it names none) as its
  // embedding's padding_idx; the top level's is the multimodal model's own.
  r.take("pad_token_id");
  for (const char* key : {"torch_dtype", "dtype", "eos_token_id", "bos_token_id", "transformers_version"}) {
    const json& value = r.value(key);
    if (!value.is_null() && (!out.contains(key) || out[key].is_null())) out[key] = value;
  }
  r.finish();
  return out.dump(2) + "\n";
}

}  // namespace mt::hf
