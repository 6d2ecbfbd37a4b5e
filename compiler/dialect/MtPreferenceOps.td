#ifndef MT_PREFERENCE_OPS_TD
#define MT_PREFERENCE_OPS_TD

// Preference training (direct preference optimisation, DPO; Rafailov et al. 2023, as TRL's
// DPOTrainer computes its default "sigmoid" loss): a batch's rows come in pairs, row 2i a
// prompt with its chosen reply and row 2i+1 the same prompt with its rejected reply, the
// targets of each row its reply's tokens (the prompt's are ignored, as mttok masks them).
// mt.sequence_logprob sums each row's log-probabilities of its targets; mt.dpo_loss compares
// each pair's sums with the reference model's (the same model before training, an input).

def Mt_SequenceLogprobOp : Mt_KernelOp<"sequence_logprob", [KernelOpInterface,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "each row's summed log-probability of its targets under the softmax of its logits";
  let description = [{
    logp[b] = sum over t with targets[b, t] in [0, V) of logits[b, t, targets[b, t]] - lse[b, t],
    lse the log-sum-exp of logits[b, t, :] (also returned, for the backward). A row with no
    counted target has 0.

    ```mlir
    %logp, %lse = mt.sequence_logprob %logits, %targets : tensor<4x64x256xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$logits, Mt_I32Tensor:$targets);
  let results = (outs Mt_F32Tensor:$logp, Mt_F32Tensor:$lse);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` type($logits) `,` type($targets)";
}

def Mt_SequenceLogprobGradOp : Mt_KernelOp<"sequence_logprob_grad", [KernelOpInterface]> {
  let summary = "backward of mt.sequence_logprob: dlogits";
  let description = [{
    dlogits[b, t, v] = dlogp[b] * (onehot(targets[b, t])[v] - softmax(logits[b, t])[v]) where the
    target counts, 0 where it does not.

    ```mlir
    %dl = mt.sequence_logprob_grad %dlogp, %logits, %targets, %lse : tensor<4xf32>, tensor<4x64x256xf32>, tensor<4x64xi32>, tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dlogp, Mt_FloatTensor:$logits, Mt_I32Tensor:$targets, Mt_F32Tensor:$lse);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_DpoLossOp : Mt_KernelOp<"dpo_loss", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "the DPO loss of a batch of (chosen, rejected) rows";
  let description = [{
    Over the P = B/2 pairs (rows 2i chosen, 2i+1 rejected), with the reference model's
    log-probabilities `reference` (B) (an input: no gradient):
      z_i = beta * ((logp[2i] - reference[2i]) - (logp[2i+1] - reference[2i+1]))
      loss = mean_i -log(sigmoid(z_i)) = mean_i softplus(-z_i).
    beta * (logp - reference) is each row's implicit reward.

    ```mlir
    %loss = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32} : tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$logp, Mt_F32Tensor:$reference, F32Attr:$beta);
  let results = (outs Mt_F32Tensor:$loss);
  let assemblyFormat = "$logp `,` $reference attr-dict `:` type($logp) `,` type($reference)";
}

def Mt_DpoLossGradOp : Mt_KernelOp<"dpo_loss_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.dpo_loss: dlogp (B)";
  let description = [{
    dlogp[2i] = -dloss * beta * sigmoid(-z_i) / P, dlogp[2i+1] = -dlogp[2i].

    ```mlir
    %dlogp = mt.dpo_loss_grad %dloss, %logp, %ref {beta = 1.0e-1 : f32} : tensor<f32>, tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dloss, Mt_F32Tensor:$logp, Mt_F32Tensor:$reference, F32Attr:$beta);
  let results = (outs Mt_F32Tensor:$dlogp);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

#endif // MT_PREFERENCE_OPS_TD
