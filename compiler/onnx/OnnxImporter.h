// ONNX import: an ONNX model (opset 13-17; older opsets where an op's meaning did not change)
// becomes the `mt` dialect's model function. Shape arithmetic is folded at compile time by
// the importer itself (ONNX's shape inference loses rank after exporters' dynamic Reshape
// chains); what remains lowers to fused `mt` ops where a pattern is recognised and to the
// generic ones (mt.unary, mt.binary, mt.gather, ...) elsewhere.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "compiler/onnx/OnnxModel.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace mt::onnximport {

struct ImportOptions {
  // Graph inputs whose values are known when compiling. An op that needs a constant operand
  // (a shape, axes, split sizes) takes it from here; every other use stays a run-time input.
  std::map<std::string, onnx::TensorProto> bound_inputs;
};

// What became of each graph input and output (in graph order).
struct ImportedSignature {
  std::vector<std::string> inputs;   // the function's run-time inputs (mt.input names)
  std::vector<std::string> outputs;  // the function's results (mt.output names)
  std::vector<int32_t> output_elem_types;  // ONNX element types the outputs had
};

// Imports `path` as a forward-only model function. Throws ImportError.
mlir::OwningOpRef<mlir::ModuleOp> importForward(mlir::MLIRContext& context, const std::string& path,
                                                const ImportOptions& options, ImportedSignature* signature);

// The ONNX op types the importer lowers (for error messages and the conformance table).
const std::vector<std::string>& supportedOps();

}  // namespace mt::onnximport
