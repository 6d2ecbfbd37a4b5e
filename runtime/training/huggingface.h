// Hugging Face's side of the built-in families (Llama, Qwen2, Mistral checkpoints for the llama
// family; GPT-2's for gpt2): where each parameter lives in their checkpoints, and the folder
// mtrun --export-hf writes — config.json (the plan's ModelInfo.hf_config) and the
// weights under Hugging Face's names, f32 or bf16, sharded past 5 GB with an index, as
// transformers' from_pretrained reads them.
#pragma once
#include <map>
#include <string>

#include "runtime/host/host_store.h"
#include "runtime/plan/plan_format.h"

namespace mt {

// The llama family's parameter `name` as Hugging Face checkpoints spell it ("layers.3.attn.q.weight"
// -> "model.layers.3.self_attn.q_proj.weight"), or "" if it has none.
std::string huggingFaceName(const std::string& name);

// Where a parameter of either family lives in a Hugging Face checkpoint: the tensor (GPT-2's
// body under `gpt2_body`: "transformer." as transformers saves GPT2LMHeadModel, "" in the
// original checkpoints), whether it is stored transposed (GPT-2's Conv1D: [in, out]), and which
// part of how many along the tensor's output axis (GPT-2's c_attn holds q, k and v side by
// side). `name` is empty where the parameter has no place. One table for mtc's import and
// mtrun's export.
struct HuggingFacePlace {
  std::string name;
  bool transposed = false;
  int64_t part = 0, parts = 1;
};
HuggingFacePlace huggingFacePlace(const std::string& param, const std::string& gpt2_body = "transformer.");

// What the exported weights are stored as: the fp32 master, or its bf16 rounding (to nearest even).
enum class ExportDtype { kF32, kBf16 };

// Throws mt::Error unless the plan can be exported (it has a Hugging Face config, every parameter
// a place, every fused tensor all its parts).
void checkHuggingFaceExport(const plan::Plan& plan);

// Throws mt::Error unless `dir` can take an export: missing, empty, or a folder an earlier
// --export-hf wrote (its weights carry our provenance), its parent writable; removes the
// staging folders of exports killed on the way. Checked before a run, so that a folder
// holding someone's model is refused before the training, not after it.
void checkHuggingFaceExportFolder(const std::string& dir);

// Writes the folder `dir` whole or not at all (AtomicFolderWriter: staged beside it, then
// renamed or exchanged into place; an earlier export there is replaced, every file of it):
// config.json with torch_dtype set, and the parameters under Hugging Face's names with
// `metadata` (provenance).
void exportHuggingFace(const plan::Plan& plan, const HostStore& store, const std::string& dir, ExportDtype dtype,
                       const std::map<std::string, std::string>& metadata);

}  // namespace mt
