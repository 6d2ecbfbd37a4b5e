// PASSES: --mt-schedule-streamed=pin-shared=true
// pin-shared: a parameter used by more than one layer block (here the embedding %arg1, tied to
// the LM head of block 1) is copied in once, before the first op, and every use reads that
// copy (forward and backward); the function records its bytes (3 x 4 floats). A weight of one
// block (%arg2) still streams per region: copied for block 0's forward and again for its
// backward.

// CHECK-LABEL: func.func @tied
// CHECK-SAME: mt.pinned_bytes = 48 : i64
// CHECK: %[[TOKENS:.*]] = mt.h2d %arg0
// CHECK: %[[E:.*]] = mt.h2d %arg1
// CHECK-NOT: mt.h2d %arg1
// CHECK: mt.h2d %arg2 {mt.block = -1 : i64}
// CHECK-NOT: mt.h2d %arg1
// CHECK: mt.embedding %[[TOKENS]], %[[E]]
// CHECK-NOT: mt.h2d %arg1
// CHECK: mt.h2d %arg2 {mt.block = 1 : i64}
// CHECK-NOT: mt.h2d %arg1
// CHECK: mt.matmul %{{.*}}, %[[E]] {mt.block = 1 : i64, transpose_b = true}
// CHECK-NOT: mt.h2d %arg1
// CHECK: mt.matmul %{{.*}}, %[[E]] {mt.backward, mt.block = 1 : i64}
// CHECK-NOT: mt.h2d %arg1
// CHECK: return
func.func @tied(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<3x4xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}}, %arg2: tensor<4x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}, %arg3: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<3x4xf32> {mt.grad = "e"}, tensor<4x4xf32> {mt.grad = "w"}) attributes {mt.block_templates = array<i64: 0>} {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<3x4xf32>
  %1 = mt.matmul %0, %arg2 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %2 = mt.matmul %1, %arg1 {mt.block = 1 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<3x4xf32>
  %loss, %lse = mt.softmax_xent %2, %arg3 {mt.block = 1 : i64} : tensor<1x2x3xf32>, tensor<1x2xi32>
  %3 = mt.fill {mt.backward, mt.block = 1 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %4 = mt.softmax_xent_grad %3, %2, %arg3, %lse {mt.backward, mt.block = 1 : i64} : tensor<f32>, tensor<1x2x3xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %5 = mt.matmul %4, %arg1 {mt.backward, mt.block = 1 : i64} : tensor<1x2x3xf32>, tensor<3x4xf32>
  %6 = mt.reshape %4 {mt.backward, mt.block = 1 : i64} : tensor<1x2x3xf32> -> tensor<2x3xf32>
  %7 = mt.reshape %1 {mt.backward, mt.block = 1 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %8 = mt.matmul %6, %7 {mt.backward, mt.block = 1 : i64, transpose_a = true} : tensor<2x3xf32>, tensor<2x4xf32>
  %9 = mt.matmul %5, %arg2 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %10 = mt.reshape %0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %11 = mt.reshape %5 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %12 = mt.matmul %11, %10 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x4xf32>, tensor<2x4xf32>
  %13 = mt.embedding_grad %arg0, %9 {mt.backward, mt.block = -1 : i64, vocab = 3 : i64} : tensor<1x2xi32>, tensor<1x2x4xf32>
  %14 = mt.add %13, %8 {mt.backward, mt.block = -1 : i64} : tensor<3x4xf32>, tensor<3x4xf32>
  return %loss, %14, %12 : tensor<f32>, tensor<3x4xf32>, tensor<4x4xf32>
}
