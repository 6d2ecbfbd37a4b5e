// PASSES: --mt-autodiff
// A sigmoid router (GLM-4.5's, DeepSeek-V3's) differentiated: the weights' gradient goes back
// through the scale, the renormalisation and the sigmoid into the logits (mt.moe_route_grad keeps
// the scale; the groups only choose); the choice bias, a frozen parameter that only chooses, takes
// no gradient. Refused: a bias beside the top-k softmax (which chooses by the logits), groups beside the top-k softmax (a softmax
// router's groups are DeepSeek-V2's), groups that do not split the experts, a bias of the wrong length.

// CHECK-LABEL: func.func @forward
// The frozen bias has no gradient between the router's and up's; groups_chosen 1, the default, is not printed.
// CHECK-SAME: tensor<4x4xf32> {mt.grad = "router"}, tensor<4x8x4xf32> {mt.grad = "up"}, tensor<4x4x8xf32> {mt.grad = "down"})
// CHECK: %[[W:.*]], %[[E:.*]] = mt.moe_route %[[LOGITS:.*]] bias %arg3 sigmoid_topk_normalized {groups = 2 : i64, scale = 2.500000e+00 : f32, top_k = 2 : i64} : tensor<2x3x4xf32>, tensor<4xf32>
// CHECK: mt.moe_combine_grad
// CHECK: %[[DLOGITS:.*]] = mt.moe_route_grad %{{.*}}, %[[LOGITS]], %[[E]] sigmoid_topk_normalized {mt.backward, scale = 2.500000e+00 : f32, top_k = 2 : i64}
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %embed: tensor<5x4xf32> {mt.param = {name = "embed", init = "normal", std = 0.02 : f32}},
                   %router: tensor<4x4xf32> {mt.param = {name = "router", init = "normal", std = 0.02 : f32}},
                   %bias: tensor<4xf32> {mt.param = {name = "bias", init = "zeros", frozen}},
                   %up: tensor<4x8x4xf32> {mt.param = {name = "up", init = "normal", std = 0.02 : f32}},
                   %down: tensor<4x4x8xf32> {mt.param = {name = "down", init = "normal", std = 0.02 : f32}},
                   %targets: tensor<2x3xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) {
  %x = mt.embedding %tokens, %embed : tensor<2x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %router {transpose_b = true} : tensor<2x3x4xf32>, tensor<4x4xf32>
  %w, %e = mt.moe_route %logits bias %bias sigmoid_topk_normalized {top_k = 2, groups = 2, groups_chosen = 1,
      scale = 2.5 : f32} : tensor<2x3x4xf32>, tensor<4xf32>
  %rows, %pos, %n = mt.moe_dispatch %x, %e {num_experts = 4} : tensor<2x3x4xf32>, tensor<2x3x2xi32>
  %h = mt.grouped_matmul %rows, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<4x8x4xf32>, tensor<4xi32>
  %y = mt.grouped_matmul %h, %down, %n {transpose_b = true} : tensor<12x8xf32>, tensor<4x4x8xf32>, tensor<4xi32>
  %out = mt.moe_combine %y, %pos, %w : tensor<12x4xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>
  %loss, %lse = mt.softmax_xent %out, %targets : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

func.func @bias_beside_topk_softmax(%logits: tensor<2x3x4xf32>, %bias: tensor<4xf32>) -> tensor<2x3x2xf32> {
  // expected-error @+1 {{'mt.moe_route' op a score bias needs a routing by scores, not topk_softmax}}
  %w, %e = mt.moe_route %logits bias %bias topk_softmax {top_k = 2} : tensor<2x3x4xf32>, tensor<4xf32>
  return %w : tensor<2x3x2xf32>
}

// -----

func.func @groups_beside_topk_softmax(%logits: tensor<2x3x4xf32>) -> tensor<2x3x2xf32> {
  // expected-error @+1 {{'mt.moe_route' op groups of experts need a routing by scores, not topk_softmax}}
  %w, %e = mt.moe_route %logits topk_softmax {top_k = 2, groups = 2} : tensor<2x3x4xf32>
  return %w : tensor<2x3x2xf32>
}

// -----

func.func @uneven_groups(%logits: tensor<2x3x4xf32>) -> tensor<2x3x2xf32> {
  // expected-error @+1 {{'mt.moe_route' op groups 3 must lie in [2, 64] and split the 4 experts into equal groups of two or more}}
  %w, %e = mt.moe_route %logits sigmoid_topk {top_k = 2, groups = 3} : tensor<2x3x4xf32>
  return %w : tensor<2x3x2xf32>
}

// -----

func.func @short_bias(%logits: tensor<2x3x4xf32>, %bias: tensor<3xf32>) -> tensor<2x3x2xf32> {
  // expected-error @+1 {{'mt.moe_route' op score bias must be (4), one per expert}}
  %w, %e = mt.moe_route %logits bias %bias sigmoid_topk {top_k = 2} : tensor<2x3x4xf32>, tensor<3xf32>
  return %w : tensor<2x3x2xf32>
}
