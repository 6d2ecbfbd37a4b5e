// The training driver behind mtrun: loads and verifies a plan, sets up the host store and a
// backend, feeds batches, schedules the learning rate, logs, exports weights.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "runtime/backends/backend.h"
#include "runtime/training/backend_choice.h"

#include "runtime/data/token_data.h"
#include "runtime/plan/plan_format.h"
#include "runtime/training/huggingface.h"

namespace mt {

// The learning rate after the warmup (mtrun --lr-schedule, parsed once at the edge): decaying as
// a cosine or linearly to lr * min_lr_ratio at the last step, or constant.
enum class LrSchedule { kCosine, kLinear, kConstant };
inline const std::map<std::string, LrSchedule>& lrScheduleNames() {
  static const std::map<std::string, LrSchedule> names = {
      {"cosine", LrSchedule::kCosine}, {"linear", LrSchedule::kLinear}, {"constant", LrSchedule::kConstant}};
  return names;
}

struct TrainConfig {
  std::string plan_path;
  std::string data_path;
  std::string weights_path;    // initial weights; "" = the plan's initializers (train() resolves the flag)
  std::string reference_weights;  // a preference plan's reference model; "" = the initial weights
  std::string export_path;     // trained weights (safetensors); "" = none
  std::string export_hf_dir;   // trained weights as a Hugging Face folder; "" = none
  std::string export_peft_dir;  // a LoRA plan's adapters as PEFT's adapter folder; "" = none
  ExportDtype export_dtype = ExportDtype::kF32;  // of the Hugging Face folder's weights
  PeftExpertsForm peft_experts = PeftExpertsForm::kLayers;  // --export-peft's form of experts' adapters
  std::string grads_path;      // gradients of the first step (safetensors); "" = none
  std::string log_path;        // JSONL, one object per step; "" = none
  std::string trace_path;      // measured timeline of the last step (Chrome trace JSON); "" = none
  std::string report_path;     // the run's picture (self-contained HTML: run_report.h); "" = none
  BackendChoice backend = BackendChoice::kAuto;
  bool tf32 = false;           // CUDA: matrix products in TF32 instead of exact fp32
  AttentionEngine attention = AttentionEngine::kAuto;  // CUDA: whose kernels run the attention
  int cuda_device = 0;         // CUDA: the GPU this process runs on (a rank's: data_parallel.h's rankDevice)
  bool other_tokenizer = false;  // train on token files of another tokenizer than the model's
  int64_t steps = 100;         // optimizer steps
  double epochs = 0.0;         // > 0: the steps that draw this many times the training tokens (instead of --steps)
  int64_t accumulate = 1;      // micro-batches (plan steps) per optimizer step
  RowLayout rows = RowLayout::kPacked;  // --rows: windows anywhere, one example per row (padded), or packed examples
  bool rows_default = false;  // no --rows: a plan of packed examples on files of examples packs them
  uint64_t seed = 1;           // data order, dropout masks (and initial weights when no weights file)
  double lr = 1e-3;  // the next token's default; a preference plan's is kPreferenceLr (resolveLearningRate)
  bool lr_default = false;  // no --lr
  LrSchedule lr_schedule = LrSchedule::kCosine;  // after the warmup
  double min_lr_ratio = 0.1;   // cosine and linear decay to lr * min_lr_ratio
  int64_t warmup = 0;          // linear warmup steps
  std::optional<double> warmup_ratio;  // --warmup-ratio: the warmup as this fraction of the steps, once known
  double weight_decay = 0.1;
  double lora_plus_ratio = 1.0;  // LoRA+: the adapters' B and the 1-D parameters at lr x this (StepOptions)
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = -1.0;     // global-norm bound; 0 off; < 0: 1.0, or off for an on-arrival plan
  std::string checkpoint_dir;  // "" = no checkpoints (with resume_dir: the same directory)
  int64_t checkpoint_every = 0;  // steps between checkpoints; 0 = only at the end and on a signal
  int keep = 3;                // checkpoints kept (the newest)
  std::string resume_dir;      // continue from the newest checkpoint in this directory
  bool resume_auto = false;    // --resume auto: from checkpoint_dir's newest checkpoint, if it has one
  double val_fraction = 0.0;   // the last fraction of the tokens, held out for validation
  std::string val_data_path;   // or a token file of held-out tokens ("" = none)
  int64_t val_every = 0;       // steps between validation losses (0: only at the end)
  int64_t val_batches = 0;     // at most this many held-out batches per validation (0: all of them)
  bool keep_best = false;      // keep (best.ckpt.safetensors) and export the lowest validation loss's weights
  bool export_only = false;    // write --export/--export-hf from the --resume checkpoint; no data, no steps
  bool eval_only = false;  // one validation of the starting weights; no step, nothing written but --log, --scores
  std::string scores_path;     // --eval-only of a preference plan: each held-out pair's scores (JSONL); "" = none
  const char* data_flag = "--data";  // the flag that named data_path (--eval-only --val-data alone: --val-data)
  // --scores given (train() sets it): on every rank, each sending its share; rank 0 alone keeps the path
  bool scores = false;
  bool scores_texts = false;  // --scores of a reward model on a file of texts: each scored alone (resolveRows)
  bool skip_nonfinite = false;  // NaN/Inf loss or gradients: skip the step (else stop)
  bool verify_transfers = false;  // check every copy to the device against the host's bytes
  int64_t print_every = 1;
  bool profile = false;        // print the time per kernel at the end
  std::string command_line;    // mtrun's arguments as given: every rank of a data-parallel job must give the same
  bool writes_checkpoints = true;  // false on ranks other than 0 of a data-parallel job (rank 0 writes the job's)
  bool sends_grads = false;    // ranks other than 0 when rank 0 dumps the first step's gradients: they send their slices
  // Several ranks: the longest a rank waits for the others before ending the job; unset (auto):
  // kRankWaitAtStart until this rank's first step is done, then kRankWaitBase plus
  // kRankWaitPerStep times its slowest step so far (a rank waits for the others about a step's
  // imbalance; start-up reads the weights, a time that grows with the model).
  std::optional<double> rank_timeout;
};
inline constexpr double kRankWaitAtStart = 600.0;
inline constexpr double kRankWaitBase = 60.0;
inline constexpr double kRankWaitPerStep = 4.0;

// Learning rate of 1-based `step`: linear warmup, then the schedule from lr at the first step
// after it: cosine or linear decay to lr * min_lr_ratio at the last step, or constant.
double learningRate(const TrainConfig& config, int64_t step);

// The sequences one optimizer step may draw (the sampler keys a row by 20 bits).
inline constexpr int64_t kMaxStepRows = int64_t{1} << 20;

// Throws mt::Error naming the first flag whose value no run can take (a NaN learning rate, a
// zero print interval, a warmup past the steps); train() starts with it.
void validateConfig(const TrainConfig& config);

class TokenFile;
// Throws mt::Error unless --data (less --val-fraction's share) and the held-out tokens each hold
// one sequence of the plan (seq + 1 tokens), naming the flag and the fix.
void checkEnoughTokens(const TrainConfig& c, const plan::Plan& plan, const TokenFile& data, const TokenFile* val_data);

// Runs training; returns the process exit code. Throws mt::Error on bad input. SIGINT and
// SIGTERM end the run after the current step, with a checkpoint when a directory is set.
int train(const TrainConfig& config);

}  // namespace mt
