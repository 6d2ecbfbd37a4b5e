// mtrun's flags, shared by mtrun and the fuzz harness of its config files (tests/fuzz).
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <map>
#include <string>

#include "runtime/training/trainer.h"
#include "tools/tool_main.h"

namespace mt {

// Adds mtrun's flags to `app`, each writing its field of `c`.
// --rows' choices, by the names the layouts have (runtime/data/token_data.h).
inline std::map<std::string, RowLayout> rowLayoutNames() {
  std::map<std::string, RowLayout> names;
  for (const RowLayout layout : kRowLayouts) names[rowsName(layout)] = layout;
  return names;
}

inline void addTrainFlags(CLI::App& app, TrainConfig& c) {
  app.add_option("plan", c.plan_path, "plan file written by mtc")->required();
  app.add_option("--data", c.data_path,
                 "token file (make one with mttok); required but with --export-only (and --eval-only, where "
                 "--val-data alone names the file to score)");
  app.add_option("--weights", c.weights_path,
                 "initial weights (safetensors); default: the PLAN.safetensors mtc wrote beside the plan when it was "
                 "written for this plan, else the plan's seeded initializers (an imported model has none: its "
                 "weights are needed)");
  app.add_option("--reference-weights", c.reference_weights,
                 "a preference plan's reference model (mtc --objective dpo or kto; not simpo or orpo, nor a reward model, "
                 "which have none): its "
                 "weights (safetensors of the plan's parameters, as mtc writes beside a plan or --export writes) "
                 "instead of the starting weights; each example's reference log-probability is computed under them "
                 "before the first step (resuming, read back from the checkpoints' folder instead)");
  CLI::Option* steps = app.add_option("--steps", c.steps, "training steps (optimizer updates)")->capture_default_str();
  app.add_option("--epochs", c.epochs,
                 "train for the steps that draw this many times the training tokens (--rows examples: examples, "
                 "drawn at random: a count, not each once; --rows packed-examples: passes, each a shuffle with every "
                 "example once, as many rows as the examples in file order pack into); instead of --steps")
      ->excludes(steps);
  app.add_option("--accumulate", c.accumulate,
                 "micro-batches per optimizer step: the plan runs N times, the gradients summed on the host (4 more "
                 "bytes of host memory per parameter) and their mean applied once, exactly the update of one step "
                 "at N times the plan's batch (the same sequences, fp32 rounding apart); under mpirun with R ranks, "
                 "each rank runs N of the step's N*R micro-batches, as --accumulate N*R in one process")
      ->capture_default_str();
  choiceOf(app, "--rows", c.rows,
           "how each row of a batch is cut from --data: packed (a window of the plan's sequence starting anywhere: "
           "examples run into each other, as packed fine-tuning does), examples (one instruction example per "
           "row from its start, the rest padding the loss ignores; an example longer than the row is cut and "
           "counted at start) or packed-examples (whole examples packed into each row, each seeing only itself, "
           "each pass over them a new shuffle with every example once; needs a plan of mtc --packed-examples) or "
           "pairs (a prompt's chosen and rejected replies in two rows, drawn at random; a plan of mtc --objective "
           "dpo or reward on a token file of mttok --preferences takes it, and only it; a KTO plan, mtc --objective "
           "kto, its labelled examples beside their KL rows, mttok --unpaired); examples and packed-examples need a "
           "token file of mttok --chat; default: packed, packed-examples for a plan of mtc --packed-examples on such "
           "a file, pairs for a plan of mtc --objective dpo, kto or reward",
           rowLayoutNames())
      ->default_str("packed, packed-examples or pairs");
  app.add_option("--seed", c.seed, "seed of the data order and of dropout's masks")->capture_default_str();
  app.add_option("--lr", c.lr,
                 "peak learning rate (default 0.001; for a preference plan, mtc --objective dpo or kto, 1e-6 as TRL's "
                 "DPOConfig and KTOConfig: their losses move the model far at the next token's rates; for a reward "
                 "model, --objective reward, 1e-4 as TRL's RewardConfig)");
  choiceOf(app, "--lr-schedule", c.lr_schedule,
           "the learning rate after the warmup: cosine or linear decay from --lr to --lr x --min-lr-ratio at the "
           "last step, or constant --lr",
           lrScheduleNames())
      ->default_str("cosine");
  app.add_option("--min-lr-ratio", c.min_lr_ratio, "final lr as a fraction of --lr (cosine, linear)")
      ->capture_default_str();
  auto* warmup = app.add_option("--warmup", c.warmup, "linear warmup steps")->capture_default_str();
  app.add_option("--warmup-ratio", c.warmup_ratio,
                 "linear warmup over this fraction of the steps (rounded up; with --epochs, of the steps they make)")
      ->excludes(warmup);
  app.add_option("--weight-decay", c.weight_decay, "AdamW decoupled weight decay (matrices only)")
      ->capture_default_str();
  app.add_option("--lora-plus-ratio", c.lora_plus_ratio,
                 "LoRA+ (Hayou et al. 2024; PEFT's create_loraplus_optimizer, loraplus_lr_ratio): the adapters' B "
                 "and every trained 1-D parameter (DoRA's magnitudes, norms, biases) learn at --lr x this, the rest "
                 "at --lr (16 is the paper's and PEFT's suggestion; give it again with --resume, as --lr); "
                 "--weight-decay still decays the matrices alone, B's at --lr x this (give 0 for PEFT's "
                 "loraplus_weight_decay default)")
      ->capture_default_str();
  app.add_option("--beta1", c.beta1, "AdamW beta1")->capture_default_str();
  app.add_option("--beta2", c.beta2, "AdamW beta2")->capture_default_str();
  app.add_option("--eps", c.eps, "AdamW epsilon")->capture_default_str();
  app.add_option("--grad-clip", c.grad_clip,
                 "global gradient-norm bound, 0 = off [default: 1, off for a plan that updates as "
                 "gradients land, which cannot clip]");
  choiceOf(app, "--backend", c.backend, "where to run: cuda when a GPU runs every kernel of the plan (auto)",
           backendChoiceNames())
      ->default_str("auto");
  app.add_flag("--other-tokenizer", c.other_tokenizer,
               "train on token files made with another tokenizer than the model's own (refused otherwise: their "
               "ids mean other tokens to the model)");
  app.add_flag("--tf32", c.tf32,
               "cuda: matrix products on the tensor cores in TF32 (~7x faster on an H100, relative error ~1e-3) "
               "instead of exact fp32");
  choiceOf(app, "--attention", c.attention,
           "cuda: whose kernels run the causal attention: cudnn (cuDNN's fused flash attention: bf16 plans, "
           "head_dim a multiple of 8 up to 128; refuses a plan it cannot run), ours (this project's kernels, any "
           "plan), or auto: cudnn for every call it takes, ours for the rest, said at start",
           std::map<std::string, AttentionEngine>{{"auto", AttentionEngine::kAuto},
                                                  {"ours", AttentionEngine::kOurs},
                                                  {"cudnn", AttentionEngine::kCudnn}})
      ->default_str("auto");
  app.add_option("--log", c.log_path, "write one JSON object per step to this file");
  app.add_option("--export", c.export_path,
                 "write the trained weights (safetensors) here: at the end, or when SIGINT/SIGTERM/SIGUSR1 stops the run");
  app.add_option("--export-hf", c.export_hf_dir,
                 "write the trained weights as a Hugging Face folder here (config.json + safetensors under Hugging "
                 "Face's names, sharded past 5 GB) for llama-family (Llama, Qwen2/3, Mistral; the mixtures of experts Qwen3-MoE, "
                 "Qwen2-MoE, OLMoE, Mixtral, gpt-oss; from their folders, with their own config, Gemma 1/2/3 (Gemma 1's legacy "
                 "hidden_act \"gelu\" written gelu_pytorch_tanh), Phi-3/4, Granite 3/4, GraniteMoE, SmolLM3, OLMo 2/3, "
                 "Ernie 4.5 and its mixtures, GLM-4, Seed-OSS, Exaone 4, GLM-4.5, DeepSeek-V2/V3) and GPT-2 models; a "
                 "reward model as its ...ForSequenceClassification, pad_token_id the end-of-text token: at the end, or "
                 "when SIGINT/SIGTERM/SIGUSR1 stops the run");
  app.add_option("--export-peft", c.export_peft_dir,
                 "a LoRA plan (mtc --lora): write its adapters, and the modules --trainable trained whole beside them "
                 "(PEFT's modules_to_save), and stacks of experts (mtc --lora-experts): gpt-oss's as its target_parameters, "
                 "Qwen3-MoE's and Mixtral's as each expert's layers in target_modules (transformers 4's; --peft-experts fused: "
                 "transformers 5's fused form), as "
                 "PEFT's adapter folder here (adapter_model.safetensors + "
                 "adapter_config.json, what PeftModel.from_pretrained(base, folder) loads on the model it was "
                 "compiled from, and mtc --lora-from reads; a reward model's as PEFT's sequence classifier, SEQ_CLS, "
                 "its score head saved, for AutoModelForSequenceClassification with num_labels=1): at the end, or "
                 "when SIGINT/SIGTERM/SIGUSR1 stops the run");
  choiceOf(app, "--peft-experts", c.peft_experts,
           "with --export-peft: how Qwen3-MoE's and Mixtral's expert and router adapters go to PEFT: layers "
           "(transformers 4's: each expert's layer and the router an nn.Linear in target_modules; PEFT 0.19 and later "
           "convert it on loading into transformers 5) or fused (transformers 5's: target_parameters "
           "mlp.experts.gate_up_proj, gate's and up's adapters side by side at twice the rank, down_proj, and the "
           "routers' mlp.gate.weight; the form transformers 5 loads as trained where the experts' ranks differ from "
           "r or with --lora-rslora; no dropout, DoRA or adapted dense MLP layers)",
           std::map<std::string, PeftExpertsForm>{{"layers", PeftExpertsForm::kLayers},
                                                  {"fused", PeftExpertsForm::kFused}})
      ->default_str("layers");
  choiceOf(app, "--export-dtype", c.export_dtype,
                          "what --export-hf stores: f32 (the master weights, exact) or bf16 (rounded to nearest even; a "
                          "router's choice bias and Ernie 4.5's router stay f32, as transformers keeps them); "
                          "--export-peft's adapters are f32",
           std::map<std::string, ExportDtype>{{"f32", ExportDtype::kF32}, {"bf16", ExportDtype::kBf16}})
      ->default_str("f32");
  app.add_option("--dump-grads", c.grads_path, "write the first step's gradients (safetensors)");
  app.add_option("--print-every", c.print_every, "print a progress line every N steps")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--rank-timeout",
         [&c](const std::string& value) {
           if (value == "auto") return c.rank_timeout.reset();
           size_t used = 0;
           double seconds = 0.0;
           try {
             seconds = std::stod(value, &used);
           } catch (const std::exception&) {
           }
           if (used != value.size() || !(seconds > 0.0) || !std::isfinite(seconds))
             throw CLI::ValidationError("--rank-timeout", "'" + value + "' is not auto or a positive number of seconds");
           c.rank_timeout = seconds;
         },
         fmt::format("under mpirun: the seconds a rank waits for the others before it ends the job (a rank hung, "
                     "stopped or gone; the wait for rank 0's checkpoint adds its bytes' time at 10 MB/s); auto: {:g} "
                     "until the first step is done, then {:g} + {:g} x the slowest step so far",
                     mt::kRankWaitAtStart, mt::kRankWaitBase, mt::kRankWaitPerStep))
      ->type_name("S|auto")
      ->default_str("auto");
  app.add_flag("--profile", c.profile, "print the time spent in each kernel at the end");
  app.add_option("--trace", c.trace_path,
                 "write the measured timeline of the last step (Chrome/Perfetto JSON; mtdump PLAN --trace T "
                 "--measured THIS lays it beside the prediction)");
  app.add_option("--report", c.report_path,
                 "write a picture of the run at its end: one self-contained HTML page (loss and validation loss, "
                 "learning rate, gradient norm, tokens/s by step; measured against predicted step time; memory; "
                 "the logged numbers embedded as JSON)");
  app.add_option("--val-fraction", c.val_fraction, "hold out this last fraction of the tokens for validation")
      ->capture_default_str();
  app.add_option("--val-data", c.val_data_path,
                 "a token file of held-out tokens to validate on (instead of --val-fraction's share of --data)");
  app.add_option("--val-every", c.val_every, "steps between validation losses (0: at the end only)")
      ->capture_default_str();
  app.add_option("--val-batches", c.val_batches,
                 "at most this many held-out batches per validation (0: all: one pass over the held-out tokens, "
                 "each a target once)")
      ->capture_default_str();
  app.add_flag("--export-only", c.export_only,
               "write --export / --export-hf (--export-dtype) / --export-peft from the --resume checkpoint's weights and stop: no "
               "data, no training");
  app.add_flag("--eval-only", c.eval_only,
               "score the starting weights (--weights, the plan's, or the --resume checkpoint's) on the held-out "
               "tokens (--val-data, --val-fraction of --data, else all of --data) as a validation would, and stop: "
               "no step, nothing written but --log and --scores");
  app.add_option("--scores", c.scores_path,
                 "with --eval-only, of a preference plan (DPO, KTO, a reward model): write each held-out pair's (KTO: "
                 "example's) rewards, log-probabilities, loss and whether the chosen reply wins here, one JSON line "
                 "each in the data's order; a reward model on a token file of examples, not pairs (mttok --chat), "
                 "scores each text alone: its reward");
  app.add_flag("--keep-best", c.keep_best,
               "keep the weights of the lowest validation loss in --checkpoint-dir (best.ckpt.safetensors) and "
               "export those at the end");
  choiceOf(app, "--on-nonfinite", c.skip_nonfinite,
                          "NaN/Inf in the loss or a gradient: stop (name the first offending tensor, exit 1) or "
                          "skip the step; either way the update is not applied",
           std::map<std::string, bool>{{"stop", false}, {"skip", true}})
      ->default_str("stop");
  app.add_flag("--verify-transfers", c.verify_transfers,
               "after every copy to the device, compare a checksum of the bytes the device received (computed "
               "there) with the host's: a corrupted transfer stops the run naming the tensor, its step not "
               "applied (costs a read of each copied byte on both sides)");
  app.add_option("--checkpoint-dir", c.checkpoint_dir,
                 "write checkpoints (parameters, AdamW state, step) here: at the end, every "
                 "--checkpoint-every steps, and on SIGINT/SIGTERM/SIGUSR1");
  app.add_option("--checkpoint-every", c.checkpoint_every, "steps between checkpoints (0: end and signals only)")
      ->capture_default_str();
  app.add_option("--keep", c.keep, "checkpoints to keep, newest first")->capture_default_str();
  app.add_option_function<std::string>(
         "--resume",
         [&c](const std::string& value) {
           c.resume_auto = value == "auto";
           c.resume_dir = c.resume_auto ? "" : value;
         },
         "continue from the newest checkpoint in this directory (bit-identical to an uninterrupted run with "
         "the same flags); auto: from --checkpoint-dir's newest, or from the start with a notice where it has "
         "none yet (a preemptible job restarts with one command)")
      ->type_name("DIR|auto");
}

}  // namespace mt
