#ifndef MT_PREFERENCE_OPS_TD
#define MT_PREFERENCE_OPS_TD

// Preference training (direct preference optimisation, DPO; Rafailov et al. 2023, as TRL's
// DPOTrainer computes its default "sigmoid" loss): a batch's rows come in pairs, row 2i a
// prompt with its chosen reply and row 2i+1 the same prompt with its rejected reply, the
// targets of each row its reply's tokens (the prompt's are ignored, as mttok masks them).
// mt.sequence_logprob sums each row's log-probabilities of its targets; mt.dpo_loss compares
// each pair's sums with the reference model's (the same model before training, an input).

// What mt.dpo_loss makes of a pair's margin z (TRL's loss_type; kernels/loss/loss.h DpoLossKind,
// the same values), with label smoothing e:
//   sigmoid  -(1 - e) log sigmoid(z) - e log sigmoid(-z)   (DPO; e > 0: conservative DPO)
//   hinge    max(0, 1 - z)                                  (SLiC)
//   robust   (-(1 - e) log sigmoid(z) + e log sigmoid(-z)) / (1 - 2e)   (robust DPO, e < 1/2)
//   ipo      ((z - 1/2) / beta)^2   (IPO, of mean log-probabilities: mt.sequence_logprob {average})
//   simpo    sigmoid's of z - gamma   (SimPO: of mean log-probabilities, the reference zeros)
//   orpo     -beta log sigmoid(z), z not beta times the gains but the log odds ratio
//            log(p_c / (1 - p_c)) - log(p_r / (1 - p_r)), p = e^logp of each reply's mean
//            log-probability per token (ORPO's odds-ratio term, the reference zeros; e ignored)
// and of c and r, the chosen and rejected replies' log-ratios (z = beta (c - r)), s the sigmoid:
//   exo_pair   s(z) (log s(z) - log(1 - e)) + s(-z) (log s(-z) - log e)   (EXO; e 1e-3 where 0)
//   sppo_hard  (c - 1/(2 beta))^2 + (r + 1/(2 beta))^2                       (SPPO, hard)
//   nca_pair   -log s(beta c) - log s(-beta c) / 2 - log s(-beta r) / 2     (NCA)
//   apo_zero   1 - s(beta c) + s(beta r);  apo_down  s(beta c) + 1 - s(z)  (APO)
//   discopop   -log s(z) (1 - m) + exp(-z) m, m = s(z / tau)               (DiscoPOP)
//   aot        sigmoid's of beta (x_(k) - y_(k)), the k-th smallest over the batch's pairs of
//              x = the policy's log-ratio chosen over rejected, y the reference's     (AOT)
//   aot_pair   the same of x = c, y = r                                               (AOT, pairs)
def Mt_PreferenceLoss : I32EnumAttr<"PreferenceLoss", "what mt.dpo_loss makes of a pair's margin", [
    I32EnumAttrCase<"Sigmoid", 0, "sigmoid">,
    I32EnumAttrCase<"Hinge", 1, "hinge">,
    I32EnumAttrCase<"Robust", 2, "robust">,
    I32EnumAttrCase<"Ipo", 3, "ipo">,
    I32EnumAttrCase<"Simpo", 4, "simpo">,
    I32EnumAttrCase<"Orpo", 5, "orpo">,
    I32EnumAttrCase<"ExoPair", 6, "exo_pair">,
    I32EnumAttrCase<"SppoHard", 7, "sppo_hard">,
    I32EnumAttrCase<"NcaPair", 8, "nca_pair">,
    I32EnumAttrCase<"ApoZero", 9, "apo_zero">,
    I32EnumAttrCase<"ApoDown", 10, "apo_down">,
    I32EnumAttrCase<"Discopop", 11, "discopop">,
    I32EnumAttrCase<"Aot", 12, "aot">,
    I32EnumAttrCase<"AotPair", 13, "aot_pair">]> {
  let cppNamespace = "::mt";
}

def Mt_SequenceLogprobOp : Mt_KernelOp<"sequence_logprob", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "each row's summed (or mean) log-probability of its targets under the softmax of its logits";
  let description = [{
    logp[b] = sum over t with targets[b, t] in [0, V) of logits[b, t, targets[b, t]] - lse[b, t],
    lse the log-sum-exp of logits[b, t, :] (also returned, for the backward). A row with no
    counted target has 0. With `average`, the sum over the row's count of counted targets (the
    mean log-probability per token, as TRL's IPO loss takes it).

    ```mlir
    %logp, %lse = mt.sequence_logprob %logits, %targets : tensor<4x64x256xf32>, tensor<4x64xi32>
    %mean, %lse2 = mt.sequence_logprob %logits, %targets {average = true} : tensor<4x64x256xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$logits, Mt_I32Tensor:$targets,
                       DefaultValuedAttr<BoolAttr, "false">:$average);
  let results = (outs Mt_F32Tensor:$logp, Mt_F32Tensor:$lse);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` type($logits) `,` type($targets)";
}

def Mt_SequenceLogprobGradOp : Mt_KernelOp<"sequence_logprob_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.sequence_logprob: dlogits";
  let description = [{
    dlogits[b, t, v] = dlogp[b] * (onehot(targets[b, t])[v] - softmax(logits[b, t])[v]) where the
    target counts, 0 where it does not; with `average`, dlogp[b] over the row's count.

    ```mlir
    %dl = mt.sequence_logprob_grad %dlogp, %logits, %targets, %lse : tensor<4xf32>, tensor<4x64x256xf32>, tensor<4x64xi32>, tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dlogp, Mt_FloatTensor:$logits, Mt_I32Tensor:$targets, Mt_F32Tensor:$lse,
                       DefaultValuedAttr<BoolAttr, "false">:$average);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

// The vocabulary split of mt.sequence_logprob (mt-split-vocab, after autodiff: no gradient
// rules): each chunk of the LM head's rows folds its logits into the running (log-sum-exp,
// target logit) of every token with mt.xent_chunk, as the next-token loss's chunks do; these
// finish each row's sum and give each chunk its dlogits.
def Mt_SequenceLogprobFinishOp : Mt_KernelOp<"sequence_logprob_finish", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "mt.sequence_logprob's (logp, lse) from the running state of every vocabulary chunk";
  let description = [{
    `running` (B, T, 2) holds each token's log-sum-exp over all `vocab` ids and its target's
    logit (`mt.xent_chunk` over every chunk): logp[b] = sum over t with targets[b, t] in [0, vocab)
    of running[b, t, 1] - running[b, t, 0] (with `average`, over their count); lse = running[..., 0].

    ```mlir
    %logp, %lse = mt.sequence_logprob_finish %r2, %targets {vocab = 256} : tensor<4x64x2xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$running, Mt_I32Tensor:$targets, I64Attr:$vocab,
                       DefaultValuedAttr<BoolAttr, "false">:$average);
  let results = (outs Mt_F32Tensor:$logp, Mt_F32Tensor:$lse);
  let assemblyFormat = "$running `,` $targets attr-dict `:` type($running) `,` type($targets)";
}

def Mt_SequenceLogprobChunkGradOp : Mt_KernelOp<"sequence_logprob_chunk_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "dlogits of one vocabulary chunk (mt.sequence_logprob_grad's columns [first, first + Vc))";
  let description = [{
    ```mlir
    %dl1 = mt.sequence_logprob_chunk_grad %dlogp, %logits1, %targets, %lse {first = 128, vocab = 256} : tensor<4xf32>, tensor<4x64x128xf32>, tensor<4x64xi32>, tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dlogp, Mt_FloatTensor:$logits, Mt_I32Tensor:$targets, Mt_F32Tensor:$lse,
                       I64Attr:$first, I64Attr:$vocab, DefaultValuedAttr<BoolAttr, "false">:$average);
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
      loss = mean_i l(z_i), l by `kind` (default sigmoid: softplus(-z) = -log sigmoid(z)) with
      `label_smoothing` (default 0); `gamma`, SimPO's target margin, is the simpo kind's only, and
      `tau`, DiscoPOP's temperature (positive), the discopop kind's.
    beta * (logp - reference) is each row's implicit reward. Kind orpo's z_i is instead the log
    odds ratio of the rows' means (kernels/loss/loss.h orpoLogOdds), its loss beta * softplus(-z).

    ```mlir
    %orpo = mt.dpo_loss %mean, %zeros {beta = 1.0e-1 : f32, kind = 5 : i32} : tensor<4xf32>, tensor<4xf32>
    ```

    ```mlir
    %loss = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32} : tensor<4xf32>, tensor<4xf32>
    %robust = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32, kind = 2 : i32, label_smoothing = 1.0e-1 : f32}
        : tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$logp, Mt_F32Tensor:$reference, F32Attr:$beta,
                       DefaultValuedAttr<Mt_PreferenceLoss, "::mt::PreferenceLoss::Sigmoid">:$kind,
                       DefaultValuedAttr<F32Attr, "0.0f">:$label_smoothing,
                       DefaultValuedAttr<F32Attr, "0.0f">:$gamma,
                       DefaultValuedAttr<F32Attr, "0.0f">:$tau);
  let results = (outs Mt_F32Tensor:$loss);
  let assemblyFormat = "$logp `,` $reference attr-dict `:` type($logp) `,` type($reference)";
}

def Mt_DpoLossGradOp : Mt_KernelOp<"dpo_loss_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.dpo_loss: dlogp (B)";
  let description = [{
    For the losses of z alone: dlogp[2i] = dloss * beta * l'(z_i) / P, dlogp[2i+1] = -dlogp[2i]
    (sigmoid: l'(z) = -sigmoid(-z)); orpo: dloss * l'(z_i) / P times z_i's slope in each row
    (1 / (1 - p) and -1 / (1 - p)); sppo_hard, nca_pair, apo_zero, apo_down: dloss / P times the
    loss's derivative in each row's log-ratio (kernels/loss/loss.h dpoPair); aot, aot_pair: each
    row's side's derivative at its rank (dpoBatchPair).

    ```mlir
    %dlogp = mt.dpo_loss_grad %dloss, %logp, %ref {beta = 1.0e-1 : f32} : tensor<f32>, tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dloss, Mt_F32Tensor:$logp, Mt_F32Tensor:$reference, F32Attr:$beta,
                       DefaultValuedAttr<Mt_PreferenceLoss, "::mt::PreferenceLoss::Sigmoid">:$kind,
                       DefaultValuedAttr<F32Attr, "0.0f">:$label_smoothing,
                       DefaultValuedAttr<F32Attr, "0.0f">:$gamma,
                       DefaultValuedAttr<F32Attr, "0.0f">:$tau);
  let results = (outs Mt_F32Tensor:$dlogp);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

// KTO (Ethayarajh et al. 2024, as TRL's KTOTrainer computes its default "kto" loss): each example
// is a prompt with one completion labelled desirable or undesirable, not a pair of replies. Its
// rows come in pairs, row 2i the example and row 2i+1 its KL row: the same prompt with another
// example's completion (mttok --unpaired chooses it), whose log-ratios estimate the KL divergence
// of the policy from the reference.
def Mt_KtoLossOp : Mt_KernelOp<"kto_loss", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "the KTO loss of a batch of (example, KL) rows, each example labelled";
  let description = [{
    Over the P = B/2 examples, with the reference model's log-probabilities `reference` (B) and
    `labels` (P) (1: the completion is desirable, 0: undesirable; both inputs, no gradient):
      kl = max(0, mean_i ((logp - reference)[2i+1]))   (no gradient, as TRL detaches it)
      c_i = (logp - reference)[2i]
      l_i = desirable_weight * (1 - sigmoid(beta * (c_i - kl)))     where labels[i] = 1
            undesirable_weight * (1 - sigmoid(beta * (kl - c_i)))   where labels[i] = 0
      loss = mean_i l_i
    beta * c_i is example i's implicit reward.

    ```mlir
    %loss = mt.kto_loss %logp, %ref, %labels {beta = 1.0e-1 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<2xf32>
    %weighted = mt.kto_loss %logp, %ref, %labels {beta = 1.0e-1 : f32, undesirable_weight = 1.5 : f32}
        : tensor<4xf32>, tensor<4xf32>, tensor<2xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$logp, Mt_F32Tensor:$reference, Mt_F32Tensor:$labels, F32Attr:$beta,
                       DefaultValuedAttr<F32Attr, "1.0f">:$desirable_weight,
                       DefaultValuedAttr<F32Attr, "1.0f">:$undesirable_weight);
  let results = (outs Mt_F32Tensor:$loss);
  let assemblyFormat = "$logp `,` $reference `,` $labels attr-dict `:` type($logp) `,` type($reference) `,` type($labels)";
}

def Mt_KtoLossGradOp : Mt_KernelOp<"kto_loss_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.kto_loss: dlogp (B), 0 on the KL rows";
  let description = [{
    dlogp[2i] = dloss / P * dl_i/dc_i: -desirable_weight * beta * s(x)(1 - s(x)) with x = beta (c_i - kl)
    where labels[i] = 1, undesirable_weight * beta * s(x)(1 - s(x)) with x = beta (kl - c_i) where 0;
    dlogp[2i+1] = 0.

    ```mlir
    %dlogp = mt.kto_loss_grad %dloss, %logp, %ref, %labels {beta = 1.0e-1 : f32} : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dloss, Mt_F32Tensor:$logp, Mt_F32Tensor:$reference, Mt_F32Tensor:$labels,
                       F32Attr:$beta,
                       DefaultValuedAttr<F32Attr, "1.0f">:$desirable_weight,
                       DefaultValuedAttr<F32Attr, "1.0f">:$undesirable_weight);
  let results = (outs Mt_F32Tensor:$dlogp);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

// Reward modelling (as TRL's RewardTrainer trains a model of Hugging Face's
// ...ForSequenceClassification with num_labels 1): the head gives one score per token, a row's
// reward is its score at the example's last token, and the loss of each (chosen, rejected) pair
// prefers the chosen reply's reward.
def Mt_RowScoreOp : Mt_KernelOp<"row_score", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "each row's score at its position: rewards[b] = scores[b, positions[b], 0]";
  let description = [{
    `positions` (B) i32, an input: where each row's example ends (its last token before the
    end-of-text token), as Hugging Face's sequence classifier reads its last non-padding token.

    ```mlir
    %rewards = mt.row_score %scores, %positions : tensor<4x64x1xf32>, tensor<4xi32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$scores, Mt_I32Tensor:$positions);
  let results = (outs Mt_F32Tensor:$rewards);
  let assemblyFormat = "$scores `,` $positions attr-dict `:` type($scores) `,` type($positions)";
}

def Mt_RowScoreGradOp : Mt_KernelOp<"row_score_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.row_score: dscores (B, T, 1), drewards[b] at (b, positions[b]), 0 elsewhere";
  let description = [{
    ```mlir
    %dscores = mt.row_score_grad %drewards, %scores, %positions : tensor<4xf32>, tensor<4x64x1xf32>, tensor<4xi32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$drewards, Mt_F32Tensor:$scores, Mt_I32Tensor:$positions);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_RewardLossOp : Mt_KernelOp<"reward_loss", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs", "getKernelName"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "the reward model's loss of a batch of (chosen, rejected) rows";
  let description = [{
    Over the P = B/2 pairs (rows 2i chosen, 2i+1 rejected), m[i] each pair's margin (the optional
    `margins` (P), an input: TRL's "margin" column; 0 without, and the kernel mt.reward_loss; with
    them, mt.reward_margin_loss):
      loss = mean_i -log sigmoid(r[2i] - r[2i+1] - m[i]) + center * mean_i (r[2i] + r[2i+1])^2
    `center` TRL's center_rewards_coefficient (default 0: none).

    ```mlir
    %loss = mt.reward_loss %rewards : tensor<4xf32>
    %centered = mt.reward_loss %rewards {center = 1.0e-2 : f32} : tensor<4xf32>
    %margined = mt.reward_loss %rewards, %margins : tensor<4xf32>, tensor<2xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$rewards, Optional<Mt_F32Tensor>:$margins,
                       DefaultValuedAttr<F32Attr, "0.0f">:$center);
  let results = (outs Mt_F32Tensor:$loss);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_RewardLossGradOp : Mt_KernelOp<"reward_loss_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs", "getKernelName"]>]> {
  let summary = "backward of mt.reward_loss: drewards (B)";
  let description = [{
    With d[i] = r[2i] - r[2i+1] - m[i] (the forward's margins, optional, last):
    drewards[2i] = dloss / P * (-sigmoid(-d[i]) + 2 center (r[2i] + r[2i+1])),
    drewards[2i+1] = dloss / P * (sigmoid(-d[i]) + 2 center (r[2i] + r[2i+1])).
    With margins, the kernel mt.reward_margin_loss_grad.

    ```mlir
    %drewards = mt.reward_loss_grad %dloss, %rewards : tensor<f32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dloss, Mt_F32Tensor:$rewards, Optional<Mt_F32Tensor>:$margins,
                       DefaultValuedAttr<F32Attr, "0.0f">:$center);
  let results = (outs Mt_F32Tensor:$drewards);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_PairNllOp : Mt_KernelOp<"pair_nll", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "alpha times the chosen replies' negative log-likelihood per token (RPO's and CPO's NLL term)";
  let description = [{
    Rows 2i are the chosen replies: -alpha * sum_i S[2i] / sum_i n[2i], n[b] row b's targets in
    [0, vocab) and S[b] its summed log-probability (`logp[b]`, or `logp[b] * n[b]` where
    `average` says logp holds each row's mean); 0 where the chosen rows count nothing. Added to
    mt.dpo_loss, this is TRL's rpo_alpha (DPOTrainer) and cpo_alpha (CPOTrainer).

    ```mlir
    %nll = mt.pair_nll %logp, %targets {alpha = 1.0 : f32, vocab = 256} : tensor<4xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$logp, Mt_I32Tensor:$targets, F32Attr:$alpha, I64Attr:$vocab,
                       DefaultValuedAttr<BoolAttr, "false">:$average);
  let results = (outs Mt_F32Tensor:$loss);
  let assemblyFormat = "$logp `,` $targets attr-dict `:` type($logp) `,` type($targets)";
}

def Mt_PairNllGradOp : Mt_KernelOp<"pair_nll_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.pair_nll: dlogp (B), 0 on the rejected rows";
  let description = [{
    dlogp[2i] = -dloss * alpha * (average ? n[2i] : 1) / sum_i n[2i], dlogp[2i + 1] = 0.

    ```mlir
    %dlogp = mt.pair_nll_grad %dloss, %logp, %targets {alpha = 1.0 : f32, vocab = 256} : tensor<f32>, tensor<4xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dloss, Mt_F32Tensor:$logp, Mt_I32Tensor:$targets, F32Attr:$alpha, I64Attr:$vocab,
                       DefaultValuedAttr<BoolAttr, "false">:$average);
  let results = (outs Mt_F32Tensor:$dlogp);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

#endif // MT_PREFERENCE_OPS_TD
