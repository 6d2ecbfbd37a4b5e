#ifndef MT_PASSES_TD
#define MT_PASSES_TD

include "mlir/Pass/PassBase.td"

def FusePass : Pass<"mt-fuse", "mlir::ModuleOp"> {
  let summary = "Replace what exporters decompose by the fused mt ops";
  let description = [{
    Rewrites patterns of generic ops (what ONNX import makes of decomposed layers) into the
    fused ops the built-in models use, so imported models run the same kernels:
    a Linear layer's explicit weight transpose into `mt.matmul`'s `transpose_b`; the exact
    GELU `0.5 * x * (1 + erf(x / sqrt(2)))` and the tanh one
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` into `mt.gelu`; `x * sigmoid(x)` into `mt.silu`
    and `silu(g) * u` into `mt.swiglu`; RMSNorm `x * (1 / sqrt(mean(x^2) + eps)) * w` into
    `mt.rmsnorm`; opset 14's LayerNorm `(d / sqrt(mean(d^2) + eps)) * g + b`, `d = x - mean(x)`,
    into `mt.layernorm`; causal attention `reshape(transpose(matmul(softmax(mask(scale(
    matmul(q, kT)))), v)))` with a constant causal mask and scale 1/sqrt(D) into
    `mt.attention` (grouped-query when k and v are repeated from fewer heads); rotate-half
    RoPE `x * cos + concat(-x2, x1) * sin` with constant tables of some theta into `mt.rope`.
    Transpose pairs that cancel and reshape chains fold. What does not match exactly
    (another constant, another axis, another mask) is left.
  }];
  let dependentDialects = ["::mt::MtDialect"];
}

def LoraPass : Pass<"mt-lora", "mlir::ModuleOp"> {
  let summary = "Low-rank adapters (LoRA) beside the weights marked as their targets";
  let description = [{
    Each product `y = mt.matmul(x, W) {transpose_b}` of a parameter W (out, in) whose
    `mt.param` has the key `lora` becomes `y + mt.matmul(mt.scale(mt.matmul(x, A)), B)` (both
    products `transpose_b`, the factor alpha / rank on the rank-wide x A^T: PEFT scales the
    update, the same product rounded otherwise), with new parameters A (rank, in),
    initialised uniform in +-1/sqrt(in) (`init = "uniform"`, `bound`), and B (out, rank), zeros:
    PEFT's LoraConfig, its names (`q.weight` -> `q.lora_A.weight`, `q.lora_B.weight`) and its
    initialisation, so the adapted model starts as the model. The new ops take the product's
    location (its layer block). Which parameters train is not this pass's: the driver freezes
    the rest (`mt.param`'s `frozen`). A target read otherwise is an error.

    With `rslora` the factor is alpha / sqrt(rank). With `dropout` p > 0, A reads
    `mt.dropout(x)` (PEFT's lora_dropout): each product its own site, numbered in the order the
    products appear after the function's existing sites, so in a model without dropouts of its
    own a twin that draws one mask per adapted call of its forward draws the same masks.

    With `dora` (PEFT's use_dora), a third parameter m (out), `X.lora_magnitude_vector`,
    initialised to W's row norms (`init = "row_norms"`, `of` = W's name), and the update is
    PEFT's DoraLinearLayer's: `(g - 1) * (x W^T) + g * scale * (x A^T) B^T` with
    `g = m / ||W + scale * B A||` per output row, that norm `mt.stop_gradient` (PEFT detaches
    it). Without dropout the adapted product is `g * (y + scale * (x A^T) B^T)` (the same sum,
    two passes over y instead of five); with dropout, y plus PEFT's term, its x W^T computed
    again from the dropped x, as PEFT does.

    A target that is a stack of experts W (E, ., .), read only as the weight of whole
    `mt.grouped_matmul` products, gets A (E, rank, in) and B (E, out, rank): each expert's rows
    `y + grouped(scale * grouped(x, A), B)` (both `transpose_b`, over the product's counts), as
    PEFT's `target_parameters` adapt an expert stack (it merges B_e A_e into W_e; the same sums)
    and its per-expert `nn.Linear` run theirs. With dropout, the product's routed rows go through
    an `mt.dropout` of their own before A, one site a product as a weight's x. No DoRA on a stack.

    A target's `mt.param` may give its own rank and alpha (`lora_rank`, `lora_alpha`: PEFT's
    rank_pattern and alpha_pattern, mtc's --lora-rank-pattern and --lora-alpha-pattern); its
    adapters then have that rank, its scale is computed from both, and A's `mt.param` carries
    an alpha of its own as `adapter_alpha` (what an export merges with).

    ```mlir
    %y = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
    // with rank 2, alpha 4:
    %y = mt.matmul %x, %w {transpose_b = true}
    %d = mt.matmul %x, %a {transpose_b = true} : tensor<2x3x4xf32>, tensor<2x4xf32>
    %s = mt.scale %d {factor = 2.0 : f32} : tensor<2x3x2xf32>
    %u = mt.matmul %s, %b {transpose_b = true} : tensor<2x3x2xf32>, tensor<5x2xf32>
    %z = mt.add %y, %u
    ```
  }];
  let options = [
    Option<"rank", "rank", "int64_t", /*default=*/"8", "the adapters' rank r (PEFT's r)">,
    Option<"alpha", "alpha", "double", /*default=*/"8.0",
           "the update's scale is alpha / r (PEFT's lora_alpha)">,
    Option<"rslora", "rslora", "bool", /*default=*/"false",
           "rank-stabilised LoRA: the scale is alpha / sqrt(r) (PEFT's use_rslora)">,
    Option<"dropout", "dropout", "double", /*default=*/"0.0",
           "the probability of dropping each element of x before A (PEFT's lora_dropout); 0: none">,
    Option<"dora", "dora", "bool", /*default=*/"false",
           "weight-decomposed LoRA: a magnitude per output row beside A and B (PEFT's use_dora)">,
  ];
  let dependentDialects = ["::mt::MtDialect"];
}

def AttachLossPass : Pass<"mt-attach-loss", "mlir::ModuleOp"> {
  let summary = "End a graph that returns logits in a softmax cross-entropy loss";
  let description = [{
    If the model function returns logits (B, T, V), appends a `targets` (B, T) i32 input and
    an `mt.softmax_xent`, and returns the scalar loss instead. A function that already returns
    a scalar loss is left as it is; anything else is an error. Results after the first must be
    named outputs (`mt.output`: a mixture of experts' router statistics); they stay after the loss.
    With `objective=dpo` the batch's rows are (chosen, rejected) pairs: a second input, the
    reference model's log-probability of each row (B) f32, named `reference_logps`; the loss
    is `mt.dpo_loss` of each row's `mt.sequence_logprob`, and those log-probabilities are a named
    output, `policy_logps`, right after the loss (the runtime reads the reference's from them
    before training, and the implicit rewards after each step). With `dpo-loss=ipo` or `simpo`
    they are each row's mean log-probability per counted target (`average`), as those compare
    them; SimPO is reference-free: no `reference_logps` input, a reference of zeros. A nonzero
    `rpo-alpha` adds `mt.pair_nll`, that weight times the chosen replies' NLL per token.
    With `objective=kto` the rows are pairs of an example and its KL row (the example's prompt with
    another's completion): the inputs `reference_logps` (B) and `kto_labels` (B/2) f32 (1: the
    example's completion is desirable), the loss `mt.kto_loss` of each row's summed
    `mt.sequence_logprob`, and the same `policy_logps` output. With `objective=reward` the function
    returns scores (B, T, 1) (a score head): the inputs `reward_positions` (B) i32 (each row's last
    token) and `reward_margins` (B/2) f32 (each pair's margin), its rewards `mt.row_score` there, a
    named output `policy_rewards`, and the loss `mt.reward_loss` of rows in (chosen, rejected) pairs
    with those margins.
  }];
  let options = [
    Option<"objective", "objective", "::mt::LossObjective", /*default=*/"::mt::LossObjective::kNextToken",
           "What the loss trains",
           [{::llvm::cl::values(
               clEnumValN(::mt::LossObjective::kNextToken, "next-token", "the next token's cross-entropy"),
               clEnumValN(::mt::LossObjective::kDpo, "dpo", "direct preference optimisation over row pairs"),
               clEnumValN(::mt::LossObjective::kKto, "kto", "KTO over pairs of a labelled example and its KL row"),
               clEnumValN(::mt::LossObjective::kReward, "reward", "a reward model's score of (chosen, rejected) row pairs"))}]>,
    Option<"beta", "beta", "double", /*default=*/"0.1",
           "beta: how far the policy may move from the reference (objective=dpo or kto)">,
    Option<"dpoLoss", "dpo-loss", "::mt::DpoLossKind", /*default=*/"::mt::DpoLossKind::kSigmoid",
           "What the DPO loss makes of a pair's margin (objective=dpo)",
           [{::llvm::cl::values(
               clEnumValN(::mt::DpoLossKind::kSigmoid, "sigmoid", "-log sigmoid (DPO)"),
               clEnumValN(::mt::DpoLossKind::kHinge, "hinge", "max(0, 1 - margin) (SLiC)"),
               clEnumValN(::mt::DpoLossKind::kRobust, "robust", "robust DPO (with label smoothing)"),
               clEnumValN(::mt::DpoLossKind::kIpo, "ipo", "IPO: (margin / beta - 1 / (2 beta))^2 of mean log-probabilities"),
               clEnumValN(::mt::DpoLossKind::kSimpo, "simpo", "SimPO: -log sigmoid(margin - gamma), reference-free"),
               clEnumValN(::mt::DpoLossKind::kOrpo, "orpo", "ORPO's odds-ratio term: -beta log sigmoid(log odds ratio), reference-free"),
               clEnumValN(::mt::DpoLossKind::kExoPair, "exo_pair", "EXO (with label smoothing)"),
               clEnumValN(::mt::DpoLossKind::kSppoHard, "sppo_hard", "SPPO with hard probabilities"),
               clEnumValN(::mt::DpoLossKind::kNcaPair, "nca_pair", "NCA"),
               clEnumValN(::mt::DpoLossKind::kApoZero, "apo_zero", "APO-zero"),
               clEnumValN(::mt::DpoLossKind::kApoDown, "apo_down", "APO-down"),
               clEnumValN(::mt::DpoLossKind::kDiscopop, "discopop", "DiscoPOP (with discopop-tau)"),
               clEnumValN(::mt::DpoLossKind::kAot, "aot", "AOT: sorted log-ratio differences against the reference's"),
               clEnumValN(::mt::DpoLossKind::kAotPair, "aot_pair", "AOT: sorted chosen against sorted rejected log-ratios"))}]>,
    Option<"labelSmoothing", "label-smoothing", "double", /*default=*/"0.0",
           "The share of pairs taken as mislabelled (objective=dpo; sigmoid, robust, simpo, exo_pair, aot, aot_pair)">,
    Option<"simpoGamma", "simpo-gamma", "double", /*default=*/"::mt::kDefaultSimpoGamma",
           "SimPO's target reward margin (objective=dpo, dpo-loss=simpo)">,
    Option<"discopopTau", "discopop-tau", "double", /*default=*/"::mt::kDefaultDiscopopTau",
           "DiscoPOP's temperature (objective=dpo, dpo-loss=discopop)">,
    Option<"rpoAlpha", "rpo-alpha", "double", /*default=*/"0.0",
           "The weight of the chosen replies' NLL added to the loss (objective=dpo; TRL's rpo_alpha, cpo_alpha; ORPO's own term, which mtc gives 1)">,
    Option<"desirableWeight", "desirable-weight", "double", /*default=*/"1.0",
           "The weight of a desirable example's loss (objective=kto; TRL's desirable_weight)">,
    Option<"undesirableWeight", "undesirable-weight", "double", /*default=*/"1.0",
           "The weight of an undesirable example's loss (objective=kto; TRL's undesirable_weight)">,
    Option<"centerRewards", "center-rewards", "double", /*default=*/"0.0",
           "The weight of the pairs' squared summed rewards (objective=reward; TRL's center_rewards_coefficient)">,
  ];
  let dependentDialects = ["::mt::MtDialect"];
}

def TileTokensPass : Pass<"mt-tile-tokens", "mlir::ModuleOp"> {
  let summary = "Run each layer block's token-wise work in tiles along the tokens";
  let description = [{
    For long contexts, where one block's activations outgrow the device: in every layer block
    (a module path with `blocks.N` / `layers.N`), each run of consecutive token-wise ops — norms,
    products with a weight, rope, residual adds and the MLP's activations: ops that compute
    each token from that token alone — is cloned once per tile of consecutive tokens, the
    clones marked with their tile in their location (mt-partition reads it into `mt.tile`).
    A tile reads its part of a whole token tensor through `mt.token_split` (views), and what
    anything else reads — attention, which needs every token; the next block; the head — is
    the whole again through `mt.token_concat`, whose tiles mt-plan-memory places in the whole's
    bytes. A rope tile turns by its tokens' positions (`position_offset`). Each weight's
    gradient becomes the sum of its tiles' products; mt-recompute then recomputes each tile's
    activations just before that tile's backward, so a block's backward holds one tile of the
    MLP at a time (attention's inputs and output stay whole).

    ```mlir
    // before (layers.0)
    %h = mt.matmul %x, %w {transpose_b = true} : tensor<1x64x32xf32>, tensor<96x32xf32>
    %g = mt.gelu %h : tensor<1x64x96xf32>
    // after, tiles = 2
    %x0, %x1 = mt.token_split %x : tensor<1x64x32xf32> -> tensor<1x32x32xf32>, tensor<1x32x32xf32>
    %h0 = mt.matmul %x0, %w {transpose_b = true} : ...  loc(fused<{mt.tile = 0}>["layers.0"])
    %g0 = mt.gelu %h0 : tensor<1x32x96xf32>
    %h1 = mt.matmul %x1, %w {transpose_b = true} : ...  loc(fused<{mt.tile = 1}>["layers.0"])
    %g1 = mt.gelu %h1 : tensor<1x32x96xf32>
    %g = mt.token_concat %g0, %g1 : ... -> tensor<1x64x96xf32>   // where the whole is read
    ```

    The head after the last layer block (its norm, the LM head) is tiled the same way, and its
    `mt.softmax_xent` becomes one `mt.count_targets` of the whole batch and each tile's
    `mt.xent_tile` — its share of the mean over every counted target — whose shares are summed
    into the loss: no tile's (tokens, vocab) logits beside another's.

    A tile holds R = batch * seq / tiles tokens, a multiple of 32, inside one sequence or whole
    sequences; another count is an error listing the counts that work. Needs the forward
    function with a (batch, seq) tokens input (before mt-autodiff); `tiles` <= 1 leaves it alone.
    The function gets `mt.token_tiles`.
  }];
  let options = [
    Option<"tiles", "tiles", "int64_t", /*default=*/"0", "Token tiles per layer block (0 or 1: no tiling)">,
    Option<"head", "head", "bool", /*default=*/"true",
           "Tile the head after the last layer block too: its token-wise ops and the loss, as each tile's "
           "share (off where mt-split-vocab splits the head by vocabulary instead)">,
  ];
  let dependentDialects = ["::mt::MtDialect"];
}

def AutodiffPass : Pass<"mt-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of the loss with respect to every parameter";
  let description = [{
    Walks the forward ops in reverse, applying each op's gradient rule
    (GradientOpInterface), summing the gradients of values used more than once, and returns
    the loss followed by one gradient per parameter argument (result attribute `mt.grad`
    naming the parameter), then the function's named outputs. Needs a function that returns a
    scalar loss, then named outputs only; an output with `mt.objective_weight` w adds w times
    itself to the loss for the gradient (its gradient seeded with w), the loss returned unchanged.
  }];
  let dependentDialects = ["::mt::MtDialect"];
}

def PartitionPass : Pass<"mt-partition", "mlir::ModuleOp"> {
  let summary = "Group the ops into layer blocks by module path and find identical blocks";
  let description = [{
    Gives every op an `mt.block` index from the module path in its location
    (`blocks.3`, `layers.3`, as built-in models and ONNX node names have them): blocks keep
    their index, ops before the first block form the prologue (-1), ops after it the epilogue
    (last + 1). Backward ops share their forward op's location and so its block. Blocks whose
    forward ops match in op names, types and attributes (a structural hash) share a template:
    `mt.block_templates` on the function maps each block to the first block like it.
  }];
  let dependentDialects = ["::mt::MtDialect"];
}

def HostEmbeddingPass : Pass<"mt-host-embedding", "mlir::ModuleOp"> {
  let summary = "Look the tokens up in the embedding table on the host, and scatter its gradient there";
  let description = [{
    Replaces the lookup of the `tokens` input in a (vocab, C) table parameter by a new
    argument `{mt.embedded_tokens = "<table>"}` (the step's tokens' rows, which the host
    fills), and the scatter of the lookup's gradient by a new result `{mt.grad_tokens =
    "<table>"}` (the rows' gradient per token, which the host scatter-adds into the table's
    gradient). An untied table loses its gradient result and every device use; a tied one (an
    LM head reads it) keeps the head's gradient as its `mt.grad` result. The schedules add the
    host tasks: `embedding_lookup` before the argument's copy in, `embedding_grad` after the
    result's copy out. The device then holds the table only where the head reads it, and the
    link carries tokens x C per step instead of vocab x C, both ways.

    ```mlir
    // before
    %x = mt.embedding %tokens, %wte : tensor<8x256xi32>, tensor<512x384xf32>
    ...
    %dwte_e = mt.embedding_grad %tokens, %dx {vocab = 512} : tensor<8x256xi32>, tensor<8x256x384xf32>
    %dwte = mt.add %dwte_h, %dwte_e : tensor<512x384xf32>, tensor<512x384xf32>
    return %loss, ..., %dwte : ...            // {mt.grad = "wte"}
    // after: %x is an argument {mt.embedded_tokens = "wte"}
    return %loss, ..., %dwte_h, ..., %dx : ...  // {mt.grad = "wte"}, {mt.grad_tokens = "wte"}
    ```

    Needs a differentiated function (after `mt-autodiff`; before `mt-split-vocab`, which then
    splits a tied head); a model without a token lookup in a parameter table is an error.
  }];
  let dependentDialects = ["::mt::MtDialect"];
}

def SplitVocabPass : Pass<"mt-split-vocab", "mlir::ModuleOp"> {
  let summary = "The LM head and its loss (cross-entropy, or a DPO plan's sequence log-probabilities) over chunks of the vocabulary";
  let description = [{
    Rewrites the differentiated head `logits = mt.matmul(h, W) {transpose_b}`,
    `mt.softmax_xent` and their backward into `chunks` row slices of W: each a parameter piece
    of its own (`mt.param` with `rows = [first, vocab]`: rows [first, first + n) of the same
    host tensor; its gradient result has `mt.grad_row`) in a layer block of its own after the
    epilogue, with `mt.xent_chunk` folding each chunk's logits into a running log-sum-exp,
    `mt.xent_finish` giving the loss, and per chunk `mt.xent_chunk_grad` then the product's
    own gradient rule. A DPO plan's `mt.sequence_logprob` goes the same way, finished by
    `mt.sequence_logprob_finish` (each row's sum, or mean with `average`) and differentiated by
    `mt.sequence_logprob_chunk_grad`; what ran between the loss and its backward in the head's
    block (`mt.dpo_loss`, the seed, `mt.dpo_loss_grad`) joins the last chunk's. The last chunk's
    backward follows its forward in the same block (its logits are reused); the others recompute
    theirs. Neither W nor the (tokens, vocab) logits
    are on the device whole: a streamed schedule copies one chunk at a time. The untied token
    embedding of the same vocabulary goes the same way (`mt.embedding_chunk` from zeros,
    `mt.embedding_grad_chunk`; blocks -1 - chunks .. -2, before the prologue) unless it is read
    elsewhere. The function gets `mt.vocab_split`, the names split. A head read
    elsewhere (tied to an embedding on the device) is an error: `mt-host-embedding` first
    moves a tied embedding's lookup to the host. Needs `mt-partition` and a differentiated
    function; `chunks` <= 1 leaves the function alone.
  }];
  let options = [
    Option<"chunks", "chunks", "int64_t", /*default=*/"0",
           "Number of vocabulary chunks (0 or 1: no split)">,
  ];
  let dependentDialects = ["::mt::MtDialect"];
}

def SplitExpertsPass : Pass<"mt-split-experts", "mlir::ModuleOp"> {
  let summary = "Each stacked expert weight in groups of consecutive experts";
  let description = [{
    Splits every stacked expert weight (an (E, ., .) parameter read only as the weight of
    `mt.grouped_matmul`, its gradient one `mt.grouped_matmul_weight_grad`) into `groups`
    pieces of consecutive experts (`mt.param` with `rows = [first expert, E]`, as
    mt-split-vocab's chunks; the gradient pieces with `mt.grad_row`). Each product over the
    stack becomes a chain from zeros, one `mt.grouped_matmul ... into` per group (each replacing
    its experts' rows: the whole product bit for bit), and the gradient one
    `mt.grouped_matmul_weight_grad {first_expert, experts}` per group. The streamed schedules
    then copy a group in one group ahead of its products, so the device holds a few experts of a
    layer at a time. The function gets `mt.expert_split`, the names split. Needs `mt-partition`
    and a differentiated function, or a forward-only one (no gradients to split); a model
    without stacked expert weights is an error;
    `groups` <= 1 leaves the function alone (more groups than experts: a group per expert).

    ```mlir
    // groups = 2, a (4, 8, 6) stack:
    %z = mt.fill {value = 0.0 : f32} : tensor<16x8xf32>
    %y0 = mt.grouped_matmul %x, %w0, %n into %z {first_expert = 0 : i64, transpose_b = true} ...
    %y1 = mt.grouped_matmul %x, %w1, %n into %y0 {first_expert = 2 : i64, transpose_b = true} ...
    ```
  }];
  let options = [
    Option<"groups", "groups", "int64_t", /*default=*/"0",
           "Number of groups of experts (0 or 1: no split)">,
  ];
  let dependentDialects = ["::mt::MtDialect"];
}

def RecomputePass : Pass<"mt-recompute", "mlir::ModuleOp"> {
  let summary = "Recompute each layer block's activations in its backward pass";
  let description = [{
    For every layer block, clones the forward ops whose results the block's backward ops read,
    just before the first backward op of the block, and points the backward ops at the clones
    (marked `mt.recompute`). Only the block inputs (the boundary activations) stay alive from
    the forward pass to the backward; each block's forward runs twice per step. With `keep`,
    the last `keep` blocks are left alone: their activations stay from the forward (more device
    memory, one forward run) — what mtc chooses when the budget has room. Blocks in token tiles
    (mt-tile-tokens, `mt.tile`) recompute each tile's ops just before that tile's stretch of the
    backward, and what the block shares (its splits and concats, attention) once before the
    block's backward; a head in token tiles (the epilogue) is recomputed so too. Needs
    `mt-partition` and a differentiated function.
  }];
  let options = [
    Option<"keep", "keep", "int64_t", /*default=*/"0",
           "Number of last blocks that keep their activations instead of recomputing them">,
  ];
  let dependentDialects = ["::mt::MtDialect"];
}

def ScheduleStreamedPass : Pass<"mt-schedule-streamed", "mlir::ModuleOp"> {
  let summary = "Streamed schedule: weights copied in per block, one block ahead (a stack's groups of experts one group ahead); gradients out as they complete";
  let description = [{
    Like mt-schedule-resident, but a parameter's device copy lives only for one run of uses
    within a block (its forward, then its recompute + backward): an `mt.h2d` is inserted at the
    start of the block that runs before (a prefetch one block ahead), so weights cross the
    link once forward and once backward. The row pieces of one parameter (mt-split-experts'
    groups of experts) that one region reads in turn are copied one piece ahead instead: each
    where the piece before it starts being read, so the device holds two of them at a time;
    a piece read twice apart in a region (its recomputed product, then its input gradient) is
    copied twice. Each gradient is copied out right after it is
    complete and its share of the global norm taken on the host at once. AdamW runs one step
    late (`adamw_previous`): each parameter's update of the previous step just before its
    first copy in, so the host optimizer overlaps the forward instead of ending the step.
    With `update=on-arrival`, each parameter is updated as soon as its gradient has landed
    instead, its norm share taken in the same pass (`adamw_on_arrival`, no `grad_norm`:
    overlapped with the backward, no global-norm clipping, and the gradients' host bytes
    reused: see mt-plan-memory). With `pin-shared`, a parameter used by
    more than one layer block (a tied embedding and LM head: the first block and the head) is
    copied once per step and stays on the device instead of crossing the link once per block
    region; the function gets `mt.pinned_bytes`. With `keep-frozen`, so is every frozen
    parameter (a LoRA's base weights, mtc --frozen) that a device op reads, its copy marked
    `mt.kept` (as are the constants' and a pinned frozen weight's): mt-plan-memory keeps its
    bytes to the end, so it crosses the link in the first step only. `keep-frozen-limit` N
    keeps only N frozen parameters (all of a parameter's row pieces or none): those read in
    the most block regions first (each region a copy saved), then in the order the step
    reads them; the rest stream as trained ones do. Needs `mt-partition` and a differentiated
    function, or a forward-only one (mtgen on a model larger than the device): its weights
    stream in the same way, its outputs copy out as they are complete, nothing is updated.
  }];
  let options = [
    Option<"update", "update", "::mt::UpdateKind", /*default=*/"::mt::UpdateKind::kDeferred",
           "When AdamW runs: deferred (one step late, exact clipping) or on-arrival",
           [{::llvm::cl::values(
               clEnumValN(::mt::UpdateKind::kDeferred, "deferred", "one step late, exact clipping"),
               clEnumValN(::mt::UpdateKind::kOnArrival, "on-arrival", "as each gradient lands"))}]>,
    Option<"pinShared", "pin-shared", "bool", /*default=*/"false",
           "Copy a parameter used by more than one layer block (a tied embedding and LM head) "
           "once per step, before the first op, and keep it on the device">,
    Option<"keepFrozen", "keep-frozen", "bool", /*default=*/"false",
           "Copy each frozen parameter once per step, before the first op, marked mt.kept "
           "(mt-plan-memory then keeps it between steps)">,
    Option<"keepFrozenLimit", "keep-frozen-limit", "int64_t", /*default=*/"-1",
           "With keep-frozen, the most frozen parameters kept (-1: all), those read in the "
           "most block regions first">,
  ];
  let dependentDialects = ["::mt::MtDialect"];
}

def OffloadActivationsPass : Pass<"mt-offload-activations", "mlir::ModuleOp"> {
  let summary = "Keep the activations the backward reads on the host instead of the device";
  let description = [{
    For long contexts, where the activations kept from the forward for the backward (block
    inputs under streamed-recompute, all of a kept block's) outgrow the device: each such
    value gets an `mt.d2h` right after the op that makes it, and every run of its backward uses
    in one block region reads an `mt.h2d` of that host copy issued a block ahead (where weights
    are prefetched). Its device bytes live only through its forward uses. A use too close for
    the round trip keeps the device value. The function gets `mt.activation_bytes`: the bytes
    moved per step, both ways. Needs a streamed schedule (after mt-schedule-streamed).
  }];
  let dependentDialects = ["::mt::MtDialect"];
}

def StageBf16Pass : Pass<"mt-stage-bf16", "mlir::ModuleOp"> {
  let summary = "Stream every weight as a bf16 copy of its fp32 master, widened on the device";
  let description = [{
    Replaces each copy of a parameter to the device (`mt.h2d` of an f32 `mt.param` argument)
    by a copy of a new argument `{mt.staging = <the parameter's mt.param>}` of the same shape in
    bf16 — the host's staging copy, which the runtime rounds from the fp32 master (to nearest
    even) whenever the master changes — and an `mt.widen` to f32 right before the copy's first
    use. Half the bytes cross the link; the forward and backward see bf16-rounded weights; the
    master weights, the AdamW moments and the gradients stay fp32.

    ```mlir
    // before
    %w = mt.h2d %arg1 {mt.block = 0 : i64} : tensor<4x4xf32>
    %y = mt.matmul %x, %w {mt.block = 1 : i64} : ...
    // after: %arg5 is {mt.staging = {name = "w", ...}} : tensor<4x4xbf16>
    %h = mt.h2d %arg5 {mt.block = 0 : i64} : tensor<4x4xbf16>
    %w = mt.widen %h {mt.block = 1 : i64} : tensor<4x4xbf16> -> tensor<4x4xf32>
    %y = mt.matmul %x, %w {mt.block = 1 : i64} : ...
    ```

    Needs a scheduled function (after `mt-schedule-resident` or `mt-schedule-streamed`),
    before `mt-plan-memory`.
  }];
  let dependentDialects = ["::mt::MtDialect"];
}

def ScheduleResidentPass : Pass<"mt-schedule-resident", "mlir::ModuleOp"> {
  let summary = "All-resident schedule: copy inputs and weights in, gradients out, optimise on host";
  let description = [{
    Inserts an `mt.h2d` for every argument (parameters and inputs) at the start of the step,
    in the order the step first uses them, an `mt.d2h` for the loss and every gradient at its
    end, then the global gradient norm on the host. AdamW runs one step late
    (`adamw_previous`, before each parameter's copy in). The memory-centric schedule (layer
    blocks, streamed weights) replaces this pass for models larger than the device. With
    `keep-frozen`, the copies of a training function's frozen parameters and constants are
    marked `mt.kept`: mt-plan-memory keeps their bytes to the end, so a backend copies them in
    the first step only.
  }];
  let options = [
    Option<"keepFrozen", "keep-frozen", "bool", /*default=*/"false",
           "Mark the copies of frozen parameters and constants mt.kept (kept between steps)">,
  ];
  let dependentDialects = ["::mt::MtDialect"];
}

def MixedPrecisionPass : Pass<"mt-mixed-precision", "mlir::ModuleOp"> {
  let summary = "A bf16 plan: bf16 weights and activations on the device, f32 statistics and gradients";
  let description = [{
    Retypes the scheduled step for mixed precision. The weights are used as the bf16 staging
    copies they crossed the link as (the `mt.widen` of `mt-stage-bf16` goes); every activation
    and activation gradient is bf16; what `runtime/plan/op_table.def` marks f32 stays f32: norms'
    statistics, log-sum-exps, the loss and its seed, the cross-entropy's running state; and
    every value that is, or only adds up to, a parameter's gradient is f32: the weight
    gradients' products (`mt.matmul` with `f32_result`), the biases' sums (`mt.sum_to` to
    f32), the norms' and embeddings' parameter gradients, and the adds, scales and transposes
    that accumulate them. Products, attention, norms and reductions accumulate in f32 inside
    their kernels whatever they store. Where a value reaches an op in another type than the op
    takes, an `mt.narrow` (f32 to bf16, to nearest even) or `mt.widen` (exact) converts it: the
    tokens' rows the host looked up, an f32-only op's operands and results (the generic ops of
    an ONNX import), a bf16 value copied to an f32 host tensor (the tokens' rows' gradient).
    Offloaded activations cross the link, and wait on the host, as bf16.

    ```mlir
    // before (weights staged by mt-stage-bf16)
    %w = mt.widen %wh : tensor<4x4xbf16> -> tensor<4x4xf32>
    %y = mt.matmul %x, %w {transpose_b = true} : tensor<2x4xf32>, tensor<4x4xf32>
    %dw = mt.matmul %dy, %x {transpose_a = true} : tensor<2x4xf32>, tensor<2x4xf32>
    %g = mt.d2h %dw : tensor<4x4xf32>
    // after
    %y = mt.matmul %x, %wh {transpose_b = true} : tensor<2x4xbf16>, tensor<4x4xbf16>
    %dw = mt.matmul %dy, %x {f32_result = true, transpose_a = true} : tensor<2x4xbf16>, tensor<2x4xbf16>
    %g = mt.d2h %dw : tensor<4x4xf32>
    ```

    Needs a scheduled function whose parameters are staged as bf16 (after `mt-stage-bf16`),
    before `mt-plan-memory`.
  }];
  let dependentDialects = ["::mt::MtDialect"];
}

def PlanMemoryPass : Pass<"mt-plan-memory", "mlir::ModuleOp"> {
  let summary = "Static offsets of every device value in one arena, by liveness";
  let description = [{
    Gives every device value (results of compute ops and of `mt.h2d`) an offset in a single
    arena (`mt.offsets` on its op), reusing the bytes of values whose last use has passed;
    `mt.reshape` results share their input's bytes, token tiles their whole's, and each link
    of a chain of a stack's groups of experts (`mt.grouped_matmul ... into`, mt-split-experts)
    the bytes of its `into` where it is that value's only reader (made in place). A value copied to the host keeps its bytes
    to the end of its block's region (the copy runs beside the next kernels instead of making
    them wait) unless only the plan without that slack fits the budget. Records the arena size
    as `mt.arena_bytes` and the smallest arena (no slack) as `mt.arena_min_bytes` on the
    function. With a budget, fails naming the smallest budget that would work. When the
    parameters are updated as their gradients land (`adamw_on_arrival`), also plans the host
    buffer they land in: each gradient's `mt.d2h` gets `mt.landing_offset`, its bytes free
    once its update has run (kept to the end of that block's region), and the function
    `mt.landing_bytes`. With `land-deferred`, so do the gradients of a deferred update, their
    bytes free once their `grad_norm` task has run (the host keeps each summed gradient apart:
    a plan for data-parallel ranks, each of which keeps only its slice). In a forward-only function the weights and constants keep their bytes
    to the end (no value reuses them), so a backend may keep them between runs — where the
    budget has room for that (a streamed one may not: then they are placed by liveness). So do
    the copies a schedule marked `mt.kept` (its `keep-frozen`: frozen parameters, their staging
    copies, constants, which no step changes) — always, the smallest arena included, so that
    mtc's trials fit that plan to the budget: a backend copies them in the first step only.
  }];
  let options = [
    Option<"budget", "budget", "int64_t", /*default=*/"0",
           "Device memory budget in bytes (0: unlimited)">,
    Option<"landDeferred", "land-deferred", "bool", /*default=*/"false",
           "Land a deferred update's gradients in the host landing buffer too">,
  ];
  let dependentDialects = ["::mt::MtDialect"];
}

#endif // MT_PASSES_TD
