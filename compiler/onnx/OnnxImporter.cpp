#include "compiler/onnx/OnnxImporter.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "compiler/dialect/MtDialect.h"
#include "compiler/onnx/Importer.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt::onnximport {

Type mtElementType(MLIRContext& context, int32_t elem_type) {
  if (elem_type == onnx::TensorProto::FLOAT) return Float32Type::get(&context);
  return IntegerType::get(&context, 32);
}

namespace {

// The static shape of a graph input from its type; dynamic dims take the batch, then the
// sequence, from the options.
std::vector<int64_t> staticShape(const onnx::ValueInfoProto& info, const ImportOptions& options) {
  std::vector<int64_t> shape;
  if (!info.type().has_tensor_type()) unsupported("graph input '" + info.name() + "' is not a tensor");
  int dynamic = 0;
  for (const auto& d : info.type().tensor_type().shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) {
      shape.push_back(d.dim_value());
      continue;
    }
    const int64_t size = dynamic == 0 ? options.batch : dynamic == 1 ? options.seq : 0;
    if (size <= 0)
      unsupported("graph input '" + info.name() + "' has a dynamic dimension '" + d.dim_param() +
                  "': give --batch (the first dynamic dimension) and --seq (the second)");
    ++dynamic;
    shape.push_back(size);
  }
  checkedNumel(shape, "graph input '" + info.name() + "'");
  return shape;
}

// A parameter name for an initializer: its own, unless the exporter made it anonymous
// ("onnx::MatMul_262"); then the module path of the first node that uses it.
std::string parameterName(const std::string& initializer, const onnx::GraphProto& graph) {
  if (initializer.find("::") == std::string::npos) return initializer;
  for (const auto& n : graph.node())
    for (int i = 0; i < n.input_size(); ++i) {
      if (n.input(i) != initializer || n.name().empty()) continue;
      return dottedPath(n.name()) + "." + std::to_string(i);  // "blocks.0.attn.qkv.MatMul.1"
    }
  return initializer;
}

}  // namespace

std::string dottedPath(const std::string& node_path) {
  std::vector<std::string> parts;
  for (size_t begin = 0; begin <= node_path.size();) {
    size_t end = node_path.find('/', begin);
    if (end == std::string::npos) end = node_path.size();
    if (end > begin) parts.push_back(node_path.substr(begin, end - begin));
    begin = end + 1;
  }
  // A container's scope then its child's, which repeats it ("mlp/mlp.0" of an nn.Sequential
  // named mlp): the child's alone is the module's name.
  std::string path;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i + 1 < parts.size() && parts[i + 1].rfind(parts[i] + ".", 0) == 0) continue;
    path += (path.empty() ? "" : ".") + parts[i];
  }
  return path;
}

Importer::Importer(MLIRContext& context, const onnx::ModelProto& model, const std::string& model_dir,
                   const ImportOptions& options, const std::set<std::string>& parameters)
    : context_(context), model_(model), model_dir_(model_dir), options_(options), parameters_(parameters),
      b_(&context), loc_(UnknownLoc::get(&context)) {}

std::string Importer::where() const {
  if (!node_) return "the graph's outputs";
  const std::string name = node_->name().empty() ? (node_->output_size() ? node_->output(0) : "?") : node_->name();
  return "node '" + name + "' (" + node_->op_type() + ", opset " + std::to_string(opset_) + ")";
}

void Importer::failNode() {
  malformed(where() + ": " + (diagnostic_.empty() ? "the op does not verify" : diagnostic_));
}

Operation* Importer::finish(StringRef name, ValueRange operands, ArrayRef<NamedAttribute> attrs,
                            ArrayRef<Type> types) {
  for (Type t : types) {
    auto shape = cast<RankedTensorType>(t).getShape();
    if (!withinElementLimit(std::vector<int64_t>(shape.begin(), shape.end())))
      malformed(where() + ": a result of more than 2^48 elements (or a negative dimension)");
  }
  OperationState state(loc_, name);
  state.addOperands(operands);
  state.addAttributes(attrs);
  state.addTypes(types);
  Operation* op = b_.create(state);
  if (failed(mlir::verify(op))) {
    op->erase();
    failNode();
  }
  return op;
}

Value Importer::addArgument(Type type, NamedAttribute attr) {
  Block& body = func_.getBody().front();
  Value arg = body.addArgument(type, func_.getLoc());
  func_.setType(b_.getFunctionType(body.getArgumentTypes(), {}));
  func_.setArgAttrs(body.getNumArguments() - 1, b_.getDictionaryAttr(attr));
  return arg;
}

size_t Importer::numInputs() const {
  size_t n = node_->input_size();
  while (n > 0 && node_->input(n - 1).empty()) --n;
  return n;
}

bool Importer::hasInput(size_t i) const { return i < numInputs() && !node_->input(i).empty(); }

const Val& Importer::input(size_t i) {
  if (!hasInput(i)) malformed(where() + ": input " + std::to_string(i) + " is missing");
  auto it = values_.find(node_->input(i));
  if (it == values_.end())
    malformed(where() + ": input '" + node_->input(i) + "' is not produced by any earlier node (the graph "
              "must be topologically sorted)");
  if (!it->second.unreadable.empty()) unsupported(where() + ": input '" + node_->input(i) + "' " + it->second.unreadable);
  return it->second;
}

bool Importer::isConst(size_t i) {
  if (!hasInput(i)) return false;
  input(i);  // checks that it exists
  Val& v = values_.at(node_->input(i));
  if (v.lazy) {
    v.constant = initializerValue(v);
    v.constant->sources = {v.initializer};
    v.lazy = false;
  }
  return v.constant.has_value();
}

const Const& Importer::constInput(size_t i, const char* what) {
  const Val& v = input(i);
  if (v.bound) return *v.bound;
  if (!isConst(i))
    unsupported(where() + ": its " + what + " (input '" + node_->input(i) + "') must be known when compiling");
  return *v.constant;
}

Value Importer::runtime(size_t i) {
  input(i);  // checks that it exists
  return runtimeValue(node_->input(i));
}

Value Importer::runtimeFloat(size_t i) {
  if (input(i).elem_type != onnx::TensorProto::FLOAT)
    unsupported(where() + ": input '" + node_->input(i) + "' is " + elemTypeName(input(i).elem_type) +
                "; this op runs on FLOAT tensors only");
  return runtime(i);
}

Value Importer::runtimeValue(const std::string& name) {
  Val& v = values_.at(name);
  if (!v.unreadable.empty()) unsupported("'" + name + "' " + v.unreadable);
  if (v.value) return v.value;
  const Type element = mtElementType(context_, v.elem_type);
  if (v.bound) {
    inputs_.push_back(name);
    v.value = addArgument(RankedTensorType::get(v.shape, element), b_.getNamedAttr(kInputAttr, b_.getStringAttr(name)));
    return v.value;
  }
  // A FLOAT initializer used as run-time data of a model to train is a parameter.
  if (!v.initializer.empty() && (parameters_.count(v.initializer) || isTrainableInitializer(v))) {
    v.value = parameter(v);
    return v.value;
  }
  const Const& c = *v.constant;
  if (options_.training && element.isF32()) {
    std::set<std::string> sources;
    for (const std::string& s : c.sources)
      if (keptConstant(s).empty()) sources.insert(s);
    if (!sources.empty()) throw RestartAsParameters{std::move(sources)};
  }
  v.value = element.isF32() && c.isUniform() ? fill(static_cast<float>(c.values[0]), c.shape)
                                             : constantArg(c, element.isF32());
  return v.value;
}

Value Importer::parameter(const Val& v) {
  return newParameter(parameterName(v.initializer, model_.graph()), v.initializer, v.shape,
                      initializers_.at(v.initializer), /*transposed=*/false, /*tie=*/false);
}

namespace {
// FNV-1a over the values' bytes: equal values, equal fingerprints.
uint64_t fingerprintOf(const std::vector<float>& values) {
  uint64_t h = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}
std::vector<float> valuesOf(const ImportedParam& param, const std::string& model_dir) {
  std::vector<float> values(checkedNumel(param.shape, "parameter " + param.name));
  initialValues(param, model_dir, values.data());
  return values;
}
}  // namespace

uint64_t Importer::fingerprint(size_t param) {
  if (!fingerprints_[param]) fingerprints_[param] = fingerprintOf(valuesOf(params_[param], model_dir_));
  return *fingerprints_[param];
}

Value Importer::newParameter(std::string name, const std::string& initializer, std::vector<int64_t> shape,
                             const onnx::TensorProto* source, bool transposed, bool tie) {
  const std::string origin = initializer + (transposed ? " (transposed)" : "");
  ImportedParam param{name, initializer, std::move(shape), source, transposed, origin};
  std::optional<uint64_t> print;
  if (tie) {
    const std::vector<float> values = valuesOf(param, model_dir_);
    print = fingerprintOf(values);
    const bool uniform = std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) == values.end();
    for (size_t i = 0; i < params_.size() && !uniform; ++i) {
      if (params_[i].shape != param.shape || fingerprint(i) != *print || valuesOf(params_[i], model_dir_) != values)
        continue;
      params_[i].origin += ";" + origin;  // the tied copy takes the trained values too
      setParamAttrs(i);
      return param_args_[i];
    }
  }
  for (const ImportedParam& other : params_)
    if (other.name == param.name) param.name += "." + std::to_string(params_.size());
  Value arg = addArgument(RankedTensorType::get(param.shape, b_.getF32Type()),
                          b_.getNamedAttr(kParamAttr, b_.getDictionaryAttr({})));
  params_.push_back(std::move(param));
  param_args_.push_back(arg);
  fingerprints_.push_back(print);
  setParamAttrs(params_.size() - 1);
  return arg;
}

void Importer::setParamAttrs(size_t i) {
  SmallVector<NamedAttribute> fields = {b_.getNamedAttr("name", b_.getStringAttr(params_[i].name)),
                                        b_.getNamedAttr("init", b_.getStringAttr("weights")),
                                        b_.getNamedAttr("origin", b_.getStringAttr(params_[i].origin))};
  func_.setArgAttr(cast<BlockArgument>(param_args_[i]).getArgNumber(), kParamAttr, b_.getDictionaryAttr(fields));
}

bool Importer::isTrainableInitializer(const Val& v) const {
  return options_.training && !v.initializer.empty() && v.elem_type == onnx::TensorProto::FLOAT &&
         keptConstant(v.initializer).empty();
}

std::string Importer::keptConstant(const std::string& name) const {
  if (options_.frozen.count(name)) return "frozen";
  if (auto known = kept_constant_.find(name); known != kept_constant_.end()) return known->second;
  std::string why;
  if (options_.frozen_pattern && std::regex_search(name, *options_.frozen_pattern)) {
    why = "matches --frozen";
  } else if (options_.trainable_pattern && !std::regex_search(name, *options_.trainable_pattern)) {
    why = "outside --trainable";
  } else if (auto it = initializers_.find(name); it != initializers_.end() &&
                                                 it->second->data_type() == onnx::TensorProto::FLOAT) {
    // Values an optimizer cannot move: a causal or padding mask an eval export folded in.
    if (holdsNonFinite(*it->second, model_dir_)) why = "holds Inf or NaN: a mask, not a weight";
  }
  kept_constant_[name] = why;
  return why;
}

Val Importer::initializerVal(const std::string& name, const onnx::TensorProto& tensor) {
  Val v;
  v.elem_type = narrowedElemType(tensor.data_type());
  v.initializer = name;
  initializers_[name] = &tensor;
  if (parameters_.count(name)) {
    v.shape.assign(tensor.dims().begin(), tensor.dims().end());  // its values stay in the file until needed
  } else if (isTrainableInitializer(v)) {
    v.shape.assign(tensor.dims().begin(), tensor.dims().end());
    v.lazy = true;  // decoded if an op folds with it (isConst)
  } else {
    v.constant = decodeTensor(tensor, model_dir_);
    v.shape = v.constant->shape;
    if (v.elem_type == onnx::TensorProto::FLOAT) v.constant->sources = {name};
  }
  return v;
}

void Importer::aliasInitializer(const Val& v, const std::string& alias) {
  values_[alias] = initializerVal(alias, *initializers_.at(v.initializer));
}

Value Importer::fill(float value, ArrayRef<int64_t> shape) {
  return create1<FillOp>({}, {b_.getNamedAttr("value", b_.getF32FloatAttr(value))},
                         {RankedTensorType::get(shape, b_.getF32Type())});
}

Value Importer::constantArg(const Const& c, bool as_float) {
  constexpr int64_t kMaxConstantBytes = int64_t{64} << 20;
  if (c.numel() * 4 > kMaxConstantBytes)
    unsupported(where() + ": a constant of " + std::to_string(c.numel()) +
                " elements; constants over 64 MiB must be parameters");
  DenseElementsAttr value;
  if (as_float) {
    std::vector<float> data(c.values.begin(), c.values.end());
    value = DenseElementsAttr::get(RankedTensorType::get(c.shape, b_.getF32Type()), ArrayRef<float>(data));
  } else {
    std::vector<int32_t> data;
    for (double v : c.values) {
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        unsupported(where() + ": integer constant " + std::to_string(v) +
                    " does not fit the 32-bit integers the runtime uses");
      data.push_back(static_cast<int32_t>(v));
    }
    value = DenseElementsAttr::get(RankedTensorType::get(c.shape, b_.getI32Type()), ArrayRef<int32_t>(data));
  }
  // Arguments go at the function's entry; the builder stays where the graph is being built.
  return addArgument(value.getType(), b_.getNamedAttr(kConstAttr, value));
}

Value Importer::reshape(Value v, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape) return v;
  return create1<ReshapeOp>({v}, {}, {RankedTensorType::get(shape, type.getElementType())});
}

int64_t Importer::normAxis(int64_t axis, int64_t rank) const {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    malformed(where() + ": axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return a;
}

void Importer::setOutput(size_t i, Value value, int32_t elem_type) {
  if (i >= static_cast<size_t>(node_->output_size()) || node_->output(i).empty()) return;
  Val v;
  v.value = value;
  v.elem_type = elem_type;
  v.shape.assign(cast<RankedTensorType>(value.getType()).getShape().begin(),
                 cast<RankedTensorType>(value.getType()).getShape().end());
  values_[node_->output(i)] = std::move(v);
}

void Importer::setOutput(size_t i, Const c, int32_t elem_type) {
  if (i >= static_cast<size_t>(node_->output_size()) || node_->output(i).empty()) return;
  Val v;
  v.shape = c.shape;
  v.elem_type = elem_type;
  v.constant = std::move(c);
  values_[node_->output(i)] = std::move(v);
}

void Importer::setUnreadableOutput(size_t i, std::string why) {
  if (i >= static_cast<size_t>(node_->output_size()) || node_->output(i).empty()) return;
  Val v;
  v.unreadable = std::move(why);
  values_[node_->output(i)] = std::move(v);
}

const onnx::AttributeProto* Importer::attr(const std::string& name) const {
  for (const auto& a : node_->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t Importer::intAttr(const std::string& name, int64_t fallback) const {
  const auto* a = attr(name);
  return a ? a->i() : fallback;
}

float Importer::floatAttr(const std::string& name, float fallback) const {
  const auto* a = attr(name);
  return a ? a->f() : fallback;
}

std::vector<int64_t> Importer::intsAttr(const std::string& name) const {
  const auto* a = attr(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

void Importer::lowerNode() {
  const auto& table = loweringTable();
  auto it = table.find(node_->op_type());
  if (!node_->domain().empty() && node_->domain() != "ai.onnx") it = table.end();
  if (it == table.end()) {
    std::string known;
    for (const auto& op : supportedOps()) known += " " + op;
    unsupported(where() + ": op type " + (node_->domain().empty() ? "" : node_->domain() + ".") +
                node_->op_type() + " is not supported (supported:" + known + ")");
  }
  if (opset_ < 0) malformed(where() + ": the model imports no version of the default ONNX opset");
  if (node_->output_size() == 0 || node_->output(0).empty()) malformed(where() + ": the node has no output");
  const std::string name = node_->name().empty() ? node_->output(0) : node_->name();
  loc_ = NameLoc::get(b_.getStringAttr(name));
  const auto& [lower, min_inputs, max_inputs] = it->second;
  if (numInputs() < min_inputs || numInputs() > max_inputs)
    malformed(where() + ": takes " + std::to_string(min_inputs) +
              (max_inputs == min_inputs ? "" : " to " + std::to_string(max_inputs)) + " inputs, has " +
              std::to_string(numInputs()));
  for (size_t i = 0; i < min_inputs; ++i)
    if (node_->input(i).empty()) malformed(where() + ": required input " + std::to_string(i) + " is empty");
  lower(*this);
  static const bool trace = std::getenv("MT_ONNX_TRACE") != nullptr;  // documented in docs/onnx.md
  for (const auto& out : node_->output()) {
    if (out.empty()) continue;
    auto produced = values_.find(out);
    if (produced == values_.end()) unsupported(where() + ": output '" + out + "' is not produced");
    if (trace) {
      std::string shape;
      for (int64_t d : produced->second.shape) shape += std::to_string(d) + "x";
      std::fprintf(stderr, "%s -> %s [%s] %s\n", where().c_str(), out.c_str(), shape.c_str(),
                   produced->second.constant ? "constant" : "run-time");
    }
  }
}

OwningOpRef<ModuleOp> Importer::run(ImportedModel* imported) {
  ScopedDiagnosticHandler capture(&context_, [&](Diagnostic& d) {
    if (d.getSeverity() == DiagnosticSeverity::Error) diagnostic_ = d.str();
    return success();
  });
  opset_ = defaultOpset(model_);
  dropout_sites_ = 0;
  const onnx::GraphProto& graph = model_.graph();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context_));
  b_.setInsertionPointToEnd(module->getBody());
  func_ = b_.create<func::FuncOp>(NameLoc::get(b_.getStringAttr(graph.name())), "forward",
                                  b_.getFunctionType({}, {}));
  b_.setInsertionPointToStart(func_.addEntryBlock());

  for (const auto& init : graph.initializer()) {
    if (init.name().empty()) malformed("an initializer has no name");
    values_[init.name()] = initializerVal(init.name(), init);
  }
  addGraphInputs();
  for (const auto& n : graph.node()) {
    node_ = &n;
    lowerNode();
  }
  node_ = nullptr;
  finishFunction(imported);
  if (failed(mlir::verify(*module))) malformed("the imported module does not verify: " + diagnostic_);
  return module;
}

void Importer::addGraphInputs() {
  int token_inputs = 0;
  for (const auto& in : model_.graph().input()) {
    if (values_.count(in.name())) continue;  // an initializer listed as an input (IR < 4)
    const int32_t elem = in.type().tensor_type().elem_type();
    if (!isSupportedElemType(elem))
      unsupported("graph input '" + in.name() + "' has element type " + elemTypeName(elem) +
                  " (supported: " + kSupportedElemTypes + ")");
    Val v;
    v.shape = staticShape(in, options_);
    v.elem_type = narrowedElemType(elem);
    auto bound = options_.bound_inputs.find(in.name());
    if (bound != options_.bound_inputs.end()) {
      v.bound = decodeTensor(bound->second, model_dir_);
      if (v.bound->shape != v.shape) malformed("bound input '" + in.name() + "' has another shape than declared");
    } else {
      std::string role = in.name();
      if (options_.training) {
        // Token ids, then targets: integer (batch, seq) tensors.
        if (v.elem_type == onnx::TensorProto::FLOAT || v.shape.size() != 2 || token_inputs == 2)
          unsupported("graph input '" + in.name() + "': a model to train takes integer (batch, seq) token ids and, "
                      "if it computes its loss, integer (batch, seq) targets; nothing else");
        role = token_inputs++ == 0 ? "tokens" : "targets";
      }
      inputs_.push_back(in.name());
      v.value = addArgument(RankedTensorType::get(v.shape, mtElementType(context_, v.elem_type)),
                            b_.getNamedAttr(kInputAttr, b_.getStringAttr(role)));
    }
    values_[in.name()] = std::move(v);
  }
}

void Importer::finishFunction(ImportedModel* imported) {
  const onnx::GraphProto& graph = model_.graph();
  Block* body = &func_.getBody().front();

  SmallVector<Value> results;
  ImportedModel result;
  // Training: the first output is the logits or the loss; the rest (say, the logits beside
  // a loss) are not needed to train.
  const int outputs = options_.training ? std::min(graph.output_size(), 1) : graph.output_size();
  if (outputs == 0) malformed("the graph has no outputs");
  std::set<std::string> listed;
  for (int i = 0; i < outputs; ++i) {
    const auto& out = graph.output(i);
    if (!values_.count(out.name())) malformed("graph output '" + out.name() + "' is produced by no node");
    if (!listed.insert(out.name()).second) malformed("graph output '" + out.name() + "' is listed twice");
    loc_ = NameLoc::get(b_.getStringAttr(out.name()));
    results.push_back(runtimeValue(out.name()));
    result.outputs.push_back(out.name());
    result.output_elem_types.push_back(values_.at(out.name()).elem_type);
  }
  b_.create<func::ReturnOp>(func_.getLoc(), results);
  func_.setType(b_.getFunctionType(body->getArgumentTypes(), TypeRange(ValueRange(results))));
  if (!options_.training)
    for (size_t i = 0; i < results.size(); ++i)
      func_.setResultAttr(i, kOutputAttr, b_.getStringAttr(graph.output(i).name()));
  func_->setAttr(kModelAttr, b_.getStringAttr(graph.name().empty() ? "onnx" : graph.name()));
  result.inputs = inputs_;
  for (const auto& [name, why] : kept_constant_)
    if (!why.empty() && values_.count(name) && values_.at(name).value) result.kept_constant.push_back({name, why});
  result.params = std::move(params_);
  if (imported) *imported = std::move(result);
}

OwningOpRef<ModuleOp> importModel(MLIRContext& context, const std::string& path, const ImportOptions& options,
                                  ImportedModel* imported) {
  context.getOrLoadDialect<MtDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  auto model = std::make_shared<const onnx::ModelProto>(readModel(path));
  const std::string model_dir = directoryOf(path);
  // Which FLOAT initializers are parameters shows only while importing: a constant folded
  // from one (a position table gathered at fixed indices) that ends up as run-time data means
  // the initializer is a parameter. Each restart adds at least one; masks and other buffers
  // that only feed compile-time logic stay constants.
  std::set<std::string> parameters;
  for (;;) {
    try {
      Importer importer(context, *model, model_dir, options, parameters);
      OwningOpRef<ModuleOp> module = importer.run(imported);
      if (imported) imported->model = model, imported->model_dir = model_dir;
      return module;
    } catch (const RestartAsParameters& restart) {
      parameters.insert(restart.initializers.begin(), restart.initializers.end());
    }
  }
}

void initialValues(const ImportedParam& param, const std::string& model_dir, float* out) {
  const Const c = decodeTensor(*param.source, model_dir);
  if (!param.transposed) {
    std::transform(c.values.begin(), c.values.end(), out, [](double v) { return static_cast<float>(v); });
    return;
  }
  // The source is (cols, rows) of this (rows, cols) parameter.
  const int64_t rows = param.shape[0], cols = param.shape[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c2 = 0; c2 < cols; ++c2) out[r * cols + c2] = static_cast<float>(c.values[c2 * rows + r]);
}

const std::vector<std::string>& supportedOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const auto& [name, lowering] : loweringTable()) names.push_back(name);
    return names;
  }();
  return ops;
}

}  // namespace mt::onnximport
