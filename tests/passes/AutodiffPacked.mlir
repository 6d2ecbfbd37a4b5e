// PASSES: --mt-autodiff
// Packed examples differentiated: the attention's gradient takes the forward's positions (the
// kernel mt.attention_packed_grad masks as the forward did), the rotary embedding at the input
// positions turns its gradient back at the same positions (mt.rope_at, inverse), and the
// positions (i32, an input) take none. A positions operand of another shape is refused.

// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]] = mt.rope_at %arg1, %arg0 {head_dim = 4 : i64, theta = 1.000000e+02 : f32} : tensor<2x3x8xf32>, tensor<2x3xi32>
// CHECK: %[[O:.*]], %[[LSE:.*]] = mt.attention %[[Q]], %{{.*}}, %{{.*}} positions %arg0 : tensor<2x3xi32> {num_heads = 2 : i64, num_kv_heads = 1 : i64}
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = mt.attention_grad %{{.*}}, %[[Q]], %{{.*}}, %{{.*}}, %[[O]], %[[LSE]], %arg0 {mt.backward, num_heads = 2 : i64, num_kv_heads = 1 : i64}
// CHECK: mt.rope_at %[[DQ]], %arg0 {head_dim = 4 : i64, inverse = true, mt.backward, theta = 1.000000e+02 : f32}
func.func @forward(%pos: tensor<2x3xi32> {mt.input = "positions"},
                   %q: tensor<2x3x8xf32> {mt.param = {name = "q", init = "normal", std = 1.0 : f32}},
                   %k: tensor<2x3x4xf32> {mt.param = {name = "k", init = "normal", std = 1.0 : f32}},
                   %v: tensor<2x3x4xf32> {mt.param = {name = "v", init = "normal", std = 1.0 : f32}},
                   %w: tensor<4x8xf32> {mt.param = {name = "w", init = "normal", std = 1.0 : f32}},
                   %targets: tensor<2x3xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) {
  %qr = mt.rope_at %q, %pos {head_dim = 4, theta = 100.0 : f32} : tensor<2x3x8xf32>, tensor<2x3xi32>
  %o, %lse = mt.attention %qr, %k, %v positions %pos : tensor<2x3xi32> {num_heads = 2, num_kv_heads = 1}
      : tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %logits = mt.matmul %o, %w {transpose_b = true} : tensor<2x3x8xf32>, tensor<4x8xf32>
  %loss, %l = mt.softmax_xent %logits, %targets : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

func.func @positions_of_another_shape(%q: tensor<2x3x8xf32>, %k: tensor<2x3x4xf32>, %pos: tensor<2x4xi32>) -> tensor<2x3x8xf32> {
  // expected-error @+1 {{positions must have shape [2,3], got [2,4]}}
  %o, %lse = mt.attention %q, %k, %k positions %pos : tensor<2x4xi32> {num_heads = 2, num_kv_heads = 1}
      : tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %o : tensor<2x3x8xf32>
}
