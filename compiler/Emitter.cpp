// The plan emitter. Every op of the scheduled function becomes one instruction on the stream
// of its kind (compute / h2d / d2h / host); a reshape becomes a second buffer over the same
// bytes. Ordering between streams comes from a hazard tracker over byte ranges of the arena and
// of each host allocation (gradients in the landing buffer share one; read-after-write,
// write-after-read, write-after-write), turned into the fewest events: a stream waits for the
// latest instruction it depends on in each other stream.
#include "compiler/Emitter.h"

#include "compiler/PlanTemplates.h"

#include <limits>
#include <map>

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "passes/Passes.h"
#include "runtime/op_table.h"

using namespace mlir;

namespace mt {
namespace {

enum StreamIndex { kCompute = 0, kH2D = 1, kD2H = 2, kHost = 3, kNumStreams = 4 };

struct Instr {
  int stream;
  int64_t segment = -1;  // 3 * layer block + (0 forward, 1 recompute, 2 backward); -1 outside blocks
  plan::Instruction body;
  std::vector<int> deps;  // global indices of instructions it must follow
  double micros = 0;
};

// Where bytes live: the device arena (kDeviceSpace) or one host allocation (its host tensor
// index; gradients in the landing buffer live in the landing tensor's space).
constexpr int kDeviceSpace = -1;
struct ByteRange {
  int space;
  int64_t begin, end;
};

// Last writer and readers since, per byte range of each space. The ranges of a space are kept
// sorted by their start with the longest one's length, so a query visits only the ranges that
// start within that length before it (a 100B plan has thousands per space).
class HazardTracker {
 public:
  void read(ByteRange r, int instr, std::vector<int>& deps) {
    Space& space = spaces_[r.space];
    forOverlapping(space, r, [&](const Access& access) {
      if (access.writer >= 0) deps.push_back(access.writer);
    });
    space.add({r.begin, r.end}).readers.push_back(instr);
  }
  void write(ByteRange r, int instr, std::vector<int>& deps) {
    Space& space = spaces_[r.space];
    forOverlapping(space, r, [&](const Access& access) { collect(access, deps); });
    space.add({r.begin, r.end}) = Access{instr, {}};
  }

 private:
  struct Access {
    int writer = -1;
    std::vector<int> readers;
  };
  struct Space {
    std::map<std::pair<int64_t, int64_t>, Access> ranges;  // [begin, end) -> accesses
    int64_t longest = 0;
    Access& add(std::pair<int64_t, int64_t> range) {
      longest = std::max(longest, range.second - range.first);
      return ranges[range];
    }
  };
  // Calls visit(access) for each range overlapping `r`, in the order of their starts.
  template <typename Visit>
  static void forOverlapping(const Space& space, ByteRange r, Visit visit) {
    const int64_t first_start = r.begin - space.longest;  // a range starting earlier ends before r
    for (auto it = space.ranges.lower_bound({first_start, std::numeric_limits<int64_t>::min()});
         it != space.ranges.end() && it->first.first < r.end; ++it)
      if (r.begin < it->first.second) visit(it->second);
  }
  static void collect(const Access& a, std::vector<int>& deps) {
    if (a.writer >= 0) deps.push_back(a.writer);
    deps.insert(deps.end(), a.readers.begin(), a.readers.end());
  }
  std::map<int, Space> spaces_;
};

plan::DType dtypeOf(Type type) {
  auto t = cast<RankedTensorType>(type);
  if (t.getElementType().isInteger(32)) return plan::DTYPE_I32;
  if (t.getElementType().isBF16()) return plan::DTYPE_BF16;
  return plan::DTYPE_F32;
}

void setShape(google::protobuf::RepeatedField<int64_t>* out, Type type) {
  for (int64_t d : cast<RankedTensorType>(type).getShape()) out->Add(d);
}

// The constant's elements as the plan's little-endian bytes.
LogicalResult setConstantData(DenseElementsAttr value, plan::HostTensor& t) {
  std::string bytes;
  if (value.getElementType().isF32()) {
    for (float v : value.getValues<float>()) bytes.append(reinterpret_cast<const char*>(&v), 4);
  } else if (value.getElementType().isInteger(32)) {
    for (int32_t v : value.getValues<int32_t>()) bytes.append(reinterpret_cast<const char*>(&v), 4);
  } else {
    return failure();
  }
  t.set_data(std::move(bytes));
  return success();
}

class Emitter {
 public:
  Emitter(func::FuncOp func, const EmitOptions& options, plan::Plan& plan, PlanStats& stats)
      : func_(func), options_(options), plan_(plan), stats_(stats) {}

  LogicalResult run();

 private:
  LogicalResult addHostTensors();
  LogicalResult addInstruction(Operation* op);
  int addBuffer(Value v, int64_t offset, const std::string& name);
  // The bytes of host tensor `t` (its own allocation, or its place in the landing buffer), or
  // `bytes` of them from byte `offset` (a row slice).
  ByteRange hostRange(int t, int64_t offset = 0, int64_t bytes = -1) const;
  // Sets `t` to the parameter `param` (argument `i`) of `type`.
  LogicalResult setParam(plan::HostTensor& t, DictionaryAttr param, RankedTensorType type, unsigned i);
  // Maps parameter piece `arg` (a row slice, mt-split-vocab) to its whole parameter's host
  // tensor, made by the first piece, and its rows' byte offset in it.
  LogicalResult addParamPiece(BlockArgument arg, DictionaryAttr param, std::map<std::string, int>& paramByName);
  // Maps staging argument `arg` (mt-stage-bf16: the bf16 copy of parameter `param`, or of one of
  // its row pieces) to the parameter's staging host tensor, made by the first.
  LogicalResult addStaging(BlockArgument arg, DictionaryAttr param, std::map<std::string, int>& paramByName);
  // A host tensor of `role` for host value `v` (a copy's result), shaped like it.
  void addHostValue(Value v, const std::string& name, plan::HostRole role);
  // Counts a copy of `bytes` to or from host tensor `t` in the stats of what it moves.
  void countCopied(int t, int64_t bytes);
  void finish();
  double micros(double bytes, double bps) const { return bytes / bps * 1e6; }

  func::FuncOp func_;
  const EmitOptions& options_;
  plan::Plan& plan_;
  PlanStats& stats_;
  DenseMap<Value, int> hostTensor_;  // function arguments and d2h results -> host tensor
  DenseMap<Value, int64_t> hostOffset_;  // row slices among them -> byte offset in the host tensor
  DenseMap<Value, int> buffer_;      // device values -> buffer
  std::map<int, int> gradOfParam_;   // param host tensor -> grad host tensor
  std::map<int, int> stagingOfParam_;  // param host tensor -> its bf16 staging host tensor
  DenseMap<Value, int> gradOfRows_;  // tokens' rows of a gradient (host) -> that gradient's host tensor
  int landing_ = -1;                 // the gradient landing host tensor, if the plan has one
  std::vector<Instr> instrs_;
  HazardTracker hazards_;
  int opCounter_ = 0;
};

LogicalResult Emitter::addHostTensors() {
  std::map<std::string, int> paramByName;
  for (BlockArgument arg : func_.getArguments()) {
    const unsigned i = arg.getArgNumber();
    auto piece = func_.getArgAttrOfType<DictionaryAttr>(i, kParamAttr);
    if (piece && piece.get(kParamRowsKey)) {
      if (failed(addParamPiece(arg, piece, paramByName))) return failure();
      continue;
    }
    if (auto staged = func_.getArgAttrOfType<DictionaryAttr>(i, kStagingAttr)) {
      if (failed(addStaging(arg, staged, paramByName))) return failure();
      continue;
    }
    plan::HostTensor* t = plan_.add_host_tensors();
    setShape(t->mutable_shape(), arg.getType());
    t->set_dtype(dtypeOf(arg.getType()));
    if (auto input = func_.getArgAttrOfType<StringAttr>(i, kInputAttr)) {
      t->set_name(input.getValue().str());
      if (input.getValue() == "tokens") t->set_role(plan::ROLE_TOKENS);
      else if (input.getValue() == "targets") t->set_role(plan::ROLE_TARGETS);
      else t->set_role(plan::ROLE_INPUT);
    } else if (auto constant = func_.getArgAttrOfType<DenseElementsAttr>(i, kConstAttr)) {
      t->set_name("constant." + std::to_string(i));
      t->set_role(plan::ROLE_CONSTANT);
      if (failed(setConstantData(constant, *t)))
        return func_.emitError("constant argument ") << i << " must be an f32 or i32 tensor";
    } else if (auto param = func_.getArgAttrOfType<DictionaryAttr>(i, kParamAttr)) {
      if (failed(setParam(*t, param, cast<RankedTensorType>(arg.getType()), i))) return failure();
      if (!paramByName.emplace(t->name(), plan_.host_tensors_size() - 1).second)
        return func_.emitError("two parameters are named '") << t->name() << "'";
      stats_.num_params += cast<RankedTensorType>(arg.getType()).getNumElements();
    } else if (auto table = func_.getArgAttrOfType<StringAttr>(i, kEmbeddedTokensAttr)) {
      // Filled on the host by the "embedding_lookup" task (mt-host-embedding): scratch.
      t->set_name("tokens' rows of " + table.getValue().str());
      t->set_role(plan::ROLE_TOKEN_ROWS);
    } else {
      return func_.emitError("argument ") << i << " is neither a parameter (mt.param), an input (mt.input) nor "
                                          << "embedded tokens (mt.embedded_tokens)";
    }
    hostTensor_[arg] = plan_.host_tensors_size() - 1;
  }
  // Gradient landing buffers and AdamW moments of every parameter.
  for (auto& [name, p] : paramByName) {
    const plan::HostTensor param = plan_.host_tensors(p);
    const std::pair<plan::HostRole, const char*> companions[] = {
        {plan::ROLE_GRAD, ".grad"}, {plan::ROLE_MOMENT1, ".exp_avg"}, {plan::ROLE_MOMENT2, ".exp_avg_sq"}};
    for (auto [role, suffix] : companions) {
      plan::HostTensor* t = plan_.add_host_tensors();
      t->set_name(name + suffix);
      *t->mutable_shape() = param.shape();
      t->set_dtype(plan::DTYPE_F32);
      t->set_role(role);
      t->set_param_index(p);
      if (role == plan::ROLE_GRAD) gradOfParam_[p] = plan_.host_tensors_size() - 1;
    }
  }
  auto ret = cast<func::ReturnOp>(func_.getBody().front().getTerminator());
  for (Value v : ret.getOperands())
    if (!v.getDefiningOp<D2HOp>()) return ret.emitError("returns a device value: run mt-schedule-resident first");
  if (isForwardOnly(func_)) {
    // Forward-only: each result is a named output.
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      addHostValue(v, func_.getResultAttrOfType<StringAttr>(i, kOutputAttr).getValue().str(), plan::ROLE_OUTPUT);
    }
    return success();
  }
  // Activations offloaded to the host (mt-offload-activations): a host tensor each, written by
  // its copy out, read by its copies back.
  int activations = 0;
  for (Operation& op : func_.getBody().front()) {
    auto out = dyn_cast<D2HOp>(op);
    if (!out || out.getResult().use_empty() ||
        !llvm::all_of(out.getResult().getUsers(), [](Operation* user) { return isa<H2DOp>(user); }))
      continue;
    Operation* def = out.getInput().getDefiningOp();
    addHostValue(out.getResult(),
                 llvm::formatv("activation {0}: {1} of block {2}", activations++,
                               def ? def->getName().stripDialect() : "input", blockOf(&op).value_or(-1)),
                 plan::ROLE_ACTIVATION);
  }
  if (auto landing = func_->getAttrOfType<IntegerAttr>(kLandingBytesAttr)) {
    plan::HostTensor* t = plan_.add_host_tensors();
    t->set_name("gradient landing");
    t->set_role(plan::ROLE_GRAD_LANDING);
    t->set_dtype(plan::DTYPE_F32);
    t->add_shape((landing.getInt() + 3) / 4);
    landing_ = plan_.host_tensors_size() - 1;
  }
  plan::HostTensor* loss = plan_.add_host_tensors();
  loss->set_name("loss");
  loss->set_dtype(plan::DTYPE_F32);
  loss->set_role(plan::ROLE_LOSS);
  const int lossIndex = plan_.host_tensors_size() - 1;

  // The returned values are d2h results: the loss, then the gradient of each named parameter.
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (i == 0) {
      hostTensor_[v] = lossIndex;
      continue;
    }
    if (auto table = func_.getResultAttrOfType<StringAttr>(i, kGradTokensAttr)) {
      // The tokens' rows of a table's gradient, scatter-added into it on the host.
      if (!paramByName.count(table.getValue().str()))
        return ret.emitError("result ") << i << " holds rows of the gradient of '" << table.getValue()
                                        << "', which is not a parameter";
      addHostValue(v, "tokens' rows of " + table.getValue().str() + ".grad", plan::ROLE_TOKEN_ROWS);
      gradOfRows_[v] = gradOfParam_[paramByName[table.getValue().str()]];
      continue;
    }
    auto name = func_.getResultAttrOfType<StringAttr>(i, kGradAttr);
    if (!name || !paramByName.count(name.getValue().str()))
      return ret.emitError("result ") << i << " is not the gradient of a parameter";
    hostTensor_[v] = gradOfParam_[paramByName[name.getValue().str()]];
    if (auto row = func_.getResultAttrOfType<IntegerAttr>(i, kGradRowAttr)) {
      auto type = cast<RankedTensorType>(v.getType());
      hostOffset_[v] = row.getInt() * rowBytes(type);
    }
    if (landing_ >= 0) {
      auto offset = v.getDefiningOp()->getAttrOfType<IntegerAttr>(kLandingOffsetAttr);
      if (!offset) return ret.emitError("result ") << i << " has no place in the gradient landing buffer";
      // A piece lands at its rows' place in its parameter's gradient.
      plan_.mutable_host_tensors(hostTensor_[v])->set_landing_offset(offset.getInt() - hostOffset_.lookup(v));
    }
  }
  // A gradient the host's token scatter lands first (an untied table on the host) has its
  // place there.
  for (Operation& op : func_.getBody().front())
    if (auto task = dyn_cast<HostTaskOp>(op); task && task.getKind() == "embedding_grad" && landing_ >= 0) {
      auto offset = task->getAttrOfType<IntegerAttr>(kLandingOffsetAttr);
      if (!offset) return task.emitError("has no place in the gradient landing buffer");
      plan_.mutable_host_tensors(gradOfParam_[hostTensor_[task.getTensors()[0]]])->set_landing_offset(offset.getInt());
    }
  return success();
}

LogicalResult Emitter::setParam(plan::HostTensor& t, DictionaryAttr param, RankedTensorType type, unsigned i) {
  auto name = param.getAs<StringAttr>("name");
  auto init = param.getAs<StringAttr>("init");
  if (!name || !init) return func_.emitError("parameter argument ") << i << " needs a name and an init in mt.param";
  t.clear_shape();
  setShape(t.mutable_shape(), type);
  t.set_dtype(dtypeOf(type));
  t.set_name(name.getValue().str());
  t.set_role(plan::ROLE_PARAM);
  if (init.getValue() == "normal") {
    t.mutable_init()->set_kind(plan::Initializer::NORMAL);
    auto std = param.getAs<FloatAttr>("std");
    if (!std) return func_.emitError("parameter '") << name.getValue() << "' has init normal but no std";
    t.mutable_init()->set_std(static_cast<float>(std.getValueAsDouble()));
  } else if (init.getValue() == "zeros") {
    t.mutable_init()->set_kind(plan::Initializer::ZEROS);
  } else if (init.getValue() == "ones") {
    t.mutable_init()->set_kind(plan::Initializer::ONES);
  } else if (init.getValue() == "weights") {
    t.mutable_init()->set_kind(plan::Initializer::WEIGHTS);
  } else {
    return func_.emitError("parameter '") << name.getValue() << "' has unknown init '" << init.getValue()
                                          << "' (normal, zeros, ones or weights)";
  }
  if (auto origin = param.getAs<StringAttr>("origin")) t.set_origin(origin.getValue().str());
  auto decay = param.getAs<BoolAttr>("decay");
  t.set_weight_decay(decay ? decay.getValue() : type.getRank() >= 2);
  return success();
}

LogicalResult Emitter::addParamPiece(BlockArgument arg, DictionaryAttr param, std::map<std::string, int>& paramByName) {
  auto name = param.getAs<StringAttr>("name");
  auto rows = param.getAs<DenseI64ArrayAttr>(kParamRowsKey);
  auto type = cast<RankedTensorType>(arg.getType());
  if (!name || rows.size() != 2 || type.getRank() < 1 || rows[0] < 0 || rows[0] + type.getDimSize(0) > rows[1])
    return func_.emitError("parameter piece ") << arg.getArgNumber()
                                               << " needs a name and rows = [first, all] that hold its rows";
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = rows[1];
  const auto whole = RankedTensorType::get(shape, type.getElementType());
  auto found = paramByName.find(name.getValue().str());
  if (found == paramByName.end()) {
    // The first piece makes the whole parameter: the tensor, initializer and optimizer state of
    // the unsplit one.
    plan::HostTensor* t = plan_.add_host_tensors();
    if (failed(setParam(*t, param, whole, arg.getArgNumber()))) return failure();
    found = paramByName.emplace(t->name(), plan_.host_tensors_size() - 1).first;
  } else if (plan_.host_tensors(found->second).shape_size() != whole.getRank() ||
             !std::equal(shape.begin(), shape.end(), plan_.host_tensors(found->second).shape().begin())) {
    return func_.emitError("parameter piece ") << arg.getArgNumber() << " of '" << name.getValue()
                                               << "' disagrees with the other pieces on the whole shape";
  }
  hostTensor_[arg] = found->second;
  hostOffset_[arg] = rows[0] * rowBytes(type);
  stats_.num_params += type.getNumElements();
  return success();
}

LogicalResult Emitter::addStaging(BlockArgument arg, DictionaryAttr param, std::map<std::string, int>& paramByName) {
  auto name = param.getAs<StringAttr>("name");
  auto found = name ? paramByName.find(name.getValue().str()) : paramByName.end();
  if (found == paramByName.end())
    return func_.emitError("staging argument ") << arg.getArgNumber() << " names no parameter before it";
  const int p = found->second;
  auto [staging, isNew] = stagingOfParam_.emplace(p, plan_.host_tensors_size());
  if (isNew) {
    const plan::HostTensor whole = plan_.host_tensors(p);
    plan::HostTensor* t = plan_.add_host_tensors();
    t->set_name(whole.name() + ".bf16");
    *t->mutable_shape() = whole.shape();
    t->set_dtype(plan::DTYPE_BF16);
    t->set_role(plan::ROLE_STAGING);
    t->set_param_index(p);
    // The master held split (plan 1.7): the staging copy and this residual are all of it.
    plan::HostTensor* residual = plan_.add_host_tensors();
    residual->set_name(whole.name() + ".residual");
    *residual->mutable_shape() = whole.shape();
    residual->set_dtype(plan::DTYPE_I16);
    residual->set_role(plan::ROLE_RESIDUAL);
    residual->set_param_index(p);
  }
  hostTensor_[arg] = staging->second;
  auto rows = param.getAs<DenseI64ArrayAttr>(kParamRowsKey);
  hostOffset_[arg] = rows ? rows[0] * rowBytes(cast<RankedTensorType>(arg.getType())) : 0;
  return success();
}

void Emitter::addHostValue(Value v, const std::string& name, plan::HostRole role) {
  plan::HostTensor* t = plan_.add_host_tensors();
  t->set_name(name);
  t->set_role(role);
  setShape(t->mutable_shape(), v.getType());
  t->set_dtype(dtypeOf(v.getType()));
  hostTensor_[v] = plan_.host_tensors_size() - 1;
}

void Emitter::countCopied(int t, int64_t bytes) {
  const plan::HostRole role = plan_.host_tensors(t).role();
  if (role == plan::ROLE_ACTIVATION) stats_.activation_bytes += bytes;
  if (role == plan::ROLE_TOKEN_ROWS) stats_.token_row_bytes += bytes;
}

ByteRange Emitter::hostRange(int t, int64_t offset, int64_t bytes) const {
  const auto& tensor = plan_.host_tensors(t);
  if (bytes < 0) bytes = hostTensorBytes(tensor);
  if (landing_ < 0 || tensor.role() != plan::ROLE_GRAD) return {t, offset, offset + bytes};
  return {landing_, tensor.landing_offset() + offset, tensor.landing_offset() + offset + bytes};
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
      if (!hostTensor_.count(h2d.getInput()))
        return op->emitError("copies in a value that is neither a function argument nor an offloaded activation");
      base = plan_.host_tensors(hostTensor_[h2d.getInput()]).name();
    } else {
      base = op->getName().stripDialect().str() + "." + std::to_string(opCounter_++);
    }
    for (auto [i, r] : llvm::enumerate(op->getResults()))
      addBuffer(r, offsets[i], op->getNumResults() == 1 ? base : base + "#" + std::to_string(i));
  }
  if (isa<ReshapeOp>(op)) return success();  // a view: no instruction

  const int index = static_cast<int>(instrs_.size());
  Instr instr;
  if (auto block = op->getAttrOfType<IntegerAttr>(kBlockAttr))
    instr.segment = 3 * block.getInt() + (op->hasAttr(kRecomputeAttr) ? 1 : op->hasAttr(kBackwardAttr) ? 2 : 0);
  auto region = [&](Value v) {
    const auto& b = plan_.buffers(buffer_[v]);
    return ByteRange{kDeviceSpace, b.offset(), b.offset() + tensorBytes(v.getType())};
  };
  const HardwareProfile& hw = options_.hardware;
  if (auto h2d = dyn_cast<H2DOp>(op)) {
    instr.stream = kH2D;
    auto* copy = instr.body.mutable_copy();
    copy->set_direction(plan::Copy::HOST_TO_DEVICE);
    const int64_t bytes = tensorBytes(h2d.getType());
    copy->set_host_tensor(hostTensor_[h2d.getInput()]);
    copy->set_host_offset(hostOffset_.lookup(h2d.getInput()));
    copy->set_buffer(buffer_[h2d.getResult()]);
    hazards_.read(hostRange(copy->host_tensor(), copy->host_offset(), bytes), index, instr.deps);
    hazards_.write(region(h2d.getResult()), index, instr.deps);
    instr.body.set_bytes(bytes);
    instr.micros = micros(bytes, hw.h2d_bps);
    stats_.h2d_bytes += bytes;
    if (const auto role = plan_.host_tensors(copy->host_tensor()).role();
        role == plan::ROLE_PARAM || role == plan::ROLE_STAGING) {
      stats_.weight_h2d_bytes += bytes;
      stats_.weight_h2d_numel += cast<RankedTensorType>(h2d.getType()).getNumElements();
      stats_.bf16_staging |= role == plan::ROLE_STAGING;
    }
    countCopied(copy->host_tensor(), bytes);
  } else if (auto d2h = dyn_cast<D2HOp>(op)) {
    instr.stream = kD2H;
    if (!hostTensor_.count(d2h.getResult()))
      return op->emitError("copies to the host a value that is neither the loss, a gradient nor an activation to "
                           "copy back");
    auto* copy = instr.body.mutable_copy();
    copy->set_direction(plan::Copy::DEVICE_TO_HOST);
    const int64_t bytes = tensorBytes(d2h.getType());
    copy->set_host_tensor(hostTensor_[d2h.getResult()]);
    copy->set_host_offset(hostOffset_.lookup(d2h.getResult()));
    copy->set_buffer(buffer_[d2h.getInput()]);
    hazards_.read(region(d2h.getInput()), index, instr.deps);
    hazards_.write(hostRange(copy->host_tensor(), copy->host_offset(), bytes), index, instr.deps);
    instr.body.set_bytes(bytes);
    instr.micros = micros(bytes, hw.d2h_bps);
    stats_.d2h_bytes += bytes;
    countCopied(copy->host_tensor(), bytes);
  } else if (auto task = dyn_cast<HostTaskOp>(op)) {
    instr.stream = kHost;
    auto* body = instr.body.mutable_host_task();
    int64_t bytes = 0;
    if (task.getKind() == "grad_norm") {
      body->set_kind(plan::HostTask::GRAD_NORM);
      for (Value v : task.getTensors()) {
        if (!hostTensor_.count(v)) return op->emitError("grad_norm operand is not a host gradient");
        // The tokens' rows of a gradient stand for the gradient they were scattered into.
        const int grad = gradOfRows_.count(v) ? gradOfRows_[v] : hostTensor_[v];
        body->add_tensors(grad);
        hazards_.read(hostRange(grad), index, instr.deps);
        bytes += hostTensorBytes(plan_.host_tensors(grad));
      }
    } else if (task.getKind() == "embedding_lookup" || task.getKind() == "embedding_grad") {
      const bool lookup = task.getKind() == "embedding_lookup";
      Value rows = task.getTensors()[lookup ? 0 : 2], tokens = task.getTensors()[1],
            table = task.getTensors()[lookup ? 2 : 0];
      if (!hostTensor_.count(rows) || !hostTensor_.count(tokens) || !hostTensor_.count(table))
        return op->emitError("operands must be host tensors: the rows, the tokens and the table");
      const int tableTensor = lookup ? hostTensor_[table] : gradOfParam_[hostTensor_[table]];
      body->set_kind(lookup ? plan::HostTask::EMBEDDING_LOOKUP : plan::HostTask::EMBEDDING_GRAD);
      for (int t : {lookup ? hostTensor_[rows] : tableTensor, hostTensor_[tokens],
                    lookup ? tableTensor : hostTensor_[rows]})
        body->add_tensors(t);
      body->set_accumulate(task->hasAttr(kAccumulateAttr));
      hazards_.read(hostRange(hostTensor_[tokens]), index, instr.deps);
      // The lookup reads rows of the table and writes the tokens' rows; the scatter reads
      // those and adds into the gradient (which it first zeroes unless accumulating).
      const int64_t rowBytes = hostTensorBytes(plan_.host_tensors(hostTensor_[rows]));
      if (lookup) {
        hazards_.read(hostRange(tableTensor), index, instr.deps);
        hazards_.write(hostRange(hostTensor_[rows]), index, instr.deps);
        bytes = 2 * rowBytes;
      } else {
        hazards_.read(hostRange(hostTensor_[rows]), index, instr.deps);
        hazards_.write(hostRange(tableTensor), index, instr.deps);
        bytes = 3 * rowBytes + (body->accumulate() ? 0 : hostTensorBytes(plan_.host_tensors(tableTensor)));
      }
    } else {
      // adamw_on_arrival takes its gradient's norm share itself (plan 1.4).
      body->set_kind(task.getKind() == "adamw"              ? plan::HostTask::ADAMW
                     : task.getKind() == "adamw_previous" ? plan::HostTask::ADAMW_PREVIOUS
                                                          : plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL);
      for (Value v : task.getTensors()) {
        auto arg = dyn_cast<BlockArgument>(v);
        if (!arg || paramName(func_, arg.getArgNumber()).empty())
          return op->emitError("adamw operand is not a parameter argument");
        const int p = hostTensor_[v];
        body->add_tensors(p);
        hazards_.read(hostRange(gradOfParam_[p]), index, instr.deps);
        hazards_.write(hostRange(p), index, instr.deps);
        // grad; param, m, v read and written (a split master's staging copy and residual are
        // its 4 bytes per weight)
        bytes += 7 * hostTensorBytes(plan_.host_tensors(p));
        if (auto staging = stagingOfParam_.find(p); staging != stagingOfParam_.end())
          hazards_.write(hostRange(staging->second), index, instr.deps);
      }
    }
    instr.body.set_bytes(bytes);
    instr.micros = micros(bytes, hw.host_bps);
  } else {
    KernelId id;
    if (!isa<KernelOpInterface>(op) || !findKernel(op->getName().getStringRef(), &id))
      return op->emitError("has no kernel in the op table (runtime/op_table.def)");
    instr.stream = kCompute;
    auto* call = instr.body.mutable_kernel();
    call->set_kernel(static_cast<uint32_t>(id));
    for (Value v : op->getOperands()) {
      call->add_inputs(buffer_[v]);
      hazards_.read(region(v), index, instr.deps);
    }
    for (Value v : op->getResults()) {
      call->add_outputs(buffer_[v]);
      hazards_.write(region(v), index, instr.deps);
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
    // bf16 operands run at the bf16 rates (tensor cores on a GPU).
    const bool bf16 = op->getNumOperands() && isa<RankedTensorType>(op->getOperand(0).getType()) &&
                      cast<RankedTensorType>(op->getOperand(0).getType()).getElementType().isBF16();
    const double rate = isa<AttentionOp, AttentionGradOp>(op) ? (bf16 ? hw.bf16_attention_flops_per_s
                                                                      : hw.attention_flops_per_s)
                                                              : (bf16 ? hw.bf16_flops_per_s : hw.flops_per_s);
    instr.micros = std::max(flops / rate, bytes / hw.memory_bps) * 1e6;
    stats_.flops += flops;
  }
  instrs_.push_back(std::move(instr));
  return success();
}

void Emitter::finish() {
  // Position of each instruction in its stream.
  std::vector<int> position(instrs_.size());
  int counts[kNumStreams] = {0, 0, 0, 0};
  for (size_t i = 0; i < instrs_.size(); ++i) position[i] = counts[instrs_[i].stream]++;

  // The waits each instruction needs: per other stream, only its latest dependency, and only
  // if this stream has not already waited for that point or later.
  std::vector<int> recordEvent(instrs_.size(), -1);
  std::vector<std::vector<int>> waits(instrs_.size());
  int waited[kNumStreams][kNumStreams];
  for (auto& row : waited) std::fill(row, row + kNumStreams, -1);
  int numEvents = 0;
  for (size_t i = 0; i < instrs_.size(); ++i) {
    const int s = instrs_[i].stream;
    int latest[kNumStreams] = {-1, -1, -1, -1};
    for (int d : instrs_[i].deps) {
      const int t = instrs_[d].stream;
      if (t != s && (latest[t] < 0 || position[d] > position[latest[t]])) latest[t] = d;
    }
    for (int t = 0; t < kNumStreams; ++t) {
      const int d = latest[t];
      if (d < 0 || position[d] <= waited[s][t]) continue;
      if (recordEvent[d] < 0) recordEvent[d] = numEvents++;
      waits[i].push_back(recordEvent[d]);
      waited[s][t] = position[d];
    }
  }

  // The predicted timeline: each stream runs in order, and an instruction starts once its
  // stream is free and everything it depends on has finished.
  std::vector<double> end(instrs_.size());
  std::vector<int> cause(instrs_.size());
  double streamFree[kNumStreams] = {0, 0, 0, 0};
  for (size_t i = 0; i < instrs_.size(); ++i) {
    const int s = instrs_[i].stream;
    double start = streamFree[s];
    int waitedFor = -1;  // the dependency that ended last, if it delayed the start
    for (int d : instrs_[i].deps)
      if (end[d] > start) start = end[d], waitedFor = d;
    // A wait is charged to the stream whose busy time caused it, through chains of waits
    // (compute waits for a copy that waited for the host optimizer: the host's).
    cause[i] = waitedFor >= 0 ? cause[waitedFor] : s;
    if (s == kCompute && waitedFor >= 0) stats_.compute_wait_us[cause[i]] += start - streamFree[s];
    end[i] = start + instrs_[i].micros;
    streamFree[s] = end[i];
    double* busy[] = {&stats_.compute_us, &stats_.h2d_us, &stats_.d2h_us, &stats_.host_us};
    *busy[s] += instrs_[i].micros;
    stats_.step_us = std::max(stats_.step_us, end[i]);
  }
  // After the last kernel the compute stream is idle too (copies out, the norm).
  const double waitedUs = stats_.compute_wait_us[kH2D] + stats_.compute_wait_us[kD2H] + stats_.compute_wait_us[kHost];
  stats_.compute_wait_us[kCompute] = std::max(0.0, stats_.step_us - stats_.compute_us - waitedUs);

  const std::pair<const char*, plan::Stream::Kind> streams[] = {{"compute", plan::Stream::COMPUTE},
                                                                {"h2d", plan::Stream::HOST_TO_DEVICE},
                                                                {"d2h", plan::Stream::DEVICE_TO_HOST},
                                                                {"host", plan::Stream::HOST}};
  for (auto [name, kind] : streams) {
    plan::Stream* stream = plan_.add_streams();
    stream->set_name(name);
    stream->set_kind(kind);
  }
  std::vector<int64_t> computeSegments;  // per compute-stream instruction, its Instr's segment
  for (size_t i = 0; i < instrs_.size(); ++i) {
    plan::Stream* stream = plan_.mutable_streams(instrs_[i].stream);
    const int before = stream->instructions_size();
    for (int e : waits[i]) stream->add_instructions()->set_wait_event(e);
    instrs_[i].body.set_predicted_us(instrs_[i].micros);
    *stream->add_instructions() = instrs_[i].body;
    if (recordEvent[i] >= 0) stream->add_instructions()->set_record_event(recordEvent[i]);
    if (instrs_[i].stream == kCompute)
      computeSegments.insert(computeSegments.end(), stream->instructions_size() - before, instrs_[i].segment);
  }
  plan_.set_num_events(numEvents);
  if (options_.templates) addBlockTemplates(*plan_.mutable_streams(kCompute), computeSegments, plan_);
}

LogicalResult Emitter::run() {
  auto arena = func_->getAttrOfType<IntegerAttr>(kArenaBytesAttr);
  if (!arena) return func_.emitError("has no memory plan: run mt-plan-memory first");
  plan_.set_magic(kPlanMagic);
  plan_.set_version_major(kPlanVersionMajor);
  plan_.set_version_minor(kPlanVersionMinor);
  plan_.set_arena_bytes(arena.getInt());
  plan_.set_init_seed(options_.init_seed);
  if (failed(addHostTensors())) return failure();
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
  finish();
  auto* model = plan_.mutable_model();
  model->set_name(options_.model_name);
  model->set_batch(options_.batch);
  model->set_seq(options_.seq);
  model->set_vocab(options_.vocab);
  model->set_num_params(stats_.num_params);
  model->set_flops_per_step(stats_.flops);
  model->set_predicted_step_us(stats_.step_us);
  model->set_hardware(options_.hardware.name);
  auto precision = func_->getAttrOfType<StringAttr>(kPrecisionAttr);
  model->set_precision(precision ? precision.getValue().str() : "fp32");
  model->set_hf_config(options_.hf_config);
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
