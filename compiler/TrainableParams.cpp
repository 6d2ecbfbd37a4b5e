#include "compiler/TrainableParams.h"

#include <fmt/format.h>

#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/plan_format.h"

using namespace mlir;

namespace mt {
namespace {

// Whether `pattern` finds parameter `name`'s plan name or its tensor's name in the folder.
bool matches(const CompileOptions& o, const std::regex& pattern, StringRef name) {
  if (std::regex_search(name.begin(), name.end(), pattern)) return true;
  auto source = o.param_source_names.find(name.str());
  return source != o.param_source_names.end() && std::regex_search(source->second, pattern);
}

// Sets key `key` in parameter argument `index`'s mt.param (to `value`; null: a unit).
void markParam(func::FuncOp func, unsigned index, StringRef key, Attribute value = {}) {
  NamedAttrList fields(func.getArgAttrOfType<DictionaryAttr>(index, kParamAttr));
  fields.set(key, value ? value : UnitAttr::get(func.getContext()));
  func.setArgAttr(index, kParamAttr, fields.getDictionary(func.getContext()));
}

// The index of the first of `patterns` that finds parameter `name`, as PEFT's rank_pattern and
// alpha_pattern take their first matching key; -1 where none does.
int firstPattern(const CompileOptions& o, const std::vector<CompileOptions::LoraPattern>& patterns, StringRef name) {
  for (size_t i = 0; i < patterns.size(); ++i)
    if (matches(o, patterns[i].pattern, name)) return static_cast<int>(i);
  return -1;
}

// A target's own rank and alpha in its mt.param (mt-lora's lora_rank, lora_alpha), where
// --lora-from's config or the patterns give them; counts the weights each pattern decides in
// `found` (a pattern whose weights an earlier one takes decides none).
void markOwnRankAndAlpha(func::FuncOp func, unsigned index, const CompileOptions& o, std::vector<int>& rank_found,
                         std::vector<int>& alpha_found) {
  const StringRef name = paramName(func, index);
  Builder b(func.getContext());
  std::optional<int64_t> rank;
  std::optional<double> alpha;
  if (o.lora_from_targets) {
    if (auto r = o.lora_from_ranks.find(name.str()); r != o.lora_from_ranks.end()) rank = r->second;
    if (auto a = o.lora_from_alphas.find(name.str()); a != o.lora_from_alphas.end()) alpha = a->second;
  }
  if (const int i = firstPattern(o, o.lora_rank_pattern, name); i >= 0)
    ++rank_found[i], rank = static_cast<int64_t>(o.lora_rank_pattern[i].value);
  if (const int i = firstPattern(o, o.lora_alpha_pattern, name); i >= 0)
    ++alpha_found[i], alpha = o.lora_alpha_pattern[i].value;
  if (rank) markParam(func, index, kParamLoraRankKey, b.getI64IntegerAttr(*rank));
  if (alpha) markParam(func, index, kParamLoraAlphaKey, b.getF32FloatAttr(static_cast<float>(*alpha)));
}

// The first pattern that found no adapted weight, as an error; "" where each found one.
std::string unusedPattern(const CompileOptions& o, const std::vector<int>& rank_found,
                          const std::vector<int>& alpha_found) {
  for (auto [flag, patterns, found] : {std::tuple{"--lora-rank-pattern", &o.lora_rank_pattern, &rank_found},
                                       {"--lora-alpha-pattern", &o.lora_alpha_pattern, &alpha_found}})
    for (size_t i = 0; i < patterns->size(); ++i)
      if ((*found)[i] == 0)
        return fmt::format("{} '{}' decides no adapted weight's {}: it finds none (it is searched among those "
                           "--lora-targets and --lora-experts adapt), or an earlier one takes each it finds",
                           flag, (*patterns)[i].text, flag == std::string("--lora-rank-pattern") ? "rank" : "alpha");
  return "";
}

const char* namesHint(const CompileOptions& o) {
  return o.param_source_names.empty() ? "mtdump lists the plan's names"
                                      : "a parameter's name in the plan (mtdump) or its tensor's in the folder";
}

// mtc --lora: marks the weights --lora-targets finds and the stacks of experts --lora-experts
// finds (mt.param's "lora"); returns the problem, if any. What --lora-targets finds that is not a
// 2-D weight (a norm, a bias, a stack of experts) is left, as PEFT's target_modules adapt the
// linear layers among the modules they name; its target_parameters name the stacks.
std::string markLoraTargets(func::FuncOp func, const CompileOptions& o) {
  int64_t marked = 0, found = 0, stacks = 0;
  std::vector<int> rank_found(o.lora_rank_pattern.size()), alpha_found(o.lora_alpha_pattern.size());
  for (BlockArgument arg : func.getArguments()) {
    const StringRef name = paramName(func, arg.getArgNumber());
    if (name.empty()) continue;
    const int64_t rank = cast<RankedTensorType>(arg.getType()).getRank();
    const bool hit = o.lora_from_targets ? o.lora_from_targets->count(name.str()) > 0
                                         : o.lora_targets && matches(o, *o.lora_targets, name);
    found += hit;
    // A stack: --lora-experts', or a target of --lora-from's target_parameters.
    const bool stack = rank == 3 && ((o.lora_experts && matches(o, *o.lora_experts, name)) || (o.lora_from_targets && hit));
    if (!stack && !(hit && rank == 2)) continue;
    markParam(func, arg.getArgNumber(), kParamLoraKey);
    markOwnRankAndAlpha(func, arg.getArgNumber(), o, rank_found, alpha_found);
    ++(stack ? stacks : marked);
  }
  if (std::string unused = unusedPattern(o, rank_found, alpha_found); !unused.empty()) return unused;
  if (o.lora_experts && stacks == 0)
    return fmt::format("--lora-experts finds no stack of experts (E, ., .) ({})", namesHint(o));
  if (!o.lora_from_targets && !o.lora_targets) return "";  // the stacks alone
  const char* flag = o.lora_from_targets ? "--lora-from's target_modules" : "--lora-targets";
  if (found == 0) return fmt::format("{} matches no parameter ({})", flag, namesHint(o));
  if (marked == 0 && !(o.lora_from_targets && stacks > 0))  // --lora-from's target_parameters alone
    return fmt::format("{} finds no (out, in) weight, only norms, biases or stacks of experts{}", flag,
                       stacks ? " (--lora-experts adapts those; without --lora-targets, it adapts them alone)" : "");
  return "";
}

// Marks frozen what does not train: with --frozen / --trainable as their help says; with --lora
// every parameter but those --trainable finds (the adapters, added after, train).
std::string markFrozen(func::FuncOp func, const CompileOptions& o) {
  const bool lora = o.lora_rank > 0;
  int64_t frozen_hits = 0, trainable_hits = 0, training = 0;
  for (BlockArgument arg : func.getArguments()) {
    const StringRef name = paramName(func, arg.getArgNumber());
    if (name.empty()) continue;
    const bool hit_frozen = o.frozen && matches(o, *o.frozen, name);
    const bool hit_trainable = o.lora_from_saved ? o.lora_from_saved->count(name.str()) > 0
                                                 : o.trainable && matches(o, *o.trainable, name);
    frozen_hits += hit_frozen, trainable_hits += hit_trainable;
    if (isFrozenParam(func, arg.getArgNumber())) continue;  // frozen in the IR already
    // A reward model's score head trains beside the adapters (PEFT's SEQ_CLS saves it too).
    const bool head = lora && name == kScoreHeadParam;
    if (!hit_frozen && (o.trainable || o.lora_from_saved ? hit_trainable || head : !lora || head)) {
      ++training;
      continue;
    }
    markParam(func, arg.getArgNumber(), kParamFrozenKey);
    if (o.bf16_params.count(name.str())) markParam(func, arg.getArgNumber(), kParamBf16ValuesKey);
  }
  if (o.frozen && frozen_hits == 0)
    return fmt::format("--frozen matches no parameter ({}); nothing would be frozen", namesHint(o));
  if (o.trainable && trainable_hits == 0)
    return fmt::format("--trainable matches no parameter ({}); nothing would train", namesHint(o));
  if (training == 0 && !lora)
    return fmt::format("{} leave{} no parameter to train",
                       o.frozen && o.trainable ? "--frozen and --trainable" : o.frozen ? "--frozen" : "--trainable",
                       o.frozen && o.trainable ? "" : "s");
  return "";
}

}  // namespace

std::string selectTrainable(ModuleOp module, const CompileOptions& o) {
  const bool lora = o.lora_rank > 0;
  if (!o.frozen && !o.trainable && !lora) return "";
  func::FuncOp func = getModelFunction(module);
  if (!func) return "the model has no function to train";
  if (isForwardOnly(func)) return "--frozen, --trainable and --lora choose what trains; this model is forward-only";
  std::string problem = lora ? markLoraTargets(func, o) : "";
  if (problem.empty()) problem = markFrozen(func, o);
  if (!problem.empty() || !lora) return problem;
  PassManager pm(module.getContext());
  LoraPassOptions options;
  options.rank = o.lora_rank;
  options.alpha = o.lora_alpha;
  options.rslora = o.lora_rslora;
  options.dropout = o.lora_dropout;
  options.dora = o.lora_dora;
  pm.addPass(createLoraPass(options));
  if (failed(pm.run(module))) return "the adapters could not be added (see the diagnostics above)";
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
