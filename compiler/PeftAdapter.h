// mtc --lora-from DIR: a PEFT LoRA adapter folder (what PEFT's save_pretrained writes, and
// mtrun --export-peft) on the Hugging Face folder it was trained from. adapter_config.json sets
// what --lora, --lora-alpha, --lora-rslora, --lora-dropout, --lora-dora, --lora-targets and
// --trainable would, its target_modules and modules_to_save matched against the folder's module
// names as PEFT matches them; adapter_model.safetensors gives the adapters' and the saved modules' starting
// values (a forward-only plan has the adapters merged into their weights instead).
// Both files are hostile until checked: a setting mtc does not implement (trained biases,
// GPT-2's Conv1D, an initialisation that changes the base weights, ...), or a key it does not
// know holding anything but an empty value, is an error naming it; every tensor of the file must
// have a place in the plan and fit it, and every adapter of the plan must find its tensors there.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/CompileOptions.h"
#include "compiler/ModuleExpression.h"
#include "compiler/HuggingFace.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan.pb.h"

namespace mt {

struct PeftAdapter {
  std::string dir;
  int64_t rank = 0;
  double alpha = 8.0;
  bool rslora = false;
  bool dora = false;  // use_dora: each adapted module has a magnitude too
  bool sequence_classifier = false;  // task_type SEQ_CLS: a reward model's, its score head saved
  double dropout = 0.0;
  bool ensure_weight_tying = false;  // a saved tied embedding stays tied to the LM head
  // target_modules: module names (a module is adapted whose name is one or ends with "." + one),
  // an expression the whole name must match, or every linear layer of the layers.
  std::vector<std::string> targets;
  std::optional<ModuleExpression> target_expression;
  bool all_linear = false;
  // all-linear as transformers 4's mixtures of experts had it, where each expert's layers and the
  // router are nn.Linear too: the file holds adapters of single experts' layers
  // ("….experts.3.gate_proj.lora_A.weight"). Otherwise transformers 5's, which has neither.
  bool all_linear_experts = false;
  // target_parameters: parameters (a parameter is adapted whose name is one or ends with "." + one),
  // gpt-oss's stacks of experts.
  std::vector<std::string> target_parameters;
  std::vector<std::string> saved;  // modules_to_save: a module whose name ends with one
  // exclude_modules: never adapted (names as target_modules' list, or an expression).
  std::vector<std::string> excluded;
  std::optional<ModuleExpression> exclude_expression;
  // layers_to_transform (with a list of target_modules): only the modules of these layers, each
  // layer's index the first number after one of layers_pattern's names (or after any name).
  std::optional<std::set<int64_t>> layers;
  std::vector<std::string> layers_pattern;
  // rank_pattern and alpha_pattern: a module's own rank or alpha, from the first key (in the
  // file's order) matching the end of its name, as PEFT's get_pattern_key finds it.
  struct Pattern {
    static constexpr char kAnyCharacter = '\x01';  // in `tail`: Python's '.'
    std::string key;
    ModuleExpression expression;  // PEFT's "(.*\.)?(key)$"
    // A key of word characters and dots: the end of a name it matches, compared directly.
    std::optional<std::string> tail;
    double value;
  };
  std::vector<Pattern> rank_pattern, alpha_pattern;
  // The PEFT that wrote it (peft_version's first three numbers; none where it is not given so):
  // some versions took a stack of experts' in and out the other way round.
  std::optional<std::array<int64_t, 3>> peft_version;
  std::shared_ptr<const SafetensorsFile> weights;  // adapter_model.safetensors, its header checked
};

// Module `module`'s rank and alpha (its patterns' or the adapter's).
int64_t adapterRank(const PeftAdapter& adapter, const std::string& module);
double adapterAlpha(const PeftAdapter& adapter, const std::string& module);

// Reads DIR/adapter_config.json and the header of DIR/adapter_model.safetensors; throws
// mt::Error naming what it cannot take.
PeftAdapter readPeftAdapter(const std::string& dir);

// Sets what the adapter says in `o`: the lora_* options, and the adapted weights, their own ranks
// and alphas and the saved modules' tensors by plan name (o.lora_from_targets, lora_from_ranks,
// lora_from_alphas, lora_from_saved), resolved over `model`'s names. Throws mt::Error where its targets find no module.
void applyPeftAdapter(const PeftAdapter& adapter, const HuggingFaceModel& model, CompileOptions& o);

// The plan's parameters whose starting values the adapter's weights give: its adapters, the
// saved modules' tensors and whole tensors it holds (an embedding saved beside them); with
// `forward_only`, the adapters merged into their weights. Throws mt::Error for a tensor of the
// file without a place in the plan, a place without its tensor, one that does not fit, or a
// saved tied embedding PEFT would untie.
WeightOverrides peftWeights(const PeftAdapter& adapter, const plan::Plan& plan, const HuggingFaceModel& model,
                            bool forward_only);

}  // namespace mt
