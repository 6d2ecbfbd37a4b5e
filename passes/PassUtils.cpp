#include "llvm/Support/FormatVariadic.h"
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

std::string formatBytes(int64_t bytes) {
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = bytes;
  int unit = -1;
  while (value >= 1024 && unit < 3) value /= 1024, ++unit;
  std::string out = std::to_string(bytes) + " bytes";
  if (unit >= 0) out += " (" + llvm::formatv("{0:F1}", value).str() + " " + units[unit] + ")";
  return out;
}

std::optional<int64_t> blockOf(Operation* op) {
  auto block = op->getAttrOfType<IntegerAttr>(kBlockAttr);
  if (!block) return std::nullopt;
  return block.getInt();
}

StringRef paramName(func::FuncOp func, unsigned index) {
  auto param = func.getArgAttrOfType<DictionaryAttr>(index, kParamAttr);
  if (!param) return "";
  auto name = param.getAs<StringAttr>("name");
  return name ? name.getValue() : "";
}

}  // namespace mt
