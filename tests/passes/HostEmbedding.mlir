// PASSES: --mt-host-embedding
// Tied: the table e is the LM head's weight too. The lookup becomes the argument %arg3 the host
// fills (mt.embedded_tokens); e's gradient result is the head's alone, and the lookup's row
// gradient (dx, the head's dh here) a new result the host scatter-adds into it (mt.grad_tokens).

// CHECK-LABEL: func.func @tied
// CHECK-SAME: %arg3: tensor<1x2x4xf32> {mt.embedded_tokens = "e"}
// CHECK-SAME: -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "e"}, tensor<1x2x4xf32> {mt.grad_tokens = "e"})
// CHECK-NOT: mt.embedding
// CHECK: mt.matmul %arg3, %arg1 {mt.block = 0 : i64, transpose_b = true}
// CHECK: %[[DH:.*]] = mt.matmul %{{.*}}, %arg1 {mt.backward, mt.block = 0 : i64}
// CHECK: %[[DW:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.backward, mt.block = 0 : i64, transpose_a = true}
// CHECK-NOT: mt.add
// CHECK-NEXT: return %{{.*}}, %[[DW]], %[[DH]]
func.func @tied(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<6x4xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}}, %arg2: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "e"}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<6x4xf32>
  %1 = mt.matmul %0, %arg1 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<6x4xf32>
  %loss, %lse = mt.softmax_xent %1, %arg2 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  %2 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %3 = mt.softmax_xent_grad %2, %1, %arg2, %lse {mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<1x2x6xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %4 = mt.matmul %3, %arg1 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<6x4xf32>
  %5 = mt.reshape %0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %6 = mt.reshape %3 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32> -> tensor<2x6xf32>
  %7 = mt.matmul %6, %5 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x6xf32>, tensor<2x4xf32>
  %8 = mt.embedding_grad %arg0, %4 {mt.backward, mt.block = -1 : i64, vocab = 6 : i64} : tensor<1x2xi32>, tensor<1x2x4xf32>
  %9 = mt.add %7, %8 {mt.backward, mt.block = -1 : i64} : tensor<6x4xf32>, tensor<6x4xf32>
  return %loss, %9 : tensor<f32>, tensor<6x4xf32>
}

// -----

// Untied: e loses its gradient result and every device use; the host makes its gradient from
// the rows alone, the scatter's padding id (2) with them for the host task.

// CHECK-LABEL: func.func @untied
// CHECK-SAME: %arg4: tensor<1x2x4xf32> {mt.embedded_tokens = "e"}
// CHECK-SAME: -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "w"}, tensor<1x2x4xf32> {mt.grad_tokens = "e", mt.padding_id = 2 : i64})
// CHECK-NOT: mt.embedding
// CHECK: %[[DH:.*]] = mt.matmul %{{.*}}, %arg2 {mt.backward, mt.block = 0 : i64}
// CHECK: %[[DW:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.backward, mt.block = 0 : i64, transpose_a = true}
// CHECK-NEXT: return %{{.*}}, %[[DW]], %[[DH]]
func.func @untied(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<6x4xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}}, %arg2: tensor<6x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}, %arg3: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "e"}, tensor<6x4xf32> {mt.grad = "w"}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<6x4xf32>
  %1 = mt.matmul %0, %arg2 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<6x4xf32>
  %loss, %lse = mt.softmax_xent %1, %arg3 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  %2 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %3 = mt.softmax_xent_grad %2, %1, %arg3, %lse {mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<1x2x6xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %4 = mt.matmul %3, %arg2 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<6x4xf32>
  %5 = mt.reshape %0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %6 = mt.reshape %3 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32> -> tensor<2x6xf32>
  %7 = mt.matmul %6, %5 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x6xf32>, tensor<2x4xf32>
  %8 = mt.embedding_grad %arg0, %4 {mt.backward, mt.block = -1 : i64, padding_id = 2 : i64, vocab = 6 : i64} : tensor<1x2xi32>, tensor<1x2x4xf32>
  return %loss, %8, %7 : tensor<f32>, tensor<6x4xf32>, tensor<6x4xf32>
}

// -----

// A model whose tokens are not looked up in a parameter table (here: no lookup at all).
// expected-error @+1 {{the token embedding on the host needs a lookup of the tokens in a parameter table (mt.embedding %tokens, %table); this model has none: drop --embedding host}}
func.func @none(%arg0: tensor<1x2x4xf32> {mt.input = "x"}, %arg1: tensor<6x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}, %arg2: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "w"}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.matmul %arg0, %arg1 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<6x4xf32>
  %loss, %lse = mt.softmax_xent %0, %arg2 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  %1 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %2 = mt.softmax_xent_grad %1, %0, %arg2, %lse {mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<1x2x6xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %3 = mt.reshape %arg0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %4 = mt.reshape %2 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32> -> tensor<2x6xf32>
  %5 = mt.matmul %4, %3 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x6xf32>, tensor<2x4xf32>
  return %loss, %5 : tensor<f32>, tensor<6x4xf32>
}
