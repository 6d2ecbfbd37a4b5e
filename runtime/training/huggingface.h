// Hugging Face's side of the built-in families (Llama, Qwen2, Mistral checkpoints for the llama
// family; GPT-2's for gpt2): where each parameter lives in their checkpoints, and the folder
// mtrun --export-hf writes — config.json (the plan's ModelInfo.hf_config; a reward model's is its
// ...ForSequenceClassification's, with pad_token_id set) and the weights under Hugging Face's
// names, f32 or bf16, sharded past 5 GB with an index, as transformers' from_pretrained reads them.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "runtime/host/host_store.h"
#include "runtime/plan/huggingface_names.h"
#include "runtime/plan/plan_format.h"

namespace mt {

// What the exported weights are stored as: the fp32 master, or its bf16 rounding (to nearest even).
enum class ExportDtype { kF32, kBf16 };

// How --export-peft writes the adapters on Qwen3-MoE's and Mixtral's experts and routers: as
// transformers 4 holds them, each expert's layer and the router an nn.Linear (target_modules), or
// as transformers 5 does, each layer's experts fused into mlp.experts.gate_up_proj and down_proj
// and the router a bare parameter, mlp.gate.weight (target_parameters).
enum class PeftExpertsForm { kLayers, kFused };

// Throws mt::Error unless the plan can be exported (it has a Hugging Face config, every parameter
// a place, every fused tensor all its parts).
void checkHuggingFaceExport(const plan::Plan& plan);

// Throws mt::Error unless `dir` can take an export: missing, empty, or a folder an earlier
// --export-hf wrote (its weights carry our provenance), its parent writable; removes the
// staging folders of exports killed on the way. Checked before a run, so that a folder
// holding someone's model is refused before the training, not after it.
// `peft`: the same for --export-peft's folder (its adapter_model.safetensors).
void checkHuggingFaceExportFolder(const std::string& dir, bool peft = false);

// Writes the folder `dir` whole or not at all (AtomicFolderWriter: staged beside it, then
// renamed or exchanged into place; an earlier export there is replaced, every file of it):
// config.json with torch_dtype set, and the parameters under Hugging Face's names with
// `metadata` (provenance).
// With the model's own files from the folder it was imported from (ModelInfo.hf_source): its
// tokenizer, chat template and generation config, so the export loads with from_pretrained and
// works with mttok and mtgen as it is.
struct HuggingFaceExport {
  std::vector<std::string> carried;  // the files copied from `source`
  std::string source;                // the folder the model came from ("" for a built-in model)
  std::string note;                  // why none were copied, where the folder is gone
  std::string padding;               // a reward model's pad_token_id, and what it means there
  std::string elsewhere;             // what transformers computes otherwise than the folder says
};
HuggingFaceExport exportHuggingFace(const plan::Plan& plan, const HostStore& store, const std::string& dir,
                                    ExportDtype dtype, const std::map<std::string, std::string>& metadata);

// The layout of the experts in the plan's Hugging Face form, its config checked as for
// --export-hf (`flag` names the export in the errors): throws mt::Error where there is none.
CheckpointLayout exportLayout(const plan::Plan& plan, const std::string& flag);

}  // namespace mt
