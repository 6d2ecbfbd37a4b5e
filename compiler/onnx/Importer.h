// The importer's state while it walks one graph (internal to compiler/onnx/).
#pragma once
#include <map>
#include <optional>

#include "compiler/onnx/ConstFold.h"
#include "compiler/onnx/OnnxImporter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

namespace mt::onnximport {

// A value of the graph: known at compile time, a run-time `mt` value, or a graph input.
struct Val {
  std::optional<Const> constant;  // known at compile time: the importer folds with it
  mlir::Value value;
  int32_t elem_type = onnx::TensorProto::FLOAT;  // the ONNX element type
  std::vector<int64_t> shape;
  // A graph input whose value the caller bound: ops that need a constant operand (a shape,
  // axes) read it; every other use makes the input a run-time argument, as if unbound.
  std::optional<Const> bound;
  std::string initializer;  // the ONNX initializer this value is, if it is one
  // A trainable FLOAT initializer whose values stay in the file until an op folds with them
  // (Importer::isConst decodes it): weights are never all decoded at once.
  bool lazy = false;
  // Why no node can read this value ("" if one can): a dropping Dropout's mask, never stored.
  std::string unreadable;
};

class Importer {
 public:
  // `parameters`: the FLOAT initializers a model to train uses as run-time data (found by
  // importing: see RestartAsParameters).
  Importer(mlir::MLIRContext& context, const onnx::ModelProto& model, const std::string& model_dir,
           const ImportOptions& options, const std::set<std::string>& parameters);
  mlir::OwningOpRef<mlir::ModuleOp> run(ImportedModel* imported);

  // --- used by the op lowerings (OnnxOps.cpp) ---
  const onnx::NodeProto& node() const { return *node_; }
  int64_t opset() const { return opset_; }
  mlir::OpBuilder& builder() { return b_; }
  mlir::Location loc() const { return loc_; }
  std::string where() const;  // "node 'name' (OpType)" for messages

  size_t numInputs() const;  // the node's inputs, trailing empty ones dropped
  bool hasInput(size_t i) const;
  const Val& input(size_t i);
  // Whether input i is known when compiling; a lazy initializer is decoded now.
  bool isConst(size_t i);
  // The same without decoding anything (a lazy initializer counts as known).
  bool knownWhenCompiling(size_t i) {
    return hasInput(i) && (input(i).constant.has_value() || input(i).lazy);
  }
  const Const& constInput(size_t i, const char* what);  // fails unless known at compile time
  mlir::Value runtime(size_t i);                       // the input as a run-time value
  mlir::Value runtimeFloat(size_t i);                  // ... which must be FLOAT
  // The named value as a run-time value, made (and kept) on first use: a bound input becomes
  // an argument, a trainable initializer a parameter, a constant a fill or a constant argument.
  mlir::Value runtimeValue(const std::string& name);

  void setOutput(size_t i, mlir::Value value, int32_t elem_type);
  void setOutput(size_t i, Const c, int32_t elem_type);
  // Output i exists (the graph may name it) but reading it is an error saying `why`.
  void setUnreadableOutput(size_t i, std::string why);

  // Attributes.
  const onnx::AttributeProto* attr(const std::string& name) const;
  int64_t intAttr(const std::string& name, int64_t fallback) const;
  float floatAttr(const std::string& name, float fallback) const;
  std::vector<int64_t> intsAttr(const std::string& name) const;

  // Creates an `mt` op, inferring result types where the op does; fails the import (not the
  // process) if the op does not verify. `types` gives them for ops that do not infer.
  template <typename OpT>
  mlir::Operation* create(mlir::ValueRange operands, llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
                          mlir::TypeRange types = {}) {
    llvm::SmallVector<mlir::Type> resultTypes(types.begin(), types.end());
    if constexpr (OpT::template hasTrait<mlir::InferTypeOpInterface::Trait>()) {
      if (failed(OpT::inferReturnTypes(&context_, loc_, operands, b_.getDictionaryAttr(attrs), nullptr, {},
                                       resultTypes)))
        failNode();
    }
    return finish(OpT::getOperationName(), operands, attrs, resultTypes);
  }
  template <typename OpT>
  mlir::Value create1(mlir::ValueRange operands, llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
                      mlir::TypeRange types = {}) {
    return create<OpT>(operands, attrs, types)->getResult(0);
  }

  // Helpers shared by several lowerings.
  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value fill(float value, llvm::ArrayRef<int64_t> shape);
  bool training() const { return options_.training; }
  // The next dropping Dropout's site: its index among the graph's dropping Dropout nodes, in
  // node order (what keys its mask: kernels/random/dropout.h).
  int64_t nextDropoutSite() { return dropout_sites_++; }
  // Whether `v` is a FLOAT initializer a model to train may take as a parameter.
  bool isTrainableInitializer(const Val& v) const;
  // Why initializer `name` stays a constant in a model to train ("" if it need not): frozen by
  // name or pattern, outside --trainable, or holding Inf/NaN (a mask). Read once, remembered.
  std::string keptConstant(const std::string& name) const;
  // A FLOAT initializer used as the value of another name (an exporter's de-duplication).
  void aliasInitializer(const Val& v, const std::string& alias);
  // A parameter whose initial value is `source`'s (transposed: its 2-D transpose), read when
  // written out. With `tie`, the same values (not all equal) as an existing parameter of that
  // shape mean one tied parameter (an eval export's untied copy of a tied weight); values are
  // then read to compare, one tensor at a time, and fingerprinted so each is read once.
  mlir::Value newParameter(std::string name, const std::string& initializer, std::vector<int64_t> shape,
                           const onnx::TensorProto* source, bool transposed, bool tie);
  const onnx::TensorProto* initializerProto(const Val& v) const { return initializers_.at(v.initializer); }
  void setParamAttrs(size_t i);  // params_[i]'s mt.param dictionary
  // The values of a FLOAT initializer.
  Const initializerValue(const Val& v) { return decodeTensor(*initializers_.at(v.initializer), model_dir_); }
  // A constant argument holding `c` as f32 (`as_float`) or i32.
  mlir::Value constantArg(const Const& c, bool as_float);
  int64_t normAxis(int64_t axis, int64_t rank) const;  // negative counts from the end; checked

 private:
  [[noreturn]] void failNode();
  mlir::Operation* finish(llvm::StringRef name, mlir::ValueRange operands,
                          llvm::ArrayRef<mlir::NamedAttribute> attrs, llvm::ArrayRef<mlir::Type> types);
  mlir::Value addArgument(mlir::Type type, mlir::NamedAttribute attr);
  void lowerNode();
  void addGraphInputs();
  void finishFunction(ImportedModel* imported);
  mlir::Value parameter(const Val& v);
  Val initializerVal(const std::string& name, const onnx::TensorProto& tensor);

  mlir::MLIRContext& context_;
  const onnx::ModelProto& model_;
  std::string model_dir_;
  const ImportOptions& options_;
  const std::set<std::string>& parameters_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  mlir::OpBuilder b_;
  mlir::Location loc_;
  mlir::func::FuncOp func_;
  std::map<std::string, Val> values_;
  std::vector<std::string> inputs_;  // run-time input names, in argument order
  mutable std::map<std::string, std::string> kept_constant_;  // keptConstant's answers
  std::vector<ImportedParam> params_;
  std::vector<mlir::Value> param_args_;  // beside params_
  std::vector<std::optional<uint64_t>> fingerprints_;  // beside params_: of the values, once read
  uint64_t fingerprint(size_t param);
  const onnx::NodeProto* node_ = nullptr;
  int64_t opset_ = 0;
  int64_t dropout_sites_ = 0;
  std::string diagnostic_;  // the last error an `mt` op's verifier emitted
};

// Thrown when folded constants computed from these FLOAT initializers turn out to be run-time
// data of a model to train: the import starts again with them as parameters.
struct RestartAsParameters {
  std::set<std::string> initializers;
};

// The lowering of one op type; it throws ImportError for what it cannot lower as given.
using Lowering = void (*)(Importer&);
struct OpLowering {
  Lowering lower;
  size_t min_inputs, max_inputs;
};
const std::map<std::string, OpLowering>& loweringTable();

// A node path as a parameter-name prefix: "/blocks.0/attn/q" -> "blocks.0.attn.q", a
// container's repeated scope dropped ("/blocks.0/mlp/mlp.0" -> "blocks.0.mlp.0").
std::string dottedPath(const std::string& node_path);

// The run-time `mt` element type of an ONNX element type (f32, or i32 for ints and bools).
mlir::Type mtElementType(mlir::MLIRContext& context, int32_t elem_type);

}  // namespace mt::onnximport
