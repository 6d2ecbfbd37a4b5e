#include "passes/Passes.h"

using namespace mlir;

namespace mt {

func::FuncOp getModelFunction(ModuleOp module) {
  func::FuncOp found;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (found) {
      func.emitError("the module must hold exactly one model function; found a second one");
      return nullptr;
    }
    found = func;
  }
  if (!found) module.emitError("the module holds no func.func model function");
  return found;
}

StringRef paramName(func::FuncOp func, unsigned index) {
  auto param = func.getArgAttrOfType<DictionaryAttr>(index, kParamAttr);
  if (!param) return "";
  auto name = param.getAs<StringAttr>("name");
  return name ? name.getValue() : "";
}

}  // namespace mt
