// PASSES: --mt-attach-loss="objective=dpo dpo-loss=orpo beta=0.25 rpo-alpha=1"
// objective=dpo with dpo-loss=orpo (mtc --dpo-loss orpo): ORPO is reference-free, so the function
// gains no reference_logps input and mt.dpo_loss (kind 5) reads a mt.fill of zeros; it compares
// each row's mean log-probability (mt.sequence_logprob {average}), and its NLL term (mtc gives
// rpo-alpha 1 unless told) is mt.pair_nll of those means, added to the odds-ratio term.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[TARGETS:[a-z0-9]+]]: tensor<2x3xi32> {mt.input = "targets"}
// CHECK-NOT: reference_logps
// CHECK: %[[LOGITS:.*]] = mt.matmul
// CHECK: %[[ZEROS:[0-9]+]] = mt.fill {value = 0.000000e+00 : f32} : tensor<2xf32>
// CHECK: %[[LOGP:[a-z0-9]+]], %{{.*}} = mt.sequence_logprob %[[LOGITS]], %[[TARGETS]] {average = true} : tensor<2x3x5xf32>, tensor<2x3xi32>
// CHECK: %[[ODDS:[0-9]+]] = mt.dpo_loss %[[LOGP]], %[[ZEROS]] {beta = 2.500000e-01 : f32, kind = 5 : i32} : tensor<2xf32>, tensor<2xf32>
// CHECK: %[[NLL:[0-9]+]] = mt.pair_nll %[[LOGP]], %[[TARGETS]] {alpha = 1.000000e+00 : f32, average = true, vocab = 5 : i64} : tensor<2xf32>, tensor<2x3xi32>
// CHECK: %[[LOSS:[0-9]+]] = mt.add %[[ODDS]], %[[NLL]] : tensor<f32>, tensor<f32>
// CHECK: return %[[LOSS]], %[[LOGP]] : tensor<f32>, tensor<2xf32>
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<2x3x5xf32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  return %logits : tensor<2x3x5xf32>
}

// -----

// Gamma is SimPO's alone: an ORPO loss that carries one is refused.
func.func @orpo_with_gamma(%logp: tensor<2xf32>, %zeros: tensor<2xf32>) -> tensor<f32> {
  // expected-error @+1 {{gamma (SimPO's target margin) must be finite, and 0 but for kind simpo}}
  %loss = mt.dpo_loss %logp, %zeros {beta = 0.25 : f32, kind = 5 : i32, gamma = 0.5 : f32} : tensor<2xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}
