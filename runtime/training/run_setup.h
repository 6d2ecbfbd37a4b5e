// What every tool that runs a plan shares (mtrun, mtgen): the backend it runs on and the weights
// it starts from.
#pragma once
#include <memory>
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
std::unique_ptr<Backend> createBackend(BackendKind kind, bool tf32, const plan::Plan& plan, HostStore& store);

// Whether the plan's parameters come from an imported model's weights (no initializer of their own).
bool isImported(const plan::Plan& plan);

// The initial weights, by one rule for every plan: `weights_flag` (--weights); else the weights
// mtc wrote beside the plan (PLAN.safetensors, when its fingerprint says it was written for this
// plan); else the plan's seeded initializers, which an imported plan does not have: "" for them.
std::string initialWeightsPath(const std::string& weights_flag, const std::string& plan_path, const plan::Plan& plan);

}  // namespace mt
