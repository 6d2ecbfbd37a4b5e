// The plan emitter: turns a scheduled, memory-planned model function into a plan.
#pragma once
#include <string>

#include "compiler/HardwareProfile.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/plan/plan_format.h"

namespace mt {

struct EmitOptions {
  std::string model_name;
  int64_t batch = 0, seq = 0, vocab = 0;
  uint64_t init_seed = 0;
  HardwareProfile hardware;
  // Identical layer blocks' compute instructions as one template launched per block (plan 1.3);
  // off: every instruction written out (what readPlan's expansion gives back either way).
  bool templates = true;
  std::string hf_config;  // ModelInfo.hf_config: the model's Hugging Face config.json, or ""
  std::string hf_source;  // ModelInfo.hf_source: the folder it was imported from (absolute), or ""
  std::string hf_module_prefix;  // ModelInfo.hf_module_prefix: kMultimodalLanguageModel, or ""
  int64_t active_params = 0;  // ModelInfo.active_params: a mixture of experts' active parameters, else 0
  double lora_alpha = 0;      // ModelInfo.lora_alpha: mtc --lora-alpha where --lora, else 0
  bool lora_rslora = false;   // ModelInfo.lora_rslora: mtc --lora-rslora
  double lora_dropout = 0;    // ModelInfo.lora_dropout: mtc --lora-dropout
};

// Per-step totals the summary reports.
struct PlanStats {
  int64_t num_params = 0;
  int64_t frozen_params = 0;  // of which frozen (mtc --frozen, --trainable): never trained
  double flops = 0;           // all kernels of one step
  int64_t h2d_bytes = 0;      // host -> device per step
  int64_t weight_h2d_bytes = 0;  // of which parameters (their bf16 staging copies, where streamed so)
  int64_t weight_h2d_numel = 0;  // the parameters' elements copied in: the weights' link crossings x num_params
  int64_t frozen_h2d_bytes = 0;  // of weight_h2d_bytes, the frozen parameters' (mtc --frozen, a LoRA's base)
  bool bf16_staging = false;     // the parameters cross the link as bf16 staging copies (mt-stage-bf16)
  int64_t d2h_bytes = 0;      // device -> host per step
  int64_t activation_bytes = 0;  // of h2d + d2h: activations offloaded to the host and back
  int64_t token_row_bytes = 0;   // of h2d + d2h: the tokens' rows of a host embedding (mt-host-embedding)
  double compute_us = 0, h2d_us = 0, d2h_us = 0, host_us = 0;  // busy time per stream kind
  double step_us = 0;         // predicted, with the streams overlapping as the events allow
  // A training plan whose frozen weights (and constants) the device keeps between steps: the
  // bytes only the first step copies (not in h2d_bytes above, which are a later step's) and the
  // first step's predicted time (0 when it is step_us).
  int64_t first_step_h2d_bytes = 0;
  int64_t first_step_weight_bytes = 0;  // of which the frozen weights (their staging copies)
  double first_step_us = 0;
  // Predicted time the compute stream stands idle, by the stream whose busy time made it wait
  // (1 h2d, 2 d2h, 3 host; 0: after the last kernel).
  double compute_wait_us[4] = {0, 0, 0, 0};
};

// Fails (with a diagnostic on the function) if the module is not scheduled and planned.
mlir::LogicalResult emitPlan(mlir::ModuleOp module, const EmitOptions& options, plan::Plan& plan,
                             PlanStats& stats);

}  // namespace mt
