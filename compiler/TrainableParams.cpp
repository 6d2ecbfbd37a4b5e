#include "compiler/TrainableParams.h"

#include <fmt/format.h>

#include "mlir/IR/Builders.h"
#include "passes/PassUtils.h"

using namespace mlir;

namespace mt {

std::string markFrozenParameters(ModuleOp module, const CompileOptions& o) {
  if (!o.frozen && !o.trainable) return "";
  func::FuncOp func = getModelFunction(module);
  if (!func) return "the model has no function to train";
  if (isForwardOnly(func)) return "--frozen and --trainable choose what trains; this model is forward-only";
  auto matches = [&](const std::regex& pattern, StringRef name) {
    if (std::regex_search(name.begin(), name.end(), pattern)) return true;
    auto source = o.param_source_names.find(name.str());
    return source != o.param_source_names.end() && std::regex_search(source->second, pattern);
  };
  Builder b(module.getContext());
  int64_t frozen_hits = 0, trainable_hits = 0, training = 0;
  for (BlockArgument arg : func.getArguments()) {
    const StringRef name = paramName(func, arg.getArgNumber());
    if (name.empty()) continue;
    const bool hit_frozen = o.frozen && matches(*o.frozen, name);
    const bool hit_trainable = o.trainable && matches(*o.trainable, name);
    frozen_hits += hit_frozen, trainable_hits += hit_trainable;
    if (isFrozenParam(func, arg.getArgNumber())) continue;  // frozen in the IR already
    if (!hit_frozen && (!o.trainable || hit_trainable)) {
      ++training;
      continue;
    }
    NamedAttrList fields(func.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(), kParamAttr));
    fields.set(kParamFrozenKey, b.getUnitAttr());
    func.setArgAttr(arg.getArgNumber(), kParamAttr, fields.getDictionary(module.getContext()));
  }
  const char* names = o.param_source_names.empty() ? "mtdump lists the plan's names"
                                                    : "a parameter's name in the plan (mtdump) or its tensor's in the folder";
  if (o.frozen && frozen_hits == 0)
    return fmt::format("--frozen matches no parameter ({}); nothing would be frozen", names);
  if (o.trainable && trainable_hits == 0)
    return fmt::format("--trainable matches no parameter ({}); nothing would train", names);
  if (training == 0)
    return fmt::format("{} leave{} no parameter to train",
                       o.frozen && o.trainable ? "--frozen and --trainable" : o.frozen ? "--frozen" : "--trainable",
                       o.frozen && o.trainable ? "" : "s");
  return "";
}

ParamCount countParams(ModuleOp module) {
  ParamCount params;
  if (func::FuncOp func = getModelFunction(module))
    for (BlockArgument arg : func.getArguments())
      if (!paramName(func, arg.getArgNumber()).empty()) {
        const double n = cast<RankedTensorType>(arg.getType()).getNumElements();
        params.all += n;
        if (isFrozenParam(func, arg.getArgNumber())) params.frozen += n;
      }
  return params;
}

}  // namespace mt
