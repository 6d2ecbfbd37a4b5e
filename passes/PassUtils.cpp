#include <set>

#include "llvm/Support/FormatVariadic.h"
#include "mlir/IR/Builders.h"
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

std::string formatBytes(int64_t bytes, bool exact) {
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = bytes;
  int unit = -1;
  while (value >= 1024 && unit < 3) value /= 1024, ++unit;
  const std::string exactText = std::to_string(bytes) + " bytes";
  if (unit < 0) return exactText;
  const std::string readable = llvm::formatv("{0:F1}", value).str() + " " + units[unit];
  return exact ? exactText + " (" + readable + ")" : readable;
}

std::optional<int64_t> blockOf(Operation* op) {
  auto block = op->getAttrOfType<IntegerAttr>(kBlockAttr);
  if (!block) return std::nullopt;
  return block.getInt();
}

DenseMap<Operation*, size_t> blockRegions(Block& body) {
  DenseMap<Operation*, size_t> region;
  Operation* previous = nullptr;
  for (Operation& op : body) {
    region[&op] = !previous ? 0 : region[previous] + (blockOf(&op) != blockOf(previous));
    previous = &op;
  }
  return region;
}

Operation* prefetchPoint(ArrayRef<Operation*> ops, size_t i) {
  auto block = [&](size_t k) { return blockOf(ops[k]); };
  size_t j = i;
  while (j > 0 && block(j - 1) == block(i)) --j;
  if (j == 0) return ops[0];
  const std::optional<int64_t> previous = block(j - 1);
  while (j > 0 && block(j - 1) == previous) --j;
  return ops[j];
}

LogicalResult checkReadyToSchedule(func::FuncOp func, StringRef pass, bool allowForwardOnly) {
  if (!(allowForwardOnly && isForwardOnly(func)) && (func.getNumResults() < 1 || !func.getResultAttr(0, kLossAttr) ||
      (func.getNumResults() > 1 && !func.getResultAttr(1, kGradAttr))))
    return func.emitError(pass) << " needs a differentiated function returning the loss and the gradients "
                                   "(run mt-autodiff first)";
  for (Operation& op : func.getBody().front())
    if (isa<H2DOp, D2HOp, HostTaskOp>(op)) return op.emitError("the function is already scheduled");
  return success();
}

bool isForwardOnly(func::FuncOp func) {
  if (func.getNumResults() == 0) return false;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (!func.getResultAttr(i, kOutputAttr)) return false;
  return true;
}

SmallVector<Value> parameterArguments(func::FuncOp func) {
  SmallVector<Value> params;
  for (BlockArgument arg : func.getArguments())
    if (!paramName(func, arg.getArgNumber()).empty()) params.push_back(arg);
  return params;
}

SmallVector<Value> sharedParameters(func::FuncOp func) {
  SmallVector<Value> shared;
  for (Value param : parameterArguments(func)) {
    std::optional<int64_t> first;
    for (Operation* user : param.getUsers()) {
      if (isa<HostTaskOp, func::ReturnOp>(user)) continue;
      const std::optional<int64_t> block = blockOf(user);
      if (!first) first = block;
      if (block != first) {
        shared.push_back(param);
        break;
      }
    }
  }
  return shared;
}

void insertDeferredUpdates(func::FuncOp func) {
  Block& body = func.getBody().front();
  OpBuilder b(func.getContext());
  std::set<std::string> updated;  // by name: the pieces of a parameter share one update
  for (Operation& op : llvm::make_early_inc_range(body)) {
    auto copy = dyn_cast<H2DOp>(op);
    auto arg = copy ? dyn_cast<BlockArgument>(copy.getInput()) : nullptr;
    if (!arg || paramName(func, arg.getArgNumber()).empty() ||
        !updated.insert(paramName(func, arg.getArgNumber()).str()).second)
      continue;
    b.setInsertionPoint(copy);
    auto task = b.create<HostTaskOp>(copy.getLoc(), "adamw_previous", ValueRange{arg});
    if (auto block = copy->getAttr(kBlockAttr)) task->setAttr(kBlockAttr, block);
  }
  b.setInsertionPointToStart(&body);
  for (Value param : parameterArguments(func))
    if (updated.insert(paramName(func, cast<BlockArgument>(param).getArgNumber()).str()).second)
      b.create<HostTaskOp>(func.getLoc(), "adamw_previous", ValueRange{param});
}

bool completesGradient(func::FuncOp func, unsigned index) {
  auto name = func.getResultAttrOfType<StringAttr>(index, kGradAttr);
  if (!name) return false;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Operation* mine = ret.getOperand(index).getDefiningOp();
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto other = func.getResultAttrOfType<StringAttr>(i, kGradAttr);
    if (i == index || !other || other != name) continue;
    Operation* def = ret.getOperand(i).getDefiningOp();
    if (mine && def && mine->isBeforeInBlock(def)) return false;
  }
  return true;
}

int64_t rowBytes(RankedTensorType type) {
  return type.getRank() && type.getDimSize(0) ? tensorBytes(type) / type.getDimSize(0) : tensorBytes(type);
}

StringRef paramName(func::FuncOp func, unsigned index) {
  auto param = func.getArgAttrOfType<DictionaryAttr>(index, kParamAttr);
  if (!param) return "";
  auto name = param.getAs<StringAttr>("name");
  return name ? name.getValue() : "";
}

}  // namespace mt
