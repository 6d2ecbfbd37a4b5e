// A Hugging Face folder's weights as the plan's parameters (mtc's weights file beside the plan):
// each tensor widened from F32, BF16 or F16 and checked finite, FP8 and MXFP4 dequantized, a stack
// of experts gathered from one tensor per expert, a part cut from a fused tensor, GPT-2's
// transposed ones turned, a PEFT adapter's pairs merged in where --lora-from asks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/Fp8Blocks.h"
#include "compiler/HuggingFace.h"
#include "compiler/Mxfp4.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/matmul/lora_merge.h"
#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/huggingface_names.h"
#include "runtime/plan/initializer.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

using nlohmann::json;

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    value = mantissa ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits |= sign;
  std::memcpy(&value, &bits, 4);
  return value;
}

// `n` values of `entry` (F32, BF16 or F16) as f32.
void widenValues(const SafetensorsEntry& entry, int64_t n, float* out) {
  if (entry.dtype == "F32") {
    std::memcpy(out, entry.data, 4 * static_cast<size_t>(n));
  } else if (entry.dtype == "BF16") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits;
      std::memcpy(&bits, entry.data + 2 * i, 2);
      out[i] = bf16Value(bits);
    }
  } else {  // F16, checked by the caller
    for (int64_t i = 0; i < n; ++i) {
      uint16_t half;
      std::memcpy(&half, entry.data + 2 * i, 2);
      out[i] = halfToFloat(half);
    }
  }
}

// `n` values of `entry` widened to f32; throws mt::Error naming `where` (the folder and tensor)
// and the first element that is NaN or infinite: such a checkpoint would train to NaN.
void widen(const SafetensorsEntry& entry, int64_t n, float* out, const std::string& where) {
  widenValues(entry, n, out);
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(out[i]))
      throw Error(where + " holds " + fmt::format("{}", out[i]) + " at element " + std::to_string(i) +
                  " (of its values in the file's order): weights that are not finite would train to NaN; use a "
                  "checkpoint without them");
}

// Parameter `name` (experts, in, out; n values) dequantized from MXFP4 `blocks` and `scales` (U8;
// `where` names them in errors), a NaN scale or a value past f32's range refused.
SafetensorsTensor mxfp4Tensor(const std::string& name, const std::vector<int64_t>& shape, int64_t n,
                              const SafetensorsEntry& blocks, const SafetensorsEntry& scales, const std::string& where) {
  if (blocks.dtype != "U8" || scales.dtype != "U8")
    throw Error(where + " and its scales are " + blocks.dtype + " and " + scales.dtype + ": MXFP4 stores both as U8");
  if (const std::string problem = mxfp4ShapeProblem(blocks.shape, scales.shape, shape); !problem.empty())
    throw Error(where + ": " + problem + " (the model's " + name + ")");
  return {name, "F32", shape, nullptr, 4 * n, [&blocks, &scales, shape, where](void* out) {
            if (const std::string problem = dequantizeMxfp4(blocks.data, scales.data, shape, static_cast<float*>(out));
                !problem.empty())
              throw Error(where + ": " + problem + "; use a checkpoint without it");
          }};
}

// A tensor as the folder stores it: its values, and where they are FP8 (E4M3), their scales
// (`<name>_scale_inv` or `<name>_scale`, compiler/Fp8Blocks.h) and `scales_where` naming them in
// errors.
struct StoredTensor {
  const SafetensorsEntry* values = nullptr;
  const SafetensorsEntry* fp8_scales = nullptr;
  Fp8BlockSize block;      // fine-grained FP8's, from the config
  bool compressed = false;  // compressed-tensors': the block from the scales' shape, products in their type
  std::string scales_where;
};

// "" or what is wrong with `stored`'s FP8 scales' shape; its scales' block into `block`.
std::string fp8ScaleProblem(const StoredTensor& stored, Fp8BlockSize* block) {
  const std::vector<int64_t>& weight = stored.values->shape;
  if (stored.compressed) return compressedFp8Block(weight, stored.fp8_scales->shape, block);
  *block = stored.block;
  return fp8ScaleShapeProblem(weight, stored.fp8_scales->shape, stored.block);
}

// `n` values of `stored` as f32, dequantized where they are FP8, checked finite; `where` names it
// in errors.
void widen(const StoredTensor& stored, int64_t n, float* out, const std::string& where) {
  if (!stored.fp8_scales) return widen(*stored.values, n, out, where);
  const std::vector<int64_t>& shape = stored.fp8_scales->shape;
  std::vector<float> scales(static_cast<size_t>(std::accumulate(shape.begin(), shape.end(), int64_t{1},
                                                                std::multiplies<>())));
  widen(*stored.fp8_scales, static_cast<int64_t>(scales.size()), scales.data(), stored.scales_where);
  Fp8BlockSize block;
  std::string problem = fp8ScaleProblem(stored, &block);  // refused before (requireShape)
  if (problem.empty())
    problem = dequantizeFp8Blocks(stored.values->data, scales.data(), stored.values->shape, block, out);
  if (problem.empty() && stored.compressed)
    problem = roundToScaleType(out, stored.values->shape, stored.fp8_scales->dtype);
  if (!problem.empty()) throw Error(where + ": " + problem + "; use a checkpoint without it");
}

// The merge's result, checked finite (an adapter's values can overflow f32 where its weight's do not).
void checkMergedFinite(const float* w, int64_t n, const std::string& where) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(w[i]))
      throw Error(where + ": merged into their weight, they overflow f32 at element " + std::to_string(i));
}

// A stack's tensors, one an expert (its entry, and where it is for errors), each `each` values.
using ExpertEntries = std::vector<std::pair<StoredTensor, std::string>>;

// The experts' tensors widened to f32 one after another, expert e's at out + e * each.
void widenExperts(const ExpertEntries& experts, int64_t each, float* out) {
  for (size_t e = 0; e < experts.size(); ++e) widen(experts[e].first, each, out + e * each, experts[e].second);
}

// The `experts` tensors of `file` named `key` with its '*' made e (expertTensorName), checksums
// verified; each named in errors as itself, or as `where` where one is given.
ExpertEntries perExpertEntries(const SafetensorsFile& file, const std::string& key, int64_t experts,
                               const std::string& where = "") {
  ExpertEntries entries;
  for (int64_t e = 0; e < experts; ++e) {
    const std::string expert_key = expertTensorName(key, e);
    file.verify(expert_key);
    entries.push_back({{&file.entries().at(expert_key)}, where.empty() ? file.path() + ": '" + expert_key + "'" : where});
  }
  return entries;
}

// A stack of Qwen3-MoE's or Mixtral's experts, W (E, out, in), `produce` it, with each expert's
// adapters, tensors of their own in `file` (LoraMergeSource::Form::kPerExpert), merged in.
std::function<void(void*)> perExpertMergedProducer(std::function<void(void*)> produce, const SafetensorsFile& file,
                                                   const LoraMergeSource& merge, const std::vector<int64_t>& shape) {
  const int64_t experts = shape[0], out = shape[1], in = shape[2];
  const std::string where = file.path() + ": '" + merge.a + "' and '" + merge.b + "' (* each expert)";
  // Expert e's A (r, in) and B (out, r).
  const ExpertEntries a = perExpertEntries(file, merge.a, experts, where);
  const ExpertEntries b = perExpertEntries(file, merge.b, experts, where);
  const int64_t r = a[0].first.values->shape.empty() ? 0 : a[0].first.values->shape[0];
  for (int64_t e = 0; e < experts; ++e)
    if (a[e].first.values->shape != std::vector<int64_t>{r, in} ||
        b[e].first.values->shape != std::vector<int64_t>{out, r})
      throw Error(where + ": expert " + std::to_string(e) + "'s are not (r, in) and (out, r) of one rank r = " +
                  std::to_string(r) + " over " + std::to_string(experts) + " experts");
  return [produce = std::move(produce), a, b, experts, in, out, r, scale = merge.scale, where](void* buffer) {
    produce(buffer);
    std::vector<float> wide_a(static_cast<size_t>(experts * r * in)), wide_b(static_cast<size_t>(experts * out * r));
    widenExperts(a, r * in, wide_a.data());
    widenExperts(b, out * r, wide_b.data());
    float* w = static_cast<float*>(buffer);
    loraMergeExperts(w, wide_a.data(), wide_b.data(), experts, out, in, r, scale, /*in_out=*/false, w);
    checkMergedFinite(w, experts * out * in, where);
  };
}

// A part's B (E, out, r), or (out, r) as E = 1, from its rows of PEFT's lora_B `entry` (all, r*E),
// where expert e's rank k is column k*E + e (stackExpertBFromPeft), checked when the name was chosen.
void readPartB(const SafetensorsEntry& entry, const PartRows& rows, const std::vector<int64_t>& shape,
               const std::string& where, float* part) {
  const bool stack = shape.size() == 3;
  const int64_t experts = stack ? shape[0] : 1, out = shape[stack ? 1 : 0], r = shape.back(), all = rows.all;
  std::vector<float> peft(static_cast<size_t>(all * r * experts)), whole(peft.size());
  widen(entry, all * r * experts, peft.data(), where);
  stackExpertBFromPeft(peft.data(), experts, all, r, whole.data());
  for (int64_t e = 0; e < experts; ++e)
    std::copy_n(whole.data() + (e * all + rows.first) * r, out * r, part + e * out * r);
}

// Parameter `name` (E, ...; n values), a stack read from E tensors of `file` (...), expert e's
// `key` with its '*' made e: each checked when the name was chosen (compiler/PeftAdapter.cpp).
SafetensorsTensor perExpertTensor(const SafetensorsFile& file, const std::string& key, const std::string& name,
                                  const std::vector<int64_t>& shape, int64_t n) {
  return {name, "F32", shape, nullptr, 4 * n,
          [experts = perExpertEntries(file, key, shape[0]), each = n / shape[0]](void* out) {
            widenExperts(experts, each, static_cast<float*>(out));
          }};
}

// `produce` (a weight from the folder, of the merge's form) followed by its adapters from `file`
// merged in (with DoRA's magnitude where the merge names one).
std::function<void(void*)> mergedProducer(std::function<void(void*)> produce, const SafetensorsFile& file,
                                          const LoraMergeSource& merge, const std::vector<int64_t>& shape) {
  if (merge.form == LoraMergeSource::Form::kPerExpert)
    return perExpertMergedProducer(std::move(produce), file, merge, shape);
  const SafetensorsEntry& a = file.entries().at(merge.a);
  const SafetensorsEntry& b = file.entries().at(merge.b);
  file.verify(merge.a);
  file.verify(merge.b);
  const SafetensorsEntry* m = merge.magnitude.empty() ? nullptr : &file.entries().at(merge.magnitude);
  if (m) file.verify(merge.magnitude);
  const std::string where = file.path() + ": '" + merge.a + "' and '" + merge.b + "'" +
                            (m ? " with '" + merge.magnitude + "'" : "");
  // A stack adapted in place: gpt-oss's (E, in, out), transformers 5's fused Qwen3-MoE or Mixtral
  // part (E, out, in); its adapters in PEFT's layout.
  if (merge.form == LoraMergeSource::Form::kGptOssStack || merge.form == LoraMergeSource::Form::kFusedStack) {
    const bool in_out = merge.form == LoraMergeSource::Form::kGptOssStack;
    const int64_t experts = shape[0], in = shape[in_out ? 1 : 2], out = shape[in_out ? 2 : 1],
                  r = a.shape.empty() ? 0 : a.shape[0] / experts, rows = merge.b_rows.all;
    if (a.shape != std::vector<int64_t>{experts * r, in} || b.shape != std::vector<int64_t>{rows, r * experts})
      throw Error(fmt::format("{}: [{}] and [{}], not PEFT's (E*r, in) and (out, r*E), ({}, {}) and ({}, {}), of a "
                              "stack of {} experts",
                              where, fmt::join(a.shape, ", "), fmt::join(b.shape, ", "), experts * r, in, rows,
                              r * experts, experts));
    return [produce = std::move(produce), &a, &b, experts, in, out, r, in_out, b_rows = merge.b_rows,
            scale = merge.scale, where](void* buffer) {
      produce(buffer);
      std::vector<float> wide_a(static_cast<size_t>(experts * r * in)), wide_b(static_cast<size_t>(experts * out * r));
      widen(a, experts * r * in, wide_a.data(), where);  // PEFT's (E*r, in) is our (E, r, in) as it lies
      readPartB(b, b_rows, {experts, out, r}, where, wide_b.data());
      float* w = static_cast<float*>(buffer);
      loraMergeExperts(w, wide_a.data(), wide_b.data(), experts, out, in, r, scale, in_out, w);
      checkMergedFinite(w, experts * in * out, where);
    };
  }
  const int64_t out = shape[0], in = shape[1], r = a.shape[0];
  return [produce = std::move(produce), &a, &b, m, out, in, r, b_rows = merge.b_rows, scale = merge.scale,
          where](void* buffer) {
    produce(buffer);
    std::vector<float> wide_a(static_cast<size_t>(r * in)), wide_b(static_cast<size_t>(out * r)), wide_m;
    widen(a, r * in, wide_a.data(), where);
    if (b_rows.all > 0)  // W is a part of a fused layer (Phi-3's): its rows of B
      readPartB(b, b_rows, {out, r}, where, wide_b.data());
    else
      widen(b, out * r, wide_b.data(), where);
    if (m) {
      wide_m.resize(static_cast<size_t>(out));
      widen(*m, out, wide_m.data(), where);
    }
    float* w = static_cast<float*>(buffer);
    loraMerge(w, wide_a.data(), wide_b.data(), out, in, r, scale, w, m ? wide_m.data() : nullptr);
    checkMergedFinite(w, out * in, where);
  };
}

// The folder's weights as the plan's parameters: each parameter's tensor, produced from its
// source (one tensor, one per expert, MXFP4 blocks and scales, a part of a fused one, transposed).
class FolderTensors {
 public:
  FolderTensors(const HuggingFaceModel& model, const plan::Plan& plan)
      : model_(model), part_rows_(fusedPartRows(model, plan)) {}

  SafetensorsTensor tensor(const plan::HostTensor& t, const std::vector<int64_t>& shape, int64_t n) {
    const HuggingFaceSource& source = model_.weights.at(t.name());
    const HuggingFacePlace& place = source.place;
    if (place.per_expert) return expertsTensor(t, source, shape, n);
    if (!source.mxfp4_scales_file.empty())
      return mxfp4Tensor(t.name(), shape, n, entryOf(source.file, place.name + "_blocks"),
                         entryOf(source.mxfp4_scales_file, place.name + "_scales"),
                         model_.dir + ": '" + place.name + "_blocks'");
    const StoredTensor stored = storedOf(source.file, place.name);
    // The source's shape: ours, transposed (a matrix in Conv1D's [in, out]), its output axis
    // (Conv1D's last, else fusedPartAxis: a stack of experts' second) as long as all the parts'
    // together. Ours as [blocks, rows, cols] around that axis (blocks: the experts of a stack).
    const size_t axis = fusedPartAxis(shape.size());
    const int64_t rows = shape.empty() ? 1 : shape[axis];
    const int64_t blocks = axis == 1 ? shape[0] : 1;
    const int64_t cols = shape.empty() ? 1 : n / std::max<int64_t>(blocks * rows, 1);
    // This part's first row in the fused tensor, and the tensor's rows.
    const PartRows part = place.parts == 1 ? PartRows{0, rows} : part_rows_.at(t.name());
    const int64_t offset = part.first, total = part.all;
    std::vector<int64_t> expected = shape;
    if (place.transposed && expected.size() == 2) std::swap(expected[0], expected[1]);
    if (!expected.empty()) (place.transposed ? expected.back() : expected[axis]) = total;
    if (place.unit_first_axis) expected.insert(expected.begin(), 1);
    requireShape(stored, place.name, expected, t.name());
    const std::string where = model_.dir + "/" + source.file + ": '" + place.name + "'";
    return {t.name(), "F32", shape, nullptr, 4 * n,
            [stored, transposed = place.transposed, blocks, rows, cols, offset, total, n, where](void* out) {
              float* values = static_cast<float*>(out);
              if (total == rows && !transposed) return widen(stored, n, values, where);
              std::vector<float> whole(static_cast<size_t>(blocks * total * cols));
              widen(stored, blocks * total * cols, whole.data(), where);
              if (!transposed) {  // ours: each block's rows offset to offset + rows of the fused [blocks, total, cols]
                for (int64_t b = 0; b < blocks; ++b)
                  std::copy_n(whole.data() + (b * total + offset) * cols, rows * cols, values + b * rows * cols);
                return;
              }
              // ours[o][i] = theirs[i][offset + o] (GPT-2's Conv1D, [in, total])
              for (int64_t o = 0; o < rows; ++o)
                for (int64_t i = 0; i < cols; ++i) values[o * cols + i] = whole[i * total + offset + o];
            }};
  }

 private:
  // Stacked from one tensor per expert, each ours without its first axis.
  SafetensorsTensor expertsTensor(const plan::HostTensor& t, const HuggingFaceSource& source,
                                  const std::vector<int64_t>& shape, int64_t n) {
    const std::vector<int64_t> expert_shape(shape.begin() + 1, shape.end());
    const int64_t expert_numel = n / std::max<int64_t>(shape[0], 1);
    ExpertEntries experts;
    for (int64_t e = 0; e < static_cast<int64_t>(source.expert_files.size()); ++e) {
      const std::string name = expertTensorName(source.place, e);
      const StoredTensor stored = storedOf(source.expert_files[e], name);
      requireShape(stored, name, expert_shape, t.name());
      experts.push_back({stored, model_.dir + "/" + source.expert_files[e] + ": '" + name + "'"});
    }
    return {t.name(), "F32", shape, nullptr, 4 * n, [experts, expert_numel](void* out) {
              widenExperts(experts, expert_numel, static_cast<float*>(out));
            }};
  }

  // Entry `name` of the folder's `file` (mapped as it is first needed), its checksum verified.
  const SafetensorsEntry& entryOf(const std::string& file, const std::string& name) {
    auto& shard = open_[file];
    if (!shard) shard = std::make_unique<SafetensorsFile>(model_.dir + "/" + file);
    auto it = shard->entries().find(name);
    if (it == shard->entries().end())
      throw Error(model_.dir + "/" + file + " has no '" + name + "', which its index places there");
    shard->verify(name);
    return it->second;
  }

  // Tensor `name` of `file` as stored: with its FP8 scales where the folder has them beside it.
  StoredTensor storedOf(const std::string& file, const std::string& name) {
    StoredTensor stored{&entryOf(file, name)};
    if (auto scales = model_.fp8_scale_files.find(name); scales != model_.fp8_scale_files.end()) {
      const std::string scales_name = name + model_.quantization.fp8ScaleSuffix();
      stored.fp8_scales = &entryOf(scales->second, scales_name);
      stored.block = model_.quantization.fp8_block;
      stored.compressed = model_.quantization.kind == WeightQuantization::Kind::kFp8Compressed;
      stored.scales_where = model_.dir + "/" + scales->second + ": '" + scales_name + "'";
    }
    return stored;
  }

  void requireShape(const StoredTensor& stored, const std::string& name, const std::vector<int64_t>& expected,
                    const std::string& ours) const {
    const SafetensorsEntry& entry = *stored.values;
    const std::string is = model_.dir + ": '" + name + "' is " + entry.dtype + " [" + shapeText(entry.shape) + "]";
    if (!stored.fp8_scales) {
      if (entry.dtype.starts_with("F8_") && model_.quantization.kind == WeightQuantization::Kind::kFp8Compressed)
        throw Error(is + " without its scales ('" + name + "_scale', which compressed-tensors' FP8 checkpoints hold "
                    "beside each quantized weight)");
      if (entry.dtype.starts_with("F8_"))
        throw Error(is + " without its scales ('" + name + "_scale_inv', which fine-grained FP8 checkpoints hold "
                    "beside each weight, with a quantization_config of quant_method \"fp8\"; or '" + name +
                    "_scale', with compressed-tensors' of quant_method \"compressed-tensors\")");
      if (!widensTo(entry, expected))
        throw Error(is + " but the model's " + ours + " needs [" + shapeText(expected) + "] in F32, BF16 or F16");
      return;
    }
    if (entry.dtype != "F8_E4M3")
      throw Error(is + " with FP8 scales beside it ('" + name + model_.quantization.fp8ScaleSuffix() +
                  "'): scales belong beside F8_E4M3 weights alone");
    if (entry.shape != expected)
      throw Error(is + " but the model's " + ours + " needs [" + shapeText(expected) + "]");
    const SafetensorsEntry& scales = *stored.fp8_scales;
    if (!widensTo(scales, scales.shape))
      throw Error(stored.scales_where + " is " + scales.dtype + ": FP8 scales are F32, BF16 or F16");
    Fp8BlockSize block;
    if (const std::string problem = fp8ScaleProblem(stored, &block); !problem.empty())
      throw Error(model_.dir + ": '" + name + "': " + problem);
  }

  const HuggingFaceModel& model_;
  std::map<std::string, PartRows> part_rows_;  // fusedPartRows
  std::map<std::string, std::unique_ptr<SafetensorsFile>> open_;
};

}  // namespace

std::set<std::string> bf16Params(const HuggingFaceModel& model) {
  if (model.weightless) {  // no headers to read: the dtype the config says the checkpoint has
    const json config = parseJsonInput(model.config_json, "Hugging Face config " + model.dir);
    const auto says_bf16 = [&](const char* key) { return config.contains(key) && config[key] == "bfloat16"; };
    const bool bf16 = says_bf16("torch_dtype") || says_bf16("dtype");
    std::set<std::string> all;
    if (bf16 && !model.quantization.any())
      for (const auto& [ours, source] : model.weights) all.insert(ours);
    return all;
  }
  std::map<std::string, std::unique_ptr<SafetensorsFile>> open;
  auto isBf16Tensor = [&](const std::string& file, const std::string& name) {
    auto& shard = open[file];
    if (!shard) shard = std::make_unique<SafetensorsFile>(model.dir + "/" + file);
    auto it = shard->entries().find(name);
    return it != shard->entries().end() && it->second.dtype == "BF16";
  };
  std::set<std::string> params;
  for (const auto& [ours, source] : model.weights) {
    if (!source.mxfp4_scales_file.empty()) continue;
    bool bf16 = true;
    if (source.place.per_expert)
      for (size_t e = 0; e < source.expert_files.size() && bf16; ++e)
        bf16 = isBf16Tensor(source.expert_files[e], expertTensorName(source.place, static_cast<int64_t>(e)));
    else
      bf16 = isBf16Tensor(source.file, source.place.name);
    if (bf16) params.insert(ours);
  }
  return params;
}

std::map<std::string, PartRows> fusedPartRows(const HuggingFaceModel& model, const plan::Plan& plan) {
  std::map<std::string, std::vector<std::pair<int64_t, std::string>>> parts;  // by fused tensor: (part, param)
  std::map<std::string, int64_t> out;                                         // each part's output rows
  for (const auto& t : plan.host_tensors()) {
    auto source = model.weights.find(t.name());
    if (t.role() != plan::ROLE_PARAM || source == model.weights.end() || source->second.place.parts == 1) continue;
    parts[source->second.place.name].push_back({source->second.place.part, t.name()});
    out[t.name()] = t.shape().empty() ? 1 : t.shape(static_cast<int>(fusedPartAxis(t.shape_size())));
  }
  std::map<std::string, PartRows> rows;
  for (auto& [tensor, members] : parts) {
    std::sort(members.begin(), members.end());
    int64_t all = 0;
    for (const auto& [part, param] : members) rows[param].first = all, all += out.at(param);
    for (const auto& [part, param] : members) rows[param].all = all;
  }
  return rows;
}

void writeHuggingFaceWeights(const HuggingFaceModel& model, const plan::Plan& plan, const std::string& path,
                             const WeightOverrides& overrides) {
  FolderTensors folder(model, plan);
  std::vector<SafetensorsTensor> tensors;
  for (const auto& t : plan.host_tensors()) {
    if (t.role() != plan::ROLE_PARAM) continue;
    const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    const int64_t n = checkedNumel(t.shape(), t.name());
    if (auto named = overrides.names.find(t.name()); named != overrides.names.end() && overrides.per_expert.count(t.name())) {
      tensors.push_back(perExpertTensor(*overrides.file, named->second, t.name(), shape, n));
    } else if (named != overrides.names.end()) {
      const SafetensorsEntry& entry = overrides.file->entries().at(named->second);  // its shape and dtype checked
      overrides.file->verify(named->second);
      const std::string where = overrides.file->path() + ": '" + named->second + "'";
      auto b_rows = overrides.b_rows.find(t.name());  // PEFT's (all, r*E) into (E, out, r) or (out, r)
      const std::optional<PartRows> peft_b =
          b_rows == overrides.b_rows.end() ? std::nullopt : std::optional(b_rows->second);
      tensors.push_back({t.name(), "F32", shape, nullptr, 4 * n, [&entry, n, where, shape, peft_b](void* out) {
                           if (!peft_b) return widen(entry, n, static_cast<float*>(out), where);
                           readPartB(entry, *peft_b, shape, where, static_cast<float*>(out));
                         }});
    } else if (const int source = rowNormSource(plan, t); source >= 0) {  // a DoRA magnitude: W's row norms
      const plan::HostTensor& w = plan.host_tensors(source);
      tensors.push_back({t.name(), "F32", shape, nullptr, 4 * n, [&tensors, &t, &w](void* out) {
                           const auto values = std::find_if(tensors.begin(), tensors.end(),
                                                            [&](const SafetensorsTensor& s) { return s.name == w.name(); });
                           std::vector<float> staged;
                           initializeRowNorms(t, w, f32Values(*values, staged), static_cast<float*>(out));
                         }});
    } else if (t.init().kind() != plan::Initializer::WEIGHTS) {  // new to the model (a reward model's score head)
      tensors.push_back({t.name(), "F32", shape, nullptr, 4 * n, [&t, &plan, n](void* out) {
                           initializeTensor(static_cast<float*>(out), n, t.init(), plan.init_seed(), t.name());
                         }});
    } else {
      tensors.push_back(folder.tensor(t, shape, n));
    }
    if (auto merge = overrides.merged.find(t.name()); merge != overrides.merged.end())
      tensors.back().produce =
          mergedProducer(std::move(tensors.back().produce), *overrides.file, merge->second, shape);
  }
  writeSafetensors(path, tensors,
                   {{"format", "pt"},
                    {"producer", "megatrain mtc (Hugging Face " + model.architecture + ")"},
                    {"source", model.dir},
                    {kPlanFingerprintKey, planFingerprint(plan)}});
}

}  // namespace mt
