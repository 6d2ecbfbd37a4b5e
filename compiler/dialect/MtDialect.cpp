#include "compiler/dialect/MtDialect.h"

#include "compiler/dialect/MtDialect.cpp.inc"
#include "compiler/dialect/MtEnums.cpp.inc"
#include "compiler/dialect/MtInterfaces.cpp.inc"

namespace mt {

void MtDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "compiler/dialect/MtOps.cpp.inc"
      >();
}

int64_t tensorBytes(mlir::Type type) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape()) return 0;
  return tensor.getNumElements() * ((tensor.getElementTypeBitWidth() + 7) / 8);
}

int64_t defaultBytesAccessed(mlir::Operation* op) {
  int64_t bytes = 0;
  for (mlir::Value v : op->getOperands()) bytes += tensorBytes(v.getType());
  for (mlir::Value v : op->getResults()) bytes += tensorBytes(v.getType());
  return bytes;
}

}  // namespace mt
