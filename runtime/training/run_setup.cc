#include "runtime/training/run_setup.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "runtime/training/checkpoint.h"
#include "runtime/backends/cuda_device.h"
#include "runtime/data/hf_tokenizer.h"
#include "runtime/io/error.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/plan_queries.h"

namespace mt {

BackendKind chooseBackend(BackendChoice choice, bool tf32, const plan::Plan& plan) {
  BackendKind kind = BackendKind::kCpu;
  if (choice != BackendChoice::kCpu) {
    const GpuInfo gpu = probeGpu();
    if (choice == BackendChoice::kCuda && !gpu.available)
      throw Error("--backend cuda: " + gpu.description + "; use --backend cpu");
    const std::string missing = gpu.available && choice == BackendChoice::kAuto ? cudaUnsupportedKernels(plan) : "";
    if (!missing.empty())
      std::printf("note: running on the CPU although there is a GPU (%s): %s\n", gpu.description.c_str(),
                  missing.c_str());
    if (gpu.available && missing.empty()) kind = BackendKind::kCuda;
  }
  // Explicitly on the CPU, --tf32 contradicts the run; chosen by "auto" it is a note, so that
  // one config file serves machines with and without a GPU.
  if (kind == BackendKind::kCpu && tf32 && choice == BackendChoice::kCpu)
    throw Error("--tf32 sets the CUDA backend's matrix precision, but this run is on the CPU (exact fp32): drop "
                "--tf32");
  if (kind == BackendKind::kCpu && tf32)
    std::printf("note: --tf32 has no effect on the CPU backend (exact fp32)\n");
  return kind;
}

std::unique_ptr<Backend> createBackend(BackendKind kind, const CudaOptions& cuda, const plan::Plan& plan,
                                       HostStore& store) {
  if (kind == BackendKind::kCuda) return createCudaBackend(plan, store, cuda);
  // A note, as for --tf32 under auto: one config file serves machines with and without a GPU.
  if (cuda.attention != AttentionEngine::kAuto)
    std::printf("note: --attention chooses the CUDA backend's attention kernels; it has no effect on the CPU backend\n");
  return createCpuBackend(plan, store);
}

bool isImported(const plan::Plan& plan) {
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_PARAM && t.init().kind() == plan::Initializer::WEIGHTS) return true;
  return false;
}

std::string initialWeightsPath(const std::string& weights_flag, const std::string& plan_path, const plan::Plan& plan) {
  if (!weights_flag.empty()) return weights_flag;
  const std::string beside = weightsBesidePlan(plan_path);
  const bool exists = access(beside.c_str(), F_OK) == 0;
  if (exists) {
    const SafetensorsFile file(beside);
    const auto fingerprint = file.metadata().find(kPlanFingerprintKey);
    if (fingerprint != file.metadata().end() && fingerprint->second == planFingerprint(plan)) return beside;
  }
  const std::string problem =
      exists ? beside + " was not written for this plan (another compile's, or not mtc's)" : "there is no " + beside;
  if (isImported(plan))
    throw Error("the plan's parameters come from an imported model's weights, but " + problem +
                ": pass --weights with the .safetensors file mtc wrote when it compiled the plan");
  if (exists) std::printf("note: %s: starting from the plan's seeded initializers\n", problem.c_str());
  return "";
}

std::optional<uint32_t> modelTokenizerFingerprint(const plan::Plan& plan) {
  const std::string& source = plan.model().hf_source();
  if (source.empty()) return std::nullopt;
  const std::string path = source + "/tokenizer.json";
  if (access(path.c_str(), R_OK) != 0) return std::nullopt;
  return HfTokenizer(path).fingerprint();
}

void checkModelTokenizer(const plan::Plan& plan, uint32_t fingerprint, const std::string& what,
                         const std::string& override_flag) {
  if (fingerprint == 0) return;  // not recorded (a token file from before)
  const std::optional<uint32_t> model = modelTokenizerFingerprint(plan);
  if (!model || *model == fingerprint) return;
  throw Error(fmt::format("{} was made with another tokenizer (fingerprint {:08x}) than the model's ({}/tokenizer.json, "
                          "{:08x}): its ids mean other tokens to this model. Tokenize with the model's own "
                          "(mttok --tokenizer {}), or pass {} if that is what you mean",
                          what, fingerprint, plan.model().hf_source(), *model, plan.model().hf_source(), override_flag));
}

}  // namespace mt
