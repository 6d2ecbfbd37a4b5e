// Hugging Face model folders in: `config.json` (compiler/HuggingFaceConfig.h) and the folder's
// safetensors (one file, or shards with model.safetensors.index.json; F32, BF16 or F16, or quantized:
// WeightQuantization) mapped by name onto the family's parameters and widened to the fp32 master,
// one tensor at a time (GPT-2's Conv1D weights transposed, its fused c_attn cut into q, k and v).
// Read strictly:
// a config key mtc does not know, a setting it does not implement (a rope scaling other than
// linear, llama3 and yarn, biases it has no place for) or a tensor without a place is an error
// naming it, never ignored.
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compiler/HuggingFaceConfig.h"
#include "models/ModelConfig.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/huggingface_names.h"
#include "runtime/plan.pb.h"

namespace mt {

// Where one of the family's parameters comes from: a safetensors file in the folder and its
// place there (runtime/plan/huggingface_names.h: the tensor, transposed or not, which part of it).
struct HuggingFaceSource {
  std::string file;
  HuggingFacePlace place;
  std::vector<std::string> expert_files;  // a per-expert place: expert e's tensor's file (shards may split them)
  // gpt-oss's official checkpoints: the MXFP4 scales' file, `file` holding the blocks (place.name
  // + "_blocks" and "_scales"); empty for a plain tensor.
  std::string mxfp4_scales_file;
};

struct HuggingFaceModel {
  std::string dir;
  std::string architecture;  // "LlamaForCausalLM", ...
  ModelConfig config;
  std::string config_json;     // config.json as read: the plan keeps it for mtrun --export-hf
  std::map<std::string, HuggingFaceSource> weights;  // by the family's parameter name
  // What the config asks for that training does not do, said in mtc's summary (GPT-2's dropout).
  std::vector<std::string> notes;
  WeightQuantization quantization;  // the config's quantization_config
  // FP8 (WeightQuantization::fp8(): fine-grained or compressed-tensors'): the file of each E4M3 weight's scales
  // (`<name>_scale_inv` or `<name>_scale`), by the weight's name in the folder.
  std::map<std::string, std::string> fp8_scale_files;
  // A folder without its weights read for mtc --no-weights (config.json, and the index where it has
  // one: a plan to size before downloading the weights): each parameter's place named, no file
  // opened.
  bool weightless = false;
  // A multimodal folder's class (Gemma3ForConditionalGeneration, Mistral3ForConditionalGeneration)
  // where it is read as its language model (`architecture`: Gemma3ForCausalLM, MistralForCausalLM);
  // "" for any other folder.
  std::string multimodal;
};

// Whether `path` is a directory holding a config.json.
bool isHuggingFaceFolder(const std::string& path);

// Reads the folder's config and weight index; throws mt::Error naming what it cannot take.
// `config_alone`: a folder without weights is read from its config (HuggingFaceModel::weightless).
HuggingFaceModel readHuggingFaceFolder(const std::string& dir, bool config_alone = false);

// A part's rows of a tensor that holds several of the model's along its output axis: `out` of them
// from `first`, of `all`. The folder's fused weights (GPT-2's c_attn, Phi-3's qkv_proj: q's, k's,
// then v's rows) and PEFT's lora_B (all, r*E) on such a layer or stack, of which a part's B is
// (E, out, r), or (out, r) where E is 1 (transformers 5's gate_up_proj of experts: gate's rows, then
// up's). A stack of gpt-oss's is its tensor's whole: from 0, all its out.
struct PartRows {
  int64_t first = 0, all = 0;
};

// The rows of each of `plan`'s parameters that is a part of a fused tensor of `model`, by the
// parameter's name: the parts in order along the tensor's output axis, each as long as its
// parameter's output axis (its first; GPT-2's Conv1D stores it last, transposed).
std::map<std::string, PartRows> fusedPartRows(const HuggingFaceModel& model, const plan::Plan& plan);

// Parameters whose starting values come from another safetensors file than the folder's (mtc
// --lora-from: a PEFT adapter's, compiler/PeftAdapter.h), each tensor there F32, BF16 or F16 of
// the shape it is used at (checked when the names were chosen):
// - `names`: plan name -> the tensor's name in `file`, read instead of the folder's;
// - `merged` (a forward-only plan): plan name -> the adapters merged into the folder's weight
//   (W + scale B A, kernels/matmul/lora_merge.h).
struct LoraMergeSource {
  // What W is and how `file` holds its adapters:
  // - kWeight: W (out, in), A (r, in) and B (out, r);
  // - kGptOssStack: a stack of gpt-oss's experts, W (E, in, out), A and B in PEFT's layout of its
  //   target_parameters, (E*r, in) and (out, r*E);
  // - kFusedStack: a stack of Qwen3-MoE's or Mixtral's experts, W (E, out, in), its adapters PEFT's
  //   on transformers 5's fused parameter (fusedExpertsPlace): A (E*r, in) and B (parts*out, r*E),
  //   of which `b_rows` says W's part (gate_up_proj's B holds gate's rows, then up's), a kWeight
  //   of Phi-3's fused linear layer likewise (B (all, r), W's rows of it); `b_rows.all` 0: B (out, r);
  // - kPerExpert: a stack of Qwen3-MoE's or Mixtral's experts, W (E, out, in), expert e's A (r, in)
  //   and B (out, r) tensors of their own (PEFT's target_modules on each expert's linear layer):
  //   `a` and `b` name them with a '*' for e (expertTensorName).
  enum class Form { kWeight, kGptOssStack, kPerExpert, kFusedStack };
  std::string a, b;  // their names in `file`
  double scale = 0;
  std::string magnitude;  // DoRA's m (out), its name in `file`; "" for LoRA
  Form form = Form::kWeight;
  PartRows b_rows;  // kFusedStack's, a fused layer's kWeight
};
struct WeightOverrides {
  std::shared_ptr<const SafetensorsFile> file;  // read once: what was checked is what is read
  std::map<std::string, std::string> names;
  std::map<std::string, LoraMergeSource> merged;
  // Of `names`: a B read from its rows of PEFT's lora_B (all, r*E): a stack's (E, out, r)
  // (stackExpertBFromPeft), or a part's (out, r) of Phi-3's fused linear layer.
  std::map<std::string, PartRows> b_rows;
  // Of `names`: a stack (E, ...) read from E tensors of `file`, expert e's (...) the name with its
  // '*' made e (expertTensorName): the adapters on Qwen3-MoE's and Mixtral's experts.
  std::set<std::string> per_expert;
};

// The parameters whose every source tensor in the folder is BF16 (not MXFP4): their values, widened
// to f32, are bf16 values, which a frozen one's staging copy holds whole (plan 1.32's bf16_only).
// Reads the shards' headers; throws mt::Error for one it cannot read. A weightless folder's: all,
// where its config's torch_dtype (or dtype) is bfloat16.
std::set<std::string> bf16Params(const HuggingFaceModel& model);

// Writes the plan's parameters from the folder's weights (those `overrides` names from its file)
// as fp32 safetensors at `path` (with the plan's fingerprint, so mtrun takes them as the plan's
// initial weights). Throws mt::Error for a tensor of the wrong shape or dtype.
void writeHuggingFaceWeights(const HuggingFaceModel& model, const plan::Plan& plan, const std::string& path,
                             const WeightOverrides& overrides = {});

}  // namespace mt
