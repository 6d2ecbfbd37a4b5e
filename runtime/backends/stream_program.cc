#include "runtime/backends/stream_program.h"

#include "runtime/io/error.h"
#include "runtime/plan/plan_queries.h"

#include <algorithm>

namespace mt {
namespace {

// Marks `kept` the candidate copies (kept set) whose destination bytes no other instruction of
// any stream writes (a kernel's output or another copy to the device); unmarks the rest.
void markKeptCopies(std::vector<std::vector<Op>>& programs) {
  struct Range {
    const std::byte *begin, *end;
    CopyOp* copy;  // the candidate writing it, or null
  };
  std::vector<Range> writes;
  for (auto& program : programs)
    for (Op& op : program) {
      if (auto* k = std::get_if<KernelOp>(&op))
        for (const Tensor& t : k->args.out)
          writes.push_back({static_cast<const std::byte*>(t.data), static_cast<const std::byte*>(t.data) + t.bytes(), nullptr});
      if (auto* c = std::get_if<CopyOp>(&op); c && c->kept)
        writes.push_back({static_cast<const std::byte*>(c->dst), static_cast<const std::byte*>(c->dst) + c->bytes, c});
    }
  std::sort(writes.begin(), writes.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  // Sorted by start, a range overlaps another iff an earlier one ends after its start or the
  // next one starts before its end.
  const std::byte* earlier_end = nullptr;
  for (size_t i = 0; i < writes.size(); ++i) {
    const Range& w = writes[i];
    const bool overlaps = (earlier_end && earlier_end > w.begin) || (i + 1 < writes.size() && writes[i + 1].begin < w.end);
    if (w.copy) w.copy->kept = !overlaps && w.end > w.begin;
    earlier_end = std::max(earlier_end ? earlier_end : w.end, w.end);
  }
}

}  // namespace

std::vector<std::vector<Op>> bindPrograms(const plan::Plan& plan, const HostStore& store, std::byte* arena,
                                          const StepRandomness* random) {
  std::vector<std::vector<Op>> programs;
  const bool training = isTrainingPlan(plan);
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
          std::byte* host = static_cast<std::byte*>(store.data(c.host_tensor())) + c.host_offset();
          const int64_t bytes = copyBytes(plan, c);
          if (c.direction() == plan::Copy::HOST_TO_DEVICE)
            program.push_back(CopyOp{device, host, bytes, !training && unchangingBetweenRuns(plan.host_tensors(c.host_tensor()))});
          else
            program.push_back(CopyOp{host, device, bytes});
          break;
        }
        case plan::Instruction::kRecordEvent: program.push_back(RecordOp{in.record_event()}); break;
        case plan::Instruction::kWaitEvent: program.push_back(WaitOp{in.wait_event()}); break;
        case plan::Instruction::kHostTask:
          program.push_back(HostTaskOp{in.host_task().kind(),
                                       {in.host_task().tensors().begin(), in.host_task().tensors().end()},
                                       in.host_task().accumulate()});
          break;
        default: throw Error("internal: an unverified plan given to a backend");
      }
    }
    programs.push_back(std::move(program));
  }
  markKeptCopies(programs);
  return programs;
}

}  // namespace mt
