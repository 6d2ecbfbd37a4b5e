// Modes the passes take as options, parsed once where the driver reads its flags (compiler/
// CompileOptions.h) and passed to the passes as these enums, never as strings.
#pragma once

#include <optional>

#include "kernels/loss/loss.h"  // DpoLossKind: what mt.dpo_loss makes of a pair's margin

namespace mt {

// When AdamW runs (mtc --update; mt-schedule-streamed's `update`): one step late, overlapped with
// the next forward (exact global-norm clipping; 16 host bytes per parameter), or as each
// gradient lands (no clipping, ~12 bytes; streamed schedules only).
enum class UpdateKind { kDeferred, kOnArrival };

// What the loss trains (mtc --objective; mt-attach-loss's `objective`): the next token's
// cross-entropy, direct preference optimisation over rows in (chosen, rejected) pairs against the
// reference model's log-probabilities, KTO over rows in pairs of a labelled example and its KL
// row, or a reward model's score of rows in (chosen, rejected) pairs (its head one score per token;
// compiler/dialect/MtPreferenceOps.td).
enum class LossObjective { kNextToken, kDpo, kKto, kReward };
// Whether the batch's rows come in pairs scored against a reference (mtrun --rows pairs).
inline bool rowsInPairs(LossObjective objective) { return objective != LossObjective::kNextToken; }

// The loss a plan trains, as the driver's flags give it (mtc --objective, --dpo-beta, --dpo-loss,
// --dpo-label-smoothing, --simpo-gamma, --discopop-tau, --rpo-alpha, --desirable-weight,
// --undesirable-weight) and mt-attach-loss takes it: the objective and, for preferences, beta, what
// the loss makes of a pair's margin, its label smoothing, SimPO's target margin, DiscoPOP's
// temperature and the weight of the chosen replies' NLL (ORPO's own term unless given); for KTO,
// beta and the weights of the desirable and the undesirable examples' losses; for a reward model
// (--center-rewards-coefficient) the weight of the rewards' squares.
struct LossSpec {
  LossObjective objective = LossObjective::kNextToken;
  double dpo_beta = 0.1;
  DpoLossKind dpo_loss = DpoLossKind::kSigmoid;
  double dpo_label_smoothing = 0.0;
  std::optional<double> simpo_gamma;   // unset: kDefaultSimpoGamma
  std::optional<double> discopop_tau;  // unset: kDefaultDiscopopTau
  std::optional<double> rpo_alpha;  // the chosen replies' NLL per token, this much of it added (0: none)
  double desirable_weight = 1.0;    // KTO's (TRL's KTOConfig defaults)
  double undesirable_weight = 1.0;
  double center_rewards = 0.0;      // a reward model's center_rewards_coefficient (TRL's RewardConfig; 0: none)
  // The NLL term's weight: rpo_alpha as given, else ORPO's 1 (its SFT term) and 0 for the others.
  double nllWeight() const { return rpo_alpha.value_or(dpo_loss == DpoLossKind::kOrpo ? 1.0 : 0.0); }
};
inline constexpr double kDefaultSimpoGamma = 0.5;     // TRL's CPOConfig simpo_gamma
inline constexpr double kDefaultDiscopopTau = 0.05;   // TRL's DPOConfig discopop_tau

}  // namespace mt
