// PASSES: --mt-autodiff --mt-partition --mt-split-experts=groups=2 --mt-schedule-streamed
// Experts streamed in groups: the first group of each stack is copied in a region ahead (in the
// prologue, block -1, as a whole weight would be); the second group where the first group's
// products start, so that it crosses while they run and the device holds two groups of a stack
// at most. The backward copies its groups the same way in its own region.

// CHECK-LABEL: func.func @forward
// CHECK: %[[UP0:.*]] = mt.h2d %arg3 {mt.block = -1 : i64} : tensor<1x8x4xf32>
// CHECK: %[[DOWN0:.*]] = mt.h2d %arg5 {mt.block = -1 : i64} : tensor<1x4x8xf32>
// CHECK: mt.moe_dispatch
// CHECK-NEXT: %[[Z0:.*]] = mt.fill {mt.block = 0 : i64
// CHECK-NEXT: %[[UP1:.*]] = mt.h2d %arg4 {mt.block = 0 : i64} : tensor<2x8x4xf32>
// CHECK-NEXT: %[[H0:.*]] = mt.grouped_matmul %{{.*}}, %[[UP0]], %{{.*}} into %[[Z0]]
// CHECK-NEXT: %[[H:.*]] = mt.grouped_matmul %{{.*}}, %[[UP1]], %{{.*}} into %[[H0]] {first_expert = 1 : i64
// CHECK-NEXT: %[[Z1:.*]] = mt.fill {mt.block = 0 : i64
// CHECK-NEXT: %[[DOWN1:.*]] = mt.h2d %arg6 {mt.block = 0 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: %[[Y0:.*]] = mt.grouped_matmul %[[H]], %[[DOWN0]], %{{.*}} into %[[Z1]]
// CHECK-NEXT: mt.grouped_matmul %[[H]], %[[DOWN1]], %{{.*}} into %[[Y0]] {first_expert = 1 : i64
// CHECK: mt.moe_combine_grad
// CHECK-NEXT: %[[Z2:.*]] = mt.fill {mt.backward, mt.block = 0 : i64
// CHECK-NEXT: %[[BDOWN1:.*]] = mt.h2d %arg6 {mt.block = 0 : i64} : tensor<2x4x8xf32>
// CHECK-NEXT: %[[DH0:.*]] = mt.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} into %[[Z2]] {mt.backward
// CHECK-NEXT: mt.grouped_matmul %{{.*}}, %[[BDOWN1]], %{{.*}} into %[[DH0]] {first_expert = 1 : i64, mt.backward
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
