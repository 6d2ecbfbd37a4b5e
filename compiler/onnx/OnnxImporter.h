// ONNX import: an ONNX model (opset 13-17; older opsets where an op's meaning did not change)
// becomes the `mt` dialect's model function. Shape arithmetic is folded at compile time by
// the importer itself (ONNX's shape inference loses rank after exporters' dynamic Reshape
// chains); what remains lowers to fused `mt` ops where a pattern is recognised and to the
// generic ones (mt.unary, mt.binary, mt.gather, ...) elsewhere.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "compiler/onnx/OnnxModel.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace mt::onnximport {

struct ImportOptions {
  // false: a forward-only function, every graph input an `mt.input` and every output an
  // `mt.output`, initializers constants. true: a model to train — the integer (batch, seq)
  // inputs are the token ids and (if the graph computes its loss) the targets, the first
  // output is the logits or the loss, and FLOAT initializers used at run time are parameters
  // (initialised from the weights file mtc writes) unless named in `frozen`.
  bool training = false;
  std::set<std::string> frozen;
  // mtc --frozen / --trainable: initializers whose names match `frozen_pattern` stay constants;
  // with `trainable_pattern`, only those matching it may become parameters. Either way, an
  // initializer holding Inf or NaN (a mask folded into the graph) is a constant, never trained.
  std::optional<std::regex> frozen_pattern, trainable_pattern;
  // Sizes for dynamic input dimensions: the first is the batch, the second the sequence.
  int64_t batch = 0, seq = 0;
  // Graph inputs whose values are known when compiling. An op that needs a constant operand
  // (a shape, axes, split sizes) takes it from here; every other use stays a run-time input.
  std::map<std::string, onnx::TensorProto> bound_inputs;
};

// A parameter of an imported model and its initial value.
struct ImportedParam {
  std::string name;         // the parameter's name in the plan and in safetensors files
  std::string initializer;  // the ONNX initializer it came from
  std::vector<int64_t> shape;
  // The initializer holding the initial values, read only when they are written out
  // (initialValues): a large model's weights are never all in memory at once.
  const onnx::TensorProto* source = nullptr;
  bool transposed = false;  // `source` holds this (2-D) parameter transposed (eval exports)
  std::string origin;       // every initializer holding it (see HostTensor.origin in plan.proto)
};

// What the import made of the graph's inputs, outputs and initializers (in graph order).
struct ImportedModel {
  std::vector<std::string> inputs;   // the function's run-time inputs (mt.input names)
  std::vector<std::string> outputs;  // forward-only: the function's results (mt.output names)
  std::vector<int32_t> output_elem_types;  // ONNX element types the outputs had
  std::vector<ImportedParam> params;       // training: the parameters, in argument order
  std::shared_ptr<const onnx::ModelProto> model;  // holds the parameters' sources
  std::string model_dir;                          // where their external data lies
  // FLOAT initializers used at run time that stay constants, and why ("holds -inf: a mask",
  // "--frozen"): mtc's summary lists them.
  std::vector<std::pair<std::string, std::string>> kept_constant;
};

// Writes the initial values of `param` (numel of its shape floats) to `out`; `model_dir` is
// where its source's external data lies (ImportedModel::model_dir).
void initialValues(const ImportedParam& param, const std::string& model_dir, float* out);

// Imports `path` into a module holding the model function. Throws ImportError.
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext& context, const std::string& path,
                                              const ImportOptions& options, ImportedModel* imported);

// The ONNX op types the importer lowers (for error messages and the conformance table).
const std::vector<std::string>& supportedOps();

}  // namespace mt::onnximport
