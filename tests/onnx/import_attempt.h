// One hostile ONNX model through the whole compiler, as the mutation test (tests/onnx/
// mutation_test.cc) and the libFuzzer harness (tests/fuzz/fuzz_onnx.cc) drive it: imported as a
// model to train or as a forward-only one; an import either succeeds — and then its plan must
// compile and pass the runtime's verifier, and a small forward-only plan must run — or fails with
// ImportError. Anything else (a crash, another exception, a compiled plan the verifier refuses)
// is a finding.
#pragma once
#include <string>

#include "compiler/Emitter.h"
#include "compiler/Stages.h"
#include "compiler/onnx/OnnxImporter.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/backends/backend.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/verifier.h"

namespace mt::test {

// What became of one attempt.
enum class Attempt { kRefused, kImported, kRan };

inline Attempt attemptImport(const std::string& path, bool training) {
  mlir::MLIRContext context;
  context.printOpOnDiagnostic(false);
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic&) { return mlir::success(); });
  onnximport::ImportOptions options;
  options.training = training;
  options.batch = 2, options.seq = 3;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  try {
    module = onnximport::importModel(context, path, options, nullptr);
  } catch (const onnximport::ImportError&) {
    return Attempt::kRefused;
  }
  if (runStages(*module, {std::nullopt, 0, Schedule::kResident}).failed) return Attempt::kImported;  // a pass refused it
  plan::Plan plan;
  PlanStats stats;
  EmitOptions emit;
  modelShape(*module, emit.batch, emit.seq, emit.vocab);
  if (mlir::failed(emitPlan(*module, emit, plan, stats))) return Attempt::kImported;
  expandTemplates(plan);
  verifyPlan(plan);  // a compiled plan must verify: an Error here is a compiler bug
  if (training || plan.arena_bytes() > (int64_t{256} << 20)) return Attempt::kImported;
  int64_t host_bytes = 0;
  for (const auto& t : plan.host_tensors()) host_bytes += hostTensorBytes(t);
  if (host_bytes > (int64_t{256} << 20)) return Attempt::kImported;  // a valid plan too large to run here
  HostStore store(plan);
  store.initialize(1);
  createCpuBackend(plan, store)->runStep({});
  return Attempt::kRan;
}

}  // namespace mt::test
