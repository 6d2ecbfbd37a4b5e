// PASSES: --mt-recompute
// The forward ops a block's backward reads are cloned just before that backward (mt.recompute)
// and the backward reads the clones: here the block's matmul, whose result silu_grad needs,
// while the block input %0 stays the one kept from the forward pass. The silu output is read
// by nothing in the block's backward, so it is not recomputed.

// CHECK-LABEL: func.func @f
// CHECK: %[[X:.*]] = mt.embedding
// CHECK: %[[H:.*]] = mt.matmul %[[X]], %arg2 {mt.block = 0 : i64, transpose_b = true}
// CHECK: mt.softmax_xent_grad
// CHECK-NEXT: %[[H2:.*]] = mt.matmul %[[X]], %arg2 {mt.block = 0 : i64, mt.recompute, transpose_b = true}
// CHECK-NEXT: mt.silu_grad %{{.*}}, %[[H2]]
// CHECK-NOT: mt.recompute
// CHECK: return
func.func @f(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<3x4xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}}, %arg2: tensor<4x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}, %arg3: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<3x4xf32> {mt.grad = "e"}, tensor<4x4xf32> {mt.grad = "w"}) attributes {mt.block_templates = array<i64: 0>} {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<3x4xf32>
  %1 = mt.matmul %0, %arg2 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %2 = mt.silu %1 {mt.block = 0 : i64} : tensor<1x2x4xf32>
  %loss, %lse = mt.softmax_xent %2, %arg3 {mt.block = 1 : i64} : tensor<1x2x4xf32>, tensor<1x2xi32>
  %3 = mt.fill {mt.backward, mt.block = 1 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %4 = mt.softmax_xent_grad %3, %2, %arg3, %lse {mt.backward, mt.block = 1 : i64} : tensor<f32>, tensor<1x2x4xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %5 = mt.silu_grad %4, %1 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<1x2x4xf32>
  %6 = mt.matmul %5, %arg2 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %7 = mt.reshape %0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %8 = mt.reshape %5 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %9 = mt.matmul %8, %7 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x4xf32>, tensor<2x4xf32>
  %10 = mt.embedding_grad %arg0, %6 {mt.backward, mt.block = -1 : i64, vocab = 3 : i64} : tensor<1x2xi32>, tensor<1x2x4xf32>
  return %loss, %10, %9 : tensor<f32>, tensor<3x4xf32>, tensor<4x4xf32>
}

// -----

// expected-error @+1 {{mt-recompute needs layer blocks: run mt-partition first}}
func.func @unpartitioned(%tokens: tensor<2x3xi32> {mt.input = "tokens"}) -> tensor<2x3xi32> {
  return %tokens : tensor<2x3xi32>
}
