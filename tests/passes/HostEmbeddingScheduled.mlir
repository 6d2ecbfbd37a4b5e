// PASSES: --mt-schedule-streamed=update=on-arrival --mt-plan-memory
// A tied head split in two chunks with its token lookup on the host (the IR mt-host-embedding then
// mt-split-vocab make). The schedule fills the tokens' rows on the host right before their copy
// in; after the rows' gradient and both head chunks' gradients are out, the host scatter-adds the
// rows onto the chunks that landed (mt.accumulate), leaving out the tokens of the padding id (5),
// then updates the table on arrival. The table's gradient has one place in the landing buffer:
// the chunks at their rows (0 and 48 bytes in), the scatter over all of it.

// CHECK-LABEL: func.func @tied
// CHECK: mt.host_task embedding_lookup(%arg4, %arg0, %arg1) {mt.block = 1 : i64}
// CHECK-NEXT: mt.h2d %arg4 {mt.block = 1 : i64
// CHECK: %[[D1:.*]] = mt.d2h %{{.*}} {mt.block = 2 : i64, mt.landing_offset = 48 : i64} : tensor<3x4xf32>
// CHECK: %[[D0:.*]] = mt.d2h %{{.*}} {mt.block = 1 : i64, mt.landing_offset = 0 : i64} : tensor<3x4xf32>
// CHECK: %[[ROWS:.*]] = mt.d2h %{{.*}} {mt.block = 1 : i64} : tensor<1x2x4xf32>
// CHECK-NEXT: mt.host_task embedding_grad(%arg1, %arg0, %[[ROWS]]) {mt.accumulate, mt.block = 1 : i64, mt.landing_offset = 0 : i64, mt.padding_id = 5 : i64}
// CHECK-NEXT: mt.host_task adamw_on_arrival(%arg2) {mt.block = 1 : i64}
// CHECK-NEXT: return %{{.*}}, %[[D0]], %[[D1]], %[[ROWS]]
func.func @tied(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<3x4xf32> {mt.param = {init = "normal", name = "e", rows = array<i64: 0, 6>, std = 1.000000e+00 : f32}}, %arg2: tensor<3x4xf32> {mt.param = {init = "normal", name = "e", rows = array<i64: 3, 6>, std = 1.000000e+00 : f32}}, %arg3: tensor<1x2xi32> {mt.input = "targets"}, %arg4: tensor<1x2x4xf32> {mt.embedded_tokens = "e"}) -> (tensor<f32> {mt.loss}, tensor<3x4xf32> {mt.grad = "e", mt.grad_row = 0 : i64}, tensor<3x4xf32> {mt.grad = "e", mt.grad_row = 3 : i64}, tensor<1x2x4xf32> {mt.grad_tokens = "e", mt.padding_id = 5 : i64}) attributes {mt.block_templates = array<i64>, mt.vocab_split = ["e"]} {
  %0 = mt.fill {mt.block = 1 : i64, value = 0xFF800000 : f32} : tensor<1x2x2xf32>
  %1 = mt.matmul %arg4, %arg1 {mt.block = 1 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<3x4xf32>
  %2 = mt.xent_chunk %1, %arg3, %0 {first = 0 : i64, mt.block = 1 : i64} : tensor<1x2x3xf32>, tensor<1x2xi32>, tensor<1x2x2xf32>
  %3 = mt.matmul %arg4, %arg2 {mt.block = 2 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<3x4xf32>
  %4 = mt.xent_chunk %3, %arg3, %2 {first = 3 : i64, mt.block = 2 : i64} : tensor<1x2x3xf32>, tensor<1x2xi32>, tensor<1x2x2xf32>
  %loss, %lse = mt.xent_finish %4, %arg3 {mt.block = 2 : i64, vocab = 6 : i64} : tensor<1x2x2xf32>, tensor<1x2xi32>
  %5 = mt.fill {mt.backward, mt.block = 2 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %6 = mt.xent_chunk_grad %5, %3, %arg3, %lse {first = 3 : i64, mt.backward, mt.block = 2 : i64, vocab = 6 : i64} : tensor<f32>, tensor<1x2x3xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %7 = mt.matmul %6, %arg2 {mt.backward, mt.block = 2 : i64} : tensor<1x2x3xf32>, tensor<3x4xf32>
  %8 = mt.reshape %arg4 {mt.backward, mt.block = 2 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %9 = mt.reshape %6 {mt.backward, mt.block = 2 : i64} : tensor<1x2x3xf32> -> tensor<2x3xf32>
  %10 = mt.matmul %9, %8 {mt.backward, mt.block = 2 : i64, transpose_a = true} : tensor<2x3xf32>, tensor<2x4xf32>
  %11 = mt.matmul %arg4, %arg1 {mt.block = 1 : i64, mt.recompute, transpose_b = true} : tensor<1x2x4xf32>, tensor<3x4xf32>
  %12 = mt.xent_chunk_grad %5, %11, %arg3, %lse {first = 0 : i64, mt.backward, mt.block = 1 : i64, vocab = 6 : i64} : tensor<f32>, tensor<1x2x3xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %13 = mt.matmul %12, %arg1 {mt.backward, mt.block = 1 : i64} : tensor<1x2x3xf32>, tensor<3x4xf32>
  %14 = mt.reshape %arg4 {mt.backward, mt.block = 1 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %15 = mt.reshape %12 {mt.backward, mt.block = 1 : i64} : tensor<1x2x3xf32> -> tensor<2x3xf32>
  %16 = mt.matmul %15, %14 {mt.backward, mt.block = 1 : i64, transpose_a = true} : tensor<2x3xf32>, tensor<2x4xf32>
  %17 = mt.add %7, %13 {mt.backward, mt.block = 1 : i64} : tensor<1x2x4xf32>, tensor<1x2x4xf32>
  return %loss, %16, %10, %17 : tensor<f32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<1x2x4xf32>
}

// -----

// Tokens' rows of a table that is not a parameter.
// expected-error @+1 {{argument 2 holds tokens' rows of "nope": that needs a parameter of that name and a tokens input}}
func.func @nope(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<1x2xi32> {mt.input = "targets"}, %arg2: tensor<1x2x4xf32> {mt.embedded_tokens = "nope"}, %arg3: tensor<6x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}) -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "w"}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.matmul %arg2, %arg3 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<6x4xf32>
  %loss, %lse = mt.softmax_xent %0, %arg1 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  %1 = mt.fill {mt.backward, mt.block = 0 : i64, value = 0.000000e+00 : f32} : tensor<6x4xf32>
  return %loss, %1 : tensor<f32>, tensor<6x4xf32>
}
