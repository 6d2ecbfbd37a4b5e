// mtrun --export-peft: a LoRA plan's adapters (mtc --lora) as PEFT's adapter folder, what
// PeftModel.from_pretrained(base, DIR) loads on the model the plan was compiled from (a reward
// model's on AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)):
// - adapter_model.safetensors (f32): each adapted module's "base_model.model.<module>.lora_A.weight"
//   and ".lora_B.weight" (with DoRA, mtc --lora-dora, also ".lora_magnitude_vector"), and each
//   module trained whole beside them (mtc --trainable: PEFT's modules_to_save; a reward model's
//   score head, trained or not) as "base_model.model.<module>.<tensor>", all of its tensors;
// - adapter_config.json: peft_type LORA, task_type CAUSAL_LM (a reward model's SEQ_CLS, as PEFT's
//   sequence classifiers save theirs), r and lora_alpha (what most adapters have), rank_pattern
//   and alpha_pattern (the others': mtc --lora-rank-pattern, --lora-alpha-pattern), use_rslora,
//   lora_dropout, use_dora; target_modules a leaf name where every module of that name is adapted, else the adapted
//   modules' full names; modules_to_save their full names; base_model_name_or_path the folder the
//   model came from.
// Adapters on a stack of experts: gpt-oss's as PEFT's target_parameters (its ParamWrapper's
// layout), Qwen3-MoE's and Mixtral's as each expert's linear layer (target_modules, transformers 4's)
// or, with PeftExpertsForm::kFused, on transformers 5's fused parameters (target_parameters:
// gate_up_proj's lora_A gate's and up's A side by side in the rank, its lora_B their B
// block-diagonal, as PEFT converts the per-expert form on loading; the routers' mlp.gate.weight).
// Written whole or not at all. checkPeftExport throws mt::Error, before a run, for what PEFT
// cannot hold: a plan without adapters, an adapted weight without an nn.Linear of its own (GPT-2's Conv1D,
// gpt-oss's router), a trained tensor whose module PEFT cannot save whole (fused, transposed, one
// of a stack of experts), a module both adapted and trained whole, or a trained embedding the LM
// head is tied to. --export-hf writes all of those.
#pragma once
#include <map>
#include <string>

#include "runtime/host/host_store.h"
#include "runtime/plan/plan_format.h"
#include "runtime/training/huggingface.h"

namespace mt {

void checkPeftExport(const plan::Plan& plan, PeftExpertsForm experts = PeftExpertsForm::kLayers);
void exportPeft(const plan::Plan& plan, const HostStore& store, const std::string& dir,
                const std::map<std::string, std::string>& metadata, PeftExpertsForm experts = PeftExpertsForm::kLayers);

}  // namespace mt
