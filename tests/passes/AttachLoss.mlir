// PASSES: --mt-attach-loss
// Logits (B, T, V) get a targets input and a softmax cross-entropy; the loss is returned.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[TARGETS:[a-z0-9]+]]: tensor<2x3xi32> {mt.input = "targets"}
// CHECK-SAME: -> (tensor<f32> {mt.loss})
// CHECK: %[[LOGITS:.*]] = mt.matmul
// CHECK: %[[LOSS:[a-z0-9]+]], %{{.*}} = mt.softmax_xent %[[LOGITS]], %[[TARGETS]] : tensor<2x3x5xf32>, tensor<2x3xi32>
// CHECK: return %[[LOSS]] : tensor<f32>
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<2x3x5xf32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  return %logits : tensor<2x3x5xf32>
}

// -----

// A function that already returns a scalar loss is left as it is.
// CHECK-LABEL: func.func @scalar
// CHECK: mt.softmax_xent
// CHECK-NOT: mt.softmax_xent
// CHECK: return %{{.*}} : tensor<f32>
func.func @scalar(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                  %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<f32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %loss, %lse = mt.softmax_xent %x, %tokens : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

func.func @not_logits(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                      %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<3x4xf32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %y = mt.sum_to %x : tensor<2x3x4xf32> -> tensor<3x4xf32>
  // expected-error @+1 {{cannot attach a loss: the function returns 'tensor<3x4xf32>'; expected f32 logits of shape (B, T, V) or a scalar loss}}
  return %y : tensor<3x4xf32>
}

// -----

// A function that returns its own DPO loss (TRL's robust loss, label smoothing 0.2) is left as it
// is; the attributes print back.
// CHECK-LABEL: func.func @own_dpo_loss
// CHECK: mt.dpo_loss %{{.*}}, %{{.*}} {beta = 1.000000e-01 : f32, kind = 2 : i32, label_smoothing = 2.000000e-01 : f32}
func.func @own_dpo_loss(%logits: tensor<2x3x5xf32>, %targets: tensor<2x3xi32> {mt.input = "targets"},
                        %ref: tensor<2xf32> {mt.input = "reference_logps"}) -> tensor<f32> {
  %logp, %lse = mt.sequence_logprob %logits, %targets : tensor<2x3x5xf32>, tensor<2x3xi32>
  %loss = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32, kind = 2 : i32, label_smoothing = 2.0e-1 : f32} : tensor<2xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}

// -----

func.func @robust_at_one_half(%logp: tensor<2xf32>, %ref: tensor<2xf32>) -> tensor<f32> {
  // expected-error @+1 {{beta must be positive and label_smoothing in [0, 1/2] (robust: below 1/2)}}
  %loss = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32, kind = 2 : i32, label_smoothing = 5.0e-1 : f32} : tensor<2xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}

// -----

// A DPO loss written with its defaults left out (kind sigmoid, no label smoothing) parses, as the
// op's documented example is written.
// CHECK-LABEL: func.func @dpo_defaults
// CHECK: mt.dpo_loss %{{.*}}, %{{.*}} {beta = 1.000000e-01 : f32} : tensor<2xf32>, tensor<2xf32>
// CHECK: mt.dpo_loss_grad %{{.*}}, %{{.*}}, %{{.*}} {beta = 1.000000e-01 : f32} : tensor<f32>, tensor<2xf32>, tensor<2xf32>
func.func @dpo_defaults(%logp: tensor<2xf32>, %ref: tensor<2xf32>, %seed: tensor<f32>)
    -> (tensor<f32>, tensor<2xf32> {mt.output = "dlogp"}) {
  %loss = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32} : tensor<2xf32>, tensor<2xf32>
  %dlogp = mt.dpo_loss_grad %seed, %logp, %ref {beta = 1.0e-1 : f32} : tensor<f32>, tensor<2xf32>, tensor<2xf32>
  return %loss, %dlogp : tensor<f32>, tensor<2xf32>
}

// -----

// A required attribute missing (beta) is named as the file is parsed (any mt op: Mt_InferTypeOpAdaptor).
func.func @dpo_without_beta(%logp: tensor<2xf32>, %ref: tensor<2xf32>) -> tensor<f32> {
  // expected-error @+1 {{'mt.dpo_loss' op requires attribute 'beta'}}
  %loss = mt.dpo_loss %logp, %ref : tensor<2xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}

// -----

// TRL's IPO loss of mean log-probabilities (mtc --dpo-loss ipo): the sums' average and the loss's
// kind print back.
// CHECK-LABEL: func.func @own_ipo_loss
// CHECK: mt.sequence_logprob %{{.*}}, %{{.*}} {average = true} : tensor<2x3x5xf32>, tensor<2x3xi32>
// CHECK: mt.dpo_loss %{{.*}}, %{{.*}} {beta = 1.000000e-01 : f32, kind = 3 : i32}
func.func @own_ipo_loss(%logits: tensor<2x3x5xf32>, %targets: tensor<2x3xi32> {mt.input = "targets"},
                        %ref: tensor<2xf32> {mt.input = "reference_logps"}) -> tensor<f32> {
  %logp, %lse = mt.sequence_logprob %logits, %targets {average = true} : tensor<2x3x5xf32>, tensor<2x3xi32>
  %loss = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32, kind = 3 : i32} : tensor<2xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}

// -----

// SimPO (mtc --dpo-loss simpo): its target margin prints back; gamma on another kind is refused.
// CHECK-LABEL: func.func @own_simpo_loss
// CHECK: mt.dpo_loss %{{.*}}, %{{.*}} {beta = 2.000000e+00 : f32, gamma = 5.000000e-01 : f32, kind = 4 : i32}
func.func @own_simpo_loss(%logp: tensor<2xf32>, %zeros: tensor<2xf32>) -> tensor<f32> {
  %loss = mt.dpo_loss %logp, %zeros {beta = 2.0 : f32, kind = 4 : i32, gamma = 0.5 : f32} : tensor<2xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}

// -----

func.func @gamma_of_sigmoid(%logp: tensor<2xf32>, %ref: tensor<2xf32>) -> tensor<f32> {
  // expected-error @+1 {{gamma (SimPO's target margin) must be finite, and 0 but for kind simpo}}
  %loss = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32, gamma = 0.5 : f32} : tensor<2xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}

// -----

// The NLL term of RPO and CPO (mtc --rpo-alpha) added to a DPO loss: its attributes print back;
// targets that are not (B, T) beside logp are refused.
// CHECK-LABEL: func.func @own_rpo_loss
// CHECK: mt.pair_nll %{{.*}}, %{{.*}} {alpha = 5.000000e-01 : f32, average = true, vocab = 5 : i64} : tensor<2xf32>, tensor<2x3xi32>
func.func @own_rpo_loss(%logp: tensor<2xf32>, %targets: tensor<2x3xi32> {mt.input = "targets"},
                        %ref: tensor<2xf32> {mt.input = "reference_logps"}) -> tensor<f32> {
  %dpo = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32} : tensor<2xf32>, tensor<2xf32>
  %nll = mt.pair_nll %logp, %targets {alpha = 0.5 : f32, vocab = 5, average = true} : tensor<2xf32>, tensor<2x3xi32>
  %loss = mt.add %dpo, %nll : tensor<f32>, tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @nll_of_other_rows(%logp: tensor<2xf32>, %targets: tensor<4x3xi32>) -> tensor<f32> {
  // expected-error @+1 {{targets must be (B, T) beside logp (B), not [4,3]}}
  %nll = mt.pair_nll %logp, %targets {alpha = 0.5 : f32, vocab = 5} : tensor<2xf32>, tensor<4x3xi32>
  return %nll : tensor<f32>
}
