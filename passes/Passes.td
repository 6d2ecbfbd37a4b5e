#ifndef MT_PASSES_TD
#define MT_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttachLossPass : Pass<"mt-attach-loss", "mlir::ModuleOp"> {
  let summary = "End a graph that returns logits in a softmax cross-entropy loss";
  let description = [{
    If the model function returns logits (B, T, V), appends a `targets` (B, T) i32 input and
    an `mt.softmax_xent`, and returns the scalar loss instead. A function that already returns
    a scalar loss is left as it is; anything else is an error.
  }];
  let dependentDialects = ["::mt::MtDialect"];
}

def AutodiffPass : Pass<"mt-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of the loss with respect to every parameter";
  let description = [{
    Walks the forward ops in reverse, applying each op's gradient rule
    (GradientOpInterface), summing the gradients of values used more than once, and returns
    the loss followed by one gradient per parameter argument (result attribute `mt.grad`
    naming the parameter). Needs a function that returns a scalar loss.
  }];
  let dependentDialects = ["::mt::MtDialect"];
}

def ScheduleResidentPass : Pass<"mt-schedule-resident", "mlir::ModuleOp"> {
  let summary = "All-resident schedule: copy inputs and weights in, gradients out, optimise on host";
  let description = [{
    Inserts an `mt.h2d` for every argument (parameters and inputs) at the start of the step,
    an `mt.d2h` for the loss and every gradient at its end, then the host tasks: the global
    gradient norm and AdamW over every parameter. The memory-centric schedule (layer blocks,
    streamed weights) replaces this pass for models larger than the device.
  }];
  let dependentDialects = ["::mt::MtDialect"];
}

def PlanMemoryPass : Pass<"mt-plan-memory", "mlir::ModuleOp"> {
  let summary = "Static offsets of every device value in one arena, by liveness";
  let description = [{
    Gives every device value (results of compute ops and of `mt.h2d`) an offset in a single
    arena (`mt.offsets` on its op), reusing the bytes of values whose last use has passed;
    `mt.reshape` results share their input's bytes. Records the arena size as `mt.arena_bytes`
    on the function. With a budget, fails naming the smallest budget that would work.
  }];
  let options = [
    Option<"budget", "budget", "int64_t", /*default=*/"0",
           "Device memory budget in bytes (0: unlimited)">,
  ];
  let dependentDialects = ["::mt::MtDialect"];
}

#endif // MT_PASSES_TD
