// PASSES: --mt-autodiff
// A mixture of experts differentiated (compiler/dialect/MtMoeOps.cpp's rules): the combine's
// backward gives the expert outputs' and the router weights' gradients; each grouped product
// gives its input's (the same product, transpose_b flipped) and its stacked weight's
// (grouped_matmul_weight_grad over the same counts); the dispatch sums each token's routed rows
// back; the weights' gradient goes through the top-k softmax into the router's logits. The
// expert indices, positions and counts (i32) take none.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<3x4xf32> {mt.grad = "router"}, tensor<3x8x4xf32> {mt.grad = "up"}, tensor<3x4x8xf32> {mt.grad = "down"})
// CHECK: %[[W:.*]], %[[E:.*]] = mt.moe_route %[[LOGITS:.*]] softmax_topk_normalized {top_k = 2 : i64}
// CHECK: %[[ROWS:.*]], %[[POS:.*]], %[[N:.*]] = mt.moe_dispatch %[[X:.*]], %[[E]] {num_experts = 3 : i64}
// CHECK: %[[H:.*]] = mt.grouped_matmul %[[ROWS]], %arg3, %[[N]] {transpose_b = true}
// CHECK: %[[Y:.*]] = mt.grouped_matmul %[[H]], %arg4, %[[N]] {transpose_b = true}
// CHECK: %[[DY:.*]], %[[DW:.*]] = mt.moe_combine_grad %{{.*}}, %[[Y]], %[[POS]], %[[W]] {mt.backward}
// CHECK: %[[DH:.*]] = mt.grouped_matmul %[[DY]], %arg4, %[[N]] {mt.backward}
// CHECK: %[[DDOWN:.*]] = mt.grouped_matmul_weight_grad %[[H]], %[[DY]], %[[N]] {mt.backward, transpose_b = true}
// CHECK: %[[DROWS:.*]] = mt.grouped_matmul %[[DH]], %arg3, %[[N]] {mt.backward}
// CHECK: %[[DUP:.*]] = mt.grouped_matmul_weight_grad %[[ROWS]], %[[DH]], %[[N]] {mt.backward, transpose_b = true}
// CHECK: %[[DX:.*]] = mt.moe_dispatch_grad %[[DROWS]], %[[POS]] {mt.backward}
// CHECK: %[[DLOGITS:.*]] = mt.moe_route_grad %[[DW]], %[[LOGITS]], %[[E]] softmax_topk_normalized {mt.backward, top_k = 2 : i64}
// CHECK: mt.add %[[DX]], %{{.*}} {mt.backward}
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[DUP]], %[[DDOWN]]
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %embed: tensor<5x4xf32> {mt.param = {name = "embed", init = "normal", std = 0.02 : f32}},
                   %router: tensor<3x4xf32> {mt.param = {name = "router", init = "normal", std = 0.02 : f32}},
                   %up: tensor<3x8x4xf32> {mt.param = {name = "up", init = "normal", std = 0.02 : f32}},
                   %down: tensor<3x4x8xf32> {mt.param = {name = "down", init = "normal", std = 0.02 : f32}},
                   %targets: tensor<2x3xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) {
  %x = mt.embedding %tokens, %embed : tensor<2x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %router {transpose_b = true} : tensor<2x3x4xf32>, tensor<3x4xf32>
  %w, %e = mt.moe_route %logits softmax_topk_normalized {top_k = 2} : tensor<2x3x3xf32>
  %rows, %pos, %n = mt.moe_dispatch %x, %e {num_experts = 3} : tensor<2x3x4xf32>, tensor<2x3x2xi32>
  %h = mt.grouped_matmul %rows, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>
  %y = mt.grouped_matmul %h, %down, %n {transpose_b = true} : tensor<12x8xf32>, tensor<3x4x8xf32>, tensor<3xi32>
  %out = mt.moe_combine %y, %pos, %w : tensor<12x4xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>
  %loss, %lse = mt.softmax_xent %out, %targets : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

func.func @too_many_choices(%logits: tensor<2x3x3xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{moe_route top_k 4 must lie in [1, 3 experts]}}
  %w, %e = mt.moe_route %logits softmax_topk {top_k = 4} : tensor<2x3x3xf32>
  return %w : tensor<2x3x4xf32>
}

// -----

func.func @wrong_contraction(%rows: tensor<12x4xf32>, %up: tensor<3x8x5xf32>, %n: tensor<3xi32>) -> tensor<12x8xf32> {
  // expected-error @+1 {{grouped_matmul contraction sizes differ: [12,4] and [3,8,5]}}
  %h = mt.grouped_matmul %rows, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<3x8x5xf32>, tensor<3xi32>
  return %h : tensor<12x8xf32>
}

// -----

func.func @routed_rows(%y: tensor<10x4xf32>, %pos: tensor<2x3x2xi32>, %w: tensor<2x3x2xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{moe_combine routed [10,4] must be (12, C): a row per routed choice}}
  %out = mt.moe_combine %y, %pos, %w : tensor<10x4xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>
  return %out : tensor<2x3x4xf32>
}
