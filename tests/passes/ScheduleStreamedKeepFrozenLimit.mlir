// PASSES: --mt-schedule-streamed="keep-frozen=true keep-frozen-limit=1" --mt-plan-memory
// keep-frozen-limit: where the budget has room for only some of the frozen weights (mtc's
// --keep-frozen auto searches the count), the schedule keeps those whose streaming would copy
// most often first — read in more block regions — then those the step reads first; the rest
// stream as trained weights do, their copies not marked mt.kept, their bytes free after use.

// Three frozen weights: the table (read first, by block -1's lookup alone), w (block 0's forward
// and its backward: two regions) and v (block 1, whose forward and backward are one region). With
// one kept: w, though the table is read first; the table and v stream, each copied once (one
// region each), not kept.

// CHECK-LABEL: func.func @one_of_three
// CHECK: mt.h2d %arg1 {mt.block = -1 : i64, mt.offsets
// CHECK: mt.h2d %arg2 {mt.block = -1 : i64, mt.kept, mt.offsets
// CHECK-NOT: mt.h2d %arg2
// CHECK: mt.h2d %arg3 {mt.block = 0 : i64, mt.offsets
// CHECK-NOT: mt.h2d %arg3 {{.*}}mt.kept
// CHECK: return
func.func @one_of_three(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<5x4xf32> {mt.param = {frozen, init = "normal", name = "table", std = 1.000000e+00 : f32}}, %arg2: tensor<4x4xf32> {mt.param = {frozen, init = "normal", name = "w", std = 1.000000e+00 : f32}}, %arg3: tensor<4x4xf32> {mt.param = {frozen, init = "normal", name = "v", std = 1.000000e+00 : f32}}, %arg4: tensor<5x4xf32> {mt.param = {init = "normal", name = "head", std = 1.000000e+00 : f32}}, %arg5: tensor<1x2xi32> {mt.input = "targets"}, %arg6: tensor<4x4xf32> {mt.param = {init = "normal", name = "s", std = 1.000000e+00 : f32}}) -> (tensor<f32> {mt.loss}, tensor<5x4xf32> {mt.grad = "head"}, tensor<4x4xf32> {mt.grad = "s"}) attributes {mt.block_templates = array<i64: 0, 1>} {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<5x4xf32>
  %1 = mt.matmul %0, %arg6 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %2 = mt.matmul %1, %arg2 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %3 = mt.matmul %2, %arg3 {mt.block = 1 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %4 = mt.matmul %3, %arg4 {mt.block = 1 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<5x4xf32>
  %loss, %lse = mt.softmax_xent %4, %arg5 {mt.block = 1 : i64} : tensor<1x2x5xf32>, tensor<1x2xi32>
  %5 = mt.fill {mt.backward, mt.block = 1 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %6 = mt.softmax_xent_grad %5, %4, %arg5, %lse {mt.backward, mt.block = 1 : i64} : tensor<f32>, tensor<1x2x5xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %7 = mt.reshape %6 {mt.backward, mt.block = 1 : i64} : tensor<1x2x5xf32> -> tensor<2x5xf32>
  %8 = mt.reshape %3 {mt.backward, mt.block = 1 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %9 = mt.matmul %7, %8 {mt.backward, mt.block = 1 : i64, transpose_a = true} : tensor<2x5xf32>, tensor<2x4xf32>
  %10 = mt.matmul %6, %arg4 {mt.backward, mt.block = 1 : i64} : tensor<1x2x5xf32>, tensor<5x4xf32>
  %11 = mt.matmul %10, %arg3 {mt.backward, mt.block = 1 : i64} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %12 = mt.matmul %11, %arg2 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %13 = mt.reshape %12 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %14 = mt.reshape %0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %15 = mt.matmul %13, %14 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x4xf32>, tensor<2x4xf32>
  return %loss, %9, %15 : tensor<f32>, tensor<5x4xf32>, tensor<4x4xf32>
}

// -----

// w trained: the table and v, each read in one region, tie; the table, read first, is kept.

// CHECK-LABEL: func.func @first_read
// CHECK: mt.h2d %arg1 {mt.block = -1 : i64, mt.kept, mt.offsets
// CHECK-NOT: mt.h2d %arg1
// CHECK: mt.h2d %arg3 {mt.block = 0 : i64, mt.offsets
// CHECK-NOT: mt.h2d %arg3 {{.*}}mt.kept
// CHECK: return
func.func @first_read(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<5x4xf32> {mt.param = {frozen, init = "normal", name = "table", std = 1.000000e+00 : f32}}, %arg2: tensor<4x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}, %arg3: tensor<4x4xf32> {mt.param = {frozen, init = "normal", name = "v", std = 1.000000e+00 : f32}}, %arg4: tensor<5x4xf32> {mt.param = {init = "normal", name = "head", std = 1.000000e+00 : f32}}, %arg5: tensor<1x2xi32> {mt.input = "targets"}, %arg6: tensor<4x4xf32> {mt.param = {init = "normal", name = "s", std = 1.000000e+00 : f32}}) -> (tensor<f32> {mt.loss}, tensor<5x4xf32> {mt.grad = "head"}, tensor<4x4xf32> {mt.grad = "s"}, tensor<4x4xf32> {mt.grad = "w"}) attributes {mt.block_templates = array<i64: 0, 1>} {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<5x4xf32>
  %1 = mt.matmul %0, %arg6 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %2 = mt.matmul %1, %arg2 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %3 = mt.matmul %2, %arg3 {mt.block = 1 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %4 = mt.matmul %3, %arg4 {mt.block = 1 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<5x4xf32>
  %loss, %lse = mt.softmax_xent %4, %arg5 {mt.block = 1 : i64} : tensor<1x2x5xf32>, tensor<1x2xi32>
  %5 = mt.fill {mt.backward, mt.block = 1 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %6 = mt.softmax_xent_grad %5, %4, %arg5, %lse {mt.backward, mt.block = 1 : i64} : tensor<f32>, tensor<1x2x5xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %7 = mt.reshape %6 {mt.backward, mt.block = 1 : i64} : tensor<1x2x5xf32> -> tensor<2x5xf32>
  %8 = mt.reshape %3 {mt.backward, mt.block = 1 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %9 = mt.matmul %7, %8 {mt.backward, mt.block = 1 : i64, transpose_a = true} : tensor<2x5xf32>, tensor<2x4xf32>
  %10 = mt.matmul %6, %arg4 {mt.backward, mt.block = 1 : i64} : tensor<1x2x5xf32>, tensor<5x4xf32>
  %11 = mt.matmul %10, %arg3 {mt.backward, mt.block = 1 : i64} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %12 = mt.matmul %11, %arg2 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %13 = mt.reshape %12 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %14 = mt.reshape %0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %15 = mt.matmul %13, %14 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x4xf32>, tensor<2x4xf32>
  %16 = mt.reshape %11 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %17 = mt.reshape %1 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %18 = mt.matmul %16, %17 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x4xf32>, tensor<2x4xf32>
  return %loss, %9, %15, %18 : tensor<f32>, tensor<5x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
