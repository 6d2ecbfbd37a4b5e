// PASSES: --mt-autodiff
// A reward model's loss with each pair's margin (plan 1.27; TRL's "margin" column): its gradient
// mt.reward_loss_grad reads the same margins (an input: no gradient of their own), and without
// margins none (plan 1.26's form). Margins that are not one per pair are refused.

// CHECK-LABEL: func.func @margined
// CHECK: %[[R:[a-z0-9]+]] = mt.row_score
// CHECK: mt.reward_loss %[[R]], %arg4 {center = 0.00999999977 : f32} : tensor<4xf32>, tensor<2xf32>
// CHECK: mt.reward_loss_grad %{{.*}}, %[[R]], %arg4 {center = 0.00999999977 : f32, mt.backward} : tensor<f32>, tensor<4xf32>, tensor<2xf32>
func.func @margined(%tokens: tensor<4x3xi32> {mt.input = "tokens"},
                    %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}},
                    %s: tensor<1x4xf32> {mt.param = {name = "score.weight", init = "normal", std = 0.02 : f32}},
                    %positions: tensor<4xi32> {mt.input = "reward_positions"},
                    %margins: tensor<2xf32> {mt.input = "reward_margins"})
    -> (tensor<f32> {mt.loss}, tensor<4xf32> {mt.output = "policy_rewards"}) {
  %x = mt.embedding %tokens, %w : tensor<4x3xi32>, tensor<5x4xf32>
  %scores = mt.matmul %x, %s {transpose_b = true} : tensor<4x3x4xf32>, tensor<1x4xf32>
  %rewards = mt.row_score %scores, %positions : tensor<4x3x1xf32>, tensor<4xi32>
  %loss = mt.reward_loss %rewards, %margins {center = 0.00999999977 : f32} : tensor<4xf32>, tensor<2xf32>
  return %loss, %rewards : tensor<f32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @unmargined
// CHECK: mt.reward_loss_grad %{{.*}}, %{{.*}} {mt.backward} : tensor<f32>, tensor<4xf32>
func.func @unmargined(%tokens: tensor<4x3xi32> {mt.input = "tokens"},
                      %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}},
                      %s: tensor<1x4xf32> {mt.param = {name = "score.weight", init = "normal", std = 0.02 : f32}},
                      %positions: tensor<4xi32> {mt.input = "reward_positions"})
    -> (tensor<f32> {mt.loss}, tensor<4xf32> {mt.output = "policy_rewards"}) {
  %x = mt.embedding %tokens, %w : tensor<4x3xi32>, tensor<5x4xf32>
  %scores = mt.matmul %x, %s {transpose_b = true} : tensor<4x3x4xf32>, tensor<1x4xf32>
  %rewards = mt.row_score %scores, %positions : tensor<4x3x1xf32>, tensor<4xi32>
  %loss = mt.reward_loss %rewards : tensor<4xf32>
  return %loss, %rewards : tensor<f32>, tensor<4xf32>
}

// -----

func.func @margins_not_per_pair(%rewards: tensor<4xf32> {mt.input = "rewards"},
                                %margins: tensor<4xf32> {mt.input = "reward_margins"}) -> (tensor<f32> {mt.loss}) {
  // expected-error @+1 {{margins must have shape}}
  %loss = mt.reward_loss %rewards, %margins : tensor<4xf32>, tensor<4xf32>
  return %loss : tensor<f32>
}
