// PASSES: --mt-partition --mt-split-experts=groups=2
// A forward-only function (mtgen's plans: named outputs, no loss) splits its stacks alike, with
// no gradients to split: each product a chain over the groups from zeros.

// CHECK-LABEL: func.func @sample
// CHECK-SAME: %arg2: tensor<1x8x4xf32> {mt.param = {init = "normal", name = "layers.0.up", rows = array<i64: 0, 3>, std = 2.000000e-02 : f32}}
// CHECK-SAME: %arg3: tensor<2x8x4xf32> {mt.param = {init = "normal", name = "layers.0.up", rows = array<i64: 1, 3>, std = 2.000000e-02 : f32}}
// CHECK-SAME: -> (tensor<12x8xf32> {mt.output = "hidden"})
// CHECK-SAME: mt.expert_split = ["layers.0.up"]
// CHECK: %[[Z:.*]] = mt.fill {mt.block = 0 : i64, value = 0.000000e+00 : f32} : tensor<12x8xf32>
// CHECK-NEXT: %[[H0:.*]] = mt.grouped_matmul %{{.*}}, %arg2, %{{.*}} into %[[Z]] {mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: %[[H:.*]] = mt.grouped_matmul %{{.*}}, %arg3, %{{.*}} into %[[H0]] {first_expert = 1 : i64, mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: return %[[H]]
func.func @sample(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                  %embed: tensor<5x4xf32> {mt.param = {name = "embed", init = "normal", std = 0.02 : f32}},
                  %up: tensor<3x8x4xf32> {mt.param = {name = "layers.0.up", init = "normal", std = 0.02 : f32}})
    -> (tensor<12x8xf32> {mt.output = "hidden"}) {
  %x = mt.embedding %tokens, %embed : tensor<2x3xi32>, tensor<5x4xf32> loc("embed")
  %logits = mt.fill {value = 0.0 : f32} : tensor<2x3x3xf32> loc("/layers.0/moe")
  %w, %e = mt.moe_route %logits softmax_topk_normalized {top_k = 2} : tensor<2x3x3xf32> loc("/layers.0/moe")
  %rows, %pos, %n = mt.moe_dispatch %x, %e {num_experts = 3} : tensor<2x3x4xf32>, tensor<2x3x2xi32> loc("/layers.0/moe")
  %h = mt.grouped_matmul %rows, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<3x8x4xf32>, tensor<3xi32> loc("/layers.0/moe")
  return %h : tensor<12x8xf32>
}
