#include <fmt/format.h>

#include "compiler/HuggingFaceConfigReader.h"

// A config's quantization_config: how the checkpoint stores its weights (compiler/HuggingFaceConfig.h,
// WeightQuantization), each dequantized to f32 on import.
namespace mt::hf {

namespace {

constexpr int64_t kMaxFp8Block = int64_t{1} << 20;  // a side of weight_block_size

// What the summary says of FP8 weights, whichever form they come in, after how they were dequantized.
constexpr char kFp8NoteTail[] =
    ": their rounding to FP8 stays in the starting weights; training computes at the plan's precision (the FP8 "
    "model's inference quantizes activations too), and --export-hf writes the weights unquantized";

// FineGrainedFP8Config's (and the DeepSeek-V3 checkpoints' own) keys: E4M3 weights, a scale per
// weight_block_size block ([128, 128] where absent); the activations' quantization (dynamic, per
// token group, at inference) is not done: the plan computes at its own precision.
WeightQuantization readFp8Blocks(ConfigReader& q, std::vector<std::string>& notes) {
  WeightQuantization out{WeightQuantization::Kind::kFp8Blocks, {128, 128}};
  if (const json& size = q.value("weight_block_size"); !size.is_null()) {
    const auto side = [](const json& v) {
      return v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= kMaxFp8Block;
    };
    if (!size.is_array() || size.size() != 2 || !side(size[0]) || !side(size[1]))
      throw q.error(fmt::format("'weight_block_size' is {}, not [rows, cols] of whole numbers from 1 to {}",
                                jsonBrief(size), kMaxFp8Block));
    out.fp8_block = {size[0].get<int64_t>(), size[1].get<int64_t>()};
  }
  if (q.text("fmt", "e4m3") != "e4m3")
    throw q.error("'fmt' is not e4m3: mtc dequantizes FP8 weights stored as E4M3 (float8_e4m3fn)");
  if (q.text("activation_scheme", "dynamic") != "dynamic")
    throw q.error("'activation_scheme' is not dynamic: a static scheme's activation scales (input_scale) are not "
                  "read; transformers' fine-grained FP8 supports the dynamic one alone");
  // Which weights are FP8 is what the checkpoint holds: a weight with a `_scale_inv` beside it.
  q.take("modules_to_not_convert");
  q.take("dequantize");  // transformers' choice on load; mtc always dequantizes
  // DeepSeek-V3.1's "ue8m0": its scales are powers of two, stored as the floats they are.
  q.take("scale_fmt");
  q.finish();
  notes.push_back(fmt::format(
      "the checkpoint's FP8 weights (E4M3, a scale per {}x{} block) are dequantized to f32 on import, as transformers "
      "dequantizes them{}",
      out.fp8_block.rows, out.fp8_block.cols, kFp8NoteTail));
  return out;
}

constexpr size_t kMaxQuantizationGroups = 64;  // config_groups: a handful in any checkpoint

// `group`'s "weights" quantization arguments (compressed-tensors' QuantizationArgs): 8-bit floats
// (E4M3), symmetric, static, in the column order, scaled per tensor, channel, group or block.
void readCompressedWeightArgs(ConfigReader& group) {
  if (!group.has("weights")) throw group.error("no 'weights': a group that quantizes no weights is not read");
  ConfigReader w = group.nested("weights");
  const std::string refuse = ": mtc dequantizes compressed-tensors' FP8 weights alone (8-bit floats, symmetric, "
                             "static); convert other checkpoints to BF16 first";
  w.require("num_bits", 8, "not 8 bits" + refuse);
  w.require("type", "float", "not float" + refuse);
  w.require("symmetric", true, "its zero points (weight_zero_point) are not read" + refuse);
  w.require("dynamic", false, "weights quantized as they are used have no stored scales" + refuse);
  w.require("actorder", json(), "an activation order's weight_g_idx is not read" + refuse);
  w.require("zp_dtype", json(), "no zero points are read" + refuse);
  const std::string strategy = w.text("strategy", "tensor");
  if (strategy != "tensor" && strategy != "channel" && strategy != "group" && strategy != "block")
    throw w.error("'strategy' is \"" + strategy + "\": FP8 weights are scaled per tensor, channel, group or block");
  // The scales' shape says how they cover each weight (compiler/Fp8Blocks.h: compressedFp8Block), as
  // compressed-tensors' decompression reads them; these say how they were computed.
  w.take("group_size");
  w.take("block_structure");
  w.take("observer");
  w.take("observer_kwargs");
  w.take("scale_dtype");  // the scales' type is the file's
  w.finish();
}

// A config_group's activations: quantized at inference, dynamically, not in training (the plan
// computes at its own precision); static ones' stored input scales are not read.
void readCompressedActivationArgs(ConfigReader& group, const std::string& key) {
  if (!group.has(key)) return group.take(key);
  if (key == "output_activations") throw group.error("'output_activations' is not null: mtc does not read them");
  ConfigReader a = group.nested(key);
  a.require("dynamic", true,
            "static activation scales (input_scale) are not read: mtc dequantizes the weights of dynamic FP8 "
            "checkpoints (-FP8-dynamic); convert this one to BF16 first");
  for (const char* inert : {"num_bits", "type", "symmetric", "strategy", "group_size", "block_structure", "actorder",
                            "observer", "observer_kwargs", "scale_dtype", "zp_dtype"})
    a.take(inert);
  a.finish();
}

// compressed-tensors' quantization_config (llm-compressor's -FP8 and -FP8-dynamic checkpoints): FP8
// weights beside their `_scale`; which weights are quantized is what the checkpoint holds (its
// groups' targets and ignore list say how it was made).
WeightQuantization readCompressedTensors(ConfigReader& q, std::vector<std::string>& notes) {
  const std::string fix = "; mtc dequantizes compressed-tensors' float-quantized FP8 weights: convert other "
                          "checkpoints to BF16 first";
  if (const std::string format = q.text("format", ""); format != "float-quantized")
    throw q.error("'format' is \"" + format + "\", not \"float-quantized\"" + fix);
  if (const std::string status = q.text("quantization_status", ""); status != "compressed")
    throw q.error("'quantization_status' is \"" + status + "\", not \"compressed\": the weights are not stored "
                  "quantized" + fix);
  const json& groups = q.value("config_groups");
  if (!groups.is_object() || groups.empty() || groups.size() > kMaxQuantizationGroups)
    throw q.error("'config_groups' is not an object of 1 to " + std::to_string(kMaxQuantizationGroups) + " groups");
  ConfigReader all = q.nested("config_groups");
  for (const auto& item : groups.items()) {
    if (!item.value().is_object()) throw all.error("'" + item.key() + "' is not an object");
    ConfigReader group = all.nested(item.key());
    readCompressedWeightArgs(group);
    readCompressedActivationArgs(group, "input_activations");
    readCompressedActivationArgs(group, "output_activations");
    group.require("format", json("float-quantized"), "not float-quantized" + fix);
    group.take("targets");
    group.finish();
  }
  all.finish();
  q.require("kv_cache_scheme", json(), "its key and value scales (k_scale, v_scale) are not read" + fix);
  q.require("transform_config", json(), "its transforms rotate the weights, which mtc does not undo" + fix);
  if (const json& sparsity = q.value("sparsity_config"); !sparsity.is_null() && !sparsity.empty())
    throw q.error("'sparsity_config' is " + jsonBrief(sparsity) + ": sparse compressed weights are not read" + fix);
  for (const char* inert : {"ignore", "global_compression_ratio", "version", "provider"}) q.take(inert);
  q.finish();
  notes.push_back(std::string(
      "the checkpoint's FP8 weights (compressed-tensors' float-quantized: E4M3, scales per tensor, channel, group or "
      "block) are dequantized on import, as compressed-tensors decompresses them (each code's value times its scale, "
      "rounded to the scales' type)") + kFp8NoteTail);
  return {WeightQuantization::Kind::kFp8Compressed};
}

}  // namespace

WeightQuantization readQuantization(ConfigReader& r, Architecture architecture, std::vector<std::string>& notes) {
  const json& config = r.value("quantization_config");
  if (config.is_null()) return {};
  if (!config.is_object()) throw r.error("'quantization_config' is not an object");
  ConfigReader q = r.nested("quantization_config");
  const std::string method = q.text("quant_method", "");
  if (method == "mxfp4" && architecture == Architecture::kGptOss) {
    // gpt-oss's official checkpoints: the experts in MXFP4, the other weights BF16.
    q.take("modules_to_not_convert");  // the BF16 tensors: read as they are
    q.finish();
    return {WeightQuantization::Kind::kMxfp4Experts};
  }
  if (method == "fp8") return readFp8Blocks(q, notes);
  if (method == "compressed-tensors") return readCompressedTensors(q, notes);
  throw q.error("'quant_method' is " + jsonBrief(config.value("quant_method", json())) +
                ": mtc dequantizes fine-grained FP8 weights (\"fp8\": DeepSeek-V3's, Kimi K2's, Qwen3's -FP8), "
                "compressed-tensors' FP8 weights (\"compressed-tensors\", float-quantized: -FP8-dynamic) and "
                "gpt-oss's MXFP4 experts (\"mxfp4\"); convert other quantized checkpoints to BF16 first");
}

}  // namespace mt::hf
