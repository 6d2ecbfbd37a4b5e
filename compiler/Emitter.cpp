// The plan emitter. Every op of the scheduled function becomes one instruction on the stream
// of its kind (compute / h2d / d2h / host), with its cost; a view (a reshape, token tiles and
// their whole) becomes a buffer over the bytes the memory plan gave it, with no instruction. Its parts: the host tensors (compiler/EmitHostTensors.cpp), the hazards
// between instructions over byte ranges of the arena and of each host allocation
// (compiler/EmitHazards.h), the lowering of each op here, and the streams with their events and
// predicted timeline (compiler/EmitStreams.cpp).
#include "compiler/Emitter.h"

#include "compiler/EmitHazards.h"
#include "compiler/EmitHostTensors.h"
#include "compiler/EmitStreams.h"
#include "llvm/ADT/DenseMap.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/precision.h"
#include "runtime/plan/op_table.h"
#include "runtime/plan/plan_queries.h"

using namespace mlir;

namespace mt {
namespace {
// The rate an attention call (mt.attention or its gradient) runs at on the profile's GPU: a bf16
// call cuDNN's graph takes (no window, sinks, softcap or packed examples; heads a multiple of 8 up to 128:
// CudnnAttention::unsupported, mtrun's default; the run's cuDNN version, not known here, may refuse
// more: before 9.16, lengths that are not a multiple of 128) at cuDNN's, another with heads of 64
// or 128 at our tensor-core kernels' (attention_mma_cuda.cu; forward and backward apart), the rest
// (f32 plans, other heads) at our f32 kernels'.
double attentionRate(Operation* op, const HardwareProfile& hw) {
  auto forward = dyn_cast<AttentionOp>(op);
  auto grad = dyn_cast<AttentionGradOp>(op);
  const Value q = forward ? forward.getQ() : grad.getQ();
  const auto type = cast<RankedTensorType>(q.getType());
  if (!type.getElementType().isBF16()) return hw.attention_flops_per_s;
  const int64_t head_dim = type.getShape().back() / (forward ? forward.getNumHeads() : grad.getNumHeads());
  const bool plain = forward ? !forward.getWindow() && !forward.getSinks() && !forward.getPositions() &&
                                   forward.getSoftcap().isZero()
                             : !grad.getWindow() && !grad.getPositions() && grad.getSoftcap().isZero();
  if (plain && head_dim % 8 == 0 && head_dim <= 128) return hw.bf16_attention_flops_per_s;
  if (head_dim == 64 || head_dim == 128)
    return forward ? hw.bf16_attention_ours_flops_per_s : hw.bf16_attention_grad_ours_flops_per_s;
  return hw.attention_flops_per_s;
}

class Emitter {
 public:
  Emitter(func::FuncOp func, const EmitOptions& options, plan::Plan& plan, PlanStats& stats)
      : func_(func), options_(options), plan_(plan), stats_(stats) {}

  LogicalResult run();

 private:
  // Lowers `op` to an instruction (with its buffers, dependencies and cost), or only to buffers
  // (a reshape's view).
  LogicalResult addInstruction(Operation* op);
  // The lowering of each kind of op into `instr`, instruction number `index`.
  void lowerCopyIn(H2DOp h2d, int index, Instr& instr);
  LogicalResult lowerCopyOut(D2HOp d2h, int index, Instr& instr);
  LogicalResult lowerHostTask(HostTaskOp task, int index, Instr& instr);
  LogicalResult lowerKernel(Operation* op, int index, Instr& instr);
  // The arena bytes of device value `v`.
  ByteRange deviceRange(Value v) const {
    const auto& b = plan_.buffers(buffer_.lookup(v));
    return ByteRange{kDeviceSpace, b.offset(), b.offset() + tensorBytes(v.getType())};
  }
  int addBuffer(Value v, int64_t offset, const std::string& name);
  // Counts a copy of `bytes` to or from host tensor `t` in the stats of what it moves.
  void countCopied(int t, int64_t bytes);
  ByteRange hostRange(int t, int64_t offset = 0, int64_t bytes = -1) const {
    return hosts_.range(plan_, t, offset, bytes);
  }
  // A gradient's summed value, where the host reads it for the update: its landed bytes, or the
  // gradient's own tensor where the plan keeps gradients apart (the grad_norm task fills it).
  ByteRange summedGradRange(int grad) const {
    return hosts_.gradients_apart ? ByteRange{grad, 0, hostTensorBytes(plan_.host_tensors(grad))} : hostRange(grad);
  }
  double micros(double bytes, double bps) const { return bytes / bps * 1e6; }

  func::FuncOp func_;
  const EmitOptions& options_;
  plan::Plan& plan_;
  PlanStats& stats_;
  HostTensors hosts_;
  DenseMap<Value, int> buffer_;  // device values -> buffer
  std::vector<Instr> instrs_;
  HazardTracker hazards_;
  int opCounter_ = 0;
};

void Emitter::countCopied(int t, int64_t bytes) {
  const plan::HostRole role = plan_.host_tensors(t).role();
  if (role == plan::ROLE_ACTIVATION) stats_.activation_bytes += bytes;
  if (role == plan::ROLE_TOKEN_ROWS) stats_.token_row_bytes += bytes;
}

int Emitter::addBuffer(Value v, int64_t offset, const std::string& name) {
  plan::DeviceBuffer* b = plan_.add_buffers();
  b->set_name(name);
  b->set_offset(offset);
  setShape(b->mutable_shape(), v.getType());
  b->set_dtype(dtypeOf(v.getType()));
  buffer_[v] = plan_.buffers_size() - 1;
  return buffer_[v];
}

LogicalResult Emitter::addInstruction(Operation* op) {
  if (isa<func::ReturnOp>(op)) return success();
  // Device buffers of the op's results.
  if (op->getNumResults() > 0 && !isa<D2HOp>(op)) {
    auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
    if (!offsets || offsets.size() != static_cast<int64_t>(op->getNumResults()))
      return op->emitError("has no arena offsets: run mt-plan-memory first");
    std::string base;
    if (auto h2d = dyn_cast<H2DOp>(op)) {
      if (!hosts_.tensor.count(h2d.getInput()))
        return op->emitError("copies in a value that is neither a function argument nor an offloaded activation");
      base = plan_.host_tensors(hosts_.tensor[h2d.getInput()]).name();
    } else {
      base = op->getName().stripDialect().str() + "." + std::to_string(opCounter_++);
    }
    for (auto [i, r] : llvm::enumerate(op->getResults()))
      addBuffer(r, offsets[i], op->getNumResults() == 1 ? base : base + "#" + std::to_string(i));
  }
  if (isa<ReshapeOp, TokenSplitOp, TokenConcatOp>(op)) return success();  // views: no instruction

  const int index = static_cast<int>(instrs_.size());
  Instr instr;
  if (auto block = op->getAttrOfType<IntegerAttr>(kBlockAttr))
    instr.segment = 3 * block.getInt() + (op->hasAttr(kRecomputeAttr) ? 1 : op->hasAttr(kBackwardAttr) ? 2 : 0);
  LogicalResult lowered = success();
  if (auto h2d = dyn_cast<H2DOp>(op)) {
    lowerCopyIn(h2d, index, instr);
  } else if (auto d2h = dyn_cast<D2HOp>(op)) {
    lowered = lowerCopyOut(d2h, index, instr);
  } else if (auto task = dyn_cast<HostTaskOp>(op)) {
    lowered = lowerHostTask(task, index, instr);
  } else {
    lowered = lowerKernel(op, index, instr);
  }
  if (failed(lowered)) return failure();
  instrs_.push_back(std::move(instr));
  return success();
}

void Emitter::lowerCopyIn(H2DOp h2d, int index, Instr& instr) {
  instr.stream = kH2D;
  auto* copy = instr.body.mutable_copy();
  copy->set_direction(plan::Copy::HOST_TO_DEVICE);
  const int64_t bytes = tensorBytes(h2d.getType());
  copy->set_host_tensor(hosts_.tensor[h2d.getInput()]);
  copy->set_host_offset(hosts_.offset.lookup(h2d.getInput()));
  copy->set_buffer(buffer_[h2d.getResult()]);
  hazards_.read(hostRange(copy->host_tensor(), copy->host_offset(), bytes), index, instr.deps);
  hazards_.write(deviceRange(h2d.getResult()), index, instr.deps);
  instr.body.set_bytes(bytes);
  instr.micros = micros(bytes, options_.hardware.h2d_bps);
  stats_.h2d_bytes += bytes;
  if (const auto role = plan_.host_tensors(copy->host_tensor()).role();
      role == plan::ROLE_PARAM || role == plan::ROLE_STAGING) {
    stats_.weight_h2d_bytes += bytes;
    stats_.weight_h2d_numel += cast<RankedTensorType>(h2d.getType()).getNumElements();
    stats_.bf16_staging |= role == plan::ROLE_STAGING;
    if (isFrozenWeight(plan_, static_cast<int>(copy->host_tensor()))) stats_.frozen_h2d_bytes += bytes;
  }
  countCopied(copy->host_tensor(), bytes);
}

LogicalResult Emitter::lowerCopyOut(D2HOp d2h, int index, Instr& instr) {
  instr.stream = kD2H;
  if (!hosts_.tensor.count(d2h.getResult()))
    return d2h.emitError("copies to the host a value that is neither the loss, a gradient nor an activation to "
                         "copy back");
  auto* copy = instr.body.mutable_copy();
  copy->set_direction(plan::Copy::DEVICE_TO_HOST);
  const int64_t bytes = tensorBytes(d2h.getType());
  copy->set_host_tensor(hosts_.tensor[d2h.getResult()]);
  copy->set_host_offset(hosts_.offset.lookup(d2h.getResult()));
  copy->set_buffer(buffer_[d2h.getInput()]);
  hazards_.read(deviceRange(d2h.getInput()), index, instr.deps);
  hazards_.write(hostRange(copy->host_tensor(), copy->host_offset(), bytes), index, instr.deps);
  instr.body.set_bytes(bytes);
  instr.micros = micros(bytes, options_.hardware.d2h_bps);
  stats_.d2h_bytes += bytes;
  countCopied(copy->host_tensor(), bytes);
  return success();
}

LogicalResult Emitter::lowerHostTask(HostTaskOp task, int index, Instr& instr) {
  instr.stream = kHost;
  auto* body = instr.body.mutable_host_task();
  int64_t bytes = 0;
  const HostTaskKind kind = task.getKind();
  if (kind == HostTaskKind::GradNorm) {
    body->set_kind(plan::HostTask::GRAD_NORM);
    for (Value v : task.getTensors()) {
      if (!hosts_.tensor.count(v)) return task.emitError("grad_norm operand is not a host gradient");
      // The tokens' rows of a gradient stand for the gradient they were scattered into.
      const int grad = hosts_.gradOfRows.count(v) ? hosts_.gradOfRows[v] : hosts_.tensor[v];
      body->add_tensors(grad);
      hazards_.read(hostRange(grad), index, instr.deps);
      if (hosts_.gradients_apart) hazards_.write(summedGradRange(grad), index, instr.deps);
      // Read for its norm; kept apart: read again and written into its own tensor.
      bytes += (hosts_.gradients_apart ? 3 : 1) * hostTensorBytes(plan_.host_tensors(grad));
    }
  } else if (kind == HostTaskKind::EmbeddingLookup || kind == HostTaskKind::EmbeddingGrad) {
    const bool lookup = kind == HostTaskKind::EmbeddingLookup;
    Value rows = task.getTensors()[lookup ? 0 : 2], tokens = task.getTensors()[1],
          table = task.getTensors()[lookup ? 2 : 0];
    if (!hosts_.tensor.count(rows) || !hosts_.tensor.count(tokens) || !hosts_.tensor.count(table))
      return task.emitError("operands must be host tensors: the rows, the tokens and the table");
    const int tableTensor = lookup ? hosts_.tensor[table] : hosts_.gradOf(hosts_.tensor[table]);
    if (tableTensor < 0) return task.emitError("embedding_grad of a frozen table, which has no gradient");
    body->set_kind(lookup ? plan::HostTask::EMBEDDING_LOOKUP : plan::HostTask::EMBEDDING_GRAD);
    for (int t : {lookup ? hosts_.tensor[rows] : tableTensor, hosts_.tensor[tokens],
                  lookup ? tableTensor : hosts_.tensor[rows]})
      body->add_tensors(t);
    body->set_accumulate(task->hasAttr(kAccumulateAttr));
    if (auto padding = task->getAttrOfType<IntegerAttr>(kPaddingIdAttr)) {
      // (HostTaskOp's verifier leaves it to embedding_grad tasks, not negative; the whole table's
      // rows are known here.)
      if (padding.getInt() >= plan_.host_tensors(tableTensor).shape(0))
        return task.emitError("mt.padding_id ") << padding.getInt() << " is not a row of the table's gradient";
      body->set_padding_id(padding.getInt());
    }
    hazards_.read(hostRange(hosts_.tensor[tokens]), index, instr.deps);
    // The lookup reads rows of the table and writes the tokens' rows; the scatter reads
    // those and adds into the gradient (which it first zeroes unless accumulating).
    const int64_t rowBytes = hostTensorBytes(plan_.host_tensors(hosts_.tensor[rows]));
    if (lookup) {
      hazards_.read(hostRange(tableTensor), index, instr.deps);
      hazards_.write(hostRange(hosts_.tensor[rows]), index, instr.deps);
      bytes = 2 * rowBytes;
    } else {
      hazards_.read(hostRange(hosts_.tensor[rows]), index, instr.deps);
      hazards_.write(hostRange(tableTensor), index, instr.deps);
      bytes = 3 * rowBytes + (body->accumulate() ? 0 : hostTensorBytes(plan_.host_tensors(tableTensor)));
    }
  } else {
    // adamw_on_arrival takes its gradient's norm share itself (plan 1.4).
    body->set_kind(kind == HostTaskKind::Adamw           ? plan::HostTask::ADAMW
                   : kind == HostTaskKind::AdamwPrevious ? plan::HostTask::ADAMW_PREVIOUS
                                                         : plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL);
    for (Value v : task.getTensors()) {
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg || paramName(func_, arg.getArgNumber()).empty())
        return task.emitError("adamw operand is not a parameter argument");
      const int p = hosts_.tensor[v];
      if (hosts_.gradOf(p) < 0) return task.emitError("adamw of frozen parameter '") << plan_.host_tensors(p).name() << "'";
      body->add_tensors(p);
      hazards_.read(summedGradRange(hosts_.gradOf(p)), index, instr.deps);
      hazards_.write(hostRange(p), index, instr.deps);
      // grad; param, m, v read and written (a split master's staging copy and residual are
      // its 4 bytes per weight)
      bytes += 7 * hostTensorBytes(plan_.host_tensors(p));
      if (auto staging = hosts_.stagingOfParam.find(p); staging != hosts_.stagingOfParam.end())
        hazards_.write(hostRange(staging->second), index, instr.deps);
    }
  }
  instr.body.set_bytes(bytes);
  instr.micros = micros(bytes, options_.hardware.host_bps);
  return success();
}

LogicalResult Emitter::lowerKernel(Operation* op, int index, Instr& instr) {
  KernelId id;
  auto kernel = dyn_cast<KernelOpInterface>(op);
  if (!kernel || !findKernel(kernel.getKernelName(), &id))
    return op->emitError("has no kernel in the op table (runtime/plan/op_table.def)");
  instr.stream = kCompute;
  auto* call = instr.body.mutable_kernel();
  call->set_kernel(static_cast<uint32_t>(id));
  for (Value v : op->getOperands()) {
    call->add_inputs(buffer_[v]);
    hazards_.read(deviceRange(v), index, instr.deps);
  }
  for (Value v : op->getResults()) {
    call->add_outputs(buffer_[v]);
    hazards_.write(deviceRange(v), index, instr.deps);
  }
  SmallVector<int64_t> ints;
  SmallVector<float> floats;
  cast<KernelOpInterface>(op).getKernelAttrs(ints, floats);
  for (int64_t v : ints) call->add_int_attrs(v);
  for (float v : floats) call->add_float_attrs(v);
  auto cost = cast<CostOpInterface>(op);
  const int64_t flops = cost.getFlops(), bytes = cost.getBytesAccessed();
  instr.body.set_flops(flops);
  instr.body.set_bytes(bytes);
  // bf16 operands run at the bf16 rates (tensor cores on a GPU); attention at its kernels'.
  const bool bf16 = op->getNumOperands() && isa<RankedTensorType>(op->getOperand(0).getType()) &&
                    cast<RankedTensorType>(op->getOperand(0).getType()).getElementType().isBF16();
  const double rate = isa<AttentionOp, AttentionGradOp>(op)
                          ? attentionRate(op, options_.hardware)
                          : (bf16 ? options_.hardware.bf16_flops_per_s : options_.hardware.flops_per_s);
  instr.micros = std::max(flops / rate, bytes / options_.hardware.memory_bps) * 1e6;
  stats_.flops += flops;
  return success();
}

LogicalResult Emitter::run() {
  auto arena = func_->getAttrOfType<IntegerAttr>(kArenaBytesAttr);
  if (!arena) return func_.emitError("has no memory plan: run mt-plan-memory first");
  plan_.set_magic(kPlanMagic);
  plan_.set_version_major(kPlanVersionMajor);
  plan_.set_version_minor(kPlanVersionMinor);
  plan_.set_arena_bytes(arena.getInt());
  plan_.set_init_seed(options_.init_seed);
  if (failed(addHostTensors(func_, plan_, stats_, hosts_))) return failure();
  // The data loader fills batch x seq ids into the tokens and targets: a model whose two inputs
  // disagree (or disagree with its batch and sequence) cannot be trained (the verifier refuses
  // such a plan too).
  for (const auto& t : plan_.host_tensors())
    if ((t.role() == plan::ROLE_TOKENS || t.role() == plan::ROLE_TARGETS) &&
        !(t.shape_size() == 2 && t.shape(0) == options_.batch && t.shape(1) == options_.seq))
      return func_.emitError("the model's ") << t.name() << " input is not (batch " << options_.batch << ", seq "
                                             << options_.seq << ") like its tokens: tokens and targets must be "
                                             << "(batch, seq) tensors of one shape";
  for (Operation& op : func_.getBody().front())
    if (failed(addInstruction(&op))) return failure();
  assembleStreams(instrs_, options_.templates, plan_, stats_);
  auto* model = plan_.mutable_model();
  model->set_name(options_.model_name);
  model->set_batch(options_.batch);
  model->set_seq(options_.seq);
  model->set_vocab(options_.vocab);
  model->set_num_params(stats_.num_params);
  model->set_flops_per_step(stats_.flops);
  model->set_predicted_step_us(stats_.step_us);
  model->set_hardware(options_.hardware.name);
  // mt.precision records what mt-mixed-precision made of the function (absent: fp32).
  const auto attr = func_->getAttrOfType<StringAttr>(kPrecisionAttr);
  const std::optional<ComputePrecision> precision = parsePrecision(attr ? std::string_view(attr.getValue()) : "");
  if (!precision) return func_.emitError("mt.precision is ") << attr << ": neither fp32 nor bf16";
  model->set_precision(precisionName(*precision));
  model->set_hf_config(options_.hf_config);
  model->set_hf_source(options_.hf_source);
  model->set_hf_module_prefix(options_.hf_module_prefix);
  model->set_active_params(options_.active_params);
  model->set_lora_alpha(static_cast<float>(options_.lora_alpha));
  model->set_lora_rslora(options_.lora_rslora);
  model->set_lora_dropout(options_.lora_dropout);
  return success();
}

}  // namespace

LogicalResult emitPlan(ModuleOp module, const EmitOptions& options, plan::Plan& plan, PlanStats& stats) {
  func::FuncOp func = getModelFunction(module);
  if (!func) return failure();
  if (!isForwardOnly(func) && (options.batch <= 0 || options.seq <= 0 || options.vocab <= 0))
    return func.emitError("a model to train needs a positive batch, sequence length and vocabulary; got ")
           << options.batch << ", " << options.seq << " and " << options.vocab;
  return Emitter(func, options, plan, stats).run();
}

}  // namespace mt
