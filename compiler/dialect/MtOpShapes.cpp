// Shape helpers the `mt` ops share (MtOpShapes.h).
#include "compiler/dialect/MtOpShapes.h"

#include "mlir/Dialect/Traits.h"

using namespace mlir;

namespace mt::op_shapes {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

Type f32(MLIRContext* ctx) { return Float32Type::get(ctx); }

RankedTensorType f32Tensor(MLIRContext* ctx, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, f32(ctx));
}

// The element type shared by an op's activations (f32, or bf16 in a bf16 plan: mt-mixed-precision);
// fails naming the op's mix of types otherwise. Statistics (norms' mean and rstd, log-sum-exps,
// the loss and its seed) are f32 whatever the activations are.
FailureOr<Type> activationType(std::optional<Location> loc, ValueRange activations) {
  Type type = cast<RankedTensorType>(activations.front().getType()).getElementType();
  for (Value v : activations.drop_front())
    if (cast<RankedTensorType>(v.getType()).getElementType() != type)
      return emitOptionalError(loc, "mixes activation types ", type, " and ",
                               cast<RankedTensorType>(v.getType()).getElementType(), " (all f32 or all bf16)");
  return type;
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Fails unless every operand has a static shape.
LogicalResult requireStatic(std::optional<Location> loc, ValueRange operands) {
  for (Value v : operands)
    if (!tensorOf(v).hasStaticShape())
      return emitOptionalError(loc, "mt ops need static shapes, got ", v.getType());
  return success();
}

LogicalResult requireShape(std::optional<Location> loc, Value v, ArrayRef<int64_t> shape,
                           StringRef what) {
  if (tensorOf(v).getShape() == shape) return success();
  return emitOptionalError(loc, what, " must have shape ", shapeStr(shape), ", got ",
                           shapeStr(tensorOf(v).getShape()));
}

bool isSuffix(ArrayRef<int64_t> suffix, ArrayRef<int64_t> shape) {
  return suffix.size() <= shape.size() && shape.take_back(suffix.size()) == suffix;
}

// Whether `in` broadcasts (numpy rules) to exactly `out`.
bool broadcastsTo(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  SmallVector<int64_t> shape;
  return OpTrait::util::getBroadcastedShape(in, out, shape) && ArrayRef<int64_t>(shape) == out;
}

SmallVector<int64_t> dropLast(ArrayRef<int64_t> shape) {
  return SmallVector<int64_t>(shape.drop_back());
}

SmallVector<int64_t> runningShape(ArrayRef<int64_t> rows) {
  SmallVector<int64_t> shape(rows);
  shape.push_back(2);
  return shape;
}

// Pointwise ops: every operand has the shape of the first; results likewise.
LogicalResult inferPointwise(MLIRContext* ctx, std::optional<Location> loc, ValueRange operands,
                             unsigned numResults, SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, operands))) return failure();
  for (Value v : operands)
    if (failed(requireShape(loc, v, tensorOf(operands[0]).getShape(), "operand")))
      return failure();
  FailureOr<Type> act = activationType(loc, operands);
  if (failed(act)) return failure();
  types.assign(numResults, RankedTensorType::get(tensorOf(operands[0]).getShape(), *act));
  return success();
}

}  // namespace mt::op_shapes
