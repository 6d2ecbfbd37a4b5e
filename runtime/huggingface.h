// Hugging Face's side of the llama family (Llama, Qwen2, Mistral checkpoints): its tensor names,
// and the folder mtrun --export-hf writes — config.json (the plan's ModelInfo.hf_config) and the
// weights under Hugging Face's names, f32 or bf16, sharded past 5 GB with an index, as
// transformers' from_pretrained reads them.
#pragma once
#include <map>
#include <string>

#include "runtime/host_store.h"
#include "runtime/plan_format.h"

namespace mt {

// The llama family's parameter `name` as Hugging Face checkpoints spell it ("layers.3.attn.q.weight"
// -> "model.layers.3.self_attn.q_proj.weight"), or "" if it has none.
std::string huggingFaceName(const std::string& name);

// What the exported weights are stored as: the fp32 master, or its bf16 rounding (to nearest even).
enum class ExportDtype { kF32, kBf16 };

// Throws mt::Error unless the plan can be exported (it has a Hugging Face config).
void checkHuggingFaceExport(const plan::Plan& plan);

// Writes the folder `dir` (created if missing; each file atomically): config.json with
// torch_dtype set, and the parameters under Hugging Face's names with `metadata` (provenance).
void exportHuggingFace(const plan::Plan& plan, const HostStore& store, const std::string& dir, ExportDtype dtype,
                       const std::map<std::string, std::string>& metadata);

}  // namespace mt
