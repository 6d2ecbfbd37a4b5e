// PASSES: --mt-attach-loss="objective=dpo dpo-loss=ipo rpo-alpha=0.5"
// objective=dpo with rpo-alpha (mtc --rpo-alpha): the DPO loss (here IPO's, of each row's mean
// log-probability: mt.sequence_logprob {average}) plus mt.pair_nll, alpha times the chosen
// replies' NLL per token from those means and the targets, of the logits' vocabulary.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[TARGETS:[a-z0-9]+]]: tensor<2x3xi32> {mt.input = "targets"}
// CHECK-SAME: %[[REF:[a-z0-9]+]]: tensor<2xf32> {mt.input = "reference_logps"}
// CHECK: %[[LOGITS:.*]] = mt.matmul
// CHECK: %[[LOGP:[a-z0-9]+]], %{{.*}} = mt.sequence_logprob %[[LOGITS]], %[[TARGETS]] {average = true} : tensor<2x3x5xf32>, tensor<2x3xi32>
// CHECK: %[[DPO:[0-9]+]] = mt.dpo_loss %[[LOGP]], %[[REF]] {beta = 1.000000e-01 : f32, kind = 3 : i32} : tensor<2xf32>, tensor<2xf32>
// CHECK: %[[NLL:[0-9]+]] = mt.pair_nll %[[LOGP]], %[[TARGETS]] {alpha = 5.000000e-01 : f32, average = true, vocab = 5 : i64} : tensor<2xf32>, tensor<2x3xi32>
// CHECK: %[[LOSS:[0-9]+]] = mt.add %[[DPO]], %[[NLL]] : tensor<f32>, tensor<f32>
// CHECK: return %[[LOSS]], %[[LOGP]] : tensor<f32>, tensor<2xf32>
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<2x3x5xf32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  return %logits : tensor<2x3x5xf32>
}

// -----

func.func @odd_batch(%tokens: tensor<3x3xi32> {mt.input = "tokens"},
                     %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<3x3x5xf32> {
  %x = mt.embedding %tokens, %w : tensor<3x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<3x3x4xf32>, tensor<5x4xf32>
  // expected-error @+1 {{cannot train preferences (objective dpo) on a batch of 3 rows}}
  return %logits : tensor<3x3x5xf32>
}
