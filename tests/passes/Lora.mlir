// PASSES: --mt-lora="rank=2 alpha=4.0"
// LoRA adapters beside each weight marked "lora": x W^T + (alpha/r (x A^T)) B^T (the scale on the
// rank-wide x A^T, not the out-wide update), A (r, in) uniform in +-1/sqrt(in), B (out, r) zeros,
// named as PEFT names them; a weight read twice gets one pair of adapters, added to both products. A target read otherwise (as a lookup table) is refused.

// CHECK-LABEL: func.func @adapted
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x4xf32>
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<5x4xf32> {mt.param = {init = "normal", lora, name = "layers.0.attn.q.weight"
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<2x4xf32> {mt.param = {bound = 5.000000e-01 : f32, init = "uniform", name = "layers.0.attn.q.lora_A.weight"}}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<5x2xf32> {mt.param = {init = "zeros", name = "layers.0.attn.q.lora_B.weight"}}
// CHECK: %[[Y:[0-9]+]] = mt.matmul %[[X]], %[[W]] {transpose_b = true}
// CHECK: %[[D:[0-9]+]] = mt.matmul %[[X]], %[[A]] {transpose_b = true} : tensor<2x3x4xf32>, tensor<2x4xf32>
// CHECK: %[[S:[0-9]+]] = mt.scale %[[D]] {factor = 2.000000e+00 : f32} : tensor<2x3x2xf32>
// CHECK: %[[U:[0-9]+]] = mt.matmul %[[S]], %[[B]] {transpose_b = true} : tensor<2x3x2xf32>, tensor<5x2xf32>
// CHECK: %[[Z:[0-9]+]] = mt.add %[[Y]], %[[U]]
// CHECK: %[[Y2:[0-9]+]] = mt.matmul %[[X]], %[[W]] {transpose_b = true}
// CHECK: %[[D2:[0-9]+]] = mt.matmul %[[X]], %[[A]] {transpose_b = true}
// CHECK: %[[S2:[0-9]+]] = mt.scale %[[D2]] {factor = 2.000000e+00 : f32}
// CHECK: %[[U2:[0-9]+]] = mt.matmul %[[S2]], %[[B]] {transpose_b = true}
// CHECK: %[[Z2:[0-9]+]] = mt.add %[[Y2]], %[[U2]]
// CHECK: return %[[Z]], %[[Z2]]
func.func @adapted(%x: tensor<2x3x4xf32> {mt.input = "x"},
                   %w: tensor<5x4xf32> {mt.param = {name = "layers.0.attn.q.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<2x3x5xf32> {mt.output = "y"}, tensor<2x3x5xf32> {mt.output = "y2"}) {
  %y = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  %y2 = mt.matmul %x, %w {transpose_b = true} : tensor<2x3x4xf32>, tensor<5x4xf32>
  return %y, %y2 : tensor<2x3x5xf32>, tensor<2x3x5xf32>
}

// -----

func.func @lookup(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                  %e: tensor<5x4xf32> {mt.param = {name = "embed.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<2x3x4xf32> {mt.output = "x"}) {
  // expected-error @+1 {{a LoRA target must be a (out, in) weight read only as x W^T}}
  %x = mt.embedding %tokens, %e : tensor<2x3xi32>, tensor<5x4xf32>
  return %x : tensor<2x3x4xf32>
}
