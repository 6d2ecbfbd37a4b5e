// PASSES: --mt-attach-loss="objective=kto beta=0.2 undesirable-weight=1.5"
// objective=kto: logits (B, T, V) of rows in (example, KL row) pairs get a targets input, the
// reference model's log-probabilities (B) and the examples' labels (B/2); the loss is mt.kto_loss
// of each row's summed mt.sequence_logprob (no average: TRL's KTOTrainer sums them), those
// log-probabilities the output policy_logps after it.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[TARGETS:[a-z0-9]+]]: tensor<4x3xi32> {mt.input = "targets"}
// CHECK-SAME: %[[REF:[a-z0-9]+]]: tensor<4xf32> {mt.input = "reference_logps"}
// CHECK-SAME: %[[LABELS:[a-z0-9]+]]: tensor<2xf32> {mt.input = "kto_labels"}
// CHECK-SAME: -> (tensor<f32> {mt.loss}, tensor<4xf32> {mt.output = "policy_logps"})
// CHECK: %[[LOGITS:.*]] = mt.matmul
// CHECK: %[[LOGP:[a-z0-9]+]], %{{.*}} = mt.sequence_logprob %[[LOGITS]], %[[TARGETS]] : tensor<4x3x5xf32>, tensor<4x3xi32>
// CHECK-NOT: average
// CHECK: %[[LOSS:[a-z0-9]+]] = mt.kto_loss %[[LOGP]], %[[REF]], %[[LABELS]] {beta = 2.000000e-01 : f32, undesirable_weight = 1.500000e+00 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<2xf32>
// CHECK-NOT: mt.pair_nll
// CHECK: return %[[LOSS]], %[[LOGP]] : tensor<f32>, tensor<4xf32>
func.func @forward(%tokens: tensor<4x3xi32> {mt.input = "tokens"},
                   %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<4x3x5xf32> {
  %x = mt.embedding %tokens, %w : tensor<4x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<4x3x4xf32>, tensor<5x4xf32>
  return %logits : tensor<4x3x5xf32>
}

// -----

func.func @odd_batch(%tokens: tensor<3x3xi32> {mt.input = "tokens"},
                     %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<3x3x5xf32> {
  %x = mt.embedding %tokens, %w : tensor<3x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<3x3x4xf32>, tensor<5x4xf32>
  // expected-error @+1 {{cannot train preferences (objective kto) on a batch of 3 rows: its rows are (example, KL row) pairs; give an even batch}}
  return %logits : tensor<3x3x5xf32>
}

// -----

// A negative weight is refused by the op itself.
func.func @negative_weight(%logp: tensor<4xf32>, %ref: tensor<4xf32>, %labels: tensor<2xf32>) -> tensor<f32> {
  // expected-error @+1 {{beta must be positive and desirable_weight and undesirable_weight not negative, all finite}}
  %loss = mt.kto_loss %logp, %ref, %labels {beta = 1.0e-1 : f32, desirable_weight = -1.0 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}

// -----

// Labels must be one per example (B/2).
func.func @labels_per_row(%logp: tensor<4xf32>, %ref: tensor<4xf32>, %labels: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{labels}}
  %loss = mt.kto_loss %logp, %ref, %labels {beta = 1.0e-1 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return %loss : tensor<f32>
}
