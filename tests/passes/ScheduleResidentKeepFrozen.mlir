// PASSES: --mt-schedule-resident=keep-frozen=true --mt-plan-memory
// keep-frozen in the resident schedule: the copy of a frozen parameter (the table) is marked
// mt.kept, and mt-plan-memory keeps its bytes to the end of the step — though its last read is
// the forward's lookup — so a backend copies it in the first step only; a trained parameter's
// copy (the head) is not marked, nor the tokens'.

// CHECK-LABEL: func.func @frozen_table
// CHECK-DAG: mt.h2d %arg1 {mt.kept, mt.offsets = array<i64: [[TABLE:[0-9]+]]>}
// CHECK-DAG: mt.h2d %arg2 {mt.offsets
// CHECK-DAG: mt.h2d %arg0 {mt.offsets
// CHECK-NOT: mt.offsets = array<i64: [[TABLE]]>
// CHECK: return
func.func @frozen_table(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<5x4xf32> {mt.param = {frozen, init = "normal", name = "table", std = 1.000000e+00 : f32}}, %arg2: tensor<5x4xf32> {mt.param = {init = "normal", name = "head", std = 1.000000e+00 : f32}}, %arg3: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<5x4xf32> {mt.grad = "head"}) attributes {mt.block_templates = array<i64: 0>} {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<5x4xf32>
  %1 = mt.matmul %0, %arg2 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<5x4xf32>
  %loss, %lse = mt.softmax_xent %1, %arg3 {mt.block = 0 : i64} : tensor<1x2x5xf32>, tensor<1x2xi32>
  %2 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %3 = mt.softmax_xent_grad %2, %1, %arg3, %lse {mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<1x2x5xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %4 = mt.reshape %3 {mt.backward, mt.block = 0 : i64} : tensor<1x2x5xf32> -> tensor<2x5xf32>
  %5 = mt.reshape %0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %6 = mt.matmul %4, %5 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x5xf32>, tensor<2x4xf32>
  return %loss, %6 : tensor<f32>, tensor<5x4xf32>
}
