// PASSES: --mt-lora="rank=4 alpha=8.0 rslora=true dropout=0.25"
// PEFT's lora_dropout and use_rslora: A reads mt.dropout(x), one site per product, numbered in
// the function's order after its existing sites (here site 3 is taken: 4 for q's product, 5 for
// v's, though v's weight comes first among the arguments); the scale is alpha / sqrt(r) = 4.

// CHECK-LABEL: func.func @dropped
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x4xf32>
// CHECK: %[[X1:[0-9]+]] = mt.dropout %[[X]] {ratio = 1.000000e-01 : f32, site = 3 : i64}
// CHECK: %[[Q:[0-9]+]] = mt.matmul %[[X1]], %{{.*}} {transpose_b = true}
// CHECK: %[[DQ:[0-9]+]] = mt.dropout %[[X1]] {ratio = 2.500000e-01 : f32, site = 4 : i64}
// CHECK: %[[AQ:[0-9]+]] = mt.matmul %[[DQ]], %{{.*}} {transpose_b = true} : tensor<2x3x4xf32>, tensor<4x4xf32>
// CHECK: %[[SQ:[0-9]+]] = mt.scale %[[AQ]] {factor = 4.000000e+00 : f32}
// CHECK: %[[BQ:[0-9]+]] = mt.matmul %[[SQ]], %{{.*}} {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
// CHECK: %[[ZQ:[0-9]+]] = mt.add %[[Q]], %[[BQ]]
// CHECK: %[[VV:[0-9]+]] = mt.matmul %[[ZQ]], %{{.*}} {transpose_b = true}
// CHECK: %[[DV:[0-9]+]] = mt.dropout %[[ZQ]] {ratio = 2.500000e-01 : f32, site = 5 : i64}
// CHECK: mt.matmul %[[DV]]
// CHECK-NOT: mt.dropout
// CHECK: return
func.func @dropped(%x: tensor<2x3x4xf32> {mt.input = "x"},
                   %wv: tensor<5x5xf32> {mt.param = {name = "layers.0.attn.v.weight", init = "normal", std = 0.02 : f32, lora}},
                   %wq: tensor<5x4xf32> {mt.param = {name = "layers.0.attn.q.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<2x3x5xf32> {mt.output = "y"}) {
  %x1 = mt.dropout %x {ratio = 1.000000e-01 : f32, site = 3 : i64} : tensor<2x3x4xf32>
  %q = mt.matmul %x1, %wq {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  %v = mt.matmul %q, %wv {transpose_b = true} : tensor<2x3x5xf32>, tensor<5x5xf32>
  return %v : tensor<2x3x5xf32>
}
