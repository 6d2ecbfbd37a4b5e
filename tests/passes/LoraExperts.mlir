// PASSES: --mt-lora="rank=2 alpha=4.0"
// PEFT's target_parameters: a stack of experts marked `lora` gets A (E, 2, in) and B (E, out, 2),
// named as PEFT names a module's adapters; each grouped product gains two grouped products over
// the same counts, (x A_e^T) B_e^T scaled by 2. A stack stored (E, in, out) (gpt-oss's, read
// without transpose_b) gets the same adapter shapes for its (out, in).

// CHECK-LABEL: func.func @experts
// CHECK-SAME: %[[ROWS:[a-z0-9]+]]: tensor<12x4xf32>
// CHECK-SAME: %[[N:[a-z0-9]+]]: tensor<3xi32>
// CHECK-SAME: %[[UP:[a-z0-9]+]]: tensor<3x8x4xf32>
// CHECK-SAME: %[[DOWN:[a-z0-9]+]]: tensor<3x8x4xf32>
// CHECK-SAME: %[[UA:[a-z0-9]+]]: tensor<3x2x4xf32> {mt.param = {bound = 5.000000e-01 : f32, init = "uniform", name = "layers.0.moe.up.lora_A.weight"}}
// CHECK-SAME: %[[UB:[a-z0-9]+]]: tensor<3x8x2xf32> {mt.param = {init = "zeros", name = "layers.0.moe.up.lora_B.weight"}}
// CHECK-SAME: %[[DA:[a-z0-9]+]]: tensor<3x2x8xf32> {mt.param = {bound = 0.353553385 : f32, init = "uniform", name = "layers.0.moe.down.lora_A.weight"}}
// CHECK-SAME: %[[DB:[a-z0-9]+]]: tensor<3x4x2xf32> {mt.param = {init = "zeros", name = "layers.0.moe.down.lora_B.weight"}}
// CHECK: %[[H:[0-9]+]] = mt.grouped_matmul %[[ROWS]], %[[UP]], %[[N]] {transpose_b = true}
// CHECK: %[[HD:[0-9]+]] = mt.grouped_matmul %[[ROWS]], %[[UA]], %[[N]] {transpose_b = true} : tensor<12x4xf32>, tensor<3x2x4xf32>
// CHECK: %[[HS:[0-9]+]] = mt.scale %[[HD]] {factor = 2.000000e+00 : f32} : tensor<12x2xf32>
// CHECK: %[[HU:[0-9]+]] = mt.grouped_matmul %[[HS]], %[[UB]], %[[N]] {transpose_b = true} : tensor<12x2xf32>, tensor<3x8x2xf32>
// CHECK: %[[H2:[0-9]+]] = mt.add %[[H]], %[[HU]]
// CHECK: %[[Y:[0-9]+]] = mt.grouped_matmul %[[H2]], %[[DOWN]], %[[N]] :
// CHECK: %[[YD:[0-9]+]] = mt.grouped_matmul %[[H2]], %[[DA]], %[[N]] {transpose_b = true} : tensor<12x8xf32>, tensor<3x2x8xf32>
// CHECK: %[[YS:[0-9]+]] = mt.scale %[[YD]] {factor = 2.000000e+00 : f32} : tensor<12x2xf32>
// CHECK: %[[YU:[0-9]+]] = mt.grouped_matmul %[[YS]], %[[DB]], %[[N]] {transpose_b = true} : tensor<12x2xf32>, tensor<3x4x2xf32>
// CHECK: %[[Y2:[0-9]+]] = mt.add %[[Y]], %[[YU]]
// CHECK: return %[[Y2]]
func.func @experts(%rows: tensor<12x4xf32> {mt.input = "rows"}, %n: tensor<3xi32> {mt.input = "counts"},
                   %up: tensor<3x8x4xf32> {mt.param = {name = "layers.0.moe.up.weight", init = "normal", std = 0.02 : f32, lora}},
                   %down: tensor<3x8x4xf32> {mt.param = {name = "layers.0.moe.down.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<12x4xf32> {mt.output = "y"}) {
  %h = mt.grouped_matmul %rows, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>
  %y = mt.grouped_matmul %h, %down, %n : tensor<12x8xf32>, tensor<3x8x4xf32>, tensor<3xi32>
  return %y : tensor<12x4xf32>
}

// -----

// A stack read otherwise than as the weight of whole grouped products is refused.
func.func @read_otherwise(%rows: tensor<12x4xf32> {mt.input = "rows"}, %n: tensor<3xi32> {mt.input = "counts"},
                          %up: tensor<3x8x4xf32> {mt.param = {name = "layers.0.moe.up.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<12x8xf32> {mt.output = "y"}, tensor<3x8x4xf32> {mt.output = "w"}) {
  %h = mt.grouped_matmul %rows, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>
  // expected-error @+1 {{a stack of experts with LoRA adapters must be read only as the weight of whole mt.grouped_matmul products of one layout}}
  %s = mt.scale %up {factor = 2.0 : f32} : tensor<3x8x4xf32>
  return %h, %s : tensor<12x8xf32>, tensor<3x8x4xf32>
}
