// PASSES: --mt-schedule-streamed=update=on-arrival
// The on-arrival update: each gradient, once on the host, has its parameter updated at once,
// its norm share taken in the same pass (no grad_norm task; no global-norm clipping); nothing
// is deferred to the next step.

// CHECK-LABEL: func.func @f
// CHECK-NOT: adamw_previous
// CHECK-NOT: grad_norm
// CHECK: mt.d2h %{{.*}} {mt.block = 0 : i64} : tensor<4x4xf32>
// CHECK-NEXT: mt.host_task adamw_on_arrival(%arg2) {mt.block = 0 : i64}
// CHECK: mt.d2h %{{.*}} {mt.block = -1 : i64} : tensor<3x4xf32>
// CHECK-NEXT: mt.host_task adamw_on_arrival(%arg1) {mt.block = -1 : i64}
// CHECK-NEXT: return
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

// A gradient result that names no parameter cannot be updated on arrival.
// expected-error @+1 {{result 1 is not the gradient of a parameter}}
func.func @unknown(%tokens: tensor<1x2xi32> {mt.input = "tokens"},
                   %w: tensor<3x4xf32> {mt.param = {init = "normal", name = "w", std = 1.0 : f32}})
    -> (tensor<f32> {mt.loss}, tensor<3x4xf32> {mt.grad = "v"}) {
  %x = mt.embedding %tokens, %w {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<3x4xf32>
  %loss, %lse = mt.softmax_xent %x, %tokens {mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<1x2xi32>
  %g = mt.fill {mt.backward, mt.block = -1 : i64, value = 0.0 : f32} : tensor<3x4xf32>
  return %loss, %g : tensor<f32>, tensor<3x4xf32>
}
