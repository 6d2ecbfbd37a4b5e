#include "runtime/plan/plan_dump.h"

#include <algorithm>
#include <map>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/io/format_bytes.h"
#include "runtime/plan/op_table.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

const char* dtypeLabel(plan::DType d) {
  switch (d) {
    case plan::DTYPE_F32: return "f32";
    case plan::DTYPE_I32: return "i32";
    case plan::DTYPE_BF16: return "bf16";
    case plan::DTYPE_I16: return "i16";
    default: return "?";
  }
}

std::string shapeLabel(const google::protobuf::RepeatedField<int64_t>& shape) {
  std::string s = "[";
  for (int i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}


std::string bufferName(const plan::Plan& plan, uint32_t b) {
  return b < static_cast<uint32_t>(plan.buffers_size()) ? "%" + plan.buffers(b).name() : "%?";
}

std::string describe(const plan::Plan& plan, const plan::Instruction& in) {
  switch (in.op_case()) {
    case plan::Instruction::kKernel: {
      const auto& k = in.kernel();
      std::string s = k.kernel() < kNumKernels ? std::string(kKernelTable[k.kernel()].op_name) : "?";
      s += "(";
      for (int i = 0; i < k.inputs_size(); ++i) s += (i ? ", " : "") + bufferName(plan, k.inputs(i));
      s += ") -> ";
      for (int i = 0; i < k.outputs_size(); ++i) s += (i ? ", " : "") + bufferName(plan, k.outputs(i));
      if (k.int_attrs_size() || k.float_attrs_size()) {
        s += "  {";
        for (auto v : k.int_attrs()) s += std::to_string(v) + " ";
        if (k.int_attrs_size() && k.float_attrs_size()) s += "| ";  // ints, then floats
        for (auto v : k.float_attrs()) s += fmt::format("{:g} ", v);
        s.back() = '}';
      }
      return s;
    }
    case plan::Instruction::kCopy: {
      const auto& c = in.copy();
      std::string host = c.host_tensor() < static_cast<uint32_t>(plan.host_tensors_size())
                             ? plan.host_tensors(c.host_tensor()).name()
                             : "?";
      if (c.host_offset() != 0) host += fmt::format(" @{}", c.host_offset());  // a row slice: its byte offset
      return c.direction() == plan::Copy::HOST_TO_DEVICE
                 ? "h2d " + host + " -> " + bufferName(plan, c.buffer())
                 : "d2h " + bufferName(plan, c.buffer()) + " -> " + host;
    }
    case plan::Instruction::kRecordEvent: return "record event " + std::to_string(in.record_event());
    case plan::Instruction::kWaitEvent: return "wait event " + std::to_string(in.wait_event());
    case plan::Instruction::kHostTask:
      return fmt::format("host {} ({} tensors{}{})", plan::HostTask::Kind_Name(in.host_task().kind()),
                         in.host_task().tensors_size(), in.host_task().accumulate() ? ", accumulate" : "",
                         in.host_task().has_padding_id()
                             ? fmt::format(", padding id {}", in.host_task().padding_id())
                             : "");
    default: return "(empty)";
  }
}

// A trace slice's title: the kernel's op, the copied tensor, or the host task.
std::string sliceName(const plan::Plan& plan, const plan::Instruction& in) {
  if (in.has_kernel() && in.kernel().kernel() < kNumKernels)
    return std::string(kKernelTable[in.kernel().kernel()].op_name);
  if (in.has_copy())
    return (in.copy().direction() == plan::Copy::HOST_TO_DEVICE ? "h2d " : "d2h ") +
           plan.host_tensors(in.copy().host_tensor()).name();
  if (in.has_host_task()) return plan::HostTask::Kind_Name(in.host_task().kind());
  return "?";
}

}  // namespace

void dumpPlan(const plan::Plan& plan, const DumpOptions& options, std::ostream& out) {
  const auto& m = plan.model();
  if (options.header) {
    out << fmt::format("plan {} v{}.{}  model {}  batch {} seq {} vocab {}\n", plan.magic(),
                       plan.version_major(), plan.version_minor(), m.name(), m.batch(), m.seq(),
                       m.vocab());
    out << fmt::format("  params {}  flops/step {:.3e}  predicted step {:.1f} ms on {}  precision {}\n",
                       m.num_params(), m.flops_per_step(), m.predicted_step_us() / 1e3, m.hardware(),
                       precisionName(planPrecision(plan)));
    out << fmt::format("  arena {}  buffers {}  host tensors {}  streams {}  events {}\n",
                       formatBytesExact(plan.arena_bytes()), plan.buffers_size(), plan.host_tensors_size(),
                       plan.streams_size(), plan.num_events());
    if (plan.templates_size()) {
      out << "  block templates";
      for (const auto& t : plan.templates()) out << fmt::format("  [{} instructions: {}]", t.instructions_size(), t.name());
      out << "\n";
    }
    const std::string missing = cudaUnsupportedKernels(plan);
    out << "  backends cpu" << (missing.empty() ? ", cuda" : " (" + missing + ")") << "\n";
  }
  if (options.tensors) {
    out << "host tensors:\n";
    for (int i = 0; i < plan.host_tensors_size(); ++i) {
      const auto& t = plan.host_tensors(i);
      out << fmt::format("  {:4} {:<9} {:<4} {:<18} {}{}{}{}{}\n", i,
                         plan::HostRole_Name(t.role()).substr(5), dtypeLabel(t.dtype()),
                         shapeLabel(t.shape()), t.name(), t.frozen() ? " (frozen)" : "",
                         t.lora_alpha() != 0.0f ? fmt::format(" (alpha {:g})", t.lora_alpha()) : "",
                         t.bf16_only() ? " (bf16 only: its STAGING)"
                         : t.role() == plan::ROLE_PARAM && isSplitMaster(plan, i) ? " (split: its STAGING + RESIDUAL)"
                                                                                  : "",
                         t.origin().empty() || t.origin() == t.name() ? "" : "  <- ONNX " + t.origin());
    }
  }
  if (options.memory) {
    out << fmt::format("device arena ({}):\n", formatBytesExact(plan.arena_bytes()));
    std::vector<int> order(plan.buffers_size());
    for (int i = 0; i < plan.buffers_size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return plan.buffers(a).offset() < plan.buffers(b).offset(); });
    for (int i : order) {
      const auto& b = plan.buffers(i);
      int64_t n = 1;
      for (auto d : b.shape()) n *= d;
      out << fmt::format("  {:>12} +{:<10} {:<4} {:<18} %{}\n", b.offset(),
                         n * (b.dtype() == plan::DTYPE_BF16 ? 2 : 4), dtypeLabel(b.dtype()),
                         shapeLabel(b.shape()), b.name());
    }
  }
  if (options.schedule) {
    for (int s = 0; s < plan.streams_size(); ++s) {
      const auto& stream = plan.streams(s);
      out << fmt::format("stream {} '{}' ({}), {} instructions{}:\n", s, stream.name(),
                         plan::Stream::Kind_Name(stream.kind()), stream.instructions_size(),
                         stream.has_loss_prefix()
                             ? fmt::format(" (the first {} run for the loss alone)", stream.loss_prefix())
                             : "");
      for (int i = 0; i < stream.instructions_size(); ++i) {
        const auto& in = stream.instructions(i);
        out << fmt::format("  {:4}  {}", i, describe(plan, in));
        if (in.flops() || in.predicted_us())
          out << fmt::format("   # {:.2e} flop, {:.1f} us", double(in.flops()), in.predicted_us());
        out << "\n";
      }
    }
  }
}

namespace {

// The metadata naming a trace's process and its stream tracks.
void nameTracks(const plan::Plan& plan, int pid, const std::string& process, nlohmann::json& events) {
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", process}}}});
  for (int s = 0; s < plan.streams_size(); ++s)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", s},
                      {"args", {{"name", plan.streams(s).name()}}}});
}

}  // namespace

void writeMeasuredTrace(const plan::Plan& plan, const StepTimeline& timeline, const std::string& backend,
                        std::ostream& out) {
  nlohmann::json events = nlohmann::json::array();
  nameTracks(plan, 1, "measured (" + backend + ")", events);
  for (int s = 0; s < plan.streams_size() && s < static_cast<int>(timeline.size()); ++s)
    for (int i = 0; i < plan.streams(s).instructions_size() && i < static_cast<int>(timeline[s].size()); ++i) {
      const Interval& t = timeline[s][i];
      if (t.start_us < 0) continue;
      const auto& in = plan.streams(s).instructions(i);
      events.push_back({{"name", sliceName(plan, in)}, {"ph", "X"}, {"pid", 1}, {"tid", s}, {"ts", t.start_us},
                        {"dur", t.end_us - t.start_us},
                        {"args", {{"instruction", describe(plan, in)}, {"predicted us", in.predicted_us()}}}});
    }
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
}

void writeTrace(const plan::Plan& plan, std::ostream& out) {
  nlohmann::json events = nlohmann::json::array();
  nameTracks(plan, 0, "predicted (" + plan.model().hardware() + ")", events);
  // Replay the streams: an instruction starts when its stream is free and, for a wait, when the
  // event's instruction has finished.
  std::vector<double> clock(plan.streams_size(), 0.0), recorded(plan.num_events(), -1.0);
  std::vector<int> pc(plan.streams_size(), 0);
  // Each buffer's live span: from the start of its first access to the end of its last.
  std::vector<double> first_use(plan.buffers_size(), -1.0), last_use(plan.buffers_size(), -1.0);
  auto touch = [&](uint32_t buffer, double start, double end) {
    if (first_use[buffer] < 0 || start < first_use[buffer]) first_use[buffer] = start;
    last_use[buffer] = std::max(last_use[buffer], end);
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < plan.streams_size(); ++s) {
      const auto& instrs = plan.streams(s).instructions();
      for (; pc[s] < instrs.size(); ++pc[s]) {
        const auto& in = instrs[pc[s]];
        if (in.has_wait_event()) {
          if (recorded[in.wait_event()] < 0) break;
          clock[s] = std::max(clock[s], recorded[in.wait_event()]);
        } else if (in.has_record_event()) {
          recorded[in.record_event()] = clock[s];
        } else {
          events.push_back({{"name", sliceName(plan, in)}, {"ph", "X"}, {"pid", 0}, {"tid", s},
                            {"ts", clock[s]}, {"dur", in.predicted_us()},
                            {"args", {{"instruction", describe(plan, in)}, {"flops", in.flops()}, {"bytes", in.bytes()}}}});
          const double end = clock[s] + in.predicted_us();
          if (in.has_copy()) touch(in.copy().buffer(), clock[s], end);
          for (uint32_t b : in.kernel().inputs()) touch(b, clock[s], end);
          for (uint32_t b : in.kernel().outputs()) touch(b, clock[s], end);
          clock[s] = end;
        }
        progress = true;
      }
    }
  }
  // Device memory in use over the step, as a counter track. Buffers over the same bytes at
  // the same time (views) are counted once; the same bytes reused later count again.
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> spans;  // bytes -> spans
  for (int b = 0; b < plan.buffers_size(); ++b) {
    if (first_use[b] < 0) continue;
    int64_t bytes = dtypeBytes(plan.buffers(b).dtype());
    for (auto d : plan.buffers(b).shape()) bytes *= d;
    spans[{plan.buffers(b).offset(), bytes}].emplace_back(first_use[b], last_use[b]);
  }
  std::map<double, int64_t> changes;
  for (auto& [range, list] : spans) {
    std::sort(list.begin(), list.end());
    for (size_t i = 0; i < list.size();) {
      double start = list[i].first, end = list[i].second;
      for (++i; i < list.size() && list[i].first < end; ++i) end = std::max(end, list[i].second);
      changes[start] += range.second;
      changes[end] -= range.second;
    }
  }
  int64_t in_use = 0;
  for (const auto& [time, delta] : changes) {
    in_use += delta;
    events.push_back({{"name", "device memory (MiB)"}, {"ph", "C"}, {"pid", 0}, {"ts", time},
                      {"args", {{"in use", in_use / 1048576.0}}}});
  }
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
}

}  // namespace mt
