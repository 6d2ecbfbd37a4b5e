// What every tool that runs a plan shares (mtrun, mtgen): the backend it runs on and the weights
// it starts from.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "runtime/backends/backend.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/plan_format.h"
#include "runtime/training/backend_choice.h"

namespace mt {

enum class BackendKind { kCpu, kCuda };

// Where a run asking for `choice` lands: auto takes the GPU when there is one and the CUDA backend
// has every kernel of the plan, and says why when it does not; cuda refuses rather than fall back.
// `tf32` on a run that lands on the CPU: an error when asked for cpu, a note under auto (one
// config file serves machines with and without a GPU).
BackendKind chooseBackend(BackendChoice choice, bool tf32, const plan::Plan& plan);
// `cuda`: the CUDA backend's options (a CPU run notes that --attention has no effect there).
std::unique_ptr<Backend> createBackend(BackendKind kind, const CudaOptions& cuda, const plan::Plan& plan,
                                       HostStore& store);

// The tokenizer of the Hugging Face folder the plan's model came from (ModelInfo.hf_source, its
// tokenizer.json), as a fingerprint (HfTokenizer::fingerprint); nullopt for a model from
// elsewhere, or where the folder or its tokenizer.json is gone.
std::optional<uint32_t> modelTokenizerFingerprint(const plan::Plan& plan);

// Throws mt::Error unless `fingerprint` (a token file's, or --tokenizer's; 0: not recorded) is the
// model's (modelTokenizerFingerprint) or unknown: ids of another tokenizer mean other tokens to
// the model, trained on or printed without a word. `what` names the file or flag; the error names
// both tokenizers and the fix (`override_flag` passes it).
void checkModelTokenizer(const plan::Plan& plan, uint32_t fingerprint, const std::string& what,
                         const std::string& override_flag);

// Whether the plan's parameters come from an imported model's weights (no initializer of their own).
bool isImported(const plan::Plan& plan);

// The initial weights, by one rule for every plan: `weights_flag` (--weights); else the weights
// mtc wrote beside the plan (PLAN.safetensors, when its fingerprint says it was written for this
// plan); else the plan's seeded initializers, which an imported plan does not have: "" for them.
std::string initialWeightsPath(const std::string& weights_flag, const std::string& plan_path, const plan::Plan& plan);

}  // namespace mt
