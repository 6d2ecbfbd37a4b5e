// A Hugging Face folder's config.json in and out: read key by key into the built-in family's
// config (the architectures of hf::kArchitectureNames, compiler/HuggingFaceConfigReader.h: Llama,
// Qwen, Mistral, Gemma, Phi-3, Granite, SmolLM3, OLMo 2 and 3, Ernie 4.5 and the mixtures of experts
// into the llama family's, GPT2LMHeadModel into the gpt2 family's; each also as its
// ...ForSequenceClassification of one label where transformers has one, a reward model: the same
// body under a score head), and written for a built-in model. Read strictly: a key mtc does not
// know or a setting it does not implement is an error naming it.
#pragma once
#include <string>
#include <vector>

#include "compiler/Fp8Blocks.h"
#include "models/ModelConfig.h"

namespace mt {

// How the config's quantization_config says the checkpoint stores its weights, each dequantized to
// f32 on import (the fp32 master starts from them): none; gpt-oss's experts as MXFP4 blocks and
// scales (quant_method "mxfp4", compiler/Mxfp4.h); its linear weights in fine-grained FP8 (quant_method
// "fp8": E4M3 codes and a scale per weight_block_size block, compiler/Fp8Blocks.h), those it names
// `..._scale_inv` beside them, the others as they are; or compressed-tensors' FP8 (quant_method
// "compressed-tensors", float-quantized: E4M3 codes beside `..._scale`, one scale per tensor,
// channel, group or block as the scales' shape says).
struct WeightQuantization {
  enum class Kind { kNone, kMxfp4Experts, kFp8Blocks, kFp8Compressed };
  Kind kind = Kind::kNone;
  Fp8BlockSize fp8_block;  // kFp8Blocks'
  bool any() const { return kind != Kind::kNone; }
  bool fp8() const { return kind == Kind::kFp8Blocks || kind == Kind::kFp8Compressed; }
  // The suffix of an FP8 weight's scales beside it: fine-grained FP8's `_scale_inv` (named for the
  // inverse of the scale it quantized with), compressed-tensors' `_scale` (`weight_scale`).
  const char* fp8ScaleSuffix() const { return kind == Kind::kFp8Compressed ? "_scale" : "_scale_inv"; }
};

struct HuggingFaceConfig {
  std::string architecture;  // "LlamaForCausalLM", ..., as the config names it
  ModelConfig config;        // a ...ForSequenceClassification's: score_head kPretrained
  // What the config asks for that training does not do, said in mtc's summary (GPT-2's and
  // Granite's dropout).
  std::vector<std::string> notes;
  WeightQuantization quantization;  // the config's quantization_config
  // The config.json the plan keeps (and --export-hf writes) where it is not the folder's own, ""
  // where it is: a multimodal folder's language model's, as its causal LM's (Gemma3ForCausalLM's);
  // a Gemma 1 config's with its activation named as mtc computes it (hf::gemmaConfigToKeep).
  std::string config_to_keep;
  // A multimodal folder's class (Gemma3ForConditionalGeneration, Mistral3ForConditionalGeneration)
  // whose language model alone is read, `architecture` its causal LM's; "" for any other folder.
  std::string multimodal;
  // The checkpoint's multi-token prediction layers after the model's (GLM-4.5's
  // num_nextn_predict_layers, model.layers.<layers>...), which transformers leaves unread: so does mtc.
  int64_t prediction_layers = 0;
};

// Reads `config_json` (the text of `path`); throws mt::Error naming what it cannot take.
HuggingFaceConfig readHuggingFaceConfig(const std::string& config_json, const std::string& path);

// A config.json transformers reads for a built-in model (LlamaForCausalLM; Qwen2ForCausalLM when
// it has q/k/v biases, Qwen3ForCausalLM with q/k norms, Qwen3MoeForCausalLM, MixtralForCausalLM,
// GptOssForCausalLM; GPT2LMHeadModel for the gpt2 family; with a score head, the same
// architecture's ...ForSequenceClassification); "" for a shape none of them has.
std::string huggingFaceConfig(const ModelConfig& config);

// The causal LM whose body an architecture is ("Qwen2ForSequenceClassification" ->
// "Qwen2ForCausalLM", "GPT2ForSequenceClassification" -> "GPT2LMHeadModel"); any other name as it is.
std::string causalArchitecture(const std::string& architecture);

// A causal LM's config.json (`config_json`, its architecture one huggingFaceConfig writes or
// readHuggingFaceConfig reads) as its reward model's: the architecture's
// ...ForSequenceClassification with one label (id2label {"0": "LABEL_0"}), the rest as it is; a
// classifier's as it is. Throws mt::Error for an architecture without that form.
std::string sequenceClassifierConfig(const std::string& config_json);

}  // namespace mt
