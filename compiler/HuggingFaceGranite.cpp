#include <fmt/format.h>

#include "compiler/HuggingFaceConfigReader.h"

// Granite's configs beside the llama family's: Granite 3's multipliers (GraniteForCausalLM,
// GraniteMoeForCausalLM) and Granite 4.0's attention-only models (GraniteMoeHybridForCausalLM).
namespace mt::hf {

// Granite's keys beside the llama family's: its multipliers (GraniteConfig's defaults 1 where
// absent; its attention_multiplier 1 too, the scores then unscaled, not head_dim^-1/2; null
// refused, as transformers 4 and 5 read it differently), and its attention dropout (Granite 3.0's
// 0.1), which `notes` says mtc does not apply, as GPT-2's.
void readGraniteKeys(ConfigReader& r, ModelConfig& c, std::vector<std::string>& notes) {
  for (auto [key, value] : {std::pair{"embedding_multiplier", &c.embedding_multiplier},
                            {"residual_multiplier", &c.residual_multiplier},
                            {"attention_multiplier", &c.attention_multiplier},
                            {"logits_scaling", &c.logits_scaling}}) {
    if (r.isNull(key))
      throw r.error(std::string("'") + key + "' is null: Granite's multipliers are numbers (1 where the config " +
                    "names none, GraniteConfig's default)");
    *value = r.number(key, 1.0);
  }
  noteUnappliedDropout(r, {"attention_dropout"}, 0.0, notes);
}

// Granite 4.0's keys (GraniteMoeHybridForCausalLM) beside Granite's, for its models with attention
// in every layer (granite-4.0-micro, -1b, -350m): their MLP, shared_mlp, as wide as
// shared_intermediate_size; the rotary embedding where position_embedding_type is "rope", else none
// in any layer (transformers' GraniteMoeHybridModel); Mamba-2 layers (the -h- hybrids) and experts
// beside the shared MLP refused by name, the Mamba layers' settings inert without them.
void readGraniteHybridKeys(ConfigReader& r, ModelConfig& c) {
  const json& types = r.value("layer_types");
  if (types.is_null())
    throw r.error("no 'layer_types': GraniteMoeHybridConfig then makes every layer Mamba-2, which mtc does not "
                  "support (the attention-only Granite 4.0 models, micro, 1b and 350m, list \"attention\" for each)");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != c.layers)
    throw r.error("'layer_types' is not a list of the " + std::to_string(c.layers) + " layers' kinds");
  for (int64_t l = 0; l < c.layers; ++l)
    if (types[l] != "attention")
      throw r.error("'layer_types' names " + jsonBrief(types[l]) + " for layer " + std::to_string(l) +
                    ": Granite 4.0's Mamba-2 layers (its -h- hybrids) are not supported, only attention in every "
                    "layer (granite-4.0-micro, -1b, -350m)");
  const json& experts = r.value("num_local_experts");
  if (!(experts.is_number_integer() && experts.get<int64_t>() == 0))
    throw r.error("'num_local_experts' is " + (experts.is_null() ? std::string("not given (8, GraniteMoeHybridConfig's default)")
                                                                 : jsonBrief(experts)) +
                  ": experts beside Granite 4.0's shared MLP are not supported yet, only its dense models (0)");
  // Without experts: their width and routing, and every Mamba-2 setting, configure nothing.
  for (const char* key : {"intermediate_size", "num_experts_per_tok", "output_router_logits", "router_aux_loss_coef",
                          "mamba_n_heads", "mamba_n_groups", "mamba_d_state", "mamba_d_head", "mamba_d_conv",
                          "mamba_expand", "mamba_chunk_size", "mamba_conv_bias", "mamba_proj_bias", "time_step_limit"})
    r.take(key);
  c.ffn = r.integer("shared_intermediate_size", 1024);
  r.require("normalization_function", "rmsnorm", "Granite 4.0's norms are RMSNorms");
  const std::string positions = r.text("position_embedding_type", "nope");
  if (positions != "rope" && positions != "nope")
    throw r.error("'position_embedding_type' is " + positions + ": \"rope\" (the rotary embedding) or \"nope\" / "
                  "null (none) are supported");
  if (positions == "nope")
    for (int64_t l = 0; l < c.layers; ++l) c.nope_layers.push_back(l);
}

}  // namespace mt::hf
