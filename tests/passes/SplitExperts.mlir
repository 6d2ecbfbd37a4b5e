// PASSES: --mt-autodiff --mt-partition --mt-split-experts=groups=2
// Each stacked expert weight (3 experts) in two groups of consecutive experts: pieces of 1 and 2
// experts (mt.param rows = [first expert, 3]), each its own argument. Every product over a stack
// (the forward's and the backward's input gradients) becomes a chain from zeros, one
// mt.grouped_matmul per group into the products so far (the second from expert 1 on); the
// stack's gradient one mt.grouped_matmul_weight_grad per group, a result each (mt.grad_row).
// The whole stacks are gone; the function names them in mt.expert_split.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg3: tensor<1x8x4xf32> {mt.param = {init = "normal", name = "layers.0.up", rows = array<i64: 0, 3>, std = 2.000000e-02 : f32}}
// CHECK-SAME: %arg4: tensor<2x8x4xf32> {mt.param = {init = "normal", name = "layers.0.up", rows = array<i64: 1, 3>, std = 2.000000e-02 : f32}}
// CHECK-SAME: %arg5: tensor<1x4x8xf32> {mt.param = {init = "normal", name = "layers.0.down", rows = array<i64: 0, 3>, std = 2.000000e-02 : f32}}
// CHECK-SAME: %arg6: tensor<2x4x8xf32> {mt.param = {init = "normal", name = "layers.0.down", rows = array<i64: 1, 3>, std = 2.000000e-02 : f32}}
// CHECK-SAME: tensor<1x8x4xf32> {mt.grad = "layers.0.up", mt.grad_row = 0 : i64}, tensor<2x8x4xf32> {mt.grad = "layers.0.up", mt.grad_row = 1 : i64}
// CHECK-SAME: tensor<1x4x8xf32> {mt.grad = "layers.0.down", mt.grad_row = 0 : i64}, tensor<2x4x8xf32> {mt.grad = "layers.0.down", mt.grad_row = 1 : i64}
// CHECK-SAME: mt.expert_split = ["layers.0.up", "layers.0.down"]
// CHECK: %[[ROWS:.*]], %[[POS:.*]], %[[N:.*]] = mt.moe_dispatch
// CHECK-NEXT: %[[Z0:.*]] = mt.fill {mt.block = 0 : i64, value = 0.000000e+00 : f32} : tensor<12x8xf32>
// CHECK-NEXT: %[[H0:.*]] = mt.grouped_matmul %[[ROWS]], %arg3, %[[N]] into %[[Z0]] {mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: %[[H:.*]] = mt.grouped_matmul %[[ROWS]], %arg4, %[[N]] into %[[H0]] {first_expert = 1 : i64, mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: %[[Z1:.*]] = mt.fill {mt.block = 0 : i64, value = 0.000000e+00 : f32} : tensor<12x4xf32>
// CHECK-NEXT: %[[Y0:.*]] = mt.grouped_matmul %[[H]], %arg5, %[[N]] into %[[Z1]] {mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: %[[Y:.*]] = mt.grouped_matmul %[[H]], %arg6, %[[N]] into %[[Y0]] {first_expert = 1 : i64, mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: mt.moe_combine %[[Y]], %[[POS]]
// CHECK: %[[DY:.*]], %[[DW:.*]] = mt.moe_combine_grad %{{.*}}, %[[Y]], %[[POS]]
// CHECK-NEXT: %[[Z2:.*]] = mt.fill {mt.backward, mt.block = 0 : i64, value = 0.000000e+00 : f32} : tensor<12x8xf32>
// CHECK-NEXT: %[[DH0:.*]] = mt.grouped_matmul %[[DY]], %arg5, %[[N]] into %[[Z2]] {mt.backward, mt.block = 0 : i64}
// CHECK-NEXT: %[[DH:.*]] = mt.grouped_matmul %[[DY]], %arg6, %[[N]] into %[[DH0]] {first_expert = 1 : i64, mt.backward, mt.block = 0 : i64}
// CHECK-NEXT: %[[DDOWN0:.*]] = mt.grouped_matmul_weight_grad %[[H]], %[[DY]], %[[N]] {experts = 1 : i64, mt.backward, mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: %[[DDOWN1:.*]] = mt.grouped_matmul_weight_grad %[[H]], %[[DY]], %[[N]] {experts = 2 : i64, first_expert = 1 : i64, mt.backward, mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: %[[Z3:.*]] = mt.fill {mt.backward, mt.block = 0 : i64, value = 0.000000e+00 : f32} : tensor<12x4xf32>
// CHECK-NEXT: %[[DR0:.*]] = mt.grouped_matmul %[[DH]], %arg3, %[[N]] into %[[Z3]] {mt.backward, mt.block = 0 : i64}
// CHECK-NEXT: %[[DR:.*]] = mt.grouped_matmul %[[DH]], %arg4, %[[N]] into %[[DR0]] {first_expert = 1 : i64, mt.backward, mt.block = 0 : i64}
// CHECK-NEXT: %[[DUP0:.*]] = mt.grouped_matmul_weight_grad %[[ROWS]], %[[DH]], %[[N]] {experts = 1 : i64, mt.backward, mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: %[[DUP1:.*]] = mt.grouped_matmul_weight_grad %[[ROWS]], %[[DH]], %[[N]] {experts = 2 : i64, first_expert = 1 : i64, mt.backward, mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: mt.moe_dispatch_grad %[[DR]], %[[POS]]
// CHECK-NOT: mt.grouped_matmul %{{.*}}, %arg{{[0-9]+}}, %{{.*}} {
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[DUP0]], %[[DUP1]], %[[DDOWN0]], %[[DDOWN1]]
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %embed: tensor<5x4xf32> {mt.param = {name = "embed", init = "normal", std = 0.02 : f32}},
                   %router: tensor<3x4xf32> {mt.param = {name = "router", init = "normal", std = 0.02 : f32}},
                   %up: tensor<3x8x4xf32> {mt.param = {name = "layers.0.up", init = "normal", std = 0.02 : f32}},
                   %down: tensor<3x4x8xf32> {mt.param = {name = "layers.0.down", init = "normal", std = 0.02 : f32}},
                   %targets: tensor<2x3xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) {
  %x = mt.embedding %tokens, %embed : tensor<2x3xi32>, tensor<5x4xf32> loc("embed")
  %logits = mt.matmul %x, %router {transpose_b = true} : tensor<2x3x4xf32>, tensor<3x4xf32> loc("/layers.0/moe")
  %w, %e = mt.moe_route %logits softmax_topk_normalized {top_k = 2} : tensor<2x3x3xf32> loc("/layers.0/moe")
  %rows, %pos, %n = mt.moe_dispatch %x, %e {num_experts = 3} : tensor<2x3x4xf32>, tensor<2x3x2xi32> loc("/layers.0/moe")
  %h = mt.grouped_matmul %rows, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<3x8x4xf32>, tensor<3xi32> loc("/layers.0/moe")
  %y = mt.grouped_matmul %h, %down, %n {transpose_b = true} : tensor<12x8xf32>, tensor<3x4x8xf32>, tensor<3xi32> loc("/layers.0/moe")
  %out = mt.moe_combine %y, %pos, %w : tensor<12x4xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32> loc("/layers.0/moe")
  %loss, %lse = mt.softmax_xent %out, %targets : tensor<2x3x4xf32>, tensor<2x3xi32> loc("head")
  return %loss : tensor<f32>
}

// -----

// A model without stacked expert weights has nothing to split: an error naming the flag.
// expected-error @+1 {{mt-split-experts: the model has no stacked expert weights (an (E, ., .) parameter read by mt.grouped_matmul) to split into groups; drop --expert-groups}}
func.func @dense(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                 %embed: tensor<5x4xf32> {mt.param = {name = "embed", init = "normal", std = 0.02 : f32}},
                 %w: tensor<4x4xf32> {mt.param = {name = "layers.0.w", init = "normal", std = 0.02 : f32}},
                 %targets: tensor<2x3xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) {
  %x = mt.embedding %tokens, %embed : tensor<2x3xi32>, tensor<5x4xf32> loc("embed")
  %y = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<4x4xf32> loc("/layers.0/mlp")
  %loss, %lse = mt.softmax_xent %y, %targets : tensor<2x3x4xf32>, tensor<2x3xi32> loc("head")
  return %loss : tensor<f32>
}
