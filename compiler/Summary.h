// What mtc prints once a plan is written: the model, its batch, host and device memory, the
// optimizer, what moves per step, the precision, the cost model's prediction with its floor
// and bottleneck, and the files.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "compiler/Emitter.h"
#include "compiler/CompileOptions.h"
#include "compiler/Stages.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/io/format_bytes.h"
#include "runtime/plan/plan_format.h"

namespace mt {

struct CompileReport {
  const CompileOptions& options;
  std::string description;           // the model and where it came from
  std::vector<std::string> notes;    // what the input asks for that training does not do
  std::vector<std::pair<std::string, std::string>> kept_constant;  // ONNX initializers kept constant, and why
  // ONNX parameters whose initializers the export left anonymous ("onnx::MatMul_271"), named from
  // the path of the node using them.
  struct PathName {
    std::string name, initializer;
    bool transposed = false;  // the initializer holds the parameter transposed
  };
  std::vector<PathName> path_names;
  std::string batch_note;            // --batch auto's reason
  UpdateKind update = UpdateKind::kDeferred;
  std::string update_note;           // why the update kind, when chosen
  std::string budget_source;         // where the device budget came from
  int64_t host_bytes = 0;
  std::string host_parts;            // what the host bytes hold
  bool write_weights = false;
  std::string weights;               // the initial weights' path
  std::string weights_origin;        // what they are: the seeded initializers, or the model's own
  // Where unwritten weights come from at mtrun's start: "" for the plan's seeded initializers;
  // else why mtrun needs a weights file (an import's weights are not in the plan).
  std::string weights_needed;
  double seconds = 0.0;              // compile time
};

void printSummary(const CompileReport& r, mlir::ModuleOp module, const StageResult& stages, const EmitOptions& emit,
                  const plan::Plan& plan, const PlanStats& stats);
// --ranks: the plan run data parallel (SummaryRanks.cpp). Nothing for one rank.
void printDataParallel(const CompileOptions& o, const EmitOptions& emit, const plan::Plan& plan,
                       const PlanStats& stats);
// The host bytes of one host of a job of `ranks` ranks, `ranks_per_host` on each (the optimizer
// sharded, one copy of the master weights per host): what --host-mem bounds. One process's for
// one rank.
double hostBytesPerHost(const plan::Plan& plan, int64_t ranks, int64_t ranks_per_host);
// The predicted step of the job `o` prices (--ranks) as mtrun runs it (the exchange on the
// hosts): one rank's step, or longer where a host's stream, memory or link is busier.
double dataParallelStepMicros(const CompileOptions& o, const EmitOptions& emit, const plan::Plan& plan,
                              const PlanStats& stats);

}  // namespace mt
