// PASSES: --mt-autodiff
// An op marked mt.stop_gradient (torch's detach: DoRA's weight norm) passes no gradient: its
// result is a constant to the backward. Here the logits are x W^T scaled by W's row norms; with
// the norm stopped, W's gradient comes from the product alone (no mt.unary_grad, no broadcast of
// a row sum's gradient); without the mark, it flows through the norm too.

// CHECK-LABEL: func.func @stopped
// CHECK-SAME: -> (tensor<f32> {mt.loss}, tensor<3x4xf32> {mt.grad = "w"})
// CHECK: mt.softmax_xent_grad
// CHECK-NOT: mt.unary_grad
// CHECK-NOT: mt.broadcast
// CHECK: return
func.func @stopped(%targets: tensor<2x3xi32> {mt.input = "targets"},
                   %x: tensor<2x3x4xf32> {mt.input = "x"},
                   %w: tensor<3x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> (tensor<f32> {mt.loss}) {
  %y = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<3x4xf32>
  %sq = mt.mul %w, %w : tensor<3x4xf32>, tensor<3x4xf32>
  %sum = mt.sum_to %sq : tensor<3x4xf32> -> tensor<3x1xf32>
  %rows = mt.reshape %sum : tensor<3x1xf32> -> tensor<3xf32>
  %norm = mt.unary %rows {fn = "sqrt", mt.stop_gradient} : tensor<3xf32>
  %logits = mt.mul %y, %norm : tensor<2x3x3xf32>, tensor<3xf32>
  %loss, %lse = mt.softmax_xent %logits, %targets : tensor<2x3x3xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @flowing
// CHECK: mt.softmax_xent_grad
// CHECK: mt.unary_grad
// CHECK: mt.broadcast
// CHECK: return
func.func @flowing(%targets: tensor<2x3xi32> {mt.input = "targets"},
                   %x: tensor<2x3x4xf32> {mt.input = "x"},
                   %w: tensor<3x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> (tensor<f32> {mt.loss}) {
  %y = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<3x4xf32>
  %sq = mt.mul %w, %w : tensor<3x4xf32>, tensor<3x4xf32>
  %sum = mt.sum_to %sq : tensor<3x4xf32> -> tensor<3x1xf32>
  %rows = mt.reshape %sum : tensor<3x1xf32> -> tensor<3xf32>
  %norm = mt.unary %rows {fn = "sqrt"} : tensor<3xf32>
  %logits = mt.mul %y, %norm : tensor<2x3x3xf32>, tensor<3xf32>
  %loss, %lse = mt.softmax_xent %logits, %targets : tensor<2x3x3xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}
