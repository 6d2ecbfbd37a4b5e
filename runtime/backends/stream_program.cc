#include "runtime/backends/stream_program.h"

#include "runtime/io/error.h"
#include "runtime/plan/plan_queries.h"

namespace mt {

std::vector<std::vector<Op>> bindPrograms(const plan::Plan& plan, const HostStore& store, std::byte* arena,
                                          const StepRandomness* random) {
  std::vector<std::vector<Op>> programs;
  const std::vector<std::vector<bool>> kept = keptCopies(plan);
  int transfers = 0;
  for (const auto& stream : plan.streams()) {
    std::vector<Op> program;
    for (const auto& in : stream.instructions()) {
      switch (in.op_case()) {
        case plan::Instruction::kKernel: {
          KernelOp op{static_cast<KernelId>(in.kernel().kernel()), bindKernelCall(plan, in.kernel(), arena)};
          op.args.random = random;
          program.push_back(std::move(op));
          break;
        }
        case plan::Instruction::kCopy: {
          const auto& c = in.copy();
          std::byte* device = arena + plan.buffers(c.buffer()).offset();
          // Null where the store holds no such tensor (an evaluation's: the gradients), never copied then.
          std::byte* base = static_cast<std::byte*>(store.landed(c.host_tensor()));
          std::byte* host = base ? base + c.host_offset() : nullptr;
          const int64_t bytes = copyBytes(plan, c);
          if (c.direction() == plan::Copy::HOST_TO_DEVICE)
            program.push_back(CopyOp{device, host, bytes, kept[programs.size()][program.size()], transfers++,
                                     static_cast<int>(c.host_tensor())});
          else
            program.push_back(CopyOp{host, device, bytes});
          break;
        }
        case plan::Instruction::kRecordEvent: program.push_back(RecordOp{in.record_event()}); break;
        case plan::Instruction::kWaitEvent: program.push_back(WaitOp{in.wait_event()}); break;
        case plan::Instruction::kHostTask:
          program.push_back(HostTaskOp{in.host_task().kind(),
                                       {in.host_task().tensors().begin(), in.host_task().tensors().end()},
                                       in.host_task().accumulate(),
                                       in.host_task().has_padding_id() ? in.host_task().padding_id() : -1});
          break;
        default: throw Error("internal: an unverified plan given to a backend");
      }
    }
    programs.push_back(std::move(program));
  }
  return programs;
}

}  // namespace mt
