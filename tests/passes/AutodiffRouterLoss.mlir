// PASSES: --mt-autodiff
// The router's load-balancing loss (compiler/dialect/MtMoeOps.td) differentiated: the function
// returns its loss, then named outputs; the output with an objective weight (the auxiliary
// loss, mt.objective_weight = 0.05) is seeded with that weight, so its gradient adds to the
// loss's while the loss returned stays the cross-entropy. The loss's gradient goes back to the
// statistics' row 1 (mt.moe_balance_loss_grad), through the chain unchanged to each layer, and
// through the softmax into its router's logits (mt.moe_balance_stats_grad); the outputs come
// back after the gradients with their attributes.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {mt.loss}, tensor<5x4xf32> {mt.grad = "embed"}, tensor<3x4xf32> {mt.grad = "router"}, tensor<2x3xf32> {mt.output = "expert_load"}, tensor<f32> {mt.objective_weight = 5.000000e-02 : f32, mt.output = "router_aux_loss"})
// CHECK: %[[LOGITS:.*]] = mt.matmul
// CHECK: %[[STATS:.*]] = mt.moe_balance_stats %[[LOGITS]], %{{.*}}, %{{.*}} :
// CHECK: %[[AUX:.*]] = mt.moe_balance_loss %[[STATS]] {rows = 6 : i64}
// CHECK: %[[SEED:.*]] = mt.fill {mt.backward, value = 5.000000e-02 : f32} : tensor<f32>
// CHECK: %[[DSTATS:.*]] = mt.moe_balance_loss_grad %[[SEED]], %[[STATS]] {mt.backward, rows = 6 : i64}
// CHECK: %[[DLOGITS:.*]] = mt.moe_balance_stats_grad %[[DSTATS]], %[[LOGITS]] {mt.backward}
// CHECK: mt.add %{{.*}}, %[[DLOGITS]] {mt.backward}
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[STATS]], %[[AUX]] :
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %embed: tensor<5x4xf32> {mt.param = {name = "embed", init = "normal", std = 0.02 : f32}},
                   %router: tensor<3x4xf32> {mt.param = {name = "router", init = "normal", std = 0.02 : f32}},
                   %targets: tensor<2x3xi32> {mt.input = "targets"})
    -> (tensor<f32> {mt.loss}, tensor<2x3xf32> {mt.output = "expert_load"},
        tensor<f32> {mt.output = "router_aux_loss", mt.objective_weight = 0.05 : f32}) {
  %x = mt.embedding %tokens, %embed : tensor<2x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %router {transpose_b = true} : tensor<2x3x4xf32>, tensor<3x4xf32>
  %w, %e = mt.moe_route %logits softmax_topk_normalized {top_k = 2} : tensor<2x3x3xf32>
  %zero = mt.fill {value = 0.0 : f32} : tensor<2x3xf32>
  %stats = mt.moe_balance_stats %logits, %e, %zero : tensor<2x3x3xf32>, tensor<2x3x2xi32>, tensor<2x3xf32>
  %aux = mt.moe_balance_loss %stats {rows = 6} : tensor<2x3xf32>
  %p:2 = mt.softmax_xent %logits, %targets : tensor<2x3x3xf32>, tensor<2x3xi32>
  return %p#0, %stats, %aux : tensor<f32>, tensor<2x3xf32>, tensor<f32>
}

// -----

func.func @result_not_an_output(%logits: tensor<2x3x3xf32>, %targets: tensor<2x3xi32> {mt.input = "targets"})
    -> (tensor<f32> {mt.loss}, tensor<2x3x3xf32>) {
  %p:2 = mt.softmax_xent %logits, %targets : tensor<2x3x3xf32>, tensor<2x3xi32>
  // expected-error @+1 {{autodiff needs a function that returns one scalar f32 loss, then named outputs only}}
  return %p#0, %logits : tensor<f32>, tensor<2x3x3xf32>
}

// -----

func.func @stats_of_other_experts(%logits: tensor<2x3x3xf32>, %e: tensor<2x3x2xi32>, %s: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{moe_balance_stats total}}
  %t = mt.moe_balance_stats %logits, %e, %s : tensor<2x3x3xf32>, tensor<2x3x2xi32>, tensor<2x4xf32>
  return %t : tensor<2x4xf32>
}

// -----

// With a token mask (plan 1.21: the padding of --rows examples left out): the statistics'
// gradient takes the mask too, and the loss's gradient its top_k (the rows from the counts).
// CHECK-LABEL: func.func @masked
// CHECK: %[[STATS:.*]] = mt.moe_balance_stats %[[LOGITS:.*]], %{{.*}}, %{{.*}} mask %arg1 :
// CHECK: %[[AUX:.*]] = mt.moe_balance_loss %[[STATS]] {rows = 6 : i64, top_k = 2 : i64}
// CHECK: %[[DSTATS:.*]] = mt.moe_balance_loss_grad %{{.*}}, %[[STATS]] {mt.backward, rows = 6 : i64, top_k = 2 : i64}
// CHECK: mt.moe_balance_stats_grad %[[DSTATS]], %[[LOGITS]] mask %arg1 {mt.backward}
func.func @masked(%tokens: tensor<2x3xi32> {mt.input = "tokens"}, %keep: tensor<2x3xf32> {mt.input = "token_mask"},
                  %embed: tensor<5x4xf32> {mt.param = {name = "embed", init = "normal", std = 0.02 : f32}},
                  %router: tensor<3x4xf32> {mt.param = {name = "router", init = "normal", std = 0.02 : f32}},
                  %targets: tensor<2x3xi32> {mt.input = "targets"})
    -> (tensor<f32> {mt.loss}, tensor<2x3xf32> {mt.output = "expert_load"},
        tensor<f32> {mt.output = "router_aux_loss", mt.objective_weight = 0.05 : f32}) {
  %x = mt.embedding %tokens, %embed : tensor<2x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %router {transpose_b = true} : tensor<2x3x4xf32>, tensor<3x4xf32>
  %w, %e = mt.moe_route %logits softmax_topk_normalized {top_k = 2} : tensor<2x3x3xf32>
  %zero = mt.fill {value = 0.0 : f32} : tensor<2x3xf32>
  %stats = mt.moe_balance_stats %logits, %e, %zero mask %keep
      : tensor<2x3x3xf32>, tensor<2x3x2xi32>, tensor<2x3xf32>, tensor<2x3xf32>
  %aux = mt.moe_balance_loss %stats {rows = 6, top_k = 2} : tensor<2x3xf32>
  %p:2 = mt.softmax_xent %logits, %targets : tensor<2x3x3xf32>, tensor<2x3xi32>
  return %p#0, %stats, %aux : tensor<f32>, tensor<2x3xf32>, tensor<f32>
}

// -----

func.func @mask_of_other_tokens(%logits: tensor<2x3x3xf32>, %e: tensor<2x3x2xi32>, %s: tensor<2x3xf32>,
                                %keep: tensor<3x2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{moe_balance_stats mask}}
  %t = mt.moe_balance_stats %logits, %e, %s mask %keep
      : tensor<2x3x3xf32>, tensor<2x3x2xi32>, tensor<2x3xf32>, tensor<3x2xf32>
  return %t : tensor<2x3xf32>
}
