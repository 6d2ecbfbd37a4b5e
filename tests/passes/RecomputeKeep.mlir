// PASSES: --mt-recompute=keep=1
// With keep=1 the last block (1) keeps its activations: its silu_grad reads the forward's
// matmul result. Block 0 is recomputed as always: its matmul is cloned before its backward.

// CHECK-LABEL: func.func @two_blocks
// CHECK: %[[H1:.*]] = mt.matmul %{{.*}}, %arg3 {mt.block = 1 : i64, transpose_b = true}
// CHECK: mt.silu_grad %{{.*}}, %[[H1]] {mt.backward, mt.block = 1 : i64}
// CHECK: %[[H0:.*]] = mt.matmul %{{.*}}, %arg2 {mt.block = 0 : i64, mt.recompute, transpose_b = true}
// CHECK-NEXT: mt.silu_grad %{{.*}}, %[[H0]] {mt.backward, mt.block = 0 : i64}
// CHECK-NOT: mt.recompute
func.func @two_blocks(%tokens: tensor<1x2xi32> {mt.input = "tokens"},
                      %e: tensor<3x4xf32> {mt.param = {init = "normal", name = "e", std = 1.0 : f32}},
                      %w0: tensor<4x4xf32> {mt.param = {init = "normal", name = "w0", std = 1.0 : f32}},
                      %w1: tensor<4x4xf32> {mt.param = {init = "normal", name = "w1", std = 1.0 : f32}},
                      %targets: tensor<1x2xi32> {mt.input = "targets"})
    -> (tensor<f32> {mt.loss}) attributes {mt.block_templates = array<i64: 0, 0>} {
  %x = mt.embedding %tokens, %e {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<3x4xf32>
  %h0 = mt.matmul %x, %w0 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %a0 = mt.silu %h0 {mt.block = 0 : i64} : tensor<1x2x4xf32>
  %h1 = mt.matmul %a0, %w1 {mt.block = 1 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %a1 = mt.silu %h1 {mt.block = 1 : i64} : tensor<1x2x4xf32>
  %loss, %lse = mt.softmax_xent %a1, %targets {mt.block = 2 : i64} : tensor<1x2x4xf32>, tensor<1x2xi32>
  %one = mt.fill {mt.backward, mt.block = 2 : i64, value = 1.0 : f32} : tensor<f32>
  %da1 = mt.softmax_xent_grad %one, %a1, %targets, %lse {mt.backward, mt.block = 2 : i64} : tensor<f32>, tensor<1x2x4xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %dh1 = mt.silu_grad %da1, %h1 {mt.backward, mt.block = 1 : i64} : tensor<1x2x4xf32>, tensor<1x2x4xf32>
  %da0 = mt.matmul %dh1, %w1 {mt.backward, mt.block = 1 : i64} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %dh0 = mt.silu_grad %da0, %h0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<1x2x4xf32>
  %dx = mt.matmul %dh0, %w0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<4x4xf32>
  return %loss : tensor<f32>
}
