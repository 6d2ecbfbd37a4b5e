#include "compiler/onnx/OnnxImporter.h"

#include <cmath>
#include <limits>

#include "compiler/dialect/MtDialect.h"
#include "compiler/onnx/Importer.h"
#include "passes/Passes.h"

using namespace mlir;

namespace mt::onnximport {

Type mtElementType(MLIRContext& context, int32_t elem_type) {
  if (elem_type == onnx::TensorProto::FLOAT) return Float32Type::get(&context);
  return IntegerType::get(&context, 32);
}

namespace {

std::string directoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The static shape of a graph input or output from its type; fails on dynamic dims.
std::vector<int64_t> staticShape(const onnx::ValueInfoProto& info) {
  std::vector<int64_t> shape;
  if (!info.type().has_tensor_type()) unsupported("graph input '" + info.name() + "' is not a tensor");
  for (const auto& d : info.type().tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0)
      unsupported("graph input '" + info.name() + "' has a dynamic dimension '" + d.dim_param() +
                  "': give its size (--batch/--seq bind batch and sequence)");
    shape.push_back(d.dim_value());
  }
  return shape;
}

}  // namespace

Importer::Importer(MLIRContext& context, const onnx::ModelProto& model, const std::string& model_dir,
                   const ImportOptions& options)
    : context_(context), model_(model), model_dir_(model_dir), options_(options), b_(&context),
      loc_(UnknownLoc::get(&context)) {}

std::string Importer::where() const {
  const std::string name = node_->name().empty() ? (node_->output_size() ? node_->output(0) : "?") : node_->name();
  return "node '" + name + "' (" + node_->op_type() + ", opset " + std::to_string(opset_) + ")";
}

void Importer::failNode() {
  malformed(where() + ": " + (diagnostic_.empty() ? "the op does not verify" : diagnostic_));
}

Operation* Importer::finish(StringRef name, ValueRange operands, ArrayRef<NamedAttribute> attrs,
                            ArrayRef<Type> types) {
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
  return it->second;
}

const Const& Importer::constInput(size_t i, const char* what) {
  const Val& v = input(i);
  if (v.bound) return *v.bound;
  if (!v.constant)
    unsupported(where() + ": its " + what + " (input '" + node_->input(i) + "') must be known when compiling");
  return *v.constant;
}

Value Importer::runtime(size_t i) {
  const Val& v = input(i);
  if (!v.value) {
    Val& stored = values_[node_->input(i)];
    stored.value = materialize(v);
  }
  return values_[node_->input(i)].value;
}

Value Importer::runtimeFloat(size_t i) {
  if (input(i).elem_type != onnx::TensorProto::FLOAT)
    unsupported(where() + ": input '" + node_->input(i) + "' is " + elemTypeName(input(i).elem_type) +
                "; this op runs on FLOAT tensors only");
  return runtime(i);
}

Value Importer::materialize(const Val& v) {
  if (v.value) return v.value;
  const Type element = mtElementType(context_, v.elem_type);
  if (v.bound) {
    // A bound graph input used at run time: it becomes an argument.
    for (const auto& [name, val] : values_)
      if (&val == &v) {
        inputs_.push_back(name);
        return addArgument(RankedTensorType::get(v.shape, element),
                           b_.getNamedAttr(kInputAttr, b_.getStringAttr(name)));
      }
  }
  const Const& c = *v.constant;
  if (element.isF32() && c.isUniform()) return fill(static_cast<float>(c.values[0]), c.shape);
  return constantArg(c, element.isF32());
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
        unsupported(where() + ": integer constant " + std::to_string(static_cast<int64_t>(v)) +
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
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
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
  const std::string name = node_->name().empty() ? node_->output(0) : node_->name();
  loc_ = NameLoc::get(b_.getStringAttr(name));
  it->second(*this);
  for (const auto& out : node_->output())
    if (!out.empty() && !values_.count(out)) unsupported(where() + ": output '" + out + "' is not produced");
}

OwningOpRef<ModuleOp> Importer::run(ImportedSignature* signature) {
  ScopedDiagnosticHandler capture(&context_, [&](Diagnostic& d) {
    if (d.getSeverity() == DiagnosticSeverity::Error) diagnostic_ = d.str();
    return success();
  });
  opset_ = defaultOpset(model_);
  const onnx::GraphProto& graph = model_.graph();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context_));
  b_.setInsertionPointToEnd(module->getBody());
  func_ = b_.create<func::FuncOp>(NameLoc::get(b_.getStringAttr(graph.name())), "forward",
                                  b_.getFunctionType({}, {}));
  Block* body = func_.addEntryBlock();
  b_.setInsertionPointToStart(body);

  for (const auto& init : graph.initializer()) {
    if (init.name().empty()) malformed("an initializer has no name");
    Val v;
    v.constant = decodeTensor(init, model_dir_);
    v.shape = v.constant->shape;
    v.elem_type = narrowedElemType(init.data_type());
    values_[init.name()] = std::move(v);
  }
  for (const auto& in : graph.input()) {
    if (values_.count(in.name())) continue;  // an initializer listed as an input (IR < 4)
    const int32_t elem = in.type().tensor_type().elem_type();
    if (!isSupportedElemType(elem))
      unsupported("graph input '" + in.name() + "' has element type " + elemTypeName(elem) +
                  " (supported: " + kSupportedElemTypes + ")");
    Val v;
    v.shape = staticShape(in);
    v.elem_type = narrowedElemType(elem);
    auto bound = options_.bound_inputs.find(in.name());
    if (bound != options_.bound_inputs.end()) {
      v.bound = decodeTensor(bound->second, model_dir_);
      if (v.bound->shape != v.shape) malformed("bound input '" + in.name() + "' has another shape than declared");
    } else {
      inputs_.push_back(in.name());
      v.value = addArgument(RankedTensorType::get(v.shape, mtElementType(context_, v.elem_type)),
                            b_.getNamedAttr(kInputAttr, b_.getStringAttr(in.name())));
    }
    values_[in.name()] = std::move(v);
  }
  for (const auto& n : graph.node()) {
    node_ = &n;
    lowerNode();
  }
  node_ = nullptr;

  SmallVector<Value> results;
  SmallVector<Attribute> names;
  if (signature) *signature = {};
  for (const auto& out : graph.output()) {
    auto it = values_.find(out.name());
    if (it == values_.end()) malformed("graph output '" + out.name() + "' is produced by no node");
    loc_ = NameLoc::get(b_.getStringAttr(out.name()));
    results.push_back(materialize(it->second));
    if (signature) {
      signature->outputs.push_back(out.name());
      signature->output_elem_types.push_back(it->second.elem_type);
    }
  }
  b_.create<func::ReturnOp>(func_.getLoc(), results);
  func_.setType(b_.getFunctionType(body->getArgumentTypes(), TypeRange(ValueRange(results))));
  for (size_t i = 0; i < results.size(); ++i)
    func_.setResultAttr(i, kOutputAttr, b_.getStringAttr(graph.output(i).name()));
  func_->setAttr(kModelAttr, b_.getStringAttr(graph.name().empty() ? "onnx" : graph.name()));
  if (signature) signature->inputs = inputs_;
  if (failed(mlir::verify(*module))) malformed("the imported module does not verify: " + diagnostic_);
  return module;
}

OwningOpRef<ModuleOp> importForward(MLIRContext& context, const std::string& path, const ImportOptions& options,
                                    ImportedSignature* signature) {
  context.getOrLoadDialect<MtDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  const onnx::ModelProto model = readModel(path);
  Importer importer(context, model, directoryOf(path), options);
  return importer.run(signature);
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
