// PASSES: --mt-recompute --mt-schedule-streamed --mt-offload-activations
// The block input %x (the embedding's result), which block 0's recompute reads in the backward,
// is copied out right after it is made and back in at the start of the region before that
// backward (block 1's, where block 0's weight is prefetched too); the forward's matmul still
// reads the device value, the recompute reads the copy.

// CHECK-LABEL: func.func @f
// CHECK-SAME: mt.activation_bytes = 64 : i64
// CHECK: %[[X:.*]] = mt.embedding
// CHECK-NEXT: %[[OUT:.*]] = mt.d2h %[[X]] {mt.block = -1 : i64} : tensor<1x2x4xf32>
// CHECK-NEXT: mt.matmul %[[X]], %{{.*}} {mt.block = 0 : i64, transpose_b = true}
// CHECK-NEXT: mt.silu
// CHECK-NEXT: %[[BACK:.*]] = mt.h2d %[[OUT]] {mt.block = 1 : i64} : tensor<1x2x4xf32>
// CHECK-NEXT: %[[W:.*]] = mt.h2d %arg2 {mt.block = 1 : i64}
// CHECK-NEXT: mt.softmax_xent
// CHECK: mt.matmul %[[BACK]], %[[W]] {mt.block = 0 : i64, mt.recompute, transpose_b = true}
// CHECK: mt.reshape %[[BACK]]
// CHECK-NOT: mt.d2h %[[X]]
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

