#ifndef MT_MOE_OPS_TD
#define MT_MOE_OPS_TD

// Mixture-of-experts layers (DESIGN.md §14): a router's logits pick k experts per token
// (mt.moe_route); the token's rows are grouped by expert (mt.moe_dispatch, a counting sort);
// each expert's SwiGLU MLP runs over its own row range (mt.grouped_matmul, mt.swiglu); the
// outputs are summed back per token with the router's weights (mt.moe_combine). Dropless, as
// Hugging Face computes it: every token reaches all k of its experts. Buffers are sized for all
// T*k routed rows, so the plan's memory is static; only the split between experts varies.

// How router logits become expert weights (Hugging Face's conventions):
//   softmax_topk             softmax over all experts, the k largest kept as they are
//                            (Qwen3-MoE with norm_topk_prob false);
//   softmax_topk_normalized  ... then divided by their sum (Mixtral, Qwen3-MoE's default);
//   topk_softmax             the k largest logits, then a softmax over those k (gpt-oss);
//   sigmoid_topk             each logit's sigmoid, the k largest (with the bias, within the
//                            groups) kept as they are;
//   sigmoid_topk_normalized  ... then divided by their sum + 1e-20 (GLM-4.5, DeepSeek-V3).
def Mt_MoeRouting : I32EnumAttr<"MoeRouting", "how mt.moe_route weighs the chosen experts", [
    I32EnumAttrCase<"SoftmaxTopK", 0, "softmax_topk">,
    I32EnumAttrCase<"SoftmaxTopKNormalized", 1, "softmax_topk_normalized">,
    I32EnumAttrCase<"TopKSoftmax", 2, "topk_softmax">,
    I32EnumAttrCase<"SigmoidTopK", 3, "sigmoid_topk">,
    I32EnumAttrCase<"SigmoidTopKNormalized", 4, "sigmoid_topk_normalized">]> {
  let cppNamespace = "::mt";
}

def Mt_MoeRouteOp : Mt_KernelOp<"moe_route", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs", "getKernelName"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "top-k expert choice from router logits: (weights, experts)";
  let description = [{
    `logits` is (..., E); each row picks its `top_k` experts, largest first (ties: the lower
    expert index first), and weighs them by `routing`, times `scale`. Results: the weights
    (..., k) and the expert indices (..., k). The indices take no gradient; the weights' goes
    through the softmax or sigmoid into the logits (mt.moe_route_grad).

    A routing by scores (all but topk_softmax) may choose by its scores plus `score_bias` (E), which
    then takes no gradient (GLM-4.5's and DeepSeek-V3's e_score_correction_bias on sigmoid scores,
    Ernie 4.5's on softmax probabilities; kernel mt.moe_route_biased).
    A routing by scores (all but topk_softmax) may choose within the `groups_chosen` of `groups`
    equal groups of experts that score largest (DeepSeek's n_group, topk_group): a sigmoid
    router's group by its two best such scores added up (DeepSeek-V3's), a softmax router's by
    its best probability (DeepSeek-V2's group_limited_greedy; plan 1.39).

    ```mlir
    %w, %e = mt.moe_route %logits softmax_topk_normalized {top_k = 2} : tensor<8x256x8xf32>
    %w, %e = mt.moe_route %logits bias %b sigmoid_topk_normalized {groups = 8 : i64, groups_chosen = 4 : i64,
        scale = 2.5 : f32, top_k = 8 : i64} : tensor<8x256x256xf32>, tensor<256xf32>
    %w, %e = mt.moe_route %logits softmax_topk {groups = 8 : i64, groups_chosen = 3 : i64, scale = 16.0 : f32,
        top_k = 6 : i64} : tensor<8x256x160xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$logits, Optional<Mt_F32Tensor>:$score_bias, Mt_MoeRouting:$routing,
                       I64Attr:$top_k, DefaultValuedAttr<I64Attr, "1">:$groups,
                       DefaultValuedAttr<I64Attr, "1">:$groups_chosen, DefaultValuedAttr<F32Attr, "1.0f">:$scale);
  let results = (outs Mt_F32Tensor:$weights, Mt_I32Tensor:$experts);
  let assemblyFormat = "$logits (`bias` $score_bias^)? $routing attr-dict `:` type($logits) (`,` type($score_bias)^)?";
  let hasVerifier = 1;
}

def Mt_MoeRouteGradOp : Mt_KernelOp<"moe_route_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.moe_route: the logits' gradient from the weights'";
  let description = [{
    ```mlir
    %dlogits = mt.moe_route_grad %dw, %logits, %e softmax_topk_normalized {top_k = 2}
        : tensor<8x256x2xf32>, tensor<8x256x8xf32>, tensor<8x256x2xi32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dweights, Mt_F32Tensor:$logits, Mt_I32Tensor:$experts,
                       Mt_MoeRouting:$routing, I64Attr:$top_k, DefaultValuedAttr<F32Attr, "1.0f">:$scale);
  let results = (outs Mt_F32Tensor:$dlogits);
  let assemblyFormat = "$dweights `,` $logits `,` $experts $routing attr-dict `:` type(operands)";
}

def Mt_MoeDispatchOp : Mt_KernelOp<"moe_dispatch", [KernelOpInterface,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "tokens' rows grouped by expert: (routed, positions, counts)";
  let description = [{
    `input` is (..., D) and `experts` (..., k): N tokens, each sent to k experts. `routed`
    (N*k, D) holds each token's row once per choice, grouped by expert in expert order, within
    an expert in token order (a stable counting sort: deterministic). `positions` (..., k)
    says where choice j of token t sits among the routed rows; `counts` (E) how many rows each
    expert got (E = `num_experts`). An expert index outside [0, E) counts for no expert: its
    rows sit after every expert's and stay out of the products.

    ```mlir
    %x, %pos, %n = mt.moe_dispatch %h, %e {num_experts = 8} : tensor<8x256x384xf32>, tensor<8x256x2xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, Mt_I32Tensor:$experts, I64Attr:$num_experts);
  let results = (outs Mt_FloatTensor:$routed, Mt_I32Tensor:$positions, Mt_I32Tensor:$counts);
  let assemblyFormat = "$input `,` $experts attr-dict `:` type($input) `,` type($experts)";
}

def Mt_MoeDispatchGradOp : Mt_KernelOp<"moe_dispatch_grad", [KernelOpInterface]> {
  let summary = "backward of mt.moe_dispatch: each token's k routed rows summed back";
  let description = [{
    dinput[t] = sum over j (in order) of drouted[positions[t, j]]; (..., D) from drouted
    (N*k, D) and positions (..., k).

    ```mlir
    %dh = mt.moe_dispatch_grad %dx, %pos : tensor<4096x384xf32>, tensor<8x256x2xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$drouted, Mt_I32Tensor:$positions);
  let results = (outs Mt_FloatTensor:$dinput);
  let assemblyFormat = "$drouted `,` $positions attr-dict `:` type($drouted) `,` type($positions)";
}

// The grouped products count a group's share of the rows in their bytes too (a group's product
// reads and writes its experts' rows only, in place).
class Mt_GroupedKernelOp<string mnemonic, list<Trait> traits = []>
    : Mt_Op<mnemonic, !listconcat(traits, [Pure, Mt_InferTypeOpAdaptor,
                                           DeclareOpInterfaceMethods<CostOpInterface, ["getBytesAccessed"]>])>;

def Mt_GroupedMatmulOp : Mt_GroupedKernelOp<"grouped_matmul", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs", "getKernelName"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "per-expert products over row ranges: rows of expert e times weight[e]";
  let description = [{
    `input` (R, K) holds the routed rows grouped by expert, `counts` (E) how many each expert
    has (from the top: expert 0's first); `weight` is (E, N, K) with `transpose_b` (each
    expert a torch Linear's (out, in) weight), else (E, K, N). Result (R, N): row r of expert
    e is input[r] @ op(weight[e]); rows past the experts' total are zero.

    With `into` (R, N), a group of experts (mt-split-experts; plan 1.20): `weight` holds the
    G experts from `first_expert` on, and the result is `into` with those experts' rows
    replaced by their products. A chain of groups from zeros gives the whole product's result
    bit for bit; the memory planner gives each link its `into`'s bytes (in place). A group's
    product has no gradient rule: the split runs after mt-autodiff.

    ```mlir
    %g = mt.grouped_matmul %x, %wg, %n {transpose_b = true}
        : tensor<4096x384xf32>, tensor<8x1024x384xf32>, tensor<8xi32>
    %g1 = mt.grouped_matmul %x, %wg1, %n into %g0 {first_expert = 4 : i64, transpose_b = true}
        : tensor<4096x384xf32>, tensor<4x1024x384xf32>, tensor<8xi32>, tensor<4096x1024xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, Mt_FloatTensor:$weight, Mt_I32Tensor:$counts,
                       Optional<Mt_FloatTensor>:$into,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b,
                       DefaultValuedAttr<I64Attr, "0">:$first_expert);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight `,` $counts (`into` $into^)? attr-dict `:` type(operands)";
}

def Mt_GroupedMatmulWeightGradOp : Mt_GroupedKernelOp<"grouped_matmul_weight_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "the weight gradient of mt.grouped_matmul, one product per expert";
  let description = [{
    dweight[e] = dout_e^T @ input_e (E, N, K) with `transpose_b`, else input_e^T @ dout_e
    (E, K, N), over expert e's row range; zero for an expert that got no rows. With `experts`
    G > 0, the gradient of a group's weight (mt-split-experts): experts `first_expert` to
    `first_expert` + G − 1 only, (G, ., .).

    ```mlir
    %dwg = mt.grouped_matmul_weight_grad %x, %dg, %n {transpose_b = true}
        : tensor<4096x384xf32>, tensor<4096x1024xf32>, tensor<8xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, Mt_FloatTensor:$dout, Mt_I32Tensor:$counts,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b,
                       DefaultValuedAttr<I64Attr, "0">:$first_expert,
                       DefaultValuedAttr<I64Attr, "0">:$experts);
  let results = (outs Mt_F32Tensor:$dweight);
  let assemblyFormat = "$input `,` $dout `,` $counts attr-dict `:` type(operands)";
}

def Mt_GroupedAddBiasOp : Mt_KernelOp<"grouped_add_bias", [KernelOpInterface,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "each expert's bias row added to its rows (gpt-oss's expert biases)";
  let description = [{
    `input` (R, C) holds the routed rows grouped by expert as `counts` (E) says; row r of
    expert e gets bias[e] (E, C) added; rows past the experts' total stay as they are.

    ```mlir
    %y = mt.grouped_add_bias %x, %b, %n : tensor<4096x1024xf32>, tensor<8x1024xf32>, tensor<8xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, Mt_FloatTensor:$bias, Mt_I32Tensor:$counts);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input `,` $bias `,` $counts attr-dict `:` type(operands)";
}

def Mt_GroupedBiasGradOp : Mt_KernelOp<"grouped_bias_grad", [KernelOpInterface]> {
  let summary = "the gradient of mt.grouped_add_bias's bias: each expert's rows summed";
  let description = [{
    dbias[e] = the sum of dout's rows in expert e's range, in row order; zero for an expert
    that got no rows.

    ```mlir
    %db = mt.grouped_bias_grad %dy, %n : tensor<4096x1024xf32>, tensor<8xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$dout, Mt_I32Tensor:$counts);
  let results = (outs Mt_F32Tensor:$dbias);
  let assemblyFormat = "$dout `,` $counts attr-dict `:` type(operands)";
}

def Mt_MoeCombineOp : Mt_KernelOp<"moe_combine", [KernelOpInterface,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "each token's expert outputs summed with the router's weights";
  let description = [{
    result[t] = sum over j (in order) of weights[t, j] * routed[positions[t, j]]: (..., D)
    from routed (N*k, D), positions (..., k) and weights (..., k).

    ```mlir
    %y = mt.moe_combine %down, %pos, %w : tensor<4096x384xf32>, tensor<8x256x2xi32>, tensor<8x256x2xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$routed, Mt_I32Tensor:$positions, Mt_F32Tensor:$weights);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$routed `,` $positions `,` $weights attr-dict `:` type(operands)";
}

def Mt_MoeCombineGradOp : Mt_KernelOp<"moe_combine_grad", [KernelOpInterface]> {
  let summary = "backward of mt.moe_combine: (drouted, dweights)";
  let description = [{
    drouted[positions[t, j]] = weights[t, j] * dout[t]; dweights[t, j] = dout[t] . routed[positions[t, j]].

    ```mlir
    %dd, %dw = mt.moe_combine_grad %dy, %down, %pos, %w
        : tensor<8x256x384xf32>, tensor<4096x384xf32>, tensor<8x256x2xi32>, tensor<8x256x2xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$dout, Mt_FloatTensor:$routed, Mt_I32Tensor:$positions,
                       Mt_F32Tensor:$weights);
  let results = (outs Mt_FloatTensor:$drouted, Mt_F32Tensor:$dweights);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

// The router's load-balancing statistics and auxiliary loss, as Hugging Face's
// load_balancing_loss_func computes them (Mixtral, Qwen3-MoE, gpt-oss): over the L MoE layers'
// N tokens each, C_e = how many of the L*N*k choices went to expert e, S_e = the sum over the
// L*N rows of softmax(logits)[e]; aux = E * sum_e C_e * S_e / (L*N)^2. The statistics run as a
// chain through the layers (each adds its own to the last), so no op sees two layers at once.

def Mt_MoeBalanceStatsOp : Mt_KernelOp<"moe_balance_stats", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelName"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "one MoE layer's routing statistics added to the running ones: (2, E)";
  let description = [{
    `logits` (..., E), the router's; `experts` (..., k), its choices; `total` (2, E), the
    statistics of the layers before (zeros before the first). Result: `total` with row 0 plus
    each expert's count of choices (an index outside [0, E) counts for none) and row 1 plus
    each expert's softmax probability summed over the tokens. Only row 1 takes a gradient
    (through the softmax into the logits); the counts are integers. With `mask` (..., one value
    per token; plan 1.21), the tokens where it is not 0 only: Hugging Face's attention mask,
    which leaves the padding of `mtrun --rows examples` out.

    ```mlir
    %s1 = mt.moe_balance_stats %logits, %e, %s0 : tensor<8x256x8xf32>, tensor<8x256x2xi32>, tensor<2x8xf32>
    %m1 = mt.moe_balance_stats %logits, %e, %s0 mask %keep
        : tensor<8x256x8xf32>, tensor<8x256x2xi32>, tensor<2x8xf32>, tensor<8x256xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$logits, Mt_I32Tensor:$experts, Mt_F32Tensor:$total,
                       Optional<Mt_F32Tensor>:$mask);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$logits `,` $experts `,` $total (`mask` $mask^)? attr-dict `:` type(operands)";
}

def Mt_MoeBalanceStatsGradOp : Mt_KernelOp<"moe_balance_stats_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelName"]>]> {
  let summary = "backward of mt.moe_balance_stats: the logits' gradient from row 1's";
  let description = [{
    dlogits[t] = p_t * (g - <g, p_t>) with p_t = softmax(logits[t]) and g = dtotal[1] (E);
    with `mask`, zero for a token where it is 0.

    ```mlir
    %dl = mt.moe_balance_stats_grad %ds, %logits : tensor<2x8xf32>, tensor<8x256x8xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dtotal, Mt_F32Tensor:$logits, Optional<Mt_F32Tensor>:$mask);
  let results = (outs Mt_F32Tensor:$dlogits);
  let assemblyFormat = "$dtotal `,` $logits (`mask` $mask^)? attr-dict `:` type(operands)";
}

def Mt_MoeBalanceLossOp : Mt_KernelOp<"moe_balance_loss", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "the router's auxiliary load-balancing loss from the layers' statistics";
  let description = [{
    `stats` (2, E) from the last mt.moe_balance_stats; `rows` = L*N, the router rows over all
    MoE layers. Result (scalar): E * sum_e stats[0, e] * stats[1, e] / rows^2. With `top_k`
    (the statistics of masked tokens; plan 1.21) the rows are those the counts give, sum_e
    stats[0, e] / top_k (each kept token chose top_k experts; 0 rows: the loss is 0).

    ```mlir
    %aux = mt.moe_balance_loss %s4 {rows = 8192} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$stats, I64Attr:$rows, DefaultValuedAttr<I64Attr, "0">:$top_k);
  let results = (outs Mt_F32Tensor:$loss);
  let assemblyFormat = "$stats attr-dict `:` type($stats)";
}

def Mt_MoeBalanceLossGradOp : Mt_KernelOp<"moe_balance_loss_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.moe_balance_loss: (2, E), row 0 zero";
  let description = [{
    dstats[1, e] = dloss * E * stats[0, e] / rows^2; dstats[0, e] = 0 (the counts take none;
    nor do the rows `top_k` has them give).

    ```mlir
    %ds = mt.moe_balance_loss_grad %daux, %s4 {rows = 8192} : tensor<f32>, tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dloss, Mt_F32Tensor:$stats, I64Attr:$rows,
                       DefaultValuedAttr<I64Attr, "0">:$top_k);
  let results = (outs Mt_F32Tensor:$dstats);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

#endif // MT_MOE_OPS_TD
