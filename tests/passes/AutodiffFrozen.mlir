// PASSES: --mt-autodiff
// Frozen parameters (mt.param's "frozen": mtc --frozen, --trainable) take no gradient. Below the
// first trained one nothing needs one, so the backward stops there: no gradient of the frozen
// embedding's or first layer's input is built. A frozen weight between trained ones still passes
// its input's gradient down (dx = dh w1), without a gradient of its own.

// CHECK-LABEL: func.func @frozen_below
// CHECK-SAME: -> (tensor<f32> {mt.loss}, tensor<3x4xf32> {mt.grad = "w2"})
// CHECK: mt.softmax_xent_grad
// The trained head's gradient: one product; nothing flows below it.
// CHECK-COUNT-1: mt.matmul {{.*}}mt.backward
// CHECK-NOT: mt.matmul {{.*}}mt.backward
// CHECK-NOT: mt.embedding_grad
// CHECK: return
func.func @frozen_below(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                        %targets: tensor<2x3xi32> {mt.input = "targets"},
                        %e: tensor<5x4xf32> {mt.param = {name = "e", init = "normal", std = 0.02 : f32, frozen}},
                        %w1: tensor<4x4xf32> {mt.param = {name = "w1", init = "normal", std = 0.02 : f32, frozen}},
                        %w2: tensor<3x4xf32> {mt.param = {name = "w2", init = "normal", std = 0.02 : f32}})
    -> (tensor<f32> {mt.loss}) {
  %x = mt.embedding %tokens, %e : tensor<2x3xi32>, tensor<5x4xf32>
  %h = mt.matmul %x, %w1 {transpose_b = true} : tensor<2x3x4xf32>, tensor<4x4xf32>
  %logits = mt.matmul %h, %w2 {transpose_b = true} : tensor<2x3x4xf32>, tensor<3x4xf32>
  %loss, %lse = mt.softmax_xent %logits, %targets : tensor<2x3x3xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @frozen_between
// CHECK-SAME: -> (tensor<f32> {mt.loss}, tensor<5x4xf32> {mt.grad = "e"}, tensor<3x4xf32> {mt.grad = "w2"})
// One weight's gradient product (w2's); w1 only passes the gradient of its input down.
// CHECK-COUNT-1: transpose_a = true
// CHECK-NOT: transpose_a = true
// CHECK: mt.matmul %{{[0-9]+}}, %arg3 {mt.backward}
// CHECK-NOT: transpose_a = true
// CHECK: mt.embedding_grad
// CHECK: return
func.func @frozen_between(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                          %targets: tensor<2x3xi32> {mt.input = "targets"},
                          %e: tensor<5x4xf32> {mt.param = {name = "e", init = "normal", std = 0.02 : f32}},
                          %w1: tensor<4x4xf32> {mt.param = {name = "w1", init = "normal", std = 0.02 : f32, frozen}},
                          %w2: tensor<3x4xf32> {mt.param = {name = "w2", init = "normal", std = 0.02 : f32}})
    -> (tensor<f32> {mt.loss}) {
  %x = mt.embedding %tokens, %e : tensor<2x3xi32>, tensor<5x4xf32>
  %h = mt.matmul %x, %w1 {transpose_b = true} : tensor<2x3x4xf32>, tensor<4x4xf32>
  %logits = mt.matmul %h, %w2 {transpose_b = true} : tensor<2x3x4xf32>, tensor<3x4xf32>
  %loss, %lse = mt.softmax_xent %logits, %targets : tensor<2x3x3xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}
