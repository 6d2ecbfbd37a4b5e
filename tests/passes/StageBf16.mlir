// PASSES: --mt-schedule-streamed --mt-stage-bf16
// Every copy of a parameter reads its bf16 staging copy (a new argument per parameter, its
// mt.staging the parameter's mt.param) and is widened to f32 right before its first use: w's
// forward copy in block 0, its backward copy (made a block ahead, in block 1) in block 0's
// backward. Inputs (tokens, targets) and the gradients are left alone.

// CHECK-LABEL: func.func @f
// CHECK-SAME: %arg4: tensor<3x4xbf16> {mt.staging = {init = "normal", name = "e", std = 1.000000e+00 : f32}}
// CHECK-SAME: %arg5: tensor<4x4xbf16> {mt.staging = {init = "normal", name = "w", std = 1.000000e+00 : f32}}
// CHECK-NEXT: mt.h2d %arg0 {mt.block = -1 : i64} : tensor<1x2xi32>
// CHECK-NEXT: mt.host_task adamw_previous(%arg1)
// CHECK-NEXT: %[[E:.*]] = mt.h2d %arg4 {mt.block = -1 : i64} : tensor<3x4xbf16>
// CHECK-NEXT: mt.host_task adamw_previous(%arg2)
// CHECK-NEXT: %[[W:.*]] = mt.h2d %arg5 {mt.block = -1 : i64} : tensor<4x4xbf16>
// CHECK-NEXT: mt.h2d %arg3 {mt.block = -1 : i64} : tensor<1x2xi32>
// CHECK-NEXT: %[[EF:.*]] = mt.widen %[[E]] {mt.block = -1 : i64} : tensor<3x4xbf16> -> tensor<3x4xf32>
// CHECK-NEXT: mt.embedding %{{.*}}, %[[EF]]
// CHECK-NEXT: %[[WF:.*]] = mt.widen %[[W]] {mt.block = 0 : i64} : tensor<4x4xbf16> -> tensor<4x4xf32>
// CHECK-NEXT: mt.matmul %{{.*}}, %[[WF]] {mt.block = 0 : i64, transpose_b = true}
// CHECK:      %[[WB:.*]] = mt.h2d %arg5 {mt.block = 1 : i64} : tensor<4x4xbf16>
// CHECK:      mt.silu_grad
// CHECK-NEXT: %[[WBF:.*]] = mt.widen %[[WB]] {mt.backward, mt.block = 0 : i64} : tensor<4x4xbf16> -> tensor<4x4xf32>
// CHECK-NEXT: mt.matmul %{{.*}}, %[[WBF]] {mt.backward, mt.block = 0 : i64}
// CHECK-NOT:  mt.h2d %arg1
// CHECK-NOT:  mt.h2d %arg2
// CHECK:      mt.d2h %{{.*}} : tensor<4x4xf32>
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

