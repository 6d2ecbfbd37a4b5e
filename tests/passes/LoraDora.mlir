// PASSES: --mt-lora="rank=2 alpha=4.0 dora=true"
// PEFT's use_dora: beside A and B a magnitude m (out) named as PEFT keys it (no ".weight"),
// starting at W's row norms; PEFT's DoraLinearLayer adds (g - 1) * (x W^T) + g * 2 (x A^T) B^T to
// the product y = x W^T, g = m / ||W + 2 B A|| per output row, the norm marked mt.stop_gradient
// (PEFT detaches it). Without dropout that is g * (y + (2 (x A^T)) B^T): an add and a mul over y,
// no second product of W, the scale on B for the norm and on x A^T for the update.

// CHECK-LABEL: func.func @dora
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x4xf32>
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<5x4xf32>
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<2x4xf32> {mt.param = {bound = 5.000000e-01 : f32, init = "uniform", name = "layers.0.attn.q.lora_A.weight"}}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<5x2xf32> {mt.param = {init = "zeros", name = "layers.0.attn.q.lora_B.weight"}}
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<5xf32> {mt.param = {init = "row_norms", name = "layers.0.attn.q.lora_magnitude_vector", of = "layers.0.attn.q.weight"}}
// CHECK: %[[Y:[0-9]+]] = mt.matmul %[[X]], %[[W]] {transpose_b = true}
// CHECK: %[[D:[0-9]+]] = mt.matmul %[[X]], %[[A]] {transpose_b = true}
// CHECK: %[[SD:[0-9]+]] = mt.scale %[[D]] {factor = 2.000000e+00 : f32} : tensor<2x3x2xf32>
// CHECK: %[[U:[0-9]+]] = mt.matmul %[[SD]], %[[B]] {transpose_b = true}
// CHECK: %[[SB:[0-9]+]] = mt.scale %[[B]] {factor = 2.000000e+00 : f32} : tensor<5x2xf32>
// CHECK: %[[BA:[0-9]+]] = mt.matmul %[[SB]], %[[A]] : tensor<5x2xf32>, tensor<2x4xf32>
// CHECK: %[[WC:[0-9]+]] = mt.add %[[W]], %[[BA]]
// CHECK: %[[SQ:[0-9]+]] = mt.mul %[[WC]], %[[WC]]
// CHECK: %[[SUM:[0-9]+]] = mt.sum_to %[[SQ]] : tensor<5x4xf32> -> tensor<5x1xf32>
// CHECK: %[[ROWS:[0-9]+]] = mt.reshape %[[SUM]] : tensor<5x1xf32> -> tensor<5xf32>
// CHECK: %[[N:[0-9]+]] = mt.unary %[[ROWS]] {fn = "sqrt", mt.stop_gradient} : tensor<5xf32>
// CHECK: %[[G:[0-9]+]] = mt.binary %[[M]], %[[N]] {fn = "div"}
// CHECK-NOT: mt.fill
// CHECK-NOT: mt.matmul %{{.*}}, %[[W]]
// CHECK: %[[YU:[0-9]+]] = mt.add %[[Y]], %[[U]]
// CHECK-NEXT: %[[Z:[0-9]+]] = mt.mul %[[YU]], %[[G]] : tensor<2x3x5xf32>, tensor<5xf32>
// CHECK: return %[[Z]]
func.func @dora(%x: tensor<2x3x4xf32> {mt.input = "x"},
                %wq: tensor<5x4xf32> {mt.param = {name = "layers.0.attn.q.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<2x3x5xf32> {mt.output = "y"}) {
  %q = mt.matmul %x, %wq {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  return %q : tensor<2x3x5xf32>
}
