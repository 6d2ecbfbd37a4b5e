// PASSES: --mt-autodiff
// The loss is differentiated with respect to every parameter: gradients of a value used twice
// are summed, a broadcast bias gets a sum_to, and the function returns the loss followed by one
// gradient per parameter, in argument order. Every op autodiff makes is marked mt.backward.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {mt.loss}, tensor<5x4xf32> {mt.grad = "w"}, tensor<5xf32> {mt.grad = "b"})
// CHECK: %[[SEED:.*]] = mt.fill {mt.backward, value = 1.000000e+00 : f32} : tensor<f32>
// CHECK: %[[DLOGITS:.*]] = mt.softmax_xent_grad %[[SEED]]
// CHECK: %[[DBIAS:.*]] = mt.sum_to %[[DLOGITS]] {mt.backward} : tensor<2x3x5xf32> -> tensor<5xf32>
// CHECK: %[[DX:.*]] = mt.matmul %[[DLOGITS]], %arg1 {mt.backward} : tensor<2x3x5xf32>, tensor<5x4xf32>
// CHECK: %[[DW_HEAD:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.backward, transpose_a = true} : tensor<6x5xf32>, tensor<6x4xf32>
// CHECK: %[[DW_EMBED:.*]] = mt.embedding_grad %arg0, %[[DX]] {mt.backward, vocab = 5 : i64}
// CHECK: %[[DW:.*]] = mt.add %[[DW_HEAD]], %[[DW_EMBED]]
// CHECK: return %{{.*}}, %[[DW]], %[[DBIAS]] : tensor<f32>, tensor<5x4xf32>, tensor<5xf32>
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}},
                   %b: tensor<5xf32> {mt.param = {name = "b", init = "zeros"}},
                   %targets: tensor<2x3xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  %biased = mt.add %logits, %b : tensor<2x3x5xf32>, tensor<5xf32>
  %loss, %lse = mt.softmax_xent %biased, %targets : tensor<2x3x5xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

// A parameter the loss does not depend on gets a zero gradient.
// CHECK-LABEL: func.func @unused
// CHECK: %[[ZERO:.*]] = mt.fill {mt.backward, value = 0.000000e+00 : f32} : tensor<7xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[ZERO]]
func.func @unused(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                  %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}},
                  %u: tensor<7xf32> {mt.param = {name = "u", init = "zeros"}}) -> tensor<f32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %loss, %lse = mt.softmax_xent %x, %tokens : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

func.func @logits(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                  %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<2x3x4xf32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  // expected-error @+1 {{autodiff needs a function that returns one scalar f32 loss, then named outputs only (run mt-attach-loss first)}}
  return %x : tensor<2x3x4xf32>
}

// -----

func.func @no_rule(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}}) -> tensor<f32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  // expected-error @+1 {{has no gradient rule, but the loss depends on its result}}
  %y = mt.silu_grad %x, %x : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %loss, %lse = mt.softmax_xent %y, %tokens : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

// A padding id on the lookup (a folder's pad_token_id) goes to the table's gradient.
// CHECK-LABEL: func.func @padded
// CHECK: mt.embedding_grad %arg0, %{{.*}} {mt.backward, padding_id = 2 : i64, vocab = 5 : i64}
func.func @padded(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                  %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}}) -> tensor<f32> {
  %x = mt.embedding %tokens, %w {padding_id = 2 : i64} : tensor<2x3xi32>, tensor<5x4xf32>
  %loss, %lse = mt.softmax_xent %x, %tokens : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

func.func @padding_outside(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                           %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}}) -> tensor<f32> {
  // expected-error @+1 {{padding_id 5 is not a row of the (5, C) table}}
  %x = mt.embedding %tokens, %w {padding_id = 5 : i64} : tensor<2x3xi32>, tensor<5x4xf32>
  %loss, %lse = mt.softmax_xent %x, %tokens : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}
