// Helpers the ONNX op lowerings share (OnnxOps.cpp, OnnxShapeOps.cpp, OnnxElementwise.cpp): internal to the importer.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compiler/onnx/Importer.h"

namespace mt::onnximport::lowering {

using TP = onnx::TensorProto;

inline std::vector<int64_t> shapeOf(mlir::Value v) {
  auto s = mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
  return {s.begin(), s.end()};
}

inline Const intConst(std::vector<int64_t> values, std::vector<int64_t> shape) {
  Const c;
  c.kind = Const::Kind::Int;
  c.shape = std::move(shape);
  c.values.assign(values.begin(), values.end());
  return c;
}

// The one value of a compile-time scalar operand.
inline double scalarInput(Importer& im, size_t i, const char* what) {
  const Const& c = im.constInput(i, what);
  if (c.values.size() != 1) malformed(im.where() + ": its " + what + " must hold one value");
  return c.values[0];
}

inline bool allInputsConst(Importer& im) {
  // Nothing is decoded unless everything is known: Gather(weights, run-time ids) reads none.
  for (size_t i = 0; i < im.numInputs(); ++i)
    if (im.hasInput(i) && !im.knownWhenCompiling(i)) return false;
  for (size_t i = 0; i < im.numInputs(); ++i)
    if (im.hasInput(i) && !im.isConst(i)) return false;
  return true;
}

// The elements before `axis` and from it on: (outer, inner) of a 2-D view split at `axis`.
inline std::pair<int64_t, int64_t> splitAt(const std::vector<int64_t>& shape, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) (d < axis ? outer : inner) *= shape[d];
  return {outer, inner};
}

inline mlir::NamedAttribute named(Importer& im, const char* name, mlir::Attribute value) {
  return im.builder().getNamedAttr(name, value);
}
inline mlir::Attribute i64(Importer& im, int64_t v) { return im.builder().getI64IntegerAttr(v); }

// An op that only renames the shape (Reshape, Flatten, Squeeze, Unsqueeze, Identity).
void reshapeTo(Importer& im, const std::vector<int64_t>& shape);

// Axes from the attribute (older opsets) or the second input (opset 13 on); `given` says which.
std::vector<int64_t> axesOf(Importer& im, size_t input, bool* given);

// Adds the shape lowerings (OnnxShapeOps.cpp) to the op table.
void addShapeLowerings(std::map<std::string, OpLowering>& table);

// Adds the elementwise lowerings (OnnxElementwise.cpp) to the op table.
void addElementwiseLowerings(std::map<std::string, OpLowering>& table);

}  // namespace mt::onnximport::lowering
