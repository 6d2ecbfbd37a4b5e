#include <set>

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"
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

namespace {
// "blocks.12" / "layers.12" anywhere in a module path -> 12.
std::optional<int64_t> blockIndexIn(StringRef path) {
  for (StringRef key : {"blocks.", "layers."}) {
    size_t at = path.find(key);
    while (at != StringRef::npos) {
      const bool starts = at == 0 || path[at - 1] == '/' || path[at - 1] == '.';
      StringRef digits = path.drop_front(at + key.size()).take_while([](char c) { return isdigit(c); });
      int64_t index;
      if (starts && !digits.empty() && !digits.getAsInteger(10, index)) return index;
      at = path.find(key, at + 1);
    }
  }
  return std::nullopt;
}
}  // namespace

std::string modulePath(Operation* op) {
  std::string path;
  op->getLoc()->walk([&](Location loc) {
    if (auto name = dyn_cast<NameLoc>(loc)) {
      path = name.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (path.empty()) {  // no module path: each distinct location is its own part
    llvm::raw_string_ostream os(path);
    op->getLoc().print(os);
  }
  return path;
}

std::optional<int64_t> layerBlockInPath(Operation* op) { return blockIndexIn(modulePath(op)); }

Location withTile(Location loc, int64_t tile) {
  Builder b(loc->getContext());
  return FusedLoc::get(b.getContext(), {loc}, b.getDictionaryAttr(b.getNamedAttr(kTileAttr, b.getI64IntegerAttr(tile))));
}

std::optional<int64_t> tileInLocation(Location loc) {
  auto fused = dyn_cast<FusedLoc>(loc);
  auto metadata = fused ? dyn_cast_or_null<DictionaryAttr>(fused.getMetadata()) : nullptr;
  auto tile = metadata ? metadata.getAs<IntegerAttr>(kTileAttr) : nullptr;
  if (!tile) return std::nullopt;
  return tile.getInt();
}

std::optional<int64_t> tileOf(Operation* op) {
  auto tile = op->getAttrOfType<IntegerAttr>(kTileAttr);
  if (!tile) return std::nullopt;
  return tile.getInt();
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
  // After the loss, a gradient (whole, or the tokens' rows of a host embedding's table, which may
  // be the only one where the rest is frozen).
  if (!(allowForwardOnly && isForwardOnly(func)) && (func.getNumResults() < 1 || !func.getResultAttr(0, kLossAttr) ||
      (func.getNumResults() > 1 && gradientOf(func, 1).empty())))
    return func.emitError(pass) << " needs a differentiated function returning the loss and the gradients "
                                   "(run mt-autodiff first)";
  for (Operation& op : func.getBody().front())
    if (isa<H2DOp, D2HOp, HostTaskOp>(op)) return op.emitError("the function is already scheduled");
  return success();
}

bool isForwardOnly(func::FuncOp func) {
  return func.getNumResults() > 0 && firstUnnamedResult(func, 0) == func.getNumResults();
}

unsigned firstUnnamedResult(func::FuncOp func, unsigned first) {
  unsigned i = first;
  while (i < func.getNumResults() && func.getResultAttr(i, kOutputAttr)) ++i;
  return i;
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
    // A parameter is first read by a copy in, or by the host's token lookup in it.
    Value read;
    if (auto copy = dyn_cast<H2DOp>(op)) read = copy.getInput();
    if (auto lookup = dyn_cast<HostTaskOp>(op); lookup && lookup.getKind() == HostTaskKind::EmbeddingLookup)
      read = lookup.getTensors()[2];
    auto arg = dyn_cast_or_null<BlockArgument>(read);
    if (!arg || paramName(func, arg.getArgNumber()).empty() || isFrozenParam(func, arg.getArgNumber()) ||
        !updated.insert(paramName(func, arg.getArgNumber()).str()).second)
      continue;
    b.setInsertionPoint(&op);
    auto task = b.create<HostTaskOp>(op.getLoc(), HostTaskKind::AdamwPrevious, ValueRange{arg});
    if (auto block = op.getAttr(kBlockAttr)) task->setAttr(kBlockAttr, block);
  }
  b.setInsertionPointToStart(&body);
  for (Value param : parameterArguments(func))
    if (!isFrozenParam(func, cast<BlockArgument>(param).getArgNumber()) &&
        updated.insert(paramName(func, cast<BlockArgument>(param).getArgNumber()).str()).second)
      b.create<HostTaskOp>(func.getLoc(), HostTaskKind::AdamwPrevious, ValueRange{param});
}

StringRef gradientOf(func::FuncOp func, unsigned index) {
  if (auto name = func.getResultAttrOfType<StringAttr>(index, kGradAttr)) return name.getValue();
  if (auto name = func.getResultAttrOfType<StringAttr>(index, kGradTokensAttr)) return name.getValue();
  return "";
}

std::vector<bool> completedGradients(func::FuncOp func) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  DenseMap<Operation*, size_t> position;
  for (auto [i, op] : llvm::enumerate(func.getBody().front())) position[&op] = i;
  // Per parameter, the position of the last op defining one of its gradient results.
  const unsigned results = func.getNumResults();
  std::vector<StringRef> names(results);
  llvm::StringMap<size_t> last;
  for (unsigned i = 0; i < results; ++i) {
    names[i] = gradientOf(func, i);
    Operation* def = ret.getOperand(i).getDefiningOp();
    if (names[i].empty() || !def) continue;
    auto [it, first] = last.try_emplace(names[i], position[def]);
    if (!first) it->second = std::max(it->second, position[def]);
  }
  std::vector<bool> completes(results, false);
  for (unsigned i = 0; i < results; ++i) {
    if (names[i].empty()) continue;
    Operation* def = ret.getOperand(i).getDefiningOp();
    completes[i] = !def || position[def] >= last.lookup(names[i]);
  }
  return completes;
}

BlockArgument tokensArgument(func::FuncOp func) {
  for (BlockArgument arg : func.getArguments())
    if (auto input = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kInputAttr); input && input == "tokens")
      return arg;
  return nullptr;
}

Value uncappedLogits(Value logits) {
  auto cap = logits.getDefiningOp<SoftcapOp>();
  return cap ? cap.getInput() : logits;
}

BlockArgument parameterNamed(func::FuncOp func, StringRef name) {
  for (BlockArgument arg : func.getArguments())
    if (paramName(func, arg.getArgNumber()) == name) return arg;
  return nullptr;
}

LogicalResult insertHostEmbeddingTasks(func::FuncOp func, ArrayRef<Value> hostResults) {
  const BlockArgument tokens = tokensArgument(func);
  // Every table named must be a parameter, and the tokens an input.
  auto tableParam = [&](Attribute name) -> Value {
    return name ? parameterNamed(func, cast<StringAttr>(name).getValue()) : nullptr;
  };
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto name = func.getArgAttr(i, kEmbeddedTokensAttr); name && (!tableParam(name) || !tokens))
      return func.emitError("argument ") << i << " holds tokens' rows of " << name
                                         << ": that needs a parameter of that name and a tokens input";
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (auto name = func.getResultAttr(i, kGradTokensAttr); name && (!tableParam(name) || !tokens))
      return func.emitError("result ") << i << " holds tokens' rows of the gradient of " << name
                                       << ": that needs a parameter of that name and a tokens input";
  OpBuilder b(func.getContext());
  for (BlockArgument arg : func.getArguments()) {
    auto table = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kEmbeddedTokensAttr);
    if (!table) continue;
    Operation* first = nullptr;
    for (Operation* user : arg.getUsers())
      if (isa<H2DOp>(user) && (!first || user->isBeforeInBlock(first))) first = user;
    if (!first) continue;
    b.setInsertionPoint(first);
    auto task = b.create<HostTaskOp>(first->getLoc(), HostTaskKind::EmbeddingLookup,
                                     ValueRange{arg, tokens, parameterNamed(func, table.getValue())});
    if (auto block = first->getAttr(kBlockAttr)) task->setAttr(kBlockAttr, block);
  }
  for (auto [i, host] : llvm::enumerate(hostResults)) {
    auto table = func.getResultAttrOfType<StringAttr>(i, kGradTokensAttr);
    if (!table) continue;
    // After the rows and the table's other gradient results (the LM head's, copied out whole
    // over the gradient) have landed: the scatter adds onto them.
    Operation* after = host.getDefiningOp();
    bool accumulate = false;
    for (unsigned j = 0; j < func.getNumResults(); ++j) {
      if (func.getResultAttrOfType<StringAttr>(j, kGradAttr) != table) continue;
      accumulate = true;
      if (Operation* copy = hostResults[j].getDefiningOp(); after->isBeforeInBlock(copy)) after = copy;
    }
    b.setInsertionPointAfter(after);
    auto task = b.create<HostTaskOp>(after->getLoc(), HostTaskKind::EmbeddingGrad,
                                     ValueRange{parameterNamed(func, table.getValue()), tokens, host});
    if (auto block = after->getAttr(kBlockAttr)) task->setAttr(kBlockAttr, block);
    if (accumulate) task->setAttr(kAccumulateAttr, b.getUnitAttr());
    if (auto padding = func.getResultAttr(i, kPaddingIdAttr)) task->setAttr(kPaddingIdAttr, padding);
  }
  return success();
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

namespace {
bool paramHasKey(func::FuncOp func, unsigned index, StringRef key) {
  auto param = func.getArgAttrOfType<DictionaryAttr>(index, kParamAttr);
  return param && param.get(key);
}
}  // namespace

bool isFrozenParam(func::FuncOp func, unsigned index) { return paramHasKey(func, index, kParamFrozenKey); }

int64_t countFrozenParameters(func::FuncOp func) {
  llvm::StringSet<> names;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (isFrozenParam(func, i)) names.insert(paramName(func, i));
  return names.size();
}

// The mt.param of argument `index`: a parameter's own, or that of the parameter a bf16 staging
// copy (mt.staging) holds; null for any other argument.
static DictionaryAttr paramOrStaged(func::FuncOp func, unsigned index) {
  if (auto param = func.getArgAttrOfType<DictionaryAttr>(index, kParamAttr)) return param;
  return func.getArgAttrOfType<DictionaryAttr>(index, kStagingAttr);
}

int64_t countKeptFrozenParameters(func::FuncOp func) {
  llvm::StringSet<> names;
  func.walk([&](H2DOp copy) {
    auto arg = dyn_cast<BlockArgument>(copy.getInput());
    if (!arg || !copy->hasAttr(kKeptAttr)) return;
    DictionaryAttr param = paramOrStaged(func, arg.getArgNumber());
    auto name = param ? param.getAs<StringAttr>("name") : nullptr;
    if (name && param.get(kParamFrozenKey)) names.insert(name.getValue());
  });
  return names.size();
}

bool isPersistentSource(func::FuncOp func, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg) return false;
  if (func.getArgAttr(arg.getArgNumber(), kConstAttr)) return true;
  DictionaryAttr param = paramOrStaged(func, arg.getArgNumber());
  return param && (isForwardOnly(func) || param.get(kParamFrozenKey));
}

void markKeptIfPersistent(func::FuncOp func, H2DOp copy) {
  if (!isForwardOnly(func) && isPersistentSource(func, copy.getInput()))
    copy->setAttr(kKeptAttr, UnitAttr::get(func.getContext()));
}

bool isLoraTarget(func::FuncOp func, unsigned index) { return paramHasKey(func, index, kParamLoraKey); }

bool isRowPiece(func::FuncOp func, unsigned index) {
  auto param = func.getArgAttrOfType<DictionaryAttr>(index, kParamAttr);
  return param && param.get(kParamRowsKey);
}

}  // namespace mt
