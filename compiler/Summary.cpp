#include "compiler/Summary.h"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <map>
#include <set>

#include "llvm/ADT/SmallPtrSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/plan_queries.h"

using namespace mlir;

namespace mt {
namespace {

std::string millis(double us) { return fmt::format("{:.1f} ms", us / 1e3); }

void printPrecision(const CompileReport& r, const PlanStats& stats) {
  if (r.options.precision == ComputePrecision::kBf16)
    std::printf("  precision      bf16 (%s): the device holds weights and activations in bf16 (rounded to "
                "nearest even; the weights to nearest, ties away from zero, on the host: the master held exactly as its "
                "bf16 copy + a 16-bit residual, no host bytes added, a frozen weight of bf16 values as its bf16 copy "
                "alone); products, attention, norms and reductions "
                "accumulate in f32; norms' statistics, log-sum-exps, the loss and the weights' gradients are f32; "
                "master weights and AdamW moments fp32 on the host. Lossy: every bf16 activation and weight read\n",
                r.options.precision_by_profile ? "the GPU profiles' default; --precision fp32 for f32 on the device"
                                               : "--precision bf16");
  else
    std::printf("  precision      fp32 (--precision fp32): everything in f32 on the device (TF32 products only with "
                "mtrun --tf32)\n");
  if (stats.bf16_staging && r.options.precision != ComputePrecision::kBf16)
    std::printf("  staging        the weights cross the link as bf16 copies of the fp32 master (rounded to nearest, "
                "ties away from zero; widened on the device): half the bytes, and the forward and backward see "
                "bf16-rounded weights; master, moments and gradients stay fp32, the master held exactly as its bf16 "
                "copy + a 16-bit residual, no host bytes added, a frozen weight of bf16 values as its bf16 copy alone "
                "(--stream-dtype bf16)\n");
}

// The token tiles of the layer blocks (mt-tile-tokens) and what they cost: each trained weight a
// tile reads gets its gradient as the sum of the tiles' products, (tiles - 1) adds of its size.
void printTokenTiles(const CompileReport& r, ModuleOp module, const StageResult& stages, const EmitOptions& emit) {
  if (stages.token_tiles <= 1) return;
  // The weights the tiles read: copied in from a parameter or its bf16 staging copy.
  llvm::SmallPtrSet<void*, 32> weights;
  int64_t summed = 0;  // their elements
  module.walk([&](Operation* op) {
    if (!tileOf(op)) return;
    for (Value v : op->getOperands()) {
      if (auto widen = v.getDefiningOp<WidenOp>()) v = widen.getInput();
      auto copy = v.getDefiningOp<H2DOp>();
      auto arg = copy ? dyn_cast<BlockArgument>(copy.getInput()) : nullptr;
      if (!arg || !weights.insert(arg.getAsOpaquePointer()).second) continue;
      func::FuncOp func = getModelFunction(module);
      auto param = func.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(), kParamAttr);
      if (!param) param = func.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(), kStagingAttr);
      if (param && !param.get(kParamFrozenKey)) summed += cast<RankedTensorType>(arg.getType()).getNumElements();
    }
  });
  const int64_t tokens = emit.batch * emit.seq / stages.token_tiles;
  const double add_bytes = 12.0 * summed * (stages.token_tiles - 1);  // two f32 reads, one write
  const bool recomputed = stages.schedule == Schedule::kStreamedRecompute;
  bool head = false;  // the LM head and its loss tiled too (mt.xent_tile)
  module.walk([&](XentTileOp) { head = true; });
  std::printf("  token tiles    each layer block's token-wise work (norms, projections, rope, the MLP)%s in %lld tiles "
              "of %lld tokens (%s), %s; attention still reads the whole sequence. Costs: the weights' gradients "
              "summed over the tiles (%s of adds per step, %s at the memory bandwidth)%s; the same weights cross "
              "the link\n",
              head ? " and the head's (its norm, the LM head, the loss as each tile's share of the mean)" : "",
              (long long)stages.token_tiles, (long long)tokens,
              r.options.token_tiles > 0 ? "--token-tiles" : "the fewest that fit --device-mem",
              recomputed ? "each tile's activations recomputed just before its backward"
                         : "every tile's activations kept for the backward (tiles save memory when recomputed: "
                           "--schedule streamed-recompute)",
              formatBytes(static_cast<int64_t>(add_bytes)).c_str(),
              millis(add_bytes / emit.hardware.memory_bps * 1e6).c_str(),
              recomputed ? ", the norms before attention recomputed once more per tile" : "");
  // The preference loss sums each row over its tokens: it reads the tiles' logits joined, unless
  // the vocabulary split folds them chunk by chunk.
  bool chunked = false;
  module.walk([&](SequenceLogprobFinishOp) { chunked = true; });
  const LossObjective objective = r.options.loss.objective;
  if (rowsInPairs(objective) && objective != LossObjective::kReward && !chunked)
    std::printf("  note           the preference loss reads the batch's logits whole (%lld x %lld x %lld), not tile by "
                "tile: --vocab-chunks N streams them in chunks of the vocabulary instead\n",
                (long long)emit.batch, (long long)emit.seq, (long long)emit.vocab);
}

// The model's dropouts (ONNX Dropout in training mode, mtc --lora-dropout's): the one random step
// of training.
void printDropout(ModuleOp module) {
  std::map<int64_t, float> sites;  // site -> ratio (its gradient and recomputes repeat a site)
  module.walk([&](DropoutOp op) { sites[static_cast<int64_t>(op.getSite())] = op.getRatio().convertToFloat(); });
  if (sites.empty()) return;
  std::map<float, int> by_ratio;
  for (const auto& [site, ratio] : sites) ++by_ratio[ratio];
  std::string what;
  for (const auto& [ratio, count] : by_ratio)
    what += fmt::format("{}p = {:g} at {} site{}", what.empty() ? "" : ", ", ratio, count, count == 1 ? "" : "s");
  std::printf("  dropout        %s: each mask drawn from mtrun --seed, the step and the site, redrawn by the backward "
              "and by recompute (never stored); off in validation\n", what.c_str());
}

// Attention left unfused (an imported graph the fuse stage did not match): its softmax over
// square (..., T, T) scores, each materialised with its probabilities, which the backward reads.
void printUnfusedAttention(ModuleOp module) {
  int count = 0;
  std::string shape;
  double bytes = 0;
  module.walk([&](SoftmaxOp op) {
    auto type = cast<RankedTensorType>(op.getInput().getType());
    const int64_t rank = type.getRank();
    if (op->hasAttr(kBackwardAttr) || op->hasAttr(kRecomputeAttr) || op.getLog() || rank < 3 ||
        static_cast<int64_t>(op.getAxis()) != rank - 1 || type.getDimSize(rank - 1) != type.getDimSize(rank - 2))
      return;
    ++count;
    bytes += 2.0 * static_cast<double>(type.getNumElements()) * 4;
    shape = fmt::format("({})", fmt::join(type.getShape(), ", "));
  });
  if (count == 0) return;
  std::printf("  attention      %d not fused into mt.attention (the graph did not match its pattern: docs/onnx.md, "
              "Fusion): each materialises %s f32 scores and their softmax, %s per step in all, read again by the "
              "backward\n", count, shape.c_str(), formatBytes(bytes).c_str());
}

void printPlanAndWeights(const CompileReport& r, const plan::Plan& plan) {
  // Instructions as run (templates expanded) and as stored (a launch's waits and records count).
  int instructions = 0, stored = 0;
  for (const auto& s : plan.streams())
    for (const auto& in : s.instructions()) {
      if (!in.has_launch()) {
        ++stored, ++instructions;
        continue;
      }
      const int syncs = in.launch().waits_size() + in.launch().records_size();
      stored += 1 + syncs;
      instructions += plan.templates(in.launch().block_template()).instructions_size() + syncs;
    }
  for (const auto& t : plan.templates()) stored += t.instructions_size();
  std::printf("  plan           %s (%d instructions on %d streams, %u events; %d stored: %d block templates), "
              "compiled in %.2f s\n",
              r.options.output.c_str(), instructions, plan.streams_size(), plan.num_events(), stored, plan.templates_size(),
              r.seconds);
  if (r.write_weights)
    std::printf("  weights        %s (%s)\n", r.weights.c_str(), r.weights_origin.c_str());
  else if (!r.weights_needed.empty())
    std::printf("  weights        not written (--no-weights): %s\n", r.weights_needed.c_str());
  else
    std::printf("  weights        not written (%s); mtrun initialises from the plan's seeded initializers\n",
                r.options.no_weights ? "--no-weights" : "over 2 GiB: pass --weights PATH to write them");
}

// The stacked expert weights split into groups (mt-split-experts), and why.
void printExpertSplit(const CompileReport& r, ModuleOp module, const StageResult& stages) {
  auto split = getModelFunction(module)->getAttrOfType<ArrayAttr>(kExpertSplitAttr);
  if (!split || split.empty()) return;
  std::printf("  expert groups  %zu stacked expert weights (%s%s) in %lld groups of consecutive experts (%s): each "
              "group copied in a group ahead of its products, so the device holds about two groups of a stack at a "
              "time\n",
              split.size(), cast<StringAttr>(split[0]).getValue().str().c_str(), split.size() > 1 ? ", ..." : "",
              (long long)stages.expert_groups,
              r.options.expert_groups > 0 ? "--expert-groups" : "the fewest that fit --device-mem");
}

// A forward-only plan (--forward-only): what it computes and costs, nothing of training.
void printForwardOnlySummary(const CompileReport& r, ModuleOp module, const StageResult& stages,
                             const EmitOptions& emit, const plan::Plan& plan, const PlanStats& stats) {
  bool tokens = false, logits = false;
  int64_t cache_bytes = 0, cache_rows = 0;
  for (const auto& t : plan.host_tensors()) {
    tokens |= t.role() == plan::ROLE_TOKENS;
    logits |= t.role() == plan::ROLE_OUTPUT && t.name() == "logits";
    if (t.role() == plan::ROLE_INPUT && t.name().rfind("cache.", 0) == 0 && t.shape_size() == 3)
      cache_bytes += hostTensorBytes(t), cache_rows = t.shape(1);
  }
  std::printf("mtc: %s\n", r.description.c_str());
  if (tokens && logits && cache_rows)
    std::printf("  decode step    batch %lld, one new token each over a key/value cache of %lld positions (%s on "
                "the host, read every step), vocab %lld: for mtgen\n",
                (long long)emit.batch, (long long)cache_rows, formatBytes(cache_bytes).c_str(), (long long)emit.vocab);
  else if (tokens && logits)
    std::printf("  forward only   batch %lld x seq %lld, vocab %lld: tokens in, logits out (no loss, gradients or "
                "optimizer; for mtgen)\n",
                (long long)emit.batch, (long long)emit.seq, (long long)emit.vocab);
  else
    std::printf("  forward only   an evaluation: the model's inputs in, its outputs out (no loss, gradients or "
                "optimizer)\n");
  std::printf("  parameters     %s; host %s (%s)\n", formatParamCount(stats.num_params).c_str(),
              formatBytes(r.host_bytes).c_str(), r.host_parts.c_str());
  const std::string schedule =
      stages.schedule == Schedule::kResident
          ? "resident"
          : std::string("streamed (the weights copied in per block, one block ahead: ") +
                (r.options.schedule                ? "--schedule"
                 : r.options.expert_groups > 1 ? "--expert-groups"
                                               : "they do not fit the budget together") + ")";
  std::printf("  device arena   %s, schedule %s%s\n", formatBytes(plan.arena_bytes()).c_str(), schedule.c_str(),
              r.options.device_mem ? (", budget " + formatBytes(r.options.device_mem) + " (" + r.budget_source + ")").c_str()
                                   : ", no budget");
  // The weights cross once: mt-plan-memory keeps their device bytes, so runs on the same
  // weights (mtgen's) copy only what changes.
  const int64_t kept = keptCopyBytes(plan);
  const char* fresh = cache_rows ? "tokens and the key/value cache" : "tokens";
  if (kept)
    std::printf("  per run        %.3e FLOP; h2d %s the first run (with the weights, then kept on the device), %s "
                "each later one (the %s); d2h %s (the outputs)\n",
                stats.flops, formatBytes(stats.h2d_bytes).c_str(), formatBytes(stats.h2d_bytes - kept).c_str(),
                fresh, formatBytes(stats.d2h_bytes).c_str());
  else
    std::printf("  per run        %.3e FLOP; h2d %s (the weights and the %s), d2h %s (the outputs)\n", stats.flops,
                formatBytes(stats.h2d_bytes).c_str(), fresh, formatBytes(stats.d2h_bytes).c_str());
  printExpertSplit(r, module, stages);
  printPrecision(r, stats);
  std::printf("  predicted run  %s on %s%s (compute %s, h2d %s, d2h %s)\n", millis(stats.step_us).c_str(),
              emit.hardware.name.c_str(), kept ? ", the first" : "", millis(stats.compute_us).c_str(),
              millis(stats.h2d_us).c_str(), millis(stats.d2h_us).c_str());
  printPlanAndWeights(r, plan);
}

// What an import left for the user to know: notes, initializers kept constant, parameters named
// from their nodes.
void printImportNotes(const CompileReport& r) {
  for (const std::string& note : r.notes) std::printf("  note           %s\n", note.c_str());
  if (!r.kept_constant.empty()) {
    std::string kept;
    for (const auto& [name, why] : r.kept_constant) kept += (kept.empty() ? "" : "; ") + name + " (" + why + ")";
    std::printf("  constants      initializers kept out of training: %s\n", kept.c_str());
  }
  if (!r.path_names.empty()) {
    constexpr size_t kShown = 8;
    std::string named;
    for (size_t i = 0; i < std::min(kShown, r.path_names.size()); ++i) {
      const auto& p = r.path_names[i];
      named += fmt::format("{}{} (from {}{})", i ? "; " : "", p.name, p.initializer, p.transposed ? ", transposed" : "");
    }
    if (r.path_names.size() > kShown) named += fmt::format("; and {} more (mtdump lists them)", r.path_names.size() - kShown);
    std::printf("  names          %zu parameters named from the node that uses them, their initializers anonymous in "
                "the export (a module's own name, as in its state_dict, may differ): %s\n",
                r.path_names.size(), named.c_str());
  }
}

// The loss of a preference plan with a reference model, in words (z, c and r as printObjective
// defines them).
std::string lossInWords(const LossSpec& spec) {
  switch (spec.dpo_loss) {
    case DpoLossKind::kHinge: return "max(0, 1 - z) (hinge)";
    case DpoLossKind::kRobust: return "robust DPO's loss of z";
    case DpoLossKind::kIpo: return "(z / beta - 1 / (2 beta))^2 (IPO)";
    case DpoLossKind::kExoPair: return spec.dpo_label_smoothing > 0.0 ? "EXO's of z" : "EXO's of z (smoothing 1e-3, TRL's for 0)";
    case DpoLossKind::kSppoHard: return "(c - 1 / (2 beta))^2 + (r + 1 / (2 beta))^2 (SPPO, hard)";
    case DpoLossKind::kNcaPair: return "-log sigmoid(beta c) - log sigmoid(-beta c) / 2 - log sigmoid(-beta r) / 2 (NCA)";
    case DpoLossKind::kApoZero: return "1 - sigmoid(beta c) + sigmoid(beta r) (APO-zero)";
    case DpoLossKind::kApoDown: return "sigmoid(beta c) + 1 - sigmoid(z) (APO-down)";
    case DpoLossKind::kAot:
      return "-log sigmoid of beta times the k-th smallest of the pairs' policy log-ratios (chosen over rejected) "
             "minus the k-th smallest of the reference's, over the micro-batch (AOT)";
    case DpoLossKind::kAotPair:
      return "-log sigmoid of beta times the k-th smallest c minus the k-th smallest r over the micro-batch's pairs "
             "(AOT, pairs)";
    case DpoLossKind::kDiscopop:
      return fmt::format("DiscoPOP's of z, tau {}", spec.discopop_tau.value_or(kDefaultDiscopopTau));
    default: return "-log sigmoid(z)";
  }
}

// A preference plan's loss (mtc --objective dpo, kto or reward and their flags), in words.
void printObjective(const LossSpec& spec) {
  if (spec.objective == LossObjective::kReward) {
    std::printf("  objective      a reward model (center %g): a score head of one output in place of the LM head (Hugging "
                "Face's ...ForSequenceClassification, num_labels 1), each row's reward its score at its example's last "
                "token before the end-of-text token; rows 2i and 2i+1 a prompt's chosen and rejected replies (mtrun "
                "--rows pairs on a token file of mttok --preferences), the loss -log sigmoid(r_c - r_r) plus center "
                "times (r_c + r_r)^2, means over the pairs, as TRL's RewardTrainer\n",
                spec.center_rewards);
    return;
  }
  if (spec.objective == LossObjective::kKto) {
    std::printf("  objective      KTO (beta %g, desirable weight %g, undesirable weight %g): rows 2i an example (a "
                "prompt and its completion, labelled desirable or not) and 2i+1 its KL row (the prompt with another "
                "example's completion; mtrun --rows pairs on a token file of mttok --unpaired), the loss w_d (1 - "
                "sigmoid(beta (c - kl))) for a desirable example and w_u (1 - sigmoid(beta (kl - c))) for an "
                "undesirable one, c its log-probability's gain over the reference model's, kl the mean gain of the "
                "micro-batch's KL rows (at least 0, no gradient); the reference is the starting weights (or mtrun "
                "--reference-weights), run once over the data before the first step\n",
                spec.dpo_beta, spec.desirable_weight, spec.undesirable_weight);
    return;
  }
  const double alpha = spec.nllWeight();
  const std::string nll = alpha > 0.0 ? fmt::format(" plus {} times the chosen replies' negative log-likelihood per "
                                                    "token ({})", alpha, spec.rpo_alpha ? "--rpo-alpha" : "ORPO's own")
                                      : "";
  std::printf("  objective      ");
  if (spec.dpo_loss == DpoLossKind::kOrpo) {
    std::printf("ORPO (beta %g): rows 2i and 2i+1 a prompt's chosen and rejected replies (mtrun --rows pairs on a "
                "token file of mttok --preferences), the loss -beta log sigmoid(z)%s, z the log odds ratio log(p_c / (1 "
                "- p_c)) - log(p_r / (1 - p_r)) of each reply's mean probability per token p = exp(mean "
                "log-probability); no reference model\n",
                spec.dpo_beta, nll.c_str());
    return;
  }
  if (spec.dpo_loss == DpoLossKind::kSimpo) {
    std::printf("SimPO (beta %g, gamma %g, label smoothing %g): rows 2i and 2i+1 a prompt's chosen and rejected "
                "replies (mtrun --rows pairs on a token file of mttok --preferences), the loss -log sigmoid(z - "
                "gamma)%s, z beta times the chosen reply's mean log-probability per token minus the rejected one's; "
                "no reference model\n",
                spec.dpo_beta, spec.simpo_gamma.value_or(kDefaultSimpoGamma), spec.dpo_label_smoothing, nll.c_str());
    return;
  }
  const bool ipo = spec.dpo_loss == DpoLossKind::kIpo;
  std::printf("DPO (beta %g, label smoothing %g): rows 2i and 2i+1 a prompt's chosen and rejected replies (mtrun "
              "--rows pairs on a token file of mttok --preferences), the loss %s%s, z = beta (c - r), c and r the "
              "chosen and rejected replies' %s gains over the reference model's; the reference is the starting "
              "weights (or mtrun --reference-weights), run once over the data before the first step\n",
              spec.dpo_beta, spec.dpo_label_smoothing, lossInWords(spec).c_str(), nll.c_str(),
              ipo ? "mean log-probability per token" : "log-probability");
}

// The batch, the parameters and their host bytes, the optimizer, the device arena and schedule.
void printMemory(const CompileReport& r, const StageResult& stages, const EmitOptions& emit, const plan::Plan& plan,
                 const PlanStats& stats) {
  std::printf("  batch %lld x seq %lld = %lld tokens/step, vocab %lld%s\n", (long long)emit.batch,
              (long long)emit.seq, (long long)(emit.batch * emit.seq), (long long)emit.vocab,
              r.batch_note.empty() ? "" : ("; " + r.batch_note).c_str());
  if (rowsInPairs(r.options.loss.objective)) printObjective(r.options.loss);
  if (r.options.packed_examples)
    std::printf("  packing        whole examples per row (mtrun --rows packed-examples), each attending only to itself, "
                "its positions from 0 (input \"positions\"); on CUDA its attention runs on this project's kernels "
                "(the tensor cores' in a bf16 plan with heads of 64 or 128; cuDNN's graph here does not keep examples "
                "apart)\n");
  std::string active = stats.frozen_params ? ", of which " + formatParamCount(stats.frozen_params) +
                                                 " frozen (no gradients, no moments, never "
                                                 "updated)"
                                           : std::string();
  if (emit.active_params) active += " (" + formatParamCount(emit.active_params) + " active per token)";
  std::printf("  parameters     %s%s; host %s (%.1f bytes/param: %s)\n", formatParamCount(stats.num_params).c_str(),
              active.c_str(), formatBytes(r.host_bytes).c_str(), double(r.host_bytes) / stats.num_params,
              r.host_parts.c_str());
  if (r.update == UpdateKind::kOnArrival)
    std::printf("  optimizer      AdamW per parameter as its gradient lands, its norm share in the same pass, "
                "overlapped with the backward; no "
                "global-norm clipping%s\n", r.update_note.empty() ? "" : ("; " + r.update_note).c_str());
  else
    std::printf("  optimizer      AdamW one step late, per parameter before its next copy in (overlapped with the "
                "forward); exact global-norm clipping\n");
  std::string measured;
  for (const auto& [schedule, arena] : stages.arena_by_schedule)
    measured += (measured.empty() ? "" : "; ") + std::string(scheduleName(schedule)) + " " + formatBytes(arena);
  if (stages.switched_from)
    measured += "; then streamed-recompute, its activations' bytes taken by more frozen weights kept: predicted faster";
  std::printf("  device arena   %s, schedule %s%s%s\n", formatBytes(plan.arena_bytes()).c_str(), scheduleName(stages.schedule),
              measured.empty() ? "" : (" (chosen for the budget: " + measured + ")").c_str(),
              r.options.device_mem ? (", budget " + formatBytes(r.options.device_mem) + " (" + r.budget_source + ")").c_str() : ", no budget");
}

// mtc --lora: the adapters and what they train.
void printLora(const CompileOptions& o, ModuleOp module, const PlanStats& stats, bool hf_form) {
  int64_t adapted = 0, stacks = 0, own_ranks = 0, own_alphas = 0;
  std::set<int64_t> ranks;
  std::set<double> alphas;
  func::FuncOp func = getModelFunction(module);
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    if (!isLoraTarget(func, i)) continue;
    ++(cast<RankedTensorType>(func.getArgument(i).getType()).getRank() == 3 ? stacks : adapted);
    auto param = func.getArgAttrOfType<DictionaryAttr>(i, kParamAttr);
    if (auto r = param.getAs<IntegerAttr>(kParamLoraRankKey)) ++own_ranks, ranks.insert(r.getInt());
    if (auto a = param.getAs<FloatAttr>(kParamLoraAlphaKey)) ++own_alphas, alphas.insert(a.getValueAsDouble());
  }
  const std::string experts = stacks ? fmt::format(" and {} stacks of experts (each expert its own)", stacks) : "";
  std::string own;  // PEFT's rank_pattern and alpha_pattern
  if (own_ranks) own += fmt::format("; {} at a rank of their own ({})", own_ranks, fmt::join(ranks, ", "));
  if (own_alphas) own += fmt::format("; {} at an alpha of their own ({})", own_alphas, fmt::join(alphas, ", "));
  const std::string dropout = o.lora_dropout > 0 ? fmt::format(", dropout {:g} before A", o.lora_dropout) : "";
  if (!o.lora_from.empty())
    std::printf("  lora           as %s/adapter_config.json says, from its tensors\n", o.lora_from.c_str());
  std::printf("  lora           %srank %lld, alpha %g (the update x %g%s%s) on %lld weights%s%s: %s trained beside %s "
              "frozen%s\n",
              o.lora_dora ? "DoRA (a magnitude per output row), " : "", static_cast<long long>(o.lora_rank),
              o.lora_alpha, loraScale(o.lora_alpha, o.lora_rank, o.lora_rslora),
              o.lora_rslora ? ", rank-stabilised: alpha / sqrt(r)" : "", dropout.c_str(),
              static_cast<long long>(adapted), experts.c_str(), own.c_str(),
              formatParamCount(stats.num_params - stats.frozen_params).c_str(),
              formatParamCount(stats.frozen_params).c_str(),
              hf_form ? "; --export-hf merges the adapters into the weights" : "");
}

// A step's work and traffic: FLOPs, how often each forward runs, the link's bytes, activations moved.
void printPerStep(const CompileReport& r, ModuleOp module, const StageResult& stages, const PlanStats& stats) {
  std::string forward_runs = "each block's forward runs once";
  if (stages.schedule == Schedule::kStreamedRecompute) {
    auto templates = getModelFunction(module)->getAttrOfType<DenseI64ArrayAttr>(kTemplatesAttr);
    const int64_t blocks = templates ? templates.size() : 0;
    // Blocks below the lowest trained layer (frozen parameters) have no backward to recompute for.
    std::set<int64_t> backward;
    module.walk([&](Operation* op) {
      if (std::optional<int64_t> block = blockOf(op); block && *block >= 0 && *block < blocks && op->hasAttr(kBackwardAttr))
        backward.insert(*block);
    });
    const int64_t untrained = blocks - static_cast<int64_t>(backward.size());
    const std::string none = untrained ? fmt::format("; {} below the lowest trained layer have no backward", untrained) : "";
    forward_runs = stages.recompute_keep == 0 && untrained == 0
                       ? "each block's forward runs twice (recomputed in the backward)"
                   : stages.recompute_keep == 0
                       ? fmt::format("the forward of {} of {} blocks runs twice (recomputed in the backward{})",
                                     blocks - untrained, blocks, none)
                       : fmt::format("the forward of {} of {} blocks runs twice (recomputed; {}: the budget has room{})",
                                     std::max<int64_t>(0, blocks - untrained - stages.recompute_keep), blocks,
                                     stages.recompute_keep == 1
                                         ? std::string("the last keeps its activations")
                                         : fmt::format("the last {} keep their activations", stages.recompute_keep),
                                     none);
  }
  std::printf("  per step       %.3e FLOP; %s; h2d %s (weights cross the link %.2fx%s), d2h %s; activations moved %s\n",
              stats.flops, forward_runs.c_str(), formatBytes(stats.h2d_bytes).c_str(),
              stats.num_params ? double(stats.weight_h2d_numel) / stats.num_params : 0.0,
              stats.bf16_staging ? ", as bf16" : "",
              formatBytes(stats.d2h_bytes).c_str(),
              stats.activation_bytes
                  ? (formatBytes(stats.activation_bytes) + " (kept ones offloaded to the host and back" +
                     (r.options.offload == Offload::kOn ? ")" : ": the budget needs it)"))
                        .c_str()
                  : "none (kept on the device)");
}

void printVocabSplit(const CompileReport& r, ModuleOp module, const StageResult& stages, const EmitOptions& emit) {
  if (auto split = getModelFunction(module)->getAttrOfType<ArrayAttr>(kVocabSplitAttr)) {
    std::string names;
    for (Attribute name : split) names += (names.empty() ? "" : ", ") + cast<StringAttr>(name).getValue().str();
    std::printf("  vocab split    %s in %lld chunks of about %lld rows (%s): one chunk's rows, and the LM head's "
                "logits of that chunk, on the device at a time; the head's products recomputed in the backward "
                "except the last chunk's\n",
                names.c_str(), (long long)stages.vocab_chunks,
                (long long)((emit.vocab + stages.vocab_chunks - 1) / stages.vocab_chunks),
                r.options.vocab_chunks > 0 ? "--vocab-chunks" : "the fewest that fit --device-mem");
  }
}

// Where the frozen weights' copies go: kept on the device between steps (the first step copies
// them, the per-step figures being a later step's), some of them, or none (copied in every step)
// and why; copies the device keeps because no other value happens to take their bytes
// (constants, some frozen weights of a plan that does not keep them) said too.
void printFrozenCopies(const CompileReport& r, const StageResult& stages, const PlanStats& stats) {
  const std::string first_step =
      fmt::format("copied in the first step only ({} in all, that step predicted {}); the per-step figures are a "
                  "later step's", formatBytes(stats.first_step_h2d_bytes), millis(stats.first_step_us));
  if (stages.keep_frozen && stats.first_step_weight_bytes > 0 && stats.frozen_h2d_bytes == 0) {
    std::printf("  frozen weights %s kept on the device between steps (--keep-frozen auto: the budget has room): %s\n",
                formatBytes(stats.first_step_weight_bytes).c_str(), first_step.c_str());
    return;
  }
  const std::string fewer_faster = fmt::format(
      "keeping {} on the device was predicted slower: their bytes would leave fewer blocks keeping their "
      "activations or less room for copies to overlap the compute",
      stages.keep_frozen ? "more" : "them");
  if (stages.keep_frozen && stats.first_step_weight_bytes > 0 && stats.frozen_h2d_bytes > 0) {
    std::printf("  frozen weights %s kept on the device between steps, %lld of the %lld (--keep-frozen auto: %s): "
                "%s; the rest copied in every step (%s a step)\n",
                formatBytes(stats.first_step_weight_bytes).c_str(), (long long)stages.frozen_kept,
                (long long)stages.frozen_weights,
                stages.keeping_fewer_faster ? fewer_faster.c_str() : "the budget has room for no more", first_step.c_str(),
                formatBytes(stats.frozen_h2d_bytes).c_str());
    return;
  }
  if (stats.frozen_h2d_bytes > 0) {
    const char* why = r.options.keep_frozen == KeepFrozen::kOff ? "--keep-frozen off"
                      : stages.keeping_fewer_faster ? fewer_faster.c_str()
                      : stages.frozen_compute_bound
                          ? "the budget has room for only some, and the step is bound by compute (within 2 % of "
                            "it): fewer copies would not shorten it"
                          : "the budget has no room to keep them on the device";
    std::printf("  frozen weights copied in every step (%s a step), as the trained ones (%s)%s\n",
                formatBytes(stats.frozen_h2d_bytes).c_str(), why,
                stats.first_step_h2d_bytes
                    ? fmt::format("; {} of frozen weights and constants stay, no other value taking their bytes: {}",
                                  formatBytes(stats.first_step_h2d_bytes), first_step).c_str()
                    : "");
    return;
  }
  if (stats.first_step_h2d_bytes > 0)
    std::printf("  kept copies    %s of %s stay on the device between steps, no other value taking their bytes: %s\n",
                formatBytes(stats.first_step_h2d_bytes).c_str(),
                stats.first_step_weight_bytes ? "frozen weights and constants" : "constants", first_step.c_str());
}

// Tables looked up on the host and weights pinned on the device for the whole step.
void printHostEmbeddingAndPinned(const CompileReport& r, ModuleOp module, const StageResult& stages,
                                 const PlanStats& stats) {
  if (stages.host_embedding) {
    std::string tables;
    func::FuncOp func = getModelFunction(module);
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto table = func.getArgAttrOfType<StringAttr>(i, kEmbeddedTokensAttr))
        tables += (tables.empty() ? "" : ", ") + table.getValue().str();
    std::printf("  embedding      the tokens looked up in %s on the host, its gradient scatter-added there (%s): "
                "the tokens' rows cross the link, %s per step each way, not the table\n",
                tables.c_str(), r.options.embedding == EmbeddingPlace::kHost ? "--embedding host" : "the vocabulary split needs the tied "
                "head's weight read by the head alone",
                formatBytes(stats.token_row_bytes / 2).c_str());
  }
  if (auto pinned = getModelFunction(module)->getAttrOfType<IntegerAttr>(kPinnedBytesAttr))
    std::printf("  shared weights %s used by blocks far apart (a tied embedding and LM head) stay on the device "
                "all step: copied in once, not per block\n",
                formatBytes(pinned.getInt()).c_str());
}

// The predicted step, its floor and what bounds it; where compute waits, on what.
void printPrediction(const EmitOptions& emit, const PlanStats& stats) {
  // The bottleneck: compute when it is busy most of the step, else what it waits for most.
  const char* stream_names[] = {"the tail after the last kernel", "the host->device link", "the device->host link",
                                "the host optimizer"};
  int most_waited = 1;
  for (int s = 2; s < 4; ++s)
    if (stats.compute_wait_us[s] > stats.compute_wait_us[most_waited]) most_waited = s;
  const double compute_busy = stats.step_us > 0 ? stats.compute_us / stats.step_us : 1.0;
  std::string bottleneck = compute_busy >= 0.9 || stats.compute_wait_us[most_waited] == 0
                               ? std::string("compute")
                               : std::string(stream_names[most_waited] + 4);  // without "the "
  std::string idle;
  for (int s : {3, 1, 2, 0})
    if (stats.compute_wait_us[s] >= 0.005 * stats.step_us)
      idle += fmt::format("{}{} on {}", idle.empty() ? "" : ", ", millis(stats.compute_wait_us[s]), stream_names[s]);
  // Model TFLOP/s as MegaTrain reports it: 6 * parameters * tokens over the step time (a mixture
  // of experts: its active parameters; frozen ones counted as modelFlopsPerToken says).
  const double per_token = modelFlopsPerToken(double(stats.num_params), double(emit.active_params),
                                              double(stats.frozen_params));
  const double model_tflops = per_token * emit.batch * emit.seq / (stats.step_us * 1e-6) / 1e12;
  // The floor: the busiest stream's work alone (FLOPs over the peak, bytes over the bandwidth),
  // what no schedule of this plan beats; the prediction adds the waits its dependencies cost.
  const double busy_us[] = {stats.compute_us, stats.h2d_us, stats.d2h_us, stats.host_us};
  const char* busy_names[] = {"compute", "the h2d link", "the d2h link", "the host optimizer"};
  const int busiest = static_cast<int>(std::max_element(busy_us, busy_us + 4) - busy_us);
  std::printf("  predicted step %s on %s = %.1f model TFLOP/s (compute %s, h2d %s, d2h %s, host %s); floor %s "
              "(%s alone); bottleneck: %s\n",
              millis(stats.step_us).c_str(), emit.hardware.name.c_str(), model_tflops, millis(stats.compute_us).c_str(),
              millis(stats.h2d_us).c_str(), millis(stats.d2h_us).c_str(), millis(stats.host_us).c_str(),
              millis(busy_us[busiest]).c_str(), busy_names[busiest], bottleneck.c_str());
  if (compute_busy < 0.95 && !idle.empty())
    std::printf("  compute busy   %.0f%% of the step; waits %s\n", 100 * compute_busy, idle.c_str());
}

}  // namespace

void printSummary(const CompileReport& r, ModuleOp module, const StageResult& stages, const EmitOptions& emit,
                  const plan::Plan& plan, const PlanStats& stats) {
  if (!isTrainingPlan(plan)) {
    printForwardOnlySummary(r, module, stages, emit, plan, stats);
    return;
  }
  std::printf("mtc: %s\n", r.description.c_str());
  printImportNotes(r);
  printMemory(r, stages, emit, plan, stats);
  if (r.options.lora_rank) printLora(r.options, module, stats, !emit.hf_config.empty());
  printPerStep(r, module, stages, stats);
  printVocabSplit(r, module, stages, emit);
  printExpertSplit(r, module, stages);
  printTokenTiles(r, module, stages, emit);
  printPrecision(r, stats);
  printDropout(module);
  printUnfusedAttention(module);
  printHostEmbeddingAndPinned(r, module, stages, stats);
  printFrozenCopies(r, stages, stats);
  printPrediction(emit, stats);
  printDataParallel(r.options, emit, plan, stats);
  printPlanAndWeights(r, plan);
}

}  // namespace mt
