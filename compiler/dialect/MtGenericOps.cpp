// Shape inference and verifiers of the generic `mt` ops (those ONNX graphs lower to beside the
// model ops: unary/binary functions, clamp, where, broadcast, casts, softmax, gather, concat,
// slice, trilu). Every rule mirrors the runtime kernel's check, as in MtOps.cpp.
#include "compiler/dialect/MtDialect.h"
#include "compiler/dialect/MtOpShapes.h"
#include "kernels/pointwise/pointwise.h"
#include "mlir/Dialect/Traits.h"

using namespace mlir;

namespace mt {

using namespace op_shapes;

static LogicalResult checkFn(std::optional<Location> loc, StringAttr fn, bool unary) {
  if (!fn) return emitOptionalError(loc, "needs a fn attribute");
  const int64_t index = unary ? fnIndex(kUnaryFnNames, fn.getValue().str()) : fnIndex(kBinaryFnNames, fn.getValue().str());
  if (index >= 0) return success();
  std::string known;
  if (unary) for (auto n : kUnaryFnNames) known += " " + std::string(n);
  else for (auto n : kBinaryFnNames) known += " " + std::string(n);
  return emitOptionalError(loc, "unknown fn '", fn.getValue(), "' (known:", known, ")");
}

static LogicalResult broadcastOf(std::optional<Location> loc, ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                                 SmallVectorImpl<int64_t>& shape) {
  if (OpTrait::util::getBroadcastedShape(a, b, shape)) return success();
  return emitOptionalError(loc, "shapes ", shapeStr(a), " and ", shapeStr(b), " do not broadcast");
}

LogicalResult UnaryOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                        SmallVectorImpl<Type>& types) {
  if (failed(checkFn(loc, adaptor.getFnAttr(), true))) return failure();
  return inferPointwise(ctx, loc, adaptor.getOperands(), 1, types);
}

LogicalResult UnaryGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                            SmallVectorImpl<Type>& types) {
  if (failed(checkFn(loc, adaptor.getFnAttr(), true))) return failure();
  return inferPointwise(ctx, loc, adaptor.getOperands(), 1, types);
}

LogicalResult ClampOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                        SmallVectorImpl<Type>& types) {
  return inferPointwise(ctx, loc, adaptor.getOperands(), 1, types);
}

LogicalResult ClampGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                            SmallVectorImpl<Type>& types) {
  return inferPointwise(ctx, loc, adaptor.getOperands(), 1, types);
}

LogicalResult BinaryOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& types) {
  if (failed(checkFn(loc, adaptor.getFnAttr(), false)) || failed(requireStatic(loc, adaptor.getOperands())))
    return failure();
  SmallVector<int64_t> shape;
  if (failed(broadcastOf(loc, tensorOf(adaptor.getLhs()).getShape(), tensorOf(adaptor.getRhs()).getShape(), shape)))
    return failure();
  types.push_back(f32Tensor(ctx, shape));
  return success();
}

LogicalResult BinaryGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                             SmallVectorImpl<Type>& types) {
  if (failed(checkFn(loc, adaptor.getFnAttr(), false)) || failed(requireStatic(loc, adaptor.getOperands())))
    return failure();
  SmallVector<int64_t> shape;
  if (failed(broadcastOf(loc, tensorOf(adaptor.getLhs()).getShape(), tensorOf(adaptor.getRhs()).getShape(), shape)) ||
      failed(requireShape(loc, adaptor.getDout(), shape, "dout")))
    return failure();
  types.assign(2, f32Tensor(ctx, shape));
  return success();
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc, Adaptor adaptor,
                                        SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto lhs = tensorOf(adaptor.getLhs()), rhs = tensorOf(adaptor.getRhs());
  if (lhs.getElementType() != rhs.getElementType() ||
      !(lhs.getElementType().isF32() || lhs.getElementType().isInteger(32)))
    return emitOptionalError(loc, "where branches must both be f32 or both i32");
  SmallVector<int64_t> branches, shape;
  if (failed(broadcastOf(loc, lhs.getShape(), rhs.getShape(), branches)) ||
      failed(broadcastOf(loc, tensorOf(adaptor.getCond()).getShape(), branches, shape)))
    return failure();
  types.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

LogicalResult BroadcastOp::verify() {
  if (getInput().getType().getElementType() != getType().getElementType() ||
      !broadcastsTo(getInput().getType().getShape(), getType().getShape()))
    return emitOpError("input ") << getInput().getType() << " does not broadcast to " << getType();
  return success();
}

LogicalResult CastOp::verify() {
  auto in = getInput().getType(), out = getType();
  auto word = [](Type t) { return t.isF32() || t.isInteger(32); };
  if (in.getShape() != out.getShape() || !word(in.getElementType()) || !word(out.getElementType()))
    return emitOpError("casts between f32 and i32 of one shape, not ") << in << " -> " << out;
  return success();
}

LogicalResult WidenOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (in.getShape() != out.getShape() || !in.getElementType().isBF16())
    return emitOpError("widens bf16 to f32 of one shape, not ") << in << " -> " << out;
  return success();
}

LogicalResult NarrowOp::verify() {
  if (getInput().getType().getShape() != getType().getShape())
    return emitOpError("rounds f32 to bf16 of one shape, not ") << getInput().getType() << " -> " << getType();
  return success();
}

static LogicalResult checkAxis(std::optional<Location> loc, int64_t axis, int64_t rank) {
  if (axis >= 0 && axis < rank) return success();
  return emitOptionalError(loc, "axis ", axis, " out of range for rank ", rank);
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                          SmallVectorImpl<Type>& types) {
  if (failed(checkAxis(loc, adaptor.getAxis(), tensorOf(adaptor.getInput()).getRank()))) return failure();
  return inferPointwise(ctx, loc, adaptor.getOperands(), 1, types);
}

LogicalResult SoftmaxGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc, Adaptor adaptor,
                                              SmallVectorImpl<Type>& types) {
  if (failed(checkAxis(loc, adaptor.getAxis(), tensorOf(adaptor.getOutput()).getRank()))) return failure();
  return inferPointwise(ctx, loc, adaptor.getOperands(), 1, types);
}

static SmallVector<int64_t> gatherShape(ArrayRef<int64_t> data, ArrayRef<int64_t> indices, int64_t axis) {
  SmallVector<int64_t> shape(data.take_front(axis));
  shape.append(indices.begin(), indices.end());
  shape.append(data.begin() + axis + 1, data.end());
  return shape;
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto data = tensorOf(adaptor.getData());
  const int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, data.getRank()))) return failure();
  types.push_back(RankedTensorType::get(gatherShape(data.getShape(), tensorOf(adaptor.getIndices()).getShape(), axis),
                                        data.getElementType()));
  return success();
}

LogicalResult GatherGradOp::verify() {
  const int64_t axis = getAxis();
  if (axis < 0 || axis >= getType().getRank()) return emitOpError("axis out of range");
  if (getDout().getType().getShape() != ArrayRef<int64_t>(gatherShape(getType().getShape(),
                                                                       getIndices().getType().getShape(), axis)))
    return emitOpError("dout shape does not match a gather of the result's shape");
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  auto a = tensorOf(adaptor.getLhs()), b = tensorOf(adaptor.getRhs());
  const int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, a.getRank()))) return failure();
  if (a.getElementType() != b.getElementType() || a.getRank() != b.getRank())
    return emitOptionalError(loc, "concat operands differ in element type or rank");
  SmallVector<int64_t> shape(a.getShape());
  for (int64_t d = 0; d < a.getRank(); ++d)
    if (d != axis && a.getDimSize(d) != b.getDimSize(d))
      return emitOptionalError(loc, "concat operands differ outside the axis: ", shapeStr(a.getShape()), " vs ",
                               shapeStr(b.getShape()));
  shape[axis] += b.getDimSize(axis);
  types.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

// Every element a slice of `sliced` shape reads from `source` lies inside it.
static LogicalResult verifySlice(Operation* op, RankedTensorType source, RankedTensorType sliced,
                                 ArrayRef<int64_t> starts, ArrayRef<int64_t> steps) {
  const int64_t rank = source.getRank();
  if (sliced.getRank() != rank || static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank || source.getElementType() != sliced.getElementType())
    return op->emitOpError("needs one start and step per dimension and the input's rank and element type");
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = sliced.getDimSize(d);
    if (steps[d] == 0) return op->emitOpError("step ") << d << " is zero";
    if (size == 0) continue;
    const int64_t last = starts[d] + (size - 1) * steps[d];
    if (starts[d] < 0 || starts[d] >= source.getDimSize(d) || last < 0 || last >= source.getDimSize(d))
      return op->emitOpError("dimension ") << d << " reads outside the input";
  }
  return success();
}

LogicalResult SliceOp::verify() {
  return verifySlice(*this, getInput().getType(), getType(), getStarts(), getSteps());
}

LogicalResult SliceGradOp::verify() {
  return verifySlice(*this, getType(), getDout().getType(), getStarts(), getSteps());
}

LogicalResult TriluOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc, Adaptor adaptor,
                                        SmallVectorImpl<Type>& types) {
  if (failed(requireStatic(loc, adaptor.getOperands()))) return failure();
  if (tensorOf(adaptor.getInput()).getRank() < 2) return emitOptionalError(loc, "trilu input needs rank >= 2");
  types.push_back(adaptor.getInput().getType());
  return success();
}

}  // namespace mt
