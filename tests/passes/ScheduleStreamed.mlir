// PASSES: --mt-schedule-streamed
// Inputs are copied in once; a weight is copied in for each run of uses within one block,
// at the start of the block that runs before (here: %arg2 for block 0's forward at the start,
// and again for its backward while the head runs); each gradient leaves as soon as it is
// complete and its share of the norm is taken at once. AdamW runs one step late: each
// parameter's update of the previous step just before its first copy in (not before the second).

// CHECK-LABEL: func.func @f
// CHECK: %[[TOKENS:.*]] = mt.h2d %arg0
// CHECK-NEXT: mt.host_task adamw_previous(%arg1)
// CHECK-NEXT: %[[E:.*]] = mt.h2d %arg1
// CHECK-NEXT: mt.host_task adamw_previous(%arg2)
// CHECK-NEXT: %[[W_FWD:.*]] = mt.h2d %arg2
// CHECK-NOT: adamw
// CHECK: mt.embedding %[[TOKENS]], %[[E]]
// CHECK: mt.matmul %{{.*}}, %[[W_FWD]] {mt.block = 0 : i64, transpose_b = true}
// CHECK: mt.silu
// CHECK-NEXT: %[[W_BWD:.*]] = mt.h2d %arg2 {mt.block = 1 : i64}
// CHECK-NEXT: %loss, %lse = mt.softmax_xent
// CHECK-NEXT: %[[LOSS:.*]] = mt.d2h %loss
// CHECK: mt.matmul %{{.*}}, %[[W_BWD]] {mt.backward, mt.block = 0 : i64}
// CHECK: %[[DW:.*]] = mt.matmul {{.*}}transpose_a = true
// CHECK-NEXT: %[[DW_HOST:.*]] = mt.d2h %[[DW]]
// CHECK-NEXT: mt.host_task grad_norm(%[[DW_HOST]])
// CHECK: %[[DE:.*]] = mt.embedding_grad
// CHECK-NEXT: %[[DE_HOST:.*]] = mt.d2h %[[DE]]
// CHECK-NEXT: mt.host_task grad_norm(%[[DE_HOST]])
// CHECK-NEXT: return %[[LOSS]], %[[DE_HOST]], %[[DW_HOST]]
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

// expected-error @+1 {{mt-schedule-streamed needs a differentiated function returning the loss and the gradients (run mt-autodiff first)}}
func.func @forward_only(%tokens: tensor<2x3xi32> {mt.input = "tokens"}) -> tensor<2x3xi32> {
  return %tokens : tensor<2x3xi32>
}

// -----

// A forward-only function (mtgen's plan for a model larger than the device): a weight is copied
// in per block that uses it, one block ahead, as in training; each output leaves as soon as it
// is complete; no norm, no update.
// CHECK-LABEL: func.func @forward
// CHECK: mt.h2d %arg0 {mt.block = -1 : i64}
// CHECK-NEXT: %[[E:.*]] = mt.h2d %arg1 {mt.block = -1 : i64}
// CHECK-NEXT: %[[W0:.*]] = mt.h2d %arg2 {mt.block = -1 : i64}
// CHECK-NEXT: mt.embedding %{{.*}}, %[[E]]
// CHECK-NEXT: %[[W1:.*]] = mt.h2d %arg2 {mt.block = 0 : i64}
// CHECK-NEXT: %[[H:.*]] = mt.matmul %{{.*}}, %[[W0]]
// CHECK-NEXT: %[[H_HOST:.*]] = mt.d2h %[[H]]
// CHECK-NEXT: %[[Y:.*]] = mt.matmul %[[H]], %[[W1]]
// CHECK-NEXT: %[[Y_HOST:.*]] = mt.d2h %[[Y]]
// CHECK-NOT: mt.host_task
// CHECK: return %[[Y_HOST]], %[[H_HOST]]
func.func @forward(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<3x4xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}}, %arg2: tensor<4x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}) -> (tensor<1x2x4xf32> {mt.output = "logits"}, tensor<1x2x4xf32> {mt.output = "hidden"}) {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<3x4xf32>
  %1 = mt.matmul %0, %arg2 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %2 = mt.matmul %1, %arg2 {mt.block = 1 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  return %2, %1 : tensor<1x2x4xf32>, tensor<1x2x4xf32>
}
