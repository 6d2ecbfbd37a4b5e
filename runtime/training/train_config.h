// A training run's configuration resolved before its first step (train_config.cc): the plan read
// and checked for training, the optimizer's settings, --resume auto and --epochs turned into
// what they mean for this plan and data. The checks of the flags themselves are in trainer.h
// (validateConfig, checkEnoughTokens).
#pragma once
#include "runtime/host/step_options.h"
#include "runtime/plan/plan_format.h"
#include "runtime/training/trainer.h"

namespace mt {

class TokenFile;

// The plan to train: read, verified, and a training plan.
plan::Plan readTrainingPlan(const TrainConfig& config);

// The optimizer's settings for this plan; throws for flags the plan cannot honour.
StepOptions stepOptions(const TrainConfig& config, const plan::Plan& plan);

// --resume auto, resolved: the checkpoint folder's newest checkpoint where it has one, else a
// fresh start, said.
TrainConfig resolveResume(TrainConfig config);

// --epochs E, resolved: the steps that draw E times the training tokens (over every rank's
// micro-batches), said.
TrainConfig resolveEpochs(TrainConfig config, const plan::Plan& plan, const TokenFile& data);
// --warmup-ratio R: the warmup of ceil(R x steps) steps, once the steps are known (after --epochs).
TrainConfig resolveWarmup(TrainConfig config);
// --rows, resolved against the plan and the data: packed-examples needs a plan of packed
// examples (mtc --packed-examples; throws naming the fix for one that is not); without --rows,
// such a plan on files of examples (--data, and --val-data where given) packs them (said).
TrainConfig resolveRows(TrainConfig config, const plan::Plan& plan, const TokenFile& data, const TokenFile* val_data);
// Without --lr, a preference plan trains at kPreferenceLr (said), as TRL's DPOConfig defaults.
inline constexpr double kPreferenceLr = 1e-6;
// ... and a reward model's at kRewardLr, as TRL's RewardConfig defaults.
inline constexpr double kRewardLr = 1e-4;
TrainConfig resolveLearningRate(TrainConfig config, const plan::Plan& plan);
// --reference-weights needs a plan that compares with a reference model (mtc --objective dpo, not
// a reference-free loss): throws naming the fix otherwise.
void checkReferenceWeights(const TrainConfig& config, const plan::Plan& plan);

// --val-fraction's held-out tail of `data`, in tokens; with rows of examples (--rows examples,
// packed-examples) it begins at an example's start (an error naming the fix when no example starts in the tail).
int64_t heldOutTokens(const TrainConfig& config, const TokenFile& data);

}  // namespace mt
