#include "runtime/plan/plan_format.h"


#include "runtime/io/error.h"
#include "runtime/io/mapped_file.h"

namespace mt {

plan::Plan readPlan(const std::string& path) {
  return parsePlan(readWholeFile(path, "plan", "(compile one with mtc)"), path);
}

plan::Plan parsePlan(const std::string& bytes, const std::string& path) {
  plan::Plan plan;
  if (!plan.ParseFromString(bytes))
    throw Error("plan " + path + " is corrupt: not a valid plan protobuf (recompile it with mtc)");
  if (plan.magic() != kPlanMagic)
    throw Error("plan " + path + " is not a MegaTrain plan (bad magic '" + plan.magic().substr(0, 16) +
                "')");
  if (plan.version_major() != kPlanVersionMajor || plan.version_minor() > kPlanVersionMinor)
    throw Error("plan " + path + " has format version " + std::to_string(plan.version_major()) +
                "." + std::to_string(plan.version_minor()) + " but this runtime reads " +
                std::to_string(kPlanVersionMajor) + ".0 to " + std::to_string(kPlanVersionMajor) +
                "." + std::to_string(kPlanVersionMinor) +
                ": recompile the model with the mtc that matches this mtrun");
  expandTemplates(plan);
  return plan;
}

std::string weightsBesidePlan(const std::string& plan_path) {
  const size_t dot = plan_path.rfind(".plan");
  return (dot != std::string::npos ? plan_path.substr(0, dot) : plan_path) + ".safetensors";
}

void expandTemplates(plan::Plan& plan) {
  if (plan.templates_size() == 0) return;
  auto fail = [](const std::string& what) { throw Error("invalid plan: " + what); };
  for (int t = 0; t < plan.templates_size(); ++t)
    for (const auto& in : plan.templates(t).instructions())
      if (!in.has_kernel()) fail("template " + std::to_string(t) + " holds an instruction other than a kernel call");
  for (int s = 0; s < plan.streams_size(); ++s) {
    auto* stream = plan.mutable_streams(s);
    bool any = false;
    for (const auto& in : stream->instructions()) any |= in.has_launch();
    if (!any) continue;
    google::protobuf::RepeatedPtrField<plan::Instruction> flat;
    for (const auto& in : stream->instructions()) {
      if (!in.has_launch()) {
        *flat.Add() = in;
        continue;
      }
      const auto& launch = in.launch();
      const std::string where = "stream " + std::to_string(s) + ": a launch of template " +
                                std::to_string(launch.block_template());
      if (launch.block_template() >= static_cast<uint32_t>(plan.templates_size())) fail(where + ", which does not exist");
      const auto& tmpl = plan.templates(static_cast<int>(launch.block_template()));
      if (launch.buffers_size() != static_cast<int>(tmpl.num_buffers()))
        fail(where + " binds " + std::to_string(launch.buffers_size()) + " buffers; the template takes " +
             std::to_string(tmpl.num_buffers()));
      auto buffer = [&](uint32_t slot) {
        if (slot >= tmpl.num_buffers()) fail(where + ": the template uses buffer slot " + std::to_string(slot));
        return launch.buffers(static_cast<int>(slot));
      };
      // Waits and records in the launch's order, each at a template instruction.
      const auto size = static_cast<uint32_t>(tmpl.instructions_size());
      for (const auto* syncs : {&launch.waits(), &launch.records()})
        for (int k = 0; k < syncs->size(); ++k)
          if ((*syncs)[k].at() >= size || (k > 0 && (*syncs)[k].at() < (*syncs)[k - 1].at()))
            fail(where + ": a wait or record at instruction " + std::to_string((*syncs)[k].at()) +
                 " (out of range or out of order)");
      int wait = 0, record = 0;
      for (uint32_t at = 0; at < size; ++at) {
        for (; wait < launch.waits_size() && launch.waits(wait).at() == at; ++wait)
          flat.Add()->set_wait_event(launch.waits(wait).event());
        plan::Instruction* out = flat.Add();
        *out = tmpl.instructions(static_cast<int>(at));
        auto* call = out->mutable_kernel();
        for (auto& b : *call->mutable_inputs()) b = buffer(b);
        for (auto& b : *call->mutable_outputs()) b = buffer(b);
        for (; record < launch.records_size() && launch.records(record).at() == at; ++record)
          flat.Add()->set_record_event(launch.records(record).event());
      }
    }
    *stream->mutable_instructions() = std::move(flat);
  }
}

void writePlan(const plan::Plan& plan, const std::string& path) {
  std::string bytes;
  if (!plan.SerializeToString(&bytes)) throw Error("cannot serialise plan for " + path);
  writeFileAtomically(path, bytes);
}

int64_t checkedNumel(const google::protobuf::RepeatedField<int64_t>& shape, const std::string& what) {
  constexpr int64_t kMaxElements = int64_t{1} << 48;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(what + " has a negative dimension");
    if (d != 0 && n > kMaxElements / d) throw Error(what + " has more than 2^48 elements");
    n *= d;
  }
  return n;
}

int64_t hostTensorBytes(const plan::HostTensor& tensor) {
  return checkedNumel(tensor.shape(), tensor.name()) * dtypeBytes(tensor.dtype());
}

int64_t copyBytes(const plan::Plan& plan, const plan::Copy& copy) {
  const auto& buffer = plan.buffers(copy.buffer());
  return checkedNumel(buffer.shape(), buffer.name()) * dtypeBytes(buffer.dtype());
}

int64_t dtypeBytes(plan::DType dtype) {
  switch (dtype) {
    case plan::DTYPE_F32: return 4;
    case plan::DTYPE_I32: return 4;
    case plan::DTYPE_BF16: return 2;
    case plan::DTYPE_I16: return 2;
    default: throw Error("unknown dtype " + std::to_string(static_cast<int>(dtype)));
  }
}

}  // namespace mt
