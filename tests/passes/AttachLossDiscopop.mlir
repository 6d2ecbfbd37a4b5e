// PASSES: --mt-attach-loss="objective=dpo dpo-loss=discopop discopop-tau=0.25"
// objective=dpo with dpo-loss=discopop (mtc --dpo-loss discopop --discopop-tau): a loss of TRL's
// family with a reference model (the reference_logps input) over each row's summed
// log-probability, its temperature tau carried by mt.dpo_loss (kind 11); DiscoPOP without a tau,
// and a tau on another kind, are refused.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[TARGETS:[a-z0-9]+]]: tensor<2x3xi32> {mt.input = "targets"}
// CHECK-SAME: %[[REF:[a-z0-9]+]]: tensor<2xf32> {mt.input = "reference_logps"}
// CHECK: %[[LOGP:[a-z0-9]+]], %{{.*}} = mt.sequence_logprob %{{.*}}, %[[TARGETS]] : tensor<2x3x5xf32>, tensor<2x3xi32>
// CHECK: %[[LOSS:[0-9]+]] = mt.dpo_loss %[[LOGP]], %[[REF]] {beta = 1.000000e-01 : f32, kind = 11 : i32, tau = 2.500000e-01 : f32} : tensor<2xf32>, tensor<2xf32>
// CHECK: return %[[LOSS]], %[[LOGP]] : tensor<f32>, tensor<2xf32>
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<2x3x5xf32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  return %logits : tensor<2x3x5xf32>
}

// -----

func.func @discopop_without_tau(%logp: tensor<2xf32>, %ref: tensor<2xf32>) -> tensor<f32> {
  // expected-error @+1 {{tau (DiscoPOP's temperature) must be positive for kind discopop, and 0 for the others}}
  %loss = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32, kind = 11 : i32} : tensor<2xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}

// -----

func.func @tau_of_sigmoid(%logp: tensor<2xf32>, %ref: tensor<2xf32>) -> tensor<f32> {
  // expected-error @+1 {{tau (DiscoPOP's temperature) must be positive for kind discopop, and 0 for the others}}
  %loss = mt.dpo_loss %logp, %ref {beta = 1.0e-1 : f32, tau = 0.5 : f32} : tensor<2xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}
