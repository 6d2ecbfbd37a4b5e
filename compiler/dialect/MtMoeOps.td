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
//   topk_softmax             the k largest logits, then a softmax over those k (gpt-oss).
def Mt_MoeRouting : I32EnumAttr<"MoeRouting", "how mt.moe_route weighs the chosen experts", [
    I32EnumAttrCase<"SoftmaxTopK", 0, "softmax_topk">,
    I32EnumAttrCase<"SoftmaxTopKNormalized", 1, "softmax_topk_normalized">,
    I32EnumAttrCase<"TopKSoftmax", 2, "topk_softmax">]> {
  let cppNamespace = "::mt";
}

def Mt_MoeRouteOp : Mt_KernelOp<"moe_route", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "top-k expert choice from router logits: (weights, experts)";
  let description = [{
    `logits` is (..., E); each row picks its `top_k` experts, largest first (ties: the lower
    expert index first), and weighs them by `routing`. Results: the weights (..., k) and the
    expert indices (..., k). The indices take no gradient; the weights' goes through the
    softmax into the logits (mt.moe_route_grad).

    ```mlir
    %w, %e = mt.moe_route %logits softmax_topk_normalized {top_k = 2} : tensor<8x256x8xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$logits, Mt_MoeRouting:$routing, I64Attr:$top_k);
  let results = (outs Mt_F32Tensor:$weights, Mt_I32Tensor:$experts);
  let assemblyFormat = "$logits $routing attr-dict `:` type($logits)";
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
                       Mt_MoeRouting:$routing, I64Attr:$top_k);
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

def Mt_GroupedMatmulOp : Mt_KernelOp<"grouped_matmul", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "per-expert products over row ranges: rows of expert e times weight[e]";
  let description = [{
    `input` (R, K) holds the routed rows grouped by expert, `counts` (E) how many each expert
    has (from the top: expert 0's first); `weight` is (E, N, K) with `transpose_b` (each
    expert a torch Linear's (out, in) weight), else (E, K, N). Result (R, N): row r of expert
    e is input[r] @ op(weight[e]); rows past the experts' total are zero.

    ```mlir
    %g = mt.grouped_matmul %x, %wg, %n {transpose_b = true}
        : tensor<4096x384xf32>, tensor<8x1024x384xf32>, tensor<8xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, Mt_FloatTensor:$weight, Mt_I32Tensor:$counts,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight `,` $counts attr-dict `:` type(operands)";
}

def Mt_GroupedMatmulWeightGradOp : Mt_KernelOp<"grouped_matmul_weight_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "the weight gradient of mt.grouped_matmul, one product per expert";
  let description = [{
    dweight[e] = dout_e^T @ input_e (E, N, K) with `transpose_b`, else input_e^T @ dout_e
    (E, K, N), over expert e's row range; zero for an expert that got no rows.

    ```mlir
    %dwg = mt.grouped_matmul_weight_grad %x, %dg, %n {transpose_b = true}
        : tensor<4096x384xf32>, tensor<4096x1024xf32>, tensor<8xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, Mt_FloatTensor:$dout, Mt_I32Tensor:$counts,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Mt_F32Tensor:$dweight);
  let assemblyFormat = "$input `,` $dout `,` $counts attr-dict `:` type(operands)";
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

#endif // MT_MOE_OPS_TD
