#include <fmt/format.h>

#include "compiler/HuggingFaceConfigReader.h"

// A config's quantization_config: how the checkpoint stores its weights (compiler/HuggingFaceConfig.h,
// WeightQuantization), each dequantized to f32 on import.
namespace mt::hf {

namespace {

constexpr int64_t kMaxFp8Block = int64_t{1} << 20;  // a side of weight_block_size

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
      "dequantizes them: their rounding to FP8 stays in the starting weights; training computes at the plan's precision "
      "(the FP8 model's inference quantizes activations too), and --export-hf writes the weights unquantized",
      out.fp8_block.rows, out.fp8_block.cols));
  return out;
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
  throw q.error("'quant_method' is " + jsonBrief(config.value("quant_method", json())) +
                ": mtc dequantizes fine-grained FP8 weights (\"fp8\": DeepSeek-V3's, Kimi K2's, Qwen3's -FP8) and "
                "gpt-oss's MXFP4 experts (\"mxfp4\"); convert other quantized checkpoints to BF16 first");
}

}  // namespace mt::hf
