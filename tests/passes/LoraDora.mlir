// PASSES: --mt-lora="rank=2 alpha=4.0 dora=true"
// PEFT's use_dora: beside A and B a magnitude m (out) named as PEFT keys it (no ".weight"),
// starting at W's row norms; the product's update is (g - 1) * (x W^T) + (g * (x A^T) B^T) * 2 with
// g = m / ||W + 2 B A|| per output row, the norm marked mt.stop_gradient (PEFT detaches it): the
// ops in the order of PEFT's DoraLinearLayer.forward.
// Without dropout x W^T is the product itself: no second product of W.

// CHECK-LABEL: func.func @dora
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x4xf32>
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<5x4xf32>
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<2x4xf32> {mt.param = {bound = 5.000000e-01 : f32, init = "uniform", name = "layers.0.attn.q.lora_A.weight"}}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<5x2xf32> {mt.param = {init = "zeros", name = "layers.0.attn.q.lora_B.weight"}}
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<5xf32> {mt.param = {init = "row_norms", name = "layers.0.attn.q.lora_magnitude_vector", of = "layers.0.attn.q.weight"}}
// CHECK: %[[Y:[0-9]+]] = mt.matmul %[[X]], %[[W]] {transpose_b = true}
// CHECK: %[[D:[0-9]+]] = mt.matmul %[[X]], %[[A]] {transpose_b = true}
// CHECK: %[[U:[0-9]+]] = mt.matmul %[[D]], %[[B]] {transpose_b = true}
// CHECK-NOT: mt.scale %[[U]]
// CHECK: %[[BA:[0-9]+]] = mt.matmul %[[B]], %[[A]] : tensor<5x2xf32>, tensor<2x4xf32>
// CHECK: %[[SBA:[0-9]+]] = mt.scale %[[BA]] {factor = 2.000000e+00 : f32}
// CHECK: %[[WC:[0-9]+]] = mt.add %[[W]], %[[SBA]]
// CHECK: %[[SQ:[0-9]+]] = mt.mul %[[WC]], %[[WC]]
// CHECK: %[[SUM:[0-9]+]] = mt.sum_to %[[SQ]] : tensor<5x4xf32> -> tensor<5x1xf32>
// CHECK: %[[ROWS:[0-9]+]] = mt.reshape %[[SUM]] : tensor<5x1xf32> -> tensor<5xf32>
// CHECK: %[[N:[0-9]+]] = mt.unary %[[ROWS]] {fn = "sqrt", mt.stop_gradient} : tensor<5xf32>
// CHECK: %[[G:[0-9]+]] = mt.binary %[[M]], %[[N]] {fn = "div"}
// CHECK: %[[ONE:[0-9]+]] = mt.fill {value = -1.000000e+00 : f32} : tensor<5xf32>
// CHECK: %[[G1:[0-9]+]] = mt.add %[[G]], %[[ONE]]
// CHECK: %[[T1:[0-9]+]] = mt.mul %[[Y]], %[[G1]] : tensor<2x3x5xf32>, tensor<5xf32>
// CHECK: %[[GU:[0-9]+]] = mt.mul %[[U]], %[[G]] : tensor<2x3x5xf32>, tensor<5xf32>
// CHECK: %[[T2:[0-9]+]] = mt.scale %[[GU]] {factor = 2.000000e+00 : f32}
// CHECK: %[[DORA:[0-9]+]] = mt.add %[[T1]], %[[T2]]
// CHECK: %[[Z:[0-9]+]] = mt.add %[[Y]], %[[DORA]]
// CHECK-NOT: mt.matmul %{{.*}}, %[[W]]
// CHECK: return %[[Z]]
func.func @dora(%x: tensor<2x3x4xf32> {mt.input = "x"},
                %wq: tensor<5x4xf32> {mt.param = {name = "layers.0.attn.q.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<2x3x5xf32> {mt.output = "y"}) {
  %q = mt.matmul %x, %wq {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  return %q : tensor<2x3x5xf32>
}
