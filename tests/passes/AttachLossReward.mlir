// PASSES: "--mt-attach-loss=objective=reward center-rewards=0.01"
// objective=reward: a function returning scores (B, T, 1) (a reward model's head of one output) gets a
// targets input, each row's reward position (B) i32 and each pair's margin (B/2) f32, its reward
// mt.row_score there, returned as the output policy_rewards after the loss mt.reward_loss of rows in
// (chosen, rejected) pairs with those margins; logits of a whole vocabulary (an LM head) are refused,
// as is an odd batch.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<4x3xi32> {mt.input = "targets"}
// CHECK-SAME: %[[POS:[a-z0-9]+]]: tensor<4xi32> {mt.input = "reward_positions"}
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<2xf32> {mt.input = "reward_margins"}
// CHECK-SAME: -> (tensor<f32> {mt.loss}, tensor<4xf32> {mt.output = "policy_rewards"})
// CHECK: %[[SCORES:.*]] = mt.matmul
// CHECK: %[[R:[a-z0-9]+]] = mt.row_score %[[SCORES]], %[[POS]] : tensor<4x3x1xf32>, tensor<4xi32>
// CHECK: %[[LOSS:[a-z0-9]+]] = mt.reward_loss %[[R]], %[[M]] {center = 0.00999999977 : f32} : tensor<4xf32>, tensor<2xf32>
// CHECK: return %[[LOSS]], %[[R]] : tensor<f32>, tensor<4xf32>
func.func @forward(%tokens: tensor<4x3xi32> {mt.input = "tokens"},
                   %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}},
                   %s: tensor<1x4xf32> {mt.param = {name = "score.weight", init = "normal", std = 0.02 : f32}})
    -> tensor<4x3x1xf32> {
  %x = mt.embedding %tokens, %w : tensor<4x3xi32>, tensor<5x4xf32>
  %scores = mt.matmul %x, %s {transpose_b = true} : tensor<4x3x4xf32>, tensor<1x4xf32>
  return %scores : tensor<4x3x1xf32>
}

// -----

func.func @lm_head(%tokens: tensor<4x3xi32> {mt.input = "tokens"},
                   %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<4x3x5xf32> {
  %x = mt.embedding %tokens, %w : tensor<4x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<4x3x4xf32>, tensor<5x4xf32>
  // expected-error @+1 {{cannot train a reward model (objective reward): the function returns 5 outputs per token; a reward model's head gives one score}}
  return %logits : tensor<4x3x5xf32>
}

// -----

func.func @odd_batch(%tokens: tensor<3x3xi32> {mt.input = "tokens"},
                     %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}},
                     %s: tensor<1x4xf32> {mt.param = {name = "score.weight", init = "normal", std = 0.02 : f32}})
    -> tensor<3x3x1xf32> {
  %x = mt.embedding %tokens, %w : tensor<3x3xi32>, tensor<5x4xf32>
  %scores = mt.matmul %x, %s {transpose_b = true} : tensor<3x3x4xf32>, tensor<1x4xf32>
  // expected-error @+1 {{cannot train a reward model (objective reward) on a batch of 3 rows: its rows are (chosen, rejected) pairs; give an even batch}}
  return %scores : tensor<3x3x1xf32>
}
