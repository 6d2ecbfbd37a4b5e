// PASSES: --mt-lora="rank=2 alpha=4.0 dora=true dropout=0.1"
// DoRA with dropout: PEFT computes DoRA's base term from the dropped x, a second product of W
// (x' W^T) beside the product of the undropped x, which stays the output's first term.

// CHECK-LABEL: func.func @dora_dropped
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x4xf32>
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<5x4xf32>
// CHECK: %[[Y:[0-9]+]] = mt.matmul %[[X]], %[[W]] {transpose_b = true}
// CHECK: %[[XD:[0-9]+]] = mt.dropout %[[X]] {ratio = 1.000000e-01 : f32, site = 0 : i64}
// CHECK: mt.matmul %[[XD]]
// CHECK: %[[N:[0-9]+]] = mt.unary %{{.*}} {fn = "sqrt", mt.stop_gradient}
// CHECK: %[[BASE:[0-9]+]] = mt.matmul %[[XD]], %[[W]] {transpose_b = true}
// CHECK: %[[T1:[0-9]+]] = mt.mul %[[BASE]], %{{.*}} : tensor<2x3x5xf32>, tensor<5xf32>
// CHECK: %[[DORA:[0-9]+]] = mt.add %[[T1]], %{{.*}}
// CHECK: %[[Z:[0-9]+]] = mt.add %[[Y]], %[[DORA]]
// CHECK: return %[[Z]]
func.func @dora_dropped(%x: tensor<2x3x4xf32> {mt.input = "x"},
                        %wq: tensor<5x4xf32> {mt.param = {name = "layers.0.attn.q.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<2x3x5xf32> {mt.output = "y"}) {
  %q = mt.matmul %x, %wq {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  return %q : tensor<2x3x5xf32>
}
