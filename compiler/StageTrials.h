// What the stages' budget searches share: the knobs of a trial compile and the trials
// themselves (compiler/Stages.cpp, which runs the stages), the splits a budget may need
// (compiler/StageFit.cpp) and what it has room for once they are chosen (compiler/StageRoom.cpp:
// kept activations, kept frozen weights). Internal to the three.
#pragma once
#include <cstdint>

#include "compiler/Stages.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mt::stages {

// How the stages after partition run.
struct Knobs {
  Schedule schedule = Schedule::kResident;
  int64_t budget = 0;      // the memory planner's; 0: none
  UpdateKind update = UpdateKind::kDeferred;
  int64_t keep = 0;        // streamed-recompute: the last blocks that keep their activations
  bool pin_shared = false;  // streamed: weights shared across blocks stay on the device
  bool keep_frozen = false;  // frozen weights copied once per step into bytes kept between steps
  int64_t frozen_limit = -1;  // with keep_frozen, streamed: the most frozen weights kept (-1: all)
  int64_t vocab_chunks = 1;  // the LM head's vocabulary chunks (1: not split)
  int64_t expert_groups = 1;  // each stacked expert weight's groups (1: not split)
  bool offload = false;      // streamed: the activations the backward reads wait on the host
  EmbeddingPlace embedding = EmbeddingPlace::kAuto;  // StageOptions::embedding
  bool tied_head = false;    // the tokens' embedding table is the LM head's weight
  bool bf16_staging = false;  // the weights cross the link as bf16 staging copies
  ComputePrecision precision = ComputePrecision::kFp32;  // kBf16: a bf16 plan (mt-mixed-precision)
  int64_t token_tiles = 1;    // each layer block's token-wise work in tiles (mt-tile-tokens)
  bool land_gradients = false;  // StageOptions::land_gradients
  LossSpec loss;               // StageOptions::loss

  bool hostEmbedding() const {
    return embedding == EmbeddingPlace::kHost ||
           (embedding == EmbeddingPlace::kAuto && tied_head && vocab_chunks > 1);
  }
};

// The stages after partition run on a copy of `module` under `knobs` (without a budget); null
// if they fail.
mlir::OwningOpRef<mlir::ModuleOp> compileTrial(mlir::ModuleOp module, size_t first, const Knobs& knobs);
// The smallest arena that works for a compiled trial.
int64_t minimumArena(mlir::ModuleOp trial);
// The smallest arena the stages after partition give `module` under `knobs`, or -1 if they fail.
int64_t trialArena(mlir::ModuleOp module, size_t first, const Knobs& knobs);

// A split by `knob` (the LM head's vocabulary chunks, the experts' groups) under `knobs`,
// doubling from 2: the fewest pieces whose plan fits `budget` (0 when none does, or the model
// has nothing to split: those trials fail quietly), and the smallest arena seen with its
// pieces. The search stops where more pieces stop shrinking the arena (the peak is elsewhere
// then) and at `most` pieces.
struct ChunkSearch {
  int64_t fitting = 0, fitting_arena = -1;
  int64_t smallest_arena = -1, smallest_chunks = 0;
  // What the search chose: the fewest pieces that fit, else those of the smallest arena.
  int64_t chosen() const { return fitting ? fitting : smallest_chunks; }
  int64_t chosenArena() const { return fitting ? fitting_arena : smallest_arena; }
};
ChunkSearch searchSplit(mlir::ModuleOp module, size_t first, Knobs knobs, int64_t Knobs::*knob, int64_t most,
                        int64_t budget);

// What the trial compiles after partition share.
struct Trials {
  mutable mlir::ModuleOp module;  // partitioned (a handle: its methods are not const)
  size_t first;                // the stage after partition
  const StageOptions& options;
  Knobs defaults;              // what every trial starts from
  int64_t vocab;
  bool split_if_needed;        // the vocabulary may be split to fit the budget
  int64_t experts_if_needed;   // > 1: the experts (this many in the largest stack) may go in groups
};

// Recompute only as much as the budgets need: the largest number of last blocks that keep
// their activations from the forward (each such block's forward runs once, not twice); at most
// `most` (-1: as StageOptions::max_keep allows).
int64_t tuneRecompute(const Trials& t, const Knobs& chosen, int64_t most = -1);

// What keepFrozenWherePays found beside its knobs.
struct FrozenKeep {
  int64_t room = -1;          // the most frozen weights the budget has room to keep (-1: all)
  bool fewer_faster = false;  // fewer kept than that was predicted faster (more blocks keep activations)
  int64_t most_kept = 0;      // the most blocks keeping their activations any plan tried
  bool recompute = false;     // streamed-recompute taken over streamed, to keep more of them
  bool compute_bound = false;  // room for only some, none kept: the plan copying them is compute-bound
};

// `chosen` with frozen weights (a LoRA's base) kept on the device between steps — copied in the
// first step only, their bytes taken by no other value all step (streamed: each copied once a
// step) — as many as the budget has room for: all, or in a streamed plan the most it fits
// (those copied most often when streamed first), and, with `tunes_recompute`, the blocks that keep
// their activations tuned. With StageOptions::step_price, the plans keeping that many, half as
// many (where blocks keep their activations) and none are priced and the fastest taken, the one
// keeping more on a tie: the kept bytes may cost blocks keeping their activations, or room the
// copies out overlap in, and a compute-bound step gains nothing from the link's idle time. Where
// the plan keeping none is bound by compute (StepPrice::computeBound), none is kept and nothing
// searched. With
// `may_recompute`, a resident or streamed plan with room for only some is priced against
// streamed-recompute keeping as many as its smaller activations leave room for.
Knobs keepFrozenWherePays(const Trials& t, Knobs chosen, bool tunes_recompute, bool may_recompute,
                          FrozenKeep& kept);

// Groups of experts the budget's search tries at most (each a parameter per stack;
// --expert-groups may give more, up to a group per expert).
inline constexpr int64_t kMaxExpertGroups = 32;

// The most experts of any stacked expert weight (the most groups a split can make); 0 without.
int64_t mostExperts(mlir::ModuleOp module);

// A plan for `base` (its schedule the most frugal that was tried, too large for `budget`) that
// fits after all: first the LM head in vocabulary chunks, then the activations offloaded, then
// both, then the experts in groups (where `experts` > 1 may be split) on top of the smallest.
// `fits` is false if none does; `smallest` then holds the knobs of the smallest arena.
struct FrugalFit {
  bool fits = false;
  Knobs chosen, smallest;
  int64_t smallest_arena = -1;
};
FrugalFit fitFrugal(mlir::ModuleOp module, size_t first, Knobs base, int64_t base_arena, int64_t budget, int64_t vocab,
                    bool split, int64_t experts, bool offload, bool offload_first = false);

}  // namespace mt::stages
