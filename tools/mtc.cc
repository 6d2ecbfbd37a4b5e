// mtc: compile a model into a training plan.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "compiler/HardwareProfile.h"
#include "compiler/Pipeline.h"
#include "llvm/Support/ErrorHandling.h"
#include "tools/tool_main.h"

namespace {

// LLVM ends some failures (an allocation it cannot make, an op whose sizes its type inference
// refuses) by aborting: end them as every other error, one line and exit 1. Nothing is
// half-written: the plan and the weights are written only after the compiler is done.
void exitOnLlvmError(void*, const char* reason, bool) {
  std::fprintf(stderr, "mtc: error: %s (inside LLVM/MLIR: the model's sizes are likely past what they handle)\n",
               reason);
  std::exit(1);
}

// What the command line gives: the compile options, and what is parsed into them once the
// flags are read (the batch, memory sizes, regular expressions, tying).
struct Flags {
  mt::CompileOptions o;
  std::string batch = "8";           // a number or auto
  std::string device_mem, host_mem;  // sizes like 80GiB
  std::string frozen, trainable, lora_experts;  // regular expressions over parameter names
  std::string lora_targets = mt::kDefaultLoraTargets;
  std::vector<std::string> lora_rank_pattern, lora_alpha_pattern;  // REGEX=VALUE each
  bool list_models = false, tied = false, untied = false;
};

std::string description() {
  std::string stages;
  for (const char* stage : mt::kStageNames) stages += (stages.empty() ? "" : ", ") + std::string(stage);
  return
      "mtc: compile a model into a MegaTrain training plan (+ initial weights as safetensors).\n\n"
      "Examples:\n"
      "  mtc gpt2-demo --batch 16 -o demo.plan          a built-in model (mtc --list-models)\n"
      "  mtc llama-tiny --layers 4 --width 128 -o l.plan  a preset with overrides\n"
      "  mtc models/tiny_mlp.mlir -o tiny.plan          a model written in the mt dialect\n"
      "  mtc model.onnx -o m.plan                       a PyTorch export (token ids in, logits or\n"
      "                                                 loss out; weights -> m.safetensors)\n"
      "  mtc Qwen2.5-0.5B/ --batch 8 --seq 1024 -o q.plan  a Hugging Face folder; its weights, widened\n"
      "                                                 to fp32 -> q.safetensors (mtrun starts from them)\n"
      "  mtc gpt2-tiny --emit=autodiff                  print the IR after a stage\n\n"
      "  mtc llama-tiny --device-mem 2MiB -o l.plan     stream weights / recompute to fit 2 MiB\n\n"
      "Stages (--emit): " + stages + ".\n"
      "Exit codes: 0 success, 1 bad model or input (message on stderr), 2 bad flags.";
}

// The model, the plan file and the batch.
void addModelFlags(CLI::App& app, Flags& f) {
  mt::CompileOptions& o = f.o;
  bool& list_models = f.list_models;
  std::string& batch = f.batch;
  app.add_option("model", o.model,
                 "built-in model name, a .mlir file, an .onnx file, or a Hugging Face model folder (config.json + "
                 "safetensors: Llama, Qwen2, Qwen3, Mistral, Gemma 1, 2 and 3, Phi-3/Phi-4, Granite 3 and 4 (attention "
                 "only), SmolLM3, OLMo 2 and 3, Ernie 4.5, GLM-4, Seed-OSS, Exaone 4, GPT-2; mixtures of experts: "
                 "Qwen3-MoE, Qwen2-MoE, OLMoE, Mixtral, GraniteMoE, gpt-oss, GLM-4.5, DeepSeek-V2/V3, Ernie 4.5's; "
                 "docs/huggingface.md)");
  app.add_flag("--list-models", list_models, "list the built-in models and exit");
  app.add_option("-o,--output", o.output, "plan file to write");
  app.add_option("--batch", batch,
                 "sequences per step, or auto: the batch of the best predicted throughput that fits --device-mem "
                 "and --host-mem (built-in models; ONNX: sizes the first dynamic input dimension; static ones are the model's)")
      ->capture_default_str();
  app.add_option("--seq", o.seq, "tokens per sequence (default: the model's context; ONNX: sizes the second "
                 "dynamic input dimension)")->check(mt::positiveInteger());
}

// Overrides of a built-in model's shape, and which ONNX initializers train.
void addOverrideFlags(CLI::App& app, Flags& f) {
  mt::CompileOptions& o = f.o;
  bool &tied = f.tied, &untied = f.untied;
  std::string &frozen = f.frozen, &trainable = f.trainable;
  app.add_option("--layers", o.overrides.layers, "override: number of layers")->check(mt::positiveInteger());
  app.add_option("--width", o.overrides.width, "override: model width")->check(mt::positiveInteger());
  app.add_option("--heads", o.overrides.heads, "override: attention heads")->check(mt::positiveInteger());
  app.add_option("--kv-heads", o.overrides.kv_heads, "override: key/value heads (llama)")->check(mt::positiveInteger());
  app.add_option("--ffn", o.overrides.ffn, "override: MLP hidden width")->check(mt::positiveInteger());
  app.add_option("--vocab", o.overrides.vocab, "override: vocabulary size")->check(mt::positiveInteger());
  app.add_option("--experts", o.overrides.experts, "override: experts per mixture-of-experts layer")
      ->check(mt::positiveInteger());
  app.add_option("--experts-per-token", o.overrides.experts_per_token, "override: experts chosen per token (top k)")
      ->check(mt::positiveInteger());
  app.add_option("--expert-ffn", o.overrides.expert_ffn, "override: each expert's hidden width")
      ->check(mt::positiveInteger());
  app.add_option("--context", o.overrides.context, "override: maximum sequence length")->check(mt::positiveInteger());
  app.add_option("--router-aux-loss", o.router_aux_loss,
                 "a mixture of experts: train on the router's load-balancing loss times this coefficient "
                 "(Hugging Face's router_aux_loss_coef; typical 0.001-0.02), added to the language-model loss; 0: "
                 "logged only. Default: the folder's config (its coefficient where output_router_logits is "
                 "true), else 0")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--tied", tied, "override: tie the output projection to the embedding");
  app.add_flag("--untied", untied, "override: separate output projection");
  app.add_option("--frozen", frozen,
                 "parameters whose names this regular expression finds are never trained: no gradient, no AdamW "
                 "moments (4 host bytes per weight, not 16; 2 for a Hugging Face folder's BF16 tensor where the "
                 "weights stream as bf16: its bf16 copy alone, see --frozen-fp32), the backward stopped below the "
                 "first layer that trains; still read from the weights and written by --export, --export-hf and "
                 "checkpoints. Names: the plan's (mtdump), or "
                 "a Hugging Face folder's tensor names (e.g. 'embed_tokens|layers\\.[0-9]\\.'); ONNX: "
                 "initializers, kept as constants of the plan");
  app.add_option("--trainable", trainable,
                 "only parameters whose names this regular expression finds train, the rest frozen as with "
                 "--frozen (which wins where both match; e.g. 'self_attn' trains a folder's attention alone, 'attn\\.' a "
                 "preset's). ONNX: an initializer holding Inf or NaN (a folded mask) stays a constant either way. With --lora: "
                 "what trains beside the adapters (PEFT's modules_to_save)");
  app.add_flag("--frozen-fp32", o.frozen_fp32,
               "keep every frozen weight's fp32 master (4 host bytes), also a folder's BF16 tensor's, which a plan "
               "streaming bf16 otherwise holds as its bf16 copy alone (2 bytes, no value rounded): for weights other "
               "than the folder's (another run's --export) given to mtrun --weights, --resume or --reference-weights");
  CLI::Option* lora =
      app.add_option("--lora", o.lora_rank,
                     "train low-rank adapters of this rank (LoRA, PEFT's r; typically 8 to 64) beside the weights "
                     "--lora-targets finds, the rest frozen but what --trainable finds: each x W^T becomes "
                     "x W^T + alpha/r (x A^T) B^T (--lora-rslora: alpha/sqrt(r)), A uniform in +-1/sqrt(in), B zeros, named as PEFT names them "
                     "(q.lora_A.weight); built-in models, Hugging Face folders and mt IR (docs/fine-tuning.md)")
          ->check(CLI::Range(1, 65536));
  app.add_option("--lora-alpha", o.lora_alpha, "with --lora: the update's scale is alpha / r, or alpha / sqrt(r) with --lora-rslora (PEFT's lora_alpha)")
      ->needs(lora)
      ->check(CLI::Range(1e-6, 1e6))
      ->capture_default_str();
  app.add_flag("--lora-rslora", o.lora_rslora,
               "with --lora: rank-stabilised LoRA, the scale alpha / sqrt(r) instead of alpha / r (PEFT's use_rslora)")
      ->needs(lora);
  app.add_option("--lora-dropout", o.lora_dropout,
                 "with --lora: drop each element of an adapter's input with this probability before A, the rest "
                 "scaled by 1/(1-p) (PEFT's lora_dropout, e.g. 0.05); a mask per adapted product, redrawn each step, "
                 "none in validation")
      ->needs(lora)
      ->check(CLI::Range(0.0, 0.95))
      ->capture_default_str();
  app.add_flag("--lora-dora", o.lora_dora,
               "with --lora: weight-decomposed LoRA (DoRA, PEFT's use_dora): a trained magnitude m per output row "
               "beside A and B, starting at W's row norms; the product becomes x W^T + (g - 1) x' W^T + g s (x' A^T) "
               "B^T with g = m / ||W + s B A|| per output row and x' the dropped x (without --lora-dropout: "
               "g (x W^T + s (x A^T) B^T)), the norm a constant to the backward as PEFT detaches it. Costs each "
               "adapted weight's B A and norm every step (with --lora-dropout, a second x' W^T)")
      ->needs(lora);
  app.add_option("--lora-targets", f.lora_targets,
                 "with --lora: the weights to adapt, a regular expression searched as --frozen's; what it finds "
                 "that is not a 2-D weight (a norm, a bias) is left (the default: attention's query and value "
                 "projections, PEFT's default for Llama-family models; 'attn\\.|mlp\\.' adapts every "
                 "projection of the layers, and a mixture folder's router, whose name holds mlp.). 'all-linear' "
                 "(PEFT's shorthand) adapts the layers' attention and MLP projections (Qwen2-MoE's shared expert's "
                 "and its gate too, and GraniteMoE's router, an nn.Linear there), no other router or stack of experts. A reward model's score head trains beside them. With --lora-experts, "
                 "give it to adapt linear layers beside the experts")
      ->needs(lora)
      ->capture_default_str();
  app.add_option("--lora-experts", f.lora_experts,
                 "with --lora: the stacks of experts to adapt, a regular expression searched as --frozen's "
                 "('moe\\.' for a built-in mixture's, 'experts\\.' for a folder's): each expert its own rank-r A "
                 "and B, its routed rows x W_e^T + s (x A_e^T) B_e^T (s as --lora-alpha and --lora-rslora say), as "
                 "PEFT's target_parameters on gpt-oss and its per-expert target_modules on Qwen3-MoE and Mixtral; without "
                 "--lora-targets the stacks alone; --lora-dropout puts each product's routed rows through a mask of "
                 "their own, a token's rows for two experts dropped apart (not on gpt-oss, whose PEFT form has no "
                 "dropout); no --lora-dora; --export-hf merges them into each expert's weight")
      ->needs(lora);
  app.add_option("--lora-rank-pattern", f.lora_rank_pattern,
                 "with --lora: REGEX=R, the adapted weights the expression finds (searched as --lora-targets') get "
                 "rank R instead of --lora's (PEFT's rank_pattern); repeatable, the first that finds a weight "
                 "counts; each must decide one weight's rank")
      ->needs(lora)
      ->allow_extra_args(false)
      ->take_all();
  app.add_option("--lora-alpha-pattern", f.lora_alpha_pattern,
                 "with --lora: REGEX=ALPHA, as --lora-rank-pattern, their alpha instead of --lora-alpha's (PEFT's "
                 "alpha_pattern); --export-peft writes both patterns, --export-hf merges each weight at its own scale")
      ->needs(lora)
      ->allow_extra_args(false)
      ->take_all();
  app.add_option("--lora-from", o.lora_from,
                 "go on from a PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors, as PEFT's "
                 "save_pretrained or mtrun --export-peft writes it) on the Hugging Face folder it was trained from: "
                 "its config sets --lora, --lora-alpha, --lora-rslora, --lora-dropout, --lora-dora, the targets (its "
                 "target_modules, exclude_modules and layers_to_transform; target_parameters: the stacks of experts, "
                 "as --lora-experts, gpt-oss's and transformers 5's fused Qwen3-MoE and Mixtral ones, and those two's "
                 "routers; Qwen3-MoE's and Mixtral's also when target_modules find every expert's layer), the rank "
                 "and alpha patterns and "
                 "--trainable (its modules_to_save, trained whole), its tensors start them; with --forward-only the "
                 "adapters are merged into the weights (for mtgen); a reward model's (task_type SEQ_CLS, its score "
                 "head saved) with --objective reward; trained biases and other PEFT features it does not implement "
                 "are refused by name (docs/fine-tuning.md)");
}

// The preference loss's shape (each needs --objective, `objective`: dpo or kto, as each says).
void addPreferenceFlags(CLI::App& app, mt::LossSpec& loss, CLI::Option* objective) {
  app.add_option("--dpo-beta,--beta", loss.dpo_beta,
                 "with --objective dpo or kto: beta, how far training may move the model from its reference (TRL's "
                 "default 0.1; larger keeps it closer)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->needs(objective);
  mt::choiceOf(app, "--dpo-loss", loss.dpo_loss,
               "with --objective dpo: the preference loss, as TRL's loss_type, of c and r, the chosen and rejected "
               "replies' log-probability gains over the reference model's, and z = beta (c - r): sigmoid (-log "
               "sigmoid(z), DPO), hinge (max(0, 1 - z), SLiC), robust (robust DPO, unbiased under "
               "--dpo-label-smoothing's noise), ipo ((z / beta - 1 / (2 beta))^2, IPO, of each reply's mean "
               "log-probability per token), exo_pair (EXO), sppo_hard (SPPO, hard probabilities), nca_pair (NCA), "
               "apo_zero or apo_down (APO: the chosen replies better, or worse, than the model's own), discopop "
               "(DiscoPOP, --discopop-tau), aot or aot_pair (AOT: sorted over the batch's pairs); or, with no "
               "reference model, simpo (SimPO, as TRL's CPOTrainer with "
               "cpo_alpha 0: -log sigmoid(z - gamma) of each reply's mean log-probability per token; its beta is "
               "typically 2 to 2.5) or orpo (ORPO, as TRL's ORPOTrainer: the chosen replies' NLL per token plus "
               "-beta log sigmoid of the log odds ratio of each reply's mean probability per token); docs/inputs.md "
               "has each formula",
               std::map<std::string, mt::DpoLossKind>{{"sigmoid", mt::DpoLossKind::kSigmoid},
                                                      {"hinge", mt::DpoLossKind::kHinge},
                                                      {"robust", mt::DpoLossKind::kRobust},
                                                      {"ipo", mt::DpoLossKind::kIpo},
                                                      {"simpo", mt::DpoLossKind::kSimpo},
                                                      {"orpo", mt::DpoLossKind::kOrpo},
                                                      {"exo_pair", mt::DpoLossKind::kExoPair},
                                                      {"sppo_hard", mt::DpoLossKind::kSppoHard},
                                                      {"nca_pair", mt::DpoLossKind::kNcaPair},
                                                      {"apo_zero", mt::DpoLossKind::kApoZero},
                                                      {"apo_down", mt::DpoLossKind::kApoDown},
                                                      {"discopop", mt::DpoLossKind::kDiscopop},
                                                      {"aot", mt::DpoLossKind::kAot},
                                                      {"aot_pair", mt::DpoLossKind::kAotPair}})
      ->default_str("sigmoid")
      ->needs(objective);
  app.add_option("--dpo-label-smoothing", loss.dpo_label_smoothing,
                 "with --objective dpo: the share of pairs taken to be labelled the wrong way round, in [0, 0.5) "
                 "(TRL's label_smoothing: conservative DPO with sigmoid, robust DPO with robust; simpo, exo_pair, aot "
                 "and aot_pair take it too (exo_pair: 1e-3 where 0, as TRL); the other losses have none)")
      ->check(CLI::Range(0.0, 0.4999))
      ->capture_default_str()
      ->needs(objective);
  app.add_option("--simpo-gamma", loss.simpo_gamma,
                 "with --dpo-loss simpo: the target reward margin gamma the chosen reply's reward should beat the "
                 "rejected one's by (TRL's simpo_gamma; default 0.5)")
      ->check(CLI::Range(-1e6, 1e6))
      ->needs(objective);
  app.add_option("--discopop-tau", loss.discopop_tau,
                 "with --dpo-loss discopop: the temperature of its mix of the logistic and exponential losses (TRL's "
                 "discopop_tau; default 0.05)")
      ->check(CLI::Range(1e-6, 1e6))
      ->needs(objective);
  app.add_option("--rpo-alpha", loss.rpo_alpha,
                 "with --objective dpo: add this weight times the chosen replies' negative log-likelihood per token "
                 "to the loss (TRL's rpo_alpha; with --dpo-loss simpo, CPOTrainer's cpo_alpha; with --dpo-loss orpo "
                 "the weight of ORPO's own NLL term, default 1)")
      ->check(CLI::Range(0.0, 1e6))
      ->needs(objective);
  app.add_option("--desirable-weight", loss.desirable_weight,
                 "with --objective kto: the weight of a desirable example's loss (TRL's desirable_weight; with more "
                 "of one kind than the other, weigh the rarer up: TRL suggests desirable weight times their count "
                 "within 1 to 4/3 of undesirable weight times theirs)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str()
      ->needs(objective);
  app.add_option("--undesirable-weight", loss.undesirable_weight,
                 "with --objective kto: the weight of an undesirable example's loss (TRL's undesirable_weight)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str()
      ->needs(objective);
  app.add_option("--center-rewards-coefficient", loss.center_rewards,
                 "with --objective reward: add this times the mean of each pair's summed rewards squared, which "
                 "keeps the rewards centred on 0 (TRL's center_rewards_coefficient; 0: none)")
      ->check(CLI::Range(0.0, 1e6))
      ->needs(objective);
}

// What is written besides the plan, and the kind of plan.
void addOutputFlags(CLI::App& app, Flags& f) {
  mt::CompileOptions& o = f.o;
  std::map<std::string, std::optional<mt::Stage>> stages;
  for (size_t i = 0; i < mt::kStageCount; ++i) stages[mt::kStageNames[i]] = static_cast<mt::Stage>(i);
  mt::choiceOf(app, "--emit", o.emit, "print the IR after this stage and stop", stages);
  app.add_option("--weights", o.weights, "initial weights file (default: beside the plan)");
  app.add_flag("--no-weights", o.no_weights,
               "do not write initial weights; a Hugging Face folder of config.json alone is then read from its config "
               "(a plan to size and predict before downloading the weights)");
  CLI::Option* forward_only = app.add_flag("--forward-only", o.forward_only,
               "a forward-only plan: tokens in, logits out, no training (for mtgen; an ONNX model imported as an "
               "evaluation)");
  for (const char* what_trains : {"--frozen", "--trainable", "--lora"}) app.get_option(what_trains)->excludes(forward_only);
  // The adapter's config says what these would; its tensors go into the initial weights.
  for (const char* said : {"--lora", "--lora-alpha", "--lora-rslora", "--lora-dropout", "--lora-dora", "--lora-targets",
                           "--lora-experts", "--lora-rank-pattern", "--lora-alpha-pattern", "--trainable", "--frozen",
                           "--no-weights"})
    app.get_option("--lora-from")->excludes(app.get_option(said));
  app.add_flag("--kv-cache", o.kv_cache,
               "with --forward-only: a decode step for mtgen: one new token per sequence attending over a "
               "key/value cache of --seq positions (built-in models and Hugging Face folders)")
      ->needs(forward_only);
  app.add_flag("--packed-examples", o.packed_examples,
               "a training plan for mtrun --rows packed-examples: several whole instruction examples per row, each "
               "attending only to itself, its positions from 0 (the plan's input \"positions\"; built-in models and "
               "Hugging Face folders)")
      ->excludes(forward_only);
  CLI::Option* objective =
      mt::choiceOf(app, "--objective", o.loss.objective,
                   "what the loss trains: next-token (the cross-entropy of each target) or dpo (direct preference "
                   "optimisation: the batch's rows are (chosen, rejected) pairs from mttok --preferences, the loss "
                   "-log sigmoid(beta * ((chosen - its reference) - (rejected - its reference))) over each reply's "
                   "summed log-probability, the reference the same model before training; an even --batch, and --batch "
                   "auto sizes even ones) or kto (KTO, as TRL's KTOTrainer: each example one completion labelled "
                   "desirable or undesirable, from mttok --unpaired, in rows beside a KL row that estimates how far "
                   "the model has moved; an even --batch too) or reward (a reward model, as TRL's RewardTrainer: a "
                   "score head of one output in place of the LM head, each row's reward its score at its last token, "
                   "the loss -log sigmoid(chosen's reward - rejected's) over the pairs of mttok --preferences; an even "
                   "--batch; a ...ForSequenceClassification folder brings its own head, and needs this objective)",
                   std::map<std::string, mt::LossObjective>{{"next-token", mt::LossObjective::kNextToken},
                                                            {"dpo", mt::LossObjective::kDpo},
                                                            {"kto", mt::LossObjective::kKto},
                                                            {"reward", mt::LossObjective::kReward}})
          ->default_str("next-token")
          ->excludes(forward_only);
  addPreferenceFlags(app, o.loss, objective);
  app.add_option("--seed", o.seed, "seed of the parameter initializers")->capture_default_str();
}

// The memory budgets and how the plan fits them.
void addScheduleFlags(CLI::App& app, Flags& f) {
  mt::CompileOptions& o = f.o;
  std::string &device_mem = f.device_mem, &host_mem = f.host_mem;
  app.add_option("--device-mem", device_mem, "device memory budget, e.g. 80GiB (fail if exceeded)");
  app.add_option("--host-mem", host_mem, "host memory of the training machine, e.g. 1.5TiB (fail if exceeded)");
  app.add_option("--ranks", o.ranks,
                 "a plan for a data-parallel job of this many ranks (mpirun -np N mtrun), priced in the summary: "
                 "host bytes per rank and per host, bytes exchanged per step, the job's step and what bounds it "
                 "(the devices, a host's memory or stream, the network; with NVLink also device collectives'); "
                 "above 1, a streamed plan with the deferred update lands its gradients in a buffer so that each "
                 "rank keeps only its slice of them (the plan runs on any number of ranks, or in one process)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--ranks-per-host", o.ranks_per_host,
                 "with --ranks: ranks on each host (they share one copy of the master weights; default: all on one)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  mt::choiceOf(app, "--schedule", o.schedule,
                 "resident (all weights on the device), streamed (weights per block), streamed-recompute "
                 "(and activations recomputed per block), or auto: the first that fits --device-mem",
               std::map<std::string, std::optional<mt::Schedule>>{{"auto", std::nullopt},
                                                                  {"resident", mt::Schedule::kResident},
                                                                  {"streamed", mt::Schedule::kStreamed},
                                                                  {"streamed-recompute", mt::Schedule::kStreamedRecompute}})
      ->default_str("auto");
  mt::choiceOf(app, "--update", o.update,
                 "when AdamW runs: deferred (one step late, overlapped with the next forward; exact global-norm "
                 "clipping; 16 host bytes/param), on-arrival (as each gradient lands, overlapped with the backward; "
                 "no global clipping; ~12 host bytes/param; streamed schedules), or auto: deferred unless only "
                 "on-arrival fits --host-mem",
               std::map<std::string, std::optional<mt::UpdateKind>>{{"auto", std::nullopt},
                                                                    {"deferred", mt::UpdateKind::kDeferred},
                                                                    {"on-arrival", mt::UpdateKind::kOnArrival}})
      ->default_str("auto");
  app.add_option("--vocab-chunks", o.vocab_chunks,
                 "the LM head and its loss, and the token embedding, over this many vocabulary chunks, each "
                 "streamed in as its own block (neither the tables nor the logits on the device whole; a head "
                 "tied to the embedding takes --embedding host); 0: as few as --device-mem needs (none when the "
                 "head fits), 1: never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--expert-groups", o.expert_groups,
                 "each stacked expert weight of a mixture of experts in this many groups of consecutive experts, "
                 "each copied to the device a group ahead of its products (the device holds a few experts of a "
                 "layer at a time; the same result bit for bit); 0: as few as --device-mem needs (none when whole "
                 "layers fit), 1: never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--token-tiles", o.token_tiles,
                 "each layer block's token-wise work (norms, projections, the MLP) in this many tiles along the "
                 "tokens, each tile recomputed just before its backward (attention still over the whole "
                 "sequence): long contexts whose block does not fit otherwise; a tile is a multiple of 32 tokens "
                 "inside one sequence or whole sequences; 0: as few as --device-mem needs (none when the plan "
                 "fits untiled), 1: never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  mt::choiceOf(app, "--embedding", o.embedding,
                 "where the tokens are looked up in their embedding table and its gradient is scatter-added: "
                 "device, host (the link carries the tokens' rows, not the table; the device never holds it for "
                 "the lookup), or auto: host when the vocabulary is split and the table is the tied LM head's",
               std::map<std::string, mt::EmbeddingPlace>{{"auto", mt::EmbeddingPlace::kAuto},
                                                          {"device", mt::EmbeddingPlace::kDevice},
                                                          {"host", mt::EmbeddingPlace::kHost}})
      ->default_str("auto");
}

// What the device computes in, what crosses the link, and the cost model's hardware.
void addPrecisionFlags(CLI::App& app, Flags& f) {
  mt::CompileOptions& o = f.o;
  mt::choiceOf(app, "--stream-dtype", o.stream_dtype,
                 "what the weights cross the link as: f32 (the fp32 master weights: full precision) or bf16 "
                 "(the master's bf16 rounding, widened on the device: half the link bytes, the forward and backward "
                 "see bf16-rounded weights; the master, moments and gradients stay fp32, the master held exactly as "
                 "that bf16 copy + a 16-bit residual: no host bytes added); a bf16 plan (--precision bf16) streams "
                 "bf16",
               std::map<std::string, mt::StreamDtype>{{"f32", mt::StreamDtype::kF32}, {"bf16", mt::StreamDtype::kBf16}})
      ->default_str("f32");
  mt::choiceOf(app, "--precision", o.precision,
                 "what the device computes in: fp32 (everything, TF32 products only with mtrun --tf32) or bf16 "
                 "(weights and activations bf16 on the device, products, attention and norms accumulating in f32; "
                 "norms' statistics, softmax, the loss and the weights' gradients f32; the host's master weights and "
                 "AdamW moments fp32 as always; the weights stream as bf16)",
               std::map<std::string, mt::ComputePrecision>{
                   {mt::precisionName(mt::ComputePrecision::kFp32), mt::ComputePrecision::kFp32},
                   {mt::precisionName(mt::ComputePrecision::kBf16), mt::ComputePrecision::kBf16}})
      ->default_str("bf16 for the GPU profiles (--hw h100-pcie5, h200, gh200), fp32 for cpu");
  mt::choiceOf(app, "--offload-activations", o.offload,
                 "keep the activations the backward reads (block inputs) on the host in between, copied out "
                 "after the forward and back a block ahead of the backward (long contexts): auto (when nothing "
                 "else fits --device-mem), on (streamed schedules), off",
               std::map<std::string, mt::Offload>{{"auto", mt::Offload::kAuto}, {"on", mt::Offload::kOn},
                                                   {"off", mt::Offload::kOff}})
      ->default_str("auto");
  mt::choiceOf(app, "--keep-frozen", o.keep_frozen,
                 "a training plan's frozen weights (a LoRA's base, --frozen): auto (kept on the device between "
                 "steps where --device-mem has room: they cross the link in the first step only; a streamed "
                 "plan keeps as many as fit, fewer where blocks keeping their activations are predicted "
                 "faster), off (copied in every step, as the trained ones are)",
               std::map<std::string, mt::KeepFrozen>{{"auto", mt::KeepFrozen::kAuto}, {"off", mt::KeepFrozen::kOff}})
      ->default_str("auto");
  app.add_option("--hw", o.hardware,
                 "hardware profile of the cost model: cpu, h100-pcie5, h200, gh200, and/or explicit rates "
                 "overriding its numbers (without a name, h100-pcie5's): tflops=, attention-tflops=, bf16-tflops=, "
                 "bf16-attention-tflops=, bf16-ours-attention-tflops=, bf16-ours-attention-grad-tflops= (TFLOP/s), memory-gbps=, h2d-gbps=, d2h-gbps=, link-gbps= (both), host-gbps=, "
                 "net-gbps= (between hosts), nvlink-gbps= (between a host's GPUs) (GB/s); e.g. "
                 "h100-pcie5,link-gbps=25 or tflops=312,link-gbps=25,host-gbps=60")
      ->capture_default_str();
}

// --batch: a positive number or auto (0); exit code 2 for anything else.
std::optional<int> parseBatch(Flags& f) {
  mt::CompileOptions& o = f.o;
  const std::string& batch = f.batch;
  if (batch == "auto") {
    o.batch = 0;
  } else {
    try {
      size_t used = 0;
      o.batch = std::stoll(batch, &used);
      if (used != batch.size() || o.batch <= 0) throw std::invalid_argument(batch);
    } catch (const std::exception&) {
      std::fprintf(stderr, "mtc: error: --batch '%s' is not a positive number or auto\n", batch.c_str());
      return 2;
    }
  }
  return std::nullopt;
}

int listModels() {
  for (const auto& p : mt::modelPresets())
    std::printf("%-15s %9s params  %s\n", p.name.c_str(), mt::formatParamCount(p.config.numParams()).c_str(),
                p.description.c_str());
  return 0;
}

// The preference loss's flags: exit code 2 for one that means nothing to the objective or the loss
// given (refused, not ignored).
std::optional<int> checkPreferenceFlags(const CLI::App& app, const mt::LossSpec& loss) {
  if (app.count("--dpo-beta") && loss.objective != mt::LossObjective::kDpo && loss.objective != mt::LossObjective::kKto) {
    std::fprintf(stderr, "mtc: error: --beta (--dpo-beta) shapes a preference loss: give it with --objective dpo or "
                         "kto (or drop it)\n");
    return 2;
  }
  for (const char* flag : {"--dpo-loss", "--dpo-label-smoothing", "--simpo-gamma", "--discopop-tau", "--rpo-alpha"})
    if (app.count(flag) && loss.objective != mt::LossObjective::kDpo) {
      std::fprintf(stderr, "mtc: error: %s shapes a preference loss: give it with --objective dpo (or drop it)\n", flag);
      return 2;
    }
  for (const char* flag : {"--desirable-weight", "--undesirable-weight"})
    if (app.count(flag) && loss.objective != mt::LossObjective::kKto) {
      std::fprintf(stderr, "mtc: error: %s weighs KTO's examples: give it with --objective kto (or drop it)\n", flag);
      return 2;
    }
  if (app.count("--vocab-chunks") && app.get_option("--vocab-chunks")->as<int64_t>() > 1 &&
      loss.objective == mt::LossObjective::kReward) {
    std::fprintf(stderr, "mtc: error: --vocab-chunks splits an LM head by its vocabulary; a reward model's head has one "
                         "output (drop the flag)\n");
    return 2;
  }
  if (app.count("--center-rewards-coefficient") && loss.objective != mt::LossObjective::kReward) {
    std::fprintf(stderr, "mtc: error: --center-rewards-coefficient shapes a reward model's loss: give it with "
                         "--objective reward (or drop it)\n");
    return 2;
  }
  const mt::DpoLossKind kind = loss.dpo_loss;
  if (loss.dpo_label_smoothing != 0.0 && !mt::dpoSmooths(kind)) {
    std::fprintf(stderr, "mtc: error: --dpo-label-smoothing: the %s loss has no label smoothing (sigmoid, robust, "
                         "simpo, exo_pair, aot and aot_pair have; or drop it)\n",
                 app.get_option("--dpo-loss")->as<std::string>().c_str());
    return 2;
  }
  if (loss.simpo_gamma && kind != mt::DpoLossKind::kSimpo) {
    std::fprintf(stderr, "mtc: error: --simpo-gamma is SimPO's target margin: give it with --dpo-loss simpo (or drop "
                         "it)\n");
    return 2;
  }
  if (loss.discopop_tau && kind != mt::DpoLossKind::kDiscopop) {
    std::fprintf(stderr, "mtc: error: --discopop-tau is DiscoPOP's temperature: give it with --dpo-loss discopop (or "
                         "drop it)\n");
    return 2;
  }
  return std::nullopt;
}

// Flag `flag`'s regular expression `text`, or null after saying why it is none.
std::optional<std::regex> flagRegex(const char* flag, const std::string& text) {
  try {
    return std::regex(text, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    std::fprintf(stderr, "mtc: error: %s '%s' is not a regular expression: %s\n", flag, text.c_str(), e.what());
    return std::nullopt;
  }
}

// --lora-rank-pattern and --lora-alpha-pattern, REGEX=VALUE each (split at the last '='), into the
// options: exit code 2 naming what is wrong.
std::optional<int> parseLoraPatterns(Flags& f) {
  for (auto [flag, given, parsed] : {std::tuple{"--lora-rank-pattern", &f.lora_rank_pattern, &f.o.lora_rank_pattern},
                                     {"--lora-alpha-pattern", &f.lora_alpha_pattern, &f.o.lora_alpha_pattern}}) {
    const bool rank = parsed == &f.o.lora_rank_pattern;
    for (const std::string& text : *given) {
      const size_t eq = text.rfind('=');
      const std::string pattern = eq == std::string::npos ? "" : text.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : text.substr(eq + 1);
      char* end = nullptr;  // a plain decimal number: no space, sign, hexadecimal, inf or nan
      const bool plain = !value.empty() && value.find_first_not_of("0123456789.eE-") == std::string::npos &&
                         std::isdigit(static_cast<unsigned char>(value[0]));
      const double number = plain ? std::strtod(value.c_str(), &end) : 0.0;
      const bool whole = end && *end == '\0' && number == std::floor(number);
      const bool ok = !pattern.empty() && end && *end == '\0' &&
                      (rank ? whole && number >= 1 && number <= 65536 : number >= 1e-6 && number <= 1e6);
      if (!ok) {
        std::fprintf(stderr, "mtc: error: %s '%s': give REGEX=%s, %s (e.g. 'mlp\\.=%s')\n", flag, text.c_str(),
                     rank ? "R" : "ALPHA", rank ? "R an integer in [1, 65536]" : "ALPHA a number in [1e-6, 1e6]",
                     rank ? "16" : "32");
        return 2;
      }
      std::optional<std::regex> regex = flagRegex(flag, pattern);
      if (!regex) return 2;
      parsed->push_back({pattern, std::move(*regex), number});
    }
  }
  return std::nullopt;
}

// The flags that depend on each other or need parsing: exit code 2, naming the problem.
std::optional<int> checkFlags(const CLI::App& app, Flags& f) {
  mt::CompileOptions& o = f.o;
  const bool tied = f.tied, untied = f.untied;
  const std::string &frozen = f.frozen, &trainable = f.trainable;
  const std::string &device_mem = f.device_mem, &host_mem = f.host_mem;
  if (o.model.empty()) {
    std::fprintf(stderr, "mtc: error: no model given (a built-in name, a .mlir or an .onnx file; see --help)\n");
    return 2;
  }
  if (tied && untied) {
    std::fprintf(stderr, "mtc: error: --tied and --untied contradict each other\n");
    return 2;
  }
  if (tied || untied) o.tied = tied;
  // --lora-experts alone adapts the stacks alone, as PEFT's target_parameters without target_modules.
  if (app.count("--lora-experts") && o.lora_dora) {
    std::fprintf(stderr, "mtc: error: --lora-experts takes no --lora-dora (no DoRA on the stacks of experts)\n");
    return 2;
  }
  if (app.count("--lora-experts") && !app.count("--lora-targets")) {
    o.lora_targets.reset();
  } else {
    // PEFT's shorthand, in any case as PEFT reads it.
    const auto same_letter = [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; };
    const bool all_linear = std::ranges::equal(f.lora_targets, std::string_view("all-linear"), same_letter);
    o.lora_targets = flagRegex("--lora-targets", all_linear ? std::string(mt::kAllLinearLoraTargets) : f.lora_targets);
    if (!o.lora_targets) return 2;
  }
  for (auto [flag, text, pattern] : {std::tuple{"--frozen", &frozen, &o.frozen}, {"--trainable", &trainable, &o.trainable},
                                     {"--lora-experts", &f.lora_experts, &o.lora_experts}}) {
    if (text->empty()) continue;
    *pattern = flagRegex(flag, *text);
    if (!*pattern) return 2;
  }
  if (const auto code = checkPreferenceFlags(app, o.loss)) return code;
  if (const auto code = parseLoraPatterns(f)) return code;
  if (!app.count("--ranks-per-host")) o.ranks_per_host = o.ranks;  // all on one host
  if (o.ranks % o.ranks_per_host != 0) {
    std::fprintf(stderr, "mtc: error: --ranks %lld is not a whole number of hosts of --ranks-per-host %lld (every host "
                         "runs as many ranks, so that they share one copy of the weights)\n",
                 (long long)o.ranks, (long long)o.ranks_per_host);
    return 2;
  }
  // bf16 is a named GPU profile's default precision (measured on an H200: docs/perf.md), fp32
  // the CPU's (its backend emulates bf16 storage, no faster than fp32) and rates-only specs'.
  if (!app.count("--precision")) {
    const mt::HardwareProfile* named = mt::findHardwareProfile(o.hardware.substr(0, o.hardware.find(',')));
    if (named && named->device_budget_bytes > 0) {
      o.precision = mt::ComputePrecision::kBf16;
      o.precision_by_profile = true;
    }
  }
  if (o.precision == mt::ComputePrecision::kBf16 && app.count("--stream-dtype") && o.stream_dtype == mt::StreamDtype::kF32) {
    std::fprintf(stderr, "mtc: error: %s streams the weights as bf16: drop --stream-dtype f32 (or compile with "
                         "--precision fp32)\n",
                 o.precision_by_profile ? "a bf16 plan (the GPU profiles' default precision)" : "--precision bf16");
    return 2;
  }
  for (auto [flag, text, bytes] : {std::tuple{"--device-mem", &device_mem, &o.device_mem},
                                    std::tuple{"--host-mem", &host_mem, &o.host_mem}}) {
    if (text->empty()) continue;
    *bytes = mt::parseByteSize(*text);
    if (*bytes <= 0) {
      std::fprintf(stderr, "mtc: error: %s '%s' is not a size like 80GiB or 512MiB\n", flag, text->c_str());
      return 2;
    }
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  llvm::install_fatal_error_handler(exitOnLlvmError);
  llvm::install_bad_alloc_error_handler(exitOnLlvmError);
  Flags f;
  CLI::App app{description()};
  addModelFlags(app, f);
  addOverrideFlags(app, f);
  addOutputFlags(app, f);
  addScheduleFlags(app, f);
  addPrecisionFlags(app, f);
  if (const auto code = mt::parseFlags(app, argc, argv)) return *code;
  if (const auto code = parseBatch(f)) return *code;
  if (f.list_models) return listModels();
  if (const auto code = checkFlags(app, f)) return *code;
  return mt::runTool("mtc", [&] { return mt::compile(f.o); });
}
