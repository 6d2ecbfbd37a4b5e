#include "runtime/plan/verifier.h"

#include <algorithm>
#include <map>
#include <set>

#include "runtime/io/error.h"
#include "runtime/plan/kernel_registry.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

constexpr uint32_t kMaxEvents = 1u << 20;

[[noreturn]] void fail(const std::string& message) {
  throw Error("invalid plan: " + message + " (recompile the model with mtc)");
}

std::string where(int stream, int instr) {
  return "stream " + std::to_string(stream) + " instruction " + std::to_string(instr);
}

// A ROW_NORMS parameter (1-D): `of` is one other parameter, 2-D, a row per element, itself not
// ROW_NORMS.
// `params`: the parameters by name, -1 for a name two of them have.
void verifyRowNorms(const plan::Plan& plan, const std::map<std::string, int>& params, const plan::HostTensor& t,
                    const std::string& what) {
  auto found = params.find(t.init().of());
  if (found == params.end()) fail(what + ": its ROW_NORMS initializer reads '" + t.init().of() + "', which is no parameter");
  if (found->second < 0) fail(what + ": two parameters are named '" + t.init().of() + "', which its ROW_NORMS initializer reads");
  const plan::HostTensor* source = &plan.host_tensors(found->second);
  if (source->init().kind() == plan::Initializer::ROW_NORMS)
    fail(what + ": its ROW_NORMS initializer reads another ROW_NORMS parameter");
  if (t.shape_size() != 1 || source->shape_size() != 2 || source->shape(0) != t.shape(0))
    fail(what + ": a ROW_NORMS parameter is 1-D with one element per row of the 2-D '" + source->name() + "'");
}

void verifyHostTensors(const plan::Plan& plan) {
  std::map<plan::HostRole, int> singletons;
  std::set<std::pair<plan::HostRole, std::string>> io_names;
  std::map<int, int> staged, split;  // parameter -> its staging copies, its residuals
  std::map<std::string, int> params;   // by name; -1 where two share it
  for (int i = 0; i < plan.host_tensors_size(); ++i)
    if (plan.host_tensors(i).role() == plan::ROLE_PARAM) {
      auto [it, fresh] = params.emplace(plan.host_tensors(i).name(), i);
      if (!fresh) it->second = -1;
    }
  for (int i = 0; i < plan.host_tensors_size(); ++i) {
    const auto& t = plan.host_tensors(i);
    const std::string what = "host tensor " + std::to_string(i) + " '" + t.name() + "'";
    if (!plan::DType_IsValid(t.dtype())) fail(what + " has an unknown dtype");
    if (!plan::HostRole_IsValid(t.role())) fail(what + " has an unknown role");
    checkedNumel(t.shape(), what);
    if (t.frozen() && t.role() != plan::ROLE_PARAM) fail(what + ": only a parameter can be frozen");
    if (t.role() != plan::ROLE_PARAM && (t.init().kind() == plan::Initializer::ROW_NORMS || !t.init().of().empty()))
      fail(what + ": only a parameter has a ROW_NORMS initializer");
    if (t.bf16_only() && !(t.role() == plan::ROLE_PARAM && t.frozen()))
      fail(what + ": only a frozen parameter is held as bf16 alone");
    if (t.lora_alpha() != 0.0f && !(t.role() == plan::ROLE_PARAM && t.name().ends_with(kLoraASuffix)))
      fail(what + ": only a LoRA adapter's A (\"X" + kLoraASuffix + "\") has an alpha of its own");
    if (t.lora_alpha() != 0.0f && !(t.lora_alpha() >= 1e-6f && t.lora_alpha() <= 1e6f))
      fail(what + ": its LoRA alpha " + std::to_string(t.lora_alpha()) + " is not in [1e-6, 1e6]");
    switch (t.role()) {
      case plan::ROLE_PARAM:
        if (t.dtype() != plan::DTYPE_F32) fail(what + ": parameters must be f32");
        if (!plan::Initializer::Kind_IsValid(t.init().kind()))
          fail(what + " has an unknown initializer");
        if (!(t.init().std() >= 0.0f && t.init().std() < 1e6f))
          fail(what + " has an initializer std out of range");
        if (!(t.init().bound() >= 0.0f && t.init().bound() < 1e6f))
          fail(what + " has an initializer bound out of range");
        if (t.init().kind() == plan::Initializer::ROW_NORMS) verifyRowNorms(plan, params, t, what);
        else if (!t.init().of().empty()) fail(what + " names a parameter to initialize from, but is not ROW_NORMS");
        break;
      case plan::ROLE_GRAD:
      case plan::ROLE_MOMENT1:
      case plan::ROLE_MOMENT2:
      case plan::ROLE_STAGING:
      case plan::ROLE_RESIDUAL: {
        const int p = t.param_index();
        if (p < 0 || p >= plan.host_tensors_size() ||
            plan.host_tensors(p).role() != plan::ROLE_PARAM)
          fail(what + " refers to parameter index " + std::to_string(p) + ", not a parameter");
        if (plan.host_tensors(p).frozen() && t.role() != plan::ROLE_STAGING && t.role() != plan::ROLE_RESIDUAL)
          fail(what + " belongs to frozen parameter '" + plan.host_tensors(p).name() +
               "', which has no gradient or moments");
        const auto dtype = t.role() == plan::ROLE_STAGING    ? plan::DTYPE_BF16
                           : t.role() == plan::ROLE_RESIDUAL ? plan::DTYPE_I16
                                                             : plan::DTYPE_F32;
        if (t.dtype() != dtype ||
            !std::equal(t.shape().begin(), t.shape().end(), plan.host_tensors(p).shape().begin(),
                        plan.host_tensors(p).shape().end()))
          fail(what + " must be " + (dtype == plan::DTYPE_F32 ? "f32" : dtype == plan::DTYPE_BF16 ? "bf16" : "i16") +
               " with the shape of its parameter");
        if (t.role() == plan::ROLE_STAGING && ++staged[p] > 1)
          fail("parameter '" + plan.host_tensors(p).name() + "' has two staging copies");
        if (t.role() == plan::ROLE_RESIDUAL && ++split[p] > 1)
          fail("parameter '" + plan.host_tensors(p).name() + "' has two residuals");
        break;
      }
      case plan::ROLE_TOKENS:
      case plan::ROLE_TARGETS:
        if (t.dtype() != plan::DTYPE_I32 || t.shape_size() != 2)
          fail(what + " must be an i32 (batch, seq) tensor");
        if (++singletons[t.role()] > 1) fail("more than one token/target input");
        break;
      case plan::ROLE_LOSS:
        if (t.dtype() != plan::DTYPE_F32 || t.shape_size() != 0) fail(what + " must be an f32 scalar");
        if (++singletons[t.role()] > 1) fail("more than one loss output");
        break;
      case plan::ROLE_INPUT:
      case plan::ROLE_OUTPUT:
        if (t.dtype() == plan::DTYPE_BF16) fail(what + " must be f32 or i32");
        if (!io_names.insert({t.role(), t.name()}).second) fail("two inputs or two outputs are named '" + t.name() + "'");
        ++singletons[t.role()];
        break;
      case plan::ROLE_CONSTANT:
        if (static_cast<int64_t>(t.data().size()) != checkedNumel(t.shape(), what) * dtypeBytes(t.dtype()))
          fail(what + " holds " + std::to_string(t.data().size()) + " bytes of data, not its size");
        break;
      case plan::ROLE_ACTIVATION:
        if (t.dtype() != plan::DTYPE_F32 && t.dtype() != plan::DTYPE_BF16)
          fail(what + ": offloaded activations must be f32 or bf16");
        break;
      case plan::ROLE_TOKEN_ROWS:
        if (t.dtype() != plan::DTYPE_F32) fail(what + ": the tokens' rows of an embedding must be f32");
        break;
      case plan::ROLE_GRAD_LANDING:
        if (t.dtype() != plan::DTYPE_F32 || t.shape_size() != 1) fail(what + " must be a 1-D f32 buffer");
        if (++singletons[t.role()] > 1) fail("more than one gradient landing buffer");
        break;
      default: break;
    }
    if (t.dtype() == plan::DTYPE_I16 && t.role() != plan::ROLE_RESIDUAL) fail(what + ": only residuals are i16");
    if (t.role() != plan::ROLE_GRAD && t.landing_offset() != 0) fail(what + " has a landing offset but is not a gradient");
    if (t.role() != plan::ROLE_CONSTANT && !t.data().empty()) fail(what + " holds data but is not a constant");
  }
  for (auto [p, residuals] : split) {
    if (!staged.count(p))
      fail("parameter '" + plan.host_tensors(p).name() + "' has a residual but no staging copy (a split master is both)");
    if (plan.host_tensors(p).bf16_only())
      fail("parameter '" + plan.host_tensors(p).name() + "' is held as bf16 alone but has a residual");
  }
  for (int p = 0; p < plan.host_tensors_size(); ++p)
    if (plan.host_tensors(p).bf16_only() && !staged.count(p))
      fail("parameter '" + plan.host_tensors(p).name() + "' is held as bf16 alone but has no staging copy");
  // Gradients in the landing buffer: each inside it, aligned.
  const int landing = gradLandingTensor(plan);
  for (const auto& t : plan.host_tensors()) {
    if (t.role() != plan::ROLE_GRAD) continue;
    if (landing < 0) {
      if (t.landing_offset() != 0) fail("gradient '" + t.name() + "' has a landing offset but the plan has no landing buffer");
      continue;
    }
    const int64_t size = checkedNumel(plan.host_tensors(landing).shape(), "landing buffer") * 4;
    const int64_t bytes = checkedNumel(t.shape(), t.name()) * 4;
    if (t.landing_offset() < 0 || t.landing_offset() % kArenaAlignment != 0 || t.landing_offset() > size ||
        bytes > size - t.landing_offset())
      fail("gradient '" + t.name() + "' at landing offset " + std::to_string(t.landing_offset()) +
           " does not lie inside the landing buffer of " + std::to_string(size) + " bytes");
  }
  if (isTrainingPlan(plan)) {
    for (auto role : {plan::ROLE_TOKENS, plan::ROLE_TARGETS, plan::ROLE_LOSS})
      if (singletons[role] != 1) fail("a training plan needs exactly one tokens, targets and loss tensor");
  } else {
    if (singletons[plan::ROLE_OUTPUT] == 0) fail("a forward-only plan needs at least one output");
    for (const auto& t : plan.host_tensors())
      if (t.role() == plan::ROLE_GRAD || t.role() == plan::ROLE_MOMENT1 || t.role() == plan::ROLE_MOMENT2 ||
          t.role() == plan::ROLE_GRAD_LANDING)
        fail("a forward-only plan has no gradients or optimizer moments ('" + t.name() + "')");
  }
}

void verifyBuffers(const plan::Plan& plan) {
  if (plan.arena_bytes() < 0) fail("negative arena size");
  for (int i = 0; i < plan.buffers_size(); ++i) {
    const auto& b = plan.buffers(i);
    const std::string what = "buffer " + std::to_string(i) + " '" + b.name() + "'";
    if (!plan::DType_IsValid(b.dtype()) || b.dtype() == plan::DTYPE_I16) fail(what + " has an unknown dtype");
    const int64_t bytes = checkedNumel(b.shape(), what) * dtypeBytes(b.dtype());
    if (b.offset() < 0 || b.offset() % kArenaAlignment != 0)
      fail(what + " has offset " + std::to_string(b.offset()) + ", not a non-negative multiple of " +
           std::to_string(kArenaAlignment));
    if (b.offset() > plan.arena_bytes() || bytes > plan.arena_bytes() - b.offset())
      fail(what + " [" + std::to_string(b.offset()) + ", +" + std::to_string(bytes) +
           ") lies outside the arena of " + std::to_string(plan.arena_bytes()) + " bytes");
  }
}

void verifyKernel(const plan::Plan& plan, const plan::KernelCall& call, const std::string& at) {
  if (call.kernel() >= kNumKernels) fail(at + ": unknown kernel " + std::to_string(call.kernel()));
  const KernelInfo& info = kKernelTable[call.kernel()];
  const std::string name(info.op_name);
  if (call.inputs_size() != info.num_inputs || call.outputs_size() != info.num_outputs)
    fail(at + ": " + name + " takes " + std::to_string(info.num_inputs) + " inputs and " +
         std::to_string(info.num_outputs) + " outputs");
  // At most 16 ints and 1,024 floats (LongRoPE's: two factors for each of up to 256 pairs).
  if ((info.num_int_attrs >= 0 && call.int_attrs_size() != info.num_int_attrs) ||
      (info.num_float_attrs >= 0 && call.float_attrs_size() != info.num_float_attrs) || call.int_attrs_size() > 16 ||
      call.float_attrs_size() > 1024)
    fail(at + ": " + name + " has the wrong number of attributes");
  for (uint32_t b : call.inputs())
    if (b >= static_cast<uint32_t>(plan.buffers_size())) fail(at + ": buffer index out of range");
  for (uint32_t b : call.outputs())
    if (b >= static_cast<uint32_t>(plan.buffers_size())) fail(at + ": buffer index out of range");
  std::string problem = checkKernelCall(static_cast<KernelId>(call.kernel()), bindKernelCall(plan, call, nullptr));
  if (!problem.empty()) fail(at + ": " + name + ": " + problem);
}

void verifyCopy(const plan::Plan& plan, const plan::Copy& copy, const std::string& at) {
  if (!plan::Copy::Direction_IsValid(copy.direction())) fail(at + ": unknown copy direction");
  if (copy.host_tensor() >= static_cast<uint32_t>(plan.host_tensors_size()) ||
      copy.buffer() >= static_cast<uint32_t>(plan.buffers_size()))
    fail(at + ": copy index out of range");
  const auto& h = plan.host_tensors(copy.host_tensor());
  const auto& b = plan.buffers(copy.buffer());
  const int64_t host = checkedNumel(h.shape(), "host tensor"), buffer = checkedNumel(b.shape(), "buffer");
  const int64_t element = dtypeBytes(h.dtype()), offset = copy.host_offset();
  if (h.dtype() != b.dtype()) fail(at + ": copy between '" + h.name() + "' and '" + b.name() + "' of different types");
  if (h.role() == plan::ROLE_PARAM && isSplitMaster(plan, copy.host_tensor()))
    fail(at + ": copy of '" + h.name() + "', a split master: it holds no bytes (its staging copy is copied)");
  if (offset < 0 || offset % element != 0 || offset / element > host - buffer)
    fail(at + ": copy of " + std::to_string(buffer) + " elements at byte " + std::to_string(offset) + " of '" +
         h.name() + "' (" + std::to_string(host) + " elements) leaves the host tensor");
}

// `normed`: the gradients whose norm share an earlier task of the stream took; this task's are
// added (a GRAD_NORM's, or a NORM_AND_ADAMW_ON_ARRIVAL's parameters' gradients).
// EMBEDDING_LOOKUP / EMBEDDING_GRAD: [rows, ids, table] / [table's gradient, ids, rows].
void verifyEmbeddingTask(const plan::Plan& plan, const plan::HostTask& task, const std::string& at) {
  const bool lookup = task.kind() == plan::HostTask::EMBEDDING_LOOKUP;
  const std::string kind = plan::HostTask::Kind_Name(task.kind());
  if (task.tensors_size() != 3) fail(at + ": " + kind + " takes 3 host tensors");
  for (uint32_t t : task.tensors())
    if (t >= static_cast<uint32_t>(plan.host_tensors_size())) fail(at + ": " + kind + " operand out of range");
  const auto& table = plan.host_tensors(task.tensors(lookup ? 2 : 0));
  const auto& ids = plan.host_tensors(task.tensors(1));
  const auto& rows = plan.host_tensors(task.tensors(lookup ? 0 : 2));
  if (table.role() != (lookup ? plan::ROLE_PARAM : plan::ROLE_GRAD) || ids.role() != plan::ROLE_TOKENS ||
      rows.role() != plan::ROLE_TOKEN_ROWS)
    fail(at + ": " + kind + " needs " + (lookup ? "rows, tokens and a parameter" : "a gradient, tokens and rows") +
         " (host tensor roles)");
  std::vector<int64_t> expected(ids.shape().begin(), ids.shape().end());
  expected.push_back(table.shape_size() == 2 ? table.shape(1) : -1);
  if (table.dtype() != plan::DTYPE_F32 || ids.dtype() != plan::DTYPE_I32 || rows.dtype() != plan::DTYPE_F32 ||
      !std::equal(expected.begin(), expected.end(), rows.shape().begin(), rows.shape().end()))
    fail(at + ": " + kind + " of '" + table.name() + "': the rows '" + rows.name() +
         "' must be f32 of the tokens' shape + [C] of an f32 (V, C) table");
  if (lookup && task.accumulate()) fail(at + ": EMBEDDING_LOOKUP does not accumulate");
  if (lookup && task.has_padding_id()) fail(at + ": only EMBEDDING_GRAD has a padding_id");
  if (task.has_padding_id() && (task.padding_id() < 0 || task.padding_id() >= table.shape(0)))
    fail(at + ": EMBEDDING_GRAD's padding_id " + std::to_string(task.padding_id()) + " is not a row of the gradient '" +
         table.name() + "'");
}

void verifyHostTask(const plan::Plan& plan, const plan::HostTask& task, bool norm_seen, std::set<uint32_t>& normed,
                    const std::string& at) {
  if (!plan::HostTask::Kind_IsValid(task.kind())) fail(at + ": unknown host task");
  if (task.kind() == plan::HostTask::EMBEDDING_LOOKUP || task.kind() == plan::HostTask::EMBEDDING_GRAD)
    return verifyEmbeddingTask(plan, task, at);
  if (task.accumulate()) fail(at + ": only EMBEDDING_GRAD accumulates");
  if (task.has_padding_id()) fail(at + ": only EMBEDDING_GRAD has a padding_id");
  const auto wanted = task.kind() == plan::HostTask::GRAD_NORM ? plan::ROLE_GRAD : plan::ROLE_PARAM;
  for (uint32_t t : task.tensors()) {
    if (t >= static_cast<uint32_t>(plan.host_tensors_size()) || plan.host_tensors(t).role() != wanted)
      fail(at + ": host task operand " + std::to_string(t) + " has the wrong role");
  }
  if (task.kind() == plan::HostTask::GRAD_NORM) {
    for (uint32_t g : task.tensors())
      if (!normed.insert(g).second) fail(at + ": a gradient's norm is taken twice in a step");
  } else {
    std::vector<uint32_t> grads_normed;  // by a NORM_AND_ADAMW_ON_ARRIVAL task, once it passed
    for (uint32_t t : task.tensors()) {
      if (plan.host_tensors(t).frozen())
        fail(at + ": an update of frozen parameter '" + plan.host_tensors(t).name() + "', which never trains");
      int grads = 0, first = 0, second = 0, grad = -1;
      for (int i = 0; i < plan.host_tensors_size(); ++i) {
        const auto& h = plan.host_tensors(i);
        if (h.param_index() != static_cast<int>(t)) continue;
        if (h.role() == plan::ROLE_GRAD) ++grads, grad = i;
        first += h.role() == plan::ROLE_MOMENT1;
        second += h.role() == plan::ROLE_MOMENT2;
      }
      if (grads != 1 || first != 1 || second != 1)
        fail(at + ": parameter '" + plan.host_tensors(t).name() +
             "' needs exactly one gradient, one first moment and one second moment tensor");
      if (task.kind() == plan::HostTask::ADAMW_ON_ARRIVAL && !normed.count(static_cast<uint32_t>(grad)))
        fail(at + ": ADAMW_ON_ARRIVAL of '" + plan.host_tensors(t).name() +
             "' before the GRAD_NORM task of its gradient (which checks it for NaN/Inf)");
      if (task.kind() == plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL) {
        if (normed.count(static_cast<uint32_t>(grad)))
          fail(at + ": NORM_AND_ADAMW_ON_ARRIVAL of '" + plan.host_tensors(t).name() +
               "' after a GRAD_NORM task of its gradient (the norm would count it twice)");
        grads_normed.push_back(static_cast<uint32_t>(grad));
      }
    }
    normed.insert(grads_normed.begin(), grads_normed.end());
  }
  if (task.kind() == plan::HostTask::ADAMW && !norm_seen)
    fail(at + ": ADAMW before the GRAD_NORM task of its stream (global-norm clipping)");
  if (task.kind() == plan::HostTask::ADAMW_PREVIOUS && norm_seen)
    fail(at + ": ADAMW_PREVIOUS after a GRAD_NORM task (it applies the previous step's gradients, "
         "which this step's overwrite)");
}

// Runs each stream's first `limits[s]` instructions as the backends do; fails with `what` and the
// first wait that can never be satisfied.
void checkRuns(const plan::Plan& plan, const std::vector<size_t>& limits, const std::string& what) {
  std::vector<size_t> pc(plan.streams_size(), 0);
  std::vector<bool> recorded(plan.num_events(), false);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < plan.streams_size(); ++s) {
      const auto& instrs = plan.streams(s).instructions();
      while (pc[s] < limits[s]) {
        const auto& in = instrs[pc[s]];
        if (in.has_wait_event() && !recorded[in.wait_event()]) break;
        if (in.has_record_event()) recorded[in.record_event()] = true;
        ++pc[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < plan.streams_size(); ++s)
    if (pc[s] < limits[s])
      fail(what + ": " + where(s, pc[s]) + " waits for event " +
           std::to_string(plan.streams(s).instructions(pc[s]).wait_event()) + " that is never recorded before it");
}

// Plan 1.9's loss prefixes: on every stream of a training plan or none, within the stream, a
// run of them deadlock-free, and the loss copied out within them.
void verifyLossPrefixes(const plan::Plan& plan) {
  int with = 0;
  for (const auto& s : plan.streams()) with += s.has_loss_prefix();
  if (with == 0) return;
  if (with != plan.streams_size()) fail("loss prefixes on some streams only");
  if (!isTrainingPlan(plan)) fail("loss prefixes in a forward-only plan");
  const std::vector<size_t> limits = stepLengths(plan, /*loss_only=*/true);
  bool loss_copied = false;
  for (int s = 0; s < plan.streams_size(); ++s) {
    const auto& stream = plan.streams(s);
    if (limits[s] > static_cast<size_t>(stream.instructions_size()))
      fail("stream " + std::to_string(s) + "'s loss prefix (" + std::to_string(limits[s]) +
           ") is past its instructions");
    for (size_t i = 0; i < limits[s]; ++i) {
      const auto& in = stream.instructions(static_cast<int>(i));
      loss_copied |= in.has_copy() && in.copy().direction() == plan::Copy::DEVICE_TO_HOST &&
                     plan.host_tensors(static_cast<int>(in.copy().host_tensor())).role() == plan::ROLE_LOSS;
    }
  }
  if (!loss_copied) fail("the loss prefixes do not copy the loss out");
  checkRuns(plan, limits, "a loss-only run deadlocks");
}

void verifyEvents(const plan::Plan& plan) {
  // Each event is recorded exactly once per step.
  std::vector<int> records(plan.num_events(), 0);
  for (const auto& s : plan.streams())
    for (const auto& in : s.instructions())
      if (in.has_record_event() && ++records[in.record_event()] > 1)
        fail("event " + std::to_string(in.record_event()) + " is recorded twice");
  // Simulate the streams: a plan whose waits can never all be satisfied is a deadlock.
  checkRuns(plan, stepLengths(plan, /*loss_only=*/false), "the streams deadlock");
  verifyLossPrefixes(plan);
}

}  // namespace

namespace {

void verifyPlanContents(const plan::Plan& plan) {
  verifyHostTensors(plan);
  verifyBuffers(plan);
  if (plan.num_events() > kMaxEvents) fail("too many events");
  const bool training = isTrainingPlan(plan);
  if (training && (plan.model().batch() <= 0 || plan.model().seq() <= 0 || plan.model().vocab() <= 0))
    fail("model batch, seq and vocab must be positive");
  // The data loader fills batch x seq ids into them: they must be exactly that (issue 18).
  if (training)
    for (const auto& t : plan.host_tensors())
      if ((t.role() == plan::ROLE_TOKENS || t.role() == plan::ROLE_TARGETS) &&
          !(t.shape(0) == plan.model().batch() && t.shape(1) == plan.model().seq()))
        fail("the model is batch " + std::to_string(plan.model().batch()) + " x seq " +
             std::to_string(plan.model().seq()) + " but '" + t.name() + "' is [" + std::to_string(t.shape(0)) + ", " +
             std::to_string(t.shape(1)) + "]: the tokens and targets must be (batch, seq)");
  std::set<uint32_t> updated;
  std::set<int> update_kinds;
  for (int s = 0; s < plan.streams_size(); ++s) {
    const auto& stream = plan.streams(s);
    if (!plan::Stream::Kind_IsValid(stream.kind())) fail("stream " + std::to_string(s) + " has an unknown kind");
    bool norm_seen = false;
    std::set<uint32_t> normed;  // gradients whose norm share an earlier host task took
    for (int i = 0; i < stream.instructions_size(); ++i) {
      const auto& in = stream.instructions(i);
      const std::string at = where(s, i);
      switch (in.op_case()) {
        case plan::Instruction::kKernel:
          if (stream.kind() != plan::Stream::COMPUTE) fail(at + ": kernel outside a compute stream");
          verifyKernel(plan, in.kernel(), at);
          break;
        case plan::Instruction::kCopy:
          if (stream.kind() == plan::Stream::HOST) fail(at + ": copy on the host stream");
          verifyCopy(plan, in.copy(), at);
          break;
        case plan::Instruction::kRecordEvent:
          if (in.record_event() >= plan.num_events()) fail(at + ": event out of range");
          break;
        case plan::Instruction::kWaitEvent:
          if (in.wait_event() >= plan.num_events()) fail(at + ": event out of range");
          break;
        case plan::Instruction::kHostTask:
          if (stream.kind() != plan::Stream::HOST) fail(at + ": host task outside the host stream");
          if (!training) fail(at + ": a host task in a forward-only plan");
          verifyHostTask(plan, in.host_task(), norm_seen, normed, at);
          norm_seen |= in.host_task().kind() == plan::HostTask::GRAD_NORM;
          if (updatesParameters(in.host_task().kind())) {
            update_kinds.insert(in.host_task().kind());
            if (update_kinds.size() > 1) fail(at + ": AdamW tasks of two kinds: a plan updates in one way");
            for (uint32_t p : in.host_task().tensors())
              if (!updated.insert(p).second) fail(at + ": a parameter is updated twice in a step");
          }
          break;
        case plan::Instruction::kLaunch: fail(at + ": a template launch (expandTemplates first; readPlan does)");
        default: fail(at + ": empty instruction");
      }
    }
  }
  int host_streams = 0;
  for (const auto& s : plan.streams()) host_streams += s.kind() == plan::Stream::HOST;
  if (host_streams > 1) fail("more than one host stream");
  verifyEvents(plan);
}

}  // namespace

void verifyPlan(const plan::Plan& plan) {
  try {
    verifyPlanContents(plan);
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.rfind("invalid plan", 0) == 0) throw;
    fail(message);  // a size or dtype error from the shape helpers
  }
}

}  // namespace mt
