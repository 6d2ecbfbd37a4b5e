// PASSES: --mt-attach-loss=objective=dpo
// objective=dpo: logits (B, T, V) of rows in (chosen, rejected) pairs get a targets input and the
// reference model's log-probabilities (B); the loss is mt.dpo_loss of each row's
// mt.sequence_logprob, returned first, those log-probabilities the output policy_logps after it,
// the router's named outputs after them.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[TARGETS:[a-z0-9]+]]: tensor<2x3xi32> {mt.input = "targets"}
// CHECK-SAME: %[[REF:[a-z0-9]+]]: tensor<2xf32> {mt.input = "reference_logps"}
// CHECK-SAME: -> (tensor<f32> {mt.loss}, tensor<2xf32> {mt.output = "policy_logps"}, tensor<4xf32> {mt.output = "stats"})
// CHECK: %[[LOGITS:.*]] = mt.matmul
// CHECK: %[[LOGP:[a-z0-9]+]], %{{.*}} = mt.sequence_logprob %[[LOGITS]], %[[TARGETS]] : tensor<2x3x5xf32>, tensor<2x3xi32>
// CHECK: %[[LOSS:[a-z0-9]+]] = mt.dpo_loss %[[LOGP]], %[[REF]] {beta = 1.000000e-01 : f32} : tensor<2xf32>, tensor<2xf32>
// CHECK: return %[[LOSS]], %[[LOGP]], %{{.*}} : tensor<f32>, tensor<2xf32>, tensor<4xf32>
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}},
                   %s: tensor<4xf32> {mt.param = {name = "s", init = "zeros"}})
    -> (tensor<2x3x5xf32>, tensor<4xf32> {mt.output = "stats"}) {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  return %logits, %s : tensor<2x3x5xf32>, tensor<4xf32>
}

// -----

func.func @odd_batch(%tokens: tensor<3x3xi32> {mt.input = "tokens"},
                     %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<3x3x5xf32> {
  %x = mt.embedding %tokens, %w : tensor<3x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<3x3x4xf32>, tensor<5x4xf32>
  // expected-error @+1 {{cannot train preferences (objective dpo) on a batch of 3 rows: its rows are (chosen, rejected) pairs; give an even batch}}
  return %logits : tensor<3x3x5xf32>
}
