// What mtrun checks of its flags and inputs before anything runs, and what they resolve to. Every hyperparameter: none may
// crash the run (a zero interval) or reach the weights as NaN (issue 18); each error names the
// flag and what it takes.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "runtime/training/train_config.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>

#include "runtime/data/example_packing.h"
#include "runtime/data/token_data.h"
#include "runtime/distributed/world.h"
#include "runtime/io/error.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/plan/verifier.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/lora_merge.h"

namespace mt {
namespace {

// Whether two folder paths, both given, name the same folder as written ("out/" and "./out").
bool sameFolderName(const std::string& a, const std::string& b) {
  auto normal = [](const std::string& path) {
    std::string s = std::filesystem::path(path).lexically_normal().string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
  };
  return !a.empty() && !b.empty() && normal(a) == normal(b);
}

}  // namespace

void validateConfig(const TrainConfig& c) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw Error(what);
  };
  // Far beyond any run, and small enough that steps x tokens cannot overflow.
  constexpr int64_t kMaxSteps = int64_t{1} << 40;
  require(!c.data_path.empty() || c.export_only || (c.eval_only && !c.val_data_path.empty()),
          "--data is required: the token file to train on (make one with mttok)");
  require(!c.export_only || (!c.resume_dir.empty() && (!c.export_path.empty() || !c.export_hf_dir.empty() ||
                                                       !c.export_peft_dir.empty())),
          "--export-only writes a checkpoint's weights: give --resume CHECKPOINT_DIR and --export, --export-hf or "
          "--export-peft");
  require(c.peft_experts == PeftExpertsForm::kLayers || !c.export_peft_dir.empty(),
          "--peft-experts says how --export-peft writes experts' adapters: give --export-peft DIR too");
  require(!c.export_only || c.reference_weights.empty(),
          "--reference-weights names the reference model of a preference run; --export-only trains nothing: drop it");
  require(!c.eval_only || !c.export_only, "--eval-only scores weights and --export-only writes them: give one");
  // Each folder is written whole, replacing what was there: two outputs cannot share one.
  const std::pair<const std::string*, const char*> folders[] = {
      {&c.checkpoint_dir, "--checkpoint-dir"}, {&c.export_hf_dir, "--export-hf"}, {&c.export_peft_dir, "--export-peft"}};
  for (size_t i = 0; i < std::size(folders); ++i)
    for (size_t j = i + 1; j < std::size(folders); ++j)
      require(!sameFolderName(*folders[i].first, *folders[j].first),
              std::string(folders[i].second) + " and " + folders[j].second + " name the same folder (" +
                  *folders[i].first + "): each output replaces its folder whole, so give each its own");
  require(!c.eval_only || (c.export_path.empty() && c.export_hf_dir.empty() && c.export_peft_dir.empty() &&
                           c.checkpoint_dir.empty() &&
                           !c.keep_best && c.grads_path.empty() && c.trace_path.empty() && c.report_path.empty()),
          "--eval-only trains nothing and writes nothing but --log and --scores: drop --export, --export-hf, --export-peft, "
          "--checkpoint-dir, --keep-best, --dump-grads, --trace and --report (--resume DIR scores that folder's "
          "newest checkpoint)");
  require(!c.eval_only || !c.resume_auto,
          "--eval-only scores a checkpoint it is given: name its folder (--resume DIR), not --resume auto");
  require(c.scores_path.empty() || c.eval_only,
          "--scores " + c.scores_path + " writes the scores of an --eval-only run, each held-out pair's: add "
          "--eval-only (a training run logs their means at each validation)");
  require(!c.eval_only || (c.accumulate == 1 && c.epochs == 0.0 && !c.warmup_ratio),
          "--eval-only takes no step: drop --accumulate, --epochs and --warmup-ratio");
  require(c.steps > 0, "--steps must be positive");
  require(std::isfinite(c.epochs) && c.epochs >= 0.0, "--epochs must be a finite number >= 0 (0: --steps decides)");
  require(c.steps <= kMaxSteps, "--steps " + std::to_string(c.steps) + " is beyond any run: give at most 2^40");
  require(c.accumulate >= 1 && c.accumulate <= kMaxStepRows,
          "--accumulate must be between 1 (no accumulation) and " + std::to_string(kMaxStepRows));
  require(std::isfinite(c.lr) && c.lr >= 0.0, "--lr must be a finite number >= 0");
  require(std::isfinite(c.min_lr_ratio) && c.min_lr_ratio >= 0.0 && c.min_lr_ratio <= 1.0,
          "--min-lr-ratio must be between 0 and 1");
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0, "--weight-decay must be a finite number >= 0");
  require(std::isfinite(c.lora_plus_ratio) && c.lora_plus_ratio > 0.0 && c.lora_plus_ratio <= 1e4,
          "--lora-plus-ratio must be a number in (0, 10000] (LoRA+'s paper and PEFT suggest 16)");
  require(c.beta1 >= 0.0 && c.beta1 < 1.0, "--beta1 must be in [0, 1)");
  require(c.beta2 >= 0.0 && c.beta2 < 1.0, "--beta2 must be in [0, 1)");
  require(std::isfinite(c.eps) && c.eps > 0.0, "--eps must be a finite number > 0");
  require(!std::isnan(c.grad_clip) && std::isfinite(c.grad_clip),
          "--grad-clip must be a finite number (0: no clipping)");
  require(c.val_fraction >= 0.0 && c.val_fraction < 1.0, "--val-fraction must be in [0, 1)");
  require(c.val_data_path.empty() || c.val_fraction == 0.0,
          "--val-data and --val-fraction both name held-out tokens: give one of them");
  require(c.val_batches >= 0, "--val-batches must be 0 (one whole pass over the held-out tokens) or positive");
  require(!c.keep_best || (!c.checkpoint_dir.empty() && (c.val_fraction > 0.0 || !c.val_data_path.empty())),
          "--keep-best keeps the weights of the lowest validation loss in --checkpoint-dir: give --checkpoint-dir, "
          "and held-out tokens (--val-data or --val-fraction)");
  require(c.val_every >= 0, "--val-every must be 0 (at the end only) or positive");
  require(c.print_every >= 1, "--print-every must be at least 1");
  require(!c.rank_timeout || (std::isfinite(*c.rank_timeout) && *c.rank_timeout > 0.0),
          "--rank-timeout must be auto or a positive number of seconds");
  require(c.checkpoint_every >= 0, "--checkpoint-every must be 0 (at the end and on signals only) or positive");
  require(c.keep >= 1, "--keep must be at least 1");
  require(!c.resume_auto || !c.checkpoint_dir.empty(),
          "--resume auto needs --checkpoint-dir: the folder it resumes from and writes checkpoints to");
  require(!c.warmup_ratio || (*c.warmup_ratio >= 0.0 && *c.warmup_ratio <= 1.0),
          "--warmup-ratio must be between 0 and 1 (the fraction of the steps that warm up)");
  require(c.warmup >= 0 && c.warmup <= c.steps,
          "--warmup " + std::to_string(c.warmup) + " with --steps " + std::to_string(c.steps) +
              ": the warmup must be between 0 and the number of steps; pass a --warmup of at most " +
              std::to_string(c.steps));
}

// Each token file holds at least one sequence of the plan (seq + 1 tokens: the last is the
// last position's target); one that does not is named with its flag and the fix. (--rows
// examples: the samplers refuse a file, or a held-out tail, without an example.)
void checkEnoughTokens(const TrainConfig& c, const plan::Plan& plan, const TokenFile& data, const TokenFile* val_data) {
  // Rows of examples pad short ones: the samplers need an example, not a sequence.
  if (byExamples(c.rows)) return;
  const int64_t need = plan.model().seq() + 1;
  const std::string needs = " tokens, fewer than one sequence of the plan needs (" + std::to_string(need) +
                            ": seq " + std::to_string(plan.model().seq()) + " + 1 target)";
  const int64_t held_out = static_cast<int64_t>(c.val_fraction * data.size());
  if (data.size() - held_out < need)
    throw Error(std::string(c.data_flag) + " " + c.data_path + " holds " + std::to_string(data.size() - held_out) +
                (held_out ? " tokens to train on after --val-fraction's" : "") + needs +
                ": give more data, or compile with a shorter --seq");
  if (held_out && held_out < need)
    throw Error("--val-fraction " + fmt::format("{}", c.val_fraction) + " holds out " + std::to_string(held_out) + " of " +
                c.data_path + "'s" + needs + ": raise --val-fraction, or give --val-data");
  if (val_data && val_data->size() < need)
    throw Error("--val-data " + c.val_data_path + " holds " + std::to_string(val_data->size()) + needs +
                ": give more held-out data, or compile with a shorter --seq");
}

// A preference plan's data in the pairs it reads: (chosen, rejected) for DPO and reward models
// (mttok --preferences), labelled (example, KL row) for KTO (mttok --unpaired). A file of no pairs
// at all is left to TokenFile::requireExamples, which names it.
static void requireMatchingPairs(const TrainConfig& config, bool kto, const TokenFile& data, const TokenFile* val_data) {
  for (const TokenFile* file : {&data, val_data}) {
    if (!file || !file->hasPairs() || file->hasLabels() == kto) continue;
    if (kto)
      throw Error(file->path() + " holds (chosen, rejected) pairs (mttok --preferences), and " + config.plan_path +
                  " trains KTO (mtc --objective kto) on labelled examples beside their KL rows: tokenise the data with "
                  "mttok --unpaired (it reads preference records too, the chosen reply desirable and the rejected one "
                  "not), or compile the plan with --objective dpo");
    throw Error(file->path() + " holds KTO's labelled examples beside their KL rows (mttok --unpaired), and " +
                config.plan_path + " trains on (chosen, rejected) pairs: compile the plan with mtc --objective "
                "kto, or tokenise preference pairs with mttok --preferences");
  }
}

// --eval-only --scores of a reward model on token files of examples, not pairs: each example a
// text scored alone (a best-of-n's candidates); such files without them are refused, naming both
// uses. Files of pairs are left to the checks of pairs; a file of neither to
// TokenFile::requireExamples, which names it.
static bool scoresTexts(const TrainConfig& config, const plan::Plan& plan, const TokenFile& data,
                        const TokenFile* val_data) {
  if (!hasHostTensor(plan, plan::ROLE_OUTPUT, kPolicyRewardsOutput)) return false;
  const TokenFile& scored = val_data ? *val_data : data;
  if (scored.hasPairs() || !scored.hasExamples()) return false;
  if (!config.eval_only || !config.scores)
    throw Error(scored.path() + " holds texts, not (chosen, rejected) pairs: " + config.plan_path + " is a reward "
                "model, which trains and is validated on pairs (mttok --preferences); to score each text alone, give "
                "--eval-only --scores FILE");
  if (val_data && data.hasPairs())
    throw Error("--val-data " + val_data->path() + " holds texts and --data " + data.path() + " pairs: --eval-only "
                "--scores scores one kind; give the texts as --data alone");
  return true;
}

TrainConfig resolveRows(TrainConfig config, const plan::Plan& plan, const TokenFile& data, const TokenFile* val_data) {
  // Whether the plan takes each token's position in its example, and whether it trains on pairs of
  // rows (preferences, a reward model).
  const bool packs = hasHostTensor(plan, plan::ROLE_INPUT, kPositionsInput);
  if (config.scores && !trainsOnPairs(plan))
    throw Error("--scores: " + config.plan_path + " predicts the next token of windows of "
                "the held-out tokens, not pairs or texts to score one by one: drop --scores (--eval-only's loss and "
                "perplexity are of the held-out tokens as a whole); it is a preference plan's or a reward model's");
  if (trainsOnPairs(plan)) {
    if (!config.rows_default && config.rows != RowLayout::kPairs)
      throw Error(rowsFlag(config.rows) + ": " + config.plan_path + " trains on pairs of rows (mtc --objective dpo, "
                  "kto or reward): drop --rows (or give --rows pairs)");
    if (scoresTexts(config, plan, data, val_data)) {
      config.rows = RowLayout::kExamples, config.scores_texts = true;
      return config;
    }
    config.rows = RowLayout::kPairs;
    requireMatchingPairs(config, hasHostTensor(plan, plan::ROLE_INPUT, kKtoLabelsInput), data, val_data);
    return config;
  }
  if (config.rows == RowLayout::kPairs)
    throw Error("--rows pairs: " + config.plan_path + " trains the next token, not preferences; compile it with mtc "
                "--objective dpo (or kto) to train on pairs");
  for (const TokenFile* file : {&data, val_data})
    if (file && file->hasPairs())
      throw Error(file->path() + " is preference data (" +
                  (file->hasLabels() ? "labelled examples beside their KL rows, mttok --unpaired): train it with a "
                                       "plan of mtc --objective kto; "
                                     : "chosen and rejected replies in pairs, mttok --preferences): train it with a "
                                       "plan of mtc --objective dpo; ") +
                  config.plan_path + " trains the next token, which would learn the " +
                  (file->hasLabels() ? "undesirable completions" : "rejected replies") + " too");
  if (config.rows == RowLayout::kPackedExamples && !packs)
    throw Error("--rows packed-examples: " + config.plan_path + " was not compiled for packed examples (its attention "
                "would let the examples in a row see each other); compile it with mtc --packed-examples, or train with "
                "--rows examples (one example per row)");
  if (config.rows_default && packs && data.hasExamples() && (!val_data || val_data->hasExamples())) {
    config.rows = RowLayout::kPackedExamples;
    std::printf("--rows packed-examples: a plan of packed examples on token files of examples (give --rows to cut "
                "the rows otherwise)\n");
  }
  return config;
}

TrainConfig resolveLearningRate(TrainConfig config, const plan::Plan& plan) {
  if (!config.lr_default || config.eval_only) return config;  // --eval-only takes no step
  if (hasHostTensor(plan, plan::ROLE_OUTPUT, kPolicyRewardsOutput)) {
    config.lr = kRewardLr;
    std::printf("--lr %g: a reward model's default (TRL's RewardConfig; the next token's is 0.001): pass --lr to "
                "choose\n", config.lr);
  } else if (hasHostTensor(plan, plan::ROLE_OUTPUT, kPolicyLogprobsOutput)) {
    config.lr = kPreferenceLr;
    std::printf("--lr %g: a preference plan's default (TRL's DPOConfig and KTOConfig; the next token's is 0.001): "
                "pass --lr to choose\n", config.lr);
  }
  return config;
}

void checkReferenceWeights(const TrainConfig& config, const plan::Plan& plan) {
  if (config.reference_weights.empty()) return;
  if (!trainsOnPairs(plan))
    throw Error("--reference-weights " + config.reference_weights + ": " + config.plan_path + " trains the next "
                "token; a reference model belongs to preference training (mtc --objective dpo or kto): drop the flag");
  if (!hasHostTensor(plan, plan::ROLE_INPUT, kReferenceLogprobsInput))
    throw Error("--reference-weights " + config.reference_weights + ": " + config.plan_path + "'s loss has no "
                "reference model (mtc --dpo-loss simpo or orpo scores the policy alone; a reward model, --objective "
                "reward, has none): drop the flag, or compile with a loss that compares with one");
  if (!config.resume_dir.empty() && config.eval_only)
    throw Error("--eval-only --resume scores with the reference log-probabilities its run kept, not --reference-weights: "
                "to score against " + config.reference_weights + ", give the checkpoint as --weights (" +
                config.resume_dir + "/step-N.ckpt.safetensors) instead of --resume");
  if (!config.resume_dir.empty()) return;  // resuming, the reference log-probabilities are read back instead
  // The file's header read now, before anything is written or started: each parameter there, F32,
  // of its shape (its values, their checksums and finiteness, when it is loaded).
  const SafetensorsFile file(config.reference_weights);
  try {
    for (const plan::HostTensor& t : plan.host_tensors())
      if (t.role() == plan::ROLE_PARAM)
        file.f32Header(t.name(), std::vector<int64_t>(t.shape().begin(), t.shape().end()));
  } catch (const Error& e) {
    throw Error(std::string("--reference-weights: ") + e.what() + ": give the weights of the same model under the "
                "plan's names (mtc writes them beside a plan it compiles from the reference's folder; mtrun --export "
                "writes them too)");
  }
}

// The plan to train: read, verified, and a training plan.
plan::Plan readTrainingPlan(const TrainConfig& config) {
  plan::Plan plan = readPlan(config.plan_path);
  verifyPlan(plan);
  if (!isTrainingPlan(plan))
    throw Error(config.plan_path + " is a forward-only plan (inputs to outputs, no loss): it cannot be "
                "trained; compile the model without --forward-only");
  return plan;
}

// The optimizer's settings for this plan; throws for flags the plan cannot honour.
StepOptions stepOptions(const TrainConfig& config, const plan::Plan& plan) {
  const bool on_arrival = updatesOnArrival(planUpdateKind(plan));
  if (on_arrival && config.grad_clip > 0)
    throw Error("--grad-clip " + fmt::format("{}", config.grad_clip) + ": this plan updates each parameter as its "
                "gradient lands, before the global norm is known, so it cannot clip by it; pass --grad-clip 0 or "
                "compile with mtc --update deferred (16 bytes of host memory per parameter instead of ~12)");
  if (on_arrival && !config.grads_path.empty())
    throw Error("--dump-grads: this plan consumes each gradient as it lands and keeps none; compile with "
                "mtc --update deferred to dump them");
  if (config.lora_plus_ratio != 1.0 && loraAdapters(plan).empty())
    throw Error("--lora-plus-ratio: " + config.plan_path + " has no LoRA adapters, whose B it would train faster; "
                "compile with mtc --lora (or drop the flag)");
  StepOptions options;
  options.lora_plus_ratio = config.lora_plus_ratio;
  options.adamw.beta1 = config.beta1;
  options.adamw.beta2 = config.beta2;
  options.adamw.eps = config.eps;
  options.adamw.weight_decay = config.weight_decay;
  options.grad_clip = config.grad_clip >= 0 ? config.grad_clip : on_arrival ? 0.0 : 1.0;
  options.verify_transfers = config.verify_transfers;
  // A training plan's kept copies are of frozen weights and constants, which nothing writes
  // during a run (a checkpoint read back holds the same frozen values): every step after the
  // first finds them on the device.
  options.weights_unchanged = true;
  return options;
}

// --resume auto, resolved: the checkpoint folder's newest checkpoint where it has one, else a
// fresh start, said.
TrainConfig resolveResume(TrainConfig config) {
  if (!config.resume_auto) return config;
  if (latestCheckpoint(config.checkpoint_dir)) {
    config.resume_dir = config.checkpoint_dir;
  } else {
    std::printf("--resume auto: no checkpoint in %s yet: starting from the beginning\n", config.checkpoint_dir.c_str());
  }
  return config;
}

// --epochs E, resolved: the steps that draw E times the training tokens (the windows are drawn
// at random, so a pass is a count of tokens, not a guarantee that each is seen), said.
TrainConfig resolveEpochs(TrainConfig config, const plan::Plan& plan, const TokenFile& data) {
  if (config.epochs <= 0.0) return config;
  const int64_t train_tokens = data.size() - heldOutTokens(config, data);
  const int64_t rows = config.accumulate * World::get().size() * plan.model().batch();
  const bool examples = byExamples(config.rows);
  if (examples) data.requireExamples(config.rows);  // before a steps count made of none
  // Examples: the rows that draw E times the training examples (packed examples: that pack them
  // E times, a pass's rows as the examples pack in file order, seed-free so that a resumed run
  // counts alike); windows: the tokens.
  const int64_t train = examples ? static_cast<int64_t>(data.firstExampleFrom(train_tokens)) : train_tokens;
  const int64_t per_step = examples ? rows : rows * plan.model().seq();
  const int64_t pass_rows =
      config.rows == RowLayout::kPackedExamples
          ? packedRowsInOrder(data, 0, static_cast<size_t>(train), train_tokens, plan.model().seq())
          : train;
  const double steps = std::ceil(config.epochs * double(pass_rows) / double(per_step));
  if (!(steps <= double(int64_t{1} << 40)))
    throw Error(fmt::format("--epochs {} is {:.3g} steps: beyond any run; give fewer", config.epochs, steps));
  config.steps = std::max<int64_t>(1, static_cast<int64_t>(steps));
  std::printf("--epochs %g: %lld steps of %lld %s over the %lld training %s%s\n", config.epochs,
              static_cast<long long>(config.steps), static_cast<long long>(per_step), examples ? "rows" : "tokens",
              static_cast<long long>(train), examples ? "examples" : "tokens",
              pass_rows != train ? fmt::format(" (packed into about {} rows a pass)", pass_rows).c_str() : "");
  validateConfig(config);  // --warmup against the steps now known
  return config;
}

TrainConfig resolveWarmup(TrainConfig config) {
  if (!config.warmup_ratio) return config;
  // As transformers rounds warmup_ratio: up, so a ratio above 0 warms up at least one step.
  config.warmup = static_cast<int64_t>(std::ceil(*config.warmup_ratio * double(config.steps)));
  std::printf("--warmup-ratio %g: %lld warmup steps of %lld\n", *config.warmup_ratio,
              static_cast<long long>(config.warmup), static_cast<long long>(config.steps));
  return config;
}

int64_t heldOutTokens(const TrainConfig& config, const TokenFile& data) {
  const int64_t tail = static_cast<int64_t>(config.val_fraction * static_cast<double>(data.size()));
  if (config.val_fraction <= 0.0 || !byExamples(config.rows)) return tail;
  // One example per row: the held-out tail begins at an example's start, so none is cut in two.
  data.requireExamples(config.rows);
  const size_t first = data.firstExampleFrom(data.size() - tail);
  if (first == data.exampleStarts().size())
    throw Error(fmt::format("--val-fraction {} holds out the last {} tokens of {}, where no example starts: raise "
                            "--val-fraction, or give --val-data",
                            config.val_fraction, tail, data.path()));
  return data.size() - data.exampleStarts()[first];
}

}  // namespace mt
