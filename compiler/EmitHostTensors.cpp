#include "compiler/EmitHostTensors.h"

#include "llvm/Support/FormatVariadic.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt {
namespace {

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

class HostTensorBuilder {
 public:
  HostTensorBuilder(func::FuncOp func, plan::Plan& plan, PlanStats& stats, HostTensors& hosts)
      : func_(func), plan_(plan), stats_(stats), h_(hosts) {}
  LogicalResult build();

 private:
  // The function's arguments: parameters (by name in `paramByName`), their pieces and staging
  // copies, inputs, constants, the tokens' rows of a host embedding.
  LogicalResult addArguments(std::map<std::string, int>& paramByName);
  // Each trained parameter's gradient and AdamW moments.
  void addOptimizerState(const std::map<std::string, int>& paramByName);
  // Activations offloaded to the host (mt-offload-activations).
  void addOffloadedActivations();
  // The gradient landing buffer, the loss, and where each returned gradient lands.
  LogicalResult addTrainingResults(func::ReturnOp ret, std::map<std::string, int>& paramByName);
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

  func::FuncOp func_;
  plan::Plan& plan_;
  PlanStats& stats_;
  HostTensors& h_;
};

LogicalResult HostTensorBuilder::build() {
  std::map<std::string, int> paramByName;
  if (failed(addArguments(paramByName))) return failure();
  auto ret = cast<func::ReturnOp>(func_.getBody().front().getTerminator());
  for (Value v : ret.getOperands())
    if (!v.getDefiningOp<D2HOp>()) return ret.emitError("returns a device value: run mt-schedule-resident first");
  if (isForwardOnly(func_)) {
    // Forward-only: each result is a named output; no gradients or optimizer state.
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      addHostValue(v, func_.getResultAttrOfType<StringAttr>(i, kOutputAttr).getValue().str(), plan::ROLE_OUTPUT);
    }
    return success();
  }
  addOptimizerState(paramByName);
  addOffloadedActivations();
  return addTrainingResults(ret, paramByName);
}

LogicalResult HostTensorBuilder::addArguments(std::map<std::string, int>& paramByName) {
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
      if (t->frozen()) stats_.frozen_params += cast<RankedTensorType>(arg.getType()).getNumElements();
    } else if (auto table = func_.getArgAttrOfType<StringAttr>(i, kEmbeddedTokensAttr)) {
      // Filled on the host by the "embedding_lookup" task (mt-host-embedding): scratch.
      t->set_name("tokens' rows of " + table.getValue().str());
      t->set_role(plan::ROLE_TOKEN_ROWS);
    } else {
      return func_.emitError("argument ") << i << " is neither a parameter (mt.param), an input (mt.input) nor "
                                          << "embedded tokens (mt.embedded_tokens)";
    }
    h_.tensor[arg] = plan_.host_tensors_size() - 1;
  }
  return success();
}

void HostTensorBuilder::addOptimizerState(const std::map<std::string, int>& paramByName) {
  for (auto& [name, p] : paramByName) {
    const plan::HostTensor param = plan_.host_tensors(p);
    if (param.frozen()) continue;  // never trained: no gradient, no moments
    const std::pair<plan::HostRole, const char*> companions[] = {
        {plan::ROLE_GRAD, ".grad"}, {plan::ROLE_MOMENT1, ".exp_avg"}, {plan::ROLE_MOMENT2, ".exp_avg_sq"}};
    for (auto [role, suffix] : companions) {
      plan::HostTensor* t = plan_.add_host_tensors();
      t->set_name(name + suffix);
      *t->mutable_shape() = param.shape();
      t->set_dtype(plan::DTYPE_F32);
      t->set_role(role);
      t->set_param_index(p);
      if (role == plan::ROLE_GRAD) h_.gradOfParam[p] = plan_.host_tensors_size() - 1;
    }
  }
}

void HostTensorBuilder::addOffloadedActivations() {
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
}

LogicalResult HostTensorBuilder::addTrainingResults(func::ReturnOp ret, std::map<std::string, int>& paramByName) {
  if (auto landing = func_->getAttrOfType<IntegerAttr>(kLandingBytesAttr)) {
    plan::HostTensor* t = plan_.add_host_tensors();
    t->set_name("gradient landing");
    t->set_role(plan::ROLE_GRAD_LANDING);
    t->set_dtype(plan::DTYPE_F32);
    t->add_shape((landing.getInt() + 3) / 4);
    h_.landing = plan_.host_tensors_size() - 1;
    // Landed for the deferred update (no task updates on arrival): each kept apart once summed.
    h_.gradients_apart = true;
    func_.walk([&](HostTaskOp task) { h_.gradients_apart &= task.getKind() != HostTaskKind::AdamwOnArrival; });
  }
  plan::HostTensor* loss = plan_.add_host_tensors();
  loss->set_name("loss");
  loss->set_dtype(plan::DTYPE_F32);
  loss->set_role(plan::ROLE_LOSS);
  const int lossIndex = plan_.host_tensors_size() - 1;

  // The returned values are d2h results: the loss, then the gradient of each named parameter,
  // then named outputs (the router's statistics).
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (i == 0) {
      h_.tensor[v] = lossIndex;
      continue;
    }
    if (auto output = func_.getResultAttrOfType<StringAttr>(i, kOutputAttr)) {
      addHostValue(v, output.getValue().str(), plan::ROLE_OUTPUT);  // a statistic for the step log
      continue;
    }
    if (auto table = func_.getResultAttrOfType<StringAttr>(i, kGradTokensAttr)) {
      // The tokens' rows of a table's gradient, scatter-added into it on the host.
      if (!paramByName.count(table.getValue().str()))
        return ret.emitError("result ") << i << " holds rows of the gradient of '" << table.getValue()
                                        << "', which is not a parameter";
      const int grad = h_.gradOf(paramByName[table.getValue().str()]);
      if (grad < 0) return ret.emitError("result ") << i << " holds rows of the gradient of frozen '" << table.getValue() << "'";
      addHostValue(v, "tokens' rows of " + table.getValue().str() + ".grad", plan::ROLE_TOKEN_ROWS);
      h_.gradOfRows[v] = grad;
      continue;
    }
    auto name = func_.getResultAttrOfType<StringAttr>(i, kGradAttr);
    if (!name || !paramByName.count(name.getValue().str()))
      return ret.emitError("result ") << i << " is not the gradient of a parameter";
    const int grad = h_.gradOf(paramByName[name.getValue().str()]);
    if (grad < 0) return ret.emitError("result ") << i << " is the gradient of frozen '" << name.getValue() << "'";
    h_.tensor[v] = grad;
    if (auto row = func_.getResultAttrOfType<IntegerAttr>(i, kGradRowAttr)) {
      auto type = cast<RankedTensorType>(v.getType());
      h_.offset[v] = row.getInt() * rowBytes(type);
    }
    if (h_.landing >= 0) {
      auto offset = v.getDefiningOp()->getAttrOfType<IntegerAttr>(kLandingOffsetAttr);
      if (!offset) return ret.emitError("result ") << i << " has no place in the gradient landing buffer";
      // A piece lands at its rows' place in its parameter's gradient.
      plan_.mutable_host_tensors(h_.tensor[v])->set_landing_offset(offset.getInt() - h_.offset.lookup(v));
    }
  }
  // A gradient the host's token scatter lands first (an untied table on the host) has its
  // place there.
  for (Operation& op : func_.getBody().front())
    if (auto task = dyn_cast<HostTaskOp>(op); task && task.getKind() == HostTaskKind::EmbeddingGrad && h_.landing >= 0) {
      auto offset = task->getAttrOfType<IntegerAttr>(kLandingOffsetAttr);
      const int grad = h_.gradOf(h_.tensor[task.getTensors()[0]]);
      if (!offset || grad < 0) return task.emitError("has no place in the gradient landing buffer");
      plan_.mutable_host_tensors(grad)->set_landing_offset(offset.getInt());
    }
  return success();
}

LogicalResult HostTensorBuilder::setParam(plan::HostTensor& t, DictionaryAttr param, RankedTensorType type, unsigned i) {
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
  } else if (init.getValue() == "uniform") {
    t.mutable_init()->set_kind(plan::Initializer::UNIFORM);
    auto bound = param.getAs<FloatAttr>("bound");
    if (!bound) return func_.emitError("parameter '") << name.getValue() << "' has init uniform but no bound";
    t.mutable_init()->set_bound(static_cast<float>(bound.getValueAsDouble()));
  } else if (init.getValue() == "zeros") {
    t.mutable_init()->set_kind(plan::Initializer::ZEROS);
  } else if (init.getValue() == "ones") {
    t.mutable_init()->set_kind(plan::Initializer::ONES);
  } else if (init.getValue() == "weights") {
    t.mutable_init()->set_kind(plan::Initializer::WEIGHTS);
  } else if (init.getValue() == "row_norms") {
    t.mutable_init()->set_kind(plan::Initializer::ROW_NORMS);
    auto of = param.getAs<StringAttr>("of");
    if (!of) return func_.emitError("parameter '") << name.getValue() << "' has init row_norms but no 'of'";
    t.mutable_init()->set_of(of.getValue().str());
  } else {
    return func_.emitError("parameter '") << name.getValue() << "' has unknown init '" << init.getValue()
                                          << "' (normal, uniform, zeros, ones, weights or row_norms)";
  }
  if (auto origin = param.getAs<StringAttr>("origin")) t.set_origin(origin.getValue().str());
  if (auto alpha = param.getAs<FloatAttr>(kParamAdapterAlphaKey))
    t.set_lora_alpha(static_cast<float>(alpha.getValueAsDouble()));
  auto decay = param.getAs<BoolAttr>("decay");
  t.set_frozen(bool(param.get(kParamFrozenKey)));
  t.set_weight_decay(!t.frozen() && (decay ? decay.getValue() : type.getRank() >= 2));
  return success();
}

LogicalResult HostTensorBuilder::addParamPiece(BlockArgument arg, DictionaryAttr param, std::map<std::string, int>& paramByName) {
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
  h_.tensor[arg] = found->second;
  h_.offset[arg] = rows[0] * rowBytes(type);
  stats_.num_params += type.getNumElements();
  if (plan_.host_tensors(found->second).frozen()) stats_.frozen_params += type.getNumElements();
  return success();
}

LogicalResult HostTensorBuilder::addStaging(BlockArgument arg, DictionaryAttr param, std::map<std::string, int>& paramByName) {
  auto name = param.getAs<StringAttr>("name");
  auto found = name ? paramByName.find(name.getValue().str()) : paramByName.end();
  if (found == paramByName.end())
    return func_.emitError("staging argument ") << arg.getArgNumber() << " names no parameter before it";
  const int p = found->second;
  auto [staging, isNew] = h_.stagingOfParam.emplace(p, plan_.host_tensors_size());
  if (isNew) {
    const plan::HostTensor whole = plan_.host_tensors(p);
    plan::HostTensor* t = plan_.add_host_tensors();
    t->set_name(whole.name() + ".bf16");
    *t->mutable_shape() = whole.shape();
    t->set_dtype(plan::DTYPE_BF16);
    t->set_role(plan::ROLE_STAGING);
    t->set_param_index(p);
    if (whole.frozen() && param.get(kParamBf16ValuesKey)) {
      // A frozen weight of bf16 values (plan 1.32): the staging copy is all of it.
      plan_.mutable_host_tensors(p)->set_bf16_only(true);
    } else {
      // The master held split (plan 1.7): the staging copy and this residual are all of it.
      plan::HostTensor* residual = plan_.add_host_tensors();
      residual->set_name(whole.name() + ".residual");
      *residual->mutable_shape() = whole.shape();
      residual->set_dtype(plan::DTYPE_I16);
      residual->set_role(plan::ROLE_RESIDUAL);
      residual->set_param_index(p);
    }
  }
  h_.tensor[arg] = staging->second;
  auto rows = param.getAs<DenseI64ArrayAttr>(kParamRowsKey);
  h_.offset[arg] = rows ? rows[0] * rowBytes(cast<RankedTensorType>(arg.getType())) : 0;
  return success();
}

void HostTensorBuilder::addHostValue(Value v, const std::string& name, plan::HostRole role) {
  plan::HostTensor* t = plan_.add_host_tensors();
  t->set_name(name);
  t->set_role(role);
  setShape(t->mutable_shape(), v.getType());
  t->set_dtype(dtypeOf(v.getType()));
  h_.tensor[v] = plan_.host_tensors_size() - 1;
}

}  // namespace

plan::DType dtypeOf(Type type) {
  auto t = cast<RankedTensorType>(type);
  if (t.getElementType().isInteger(32)) return plan::DTYPE_I32;
  if (t.getElementType().isBF16()) return plan::DTYPE_BF16;
  return plan::DTYPE_F32;
}

void setShape(google::protobuf::RepeatedField<int64_t>* out, Type type) {
  for (int64_t d : cast<RankedTensorType>(type).getShape()) out->Add(d);
}

int HostTensors::gradOf(int param) const {
  auto it = gradOfParam.find(param);
  return it == gradOfParam.end() ? -1 : it->second;
}

ByteRange HostTensors::range(const plan::Plan& plan, int t, int64_t offset, int64_t bytes) const {
  const auto& tensor = plan.host_tensors(t);
  if (bytes < 0) bytes = hostTensorBytes(tensor);
  if (landing < 0 || tensor.role() != plan::ROLE_GRAD) return {t, offset, offset + bytes};
  return {landing, tensor.landing_offset() + offset, tensor.landing_offset() + offset + bytes};
}

LogicalResult addHostTensors(func::FuncOp func, plan::Plan& plan, PlanStats& stats, HostTensors& hosts) {
  return HostTensorBuilder(func, plan, stats, hosts).build();
}

}  // namespace mt
