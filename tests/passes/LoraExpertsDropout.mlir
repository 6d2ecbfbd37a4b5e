// PASSES: --mt-lora="rank=2 alpha=4.0 dropout=0.25"
// lora_dropout on a stack of experts (PEFT's per-expert nn.Linear each have one): A's grouped
// product reads the routed rows through their own mt.dropout, one site per product in the
// function's order, up's 0, then a dense weight's 1, then down's 2; each routed row is one token's
// for one expert, so the masks of two experts' rows of one token differ, as PEFT's dropouts draw.

// CHECK-LABEL: func.func @experts
// CHECK-SAME: %[[ROWS:[a-z0-9]+]]: tensor<12x4xf32>
// CHECK-SAME: %[[N:[a-z0-9]+]]: tensor<3xi32>
// CHECK-SAME: %[[UP:[a-z0-9]+]]: tensor<3x8x4xf32>
// CHECK: %[[H:[0-9]+]] = mt.grouped_matmul %[[ROWS]], %[[UP]], %[[N]] {transpose_b = true}
// CHECK: %[[HX:[0-9]+]] = mt.dropout %[[ROWS]] {ratio = 2.500000e-01 : f32, site = 0 : i64} : tensor<12x4xf32>
// CHECK: %[[HD:[0-9]+]] = mt.grouped_matmul %[[HX]], %{{.*}}, %[[N]] {transpose_b = true} : tensor<12x4xf32>, tensor<3x2x4xf32>
// CHECK: %[[HS:[0-9]+]] = mt.scale %[[HD]] {factor = 2.000000e+00 : f32}
// CHECK: %[[HU:[0-9]+]] = mt.grouped_matmul %[[HS]], %{{.*}}, %[[N]] {transpose_b = true} : tensor<12x2xf32>, tensor<3x8x2xf32>
// CHECK: %[[H2:[0-9]+]] = mt.add %[[H]], %[[HU]]
// CHECK: mt.dropout %[[H2]] {ratio = 2.500000e-01 : f32, site = 1 : i64} : tensor<12x8xf32>
// CHECK: %[[Y:[0-9]+]] = mt.grouped_matmul %{{.*}}, %{{.*}}, %[[N]] :
// CHECK: %[[YX:[0-9]+]] = mt.dropout %{{.*}} {ratio = 2.500000e-01 : f32, site = 2 : i64} : tensor<12x8xf32>
// CHECK: mt.grouped_matmul %[[YX]], %{{.*}}, %[[N]] {transpose_b = true} : tensor<12x8xf32>, tensor<3x2x8xf32>
// CHECK-NOT: mt.dropout
// CHECK: return
func.func @experts(%rows: tensor<12x4xf32> {mt.input = "rows"}, %n: tensor<3xi32> {mt.input = "counts"},
                   %up: tensor<3x8x4xf32> {mt.param = {name = "layers.0.moe.up.weight", init = "normal", std = 0.02 : f32, lora}},
                   %w: tensor<8x8xf32> {mt.param = {name = "layers.0.attn.o.weight", init = "normal", std = 0.02 : f32, lora}},
                   %down: tensor<3x8x4xf32> {mt.param = {name = "layers.0.moe.down.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<12x4xf32> {mt.output = "y"}) {
  %h = mt.grouped_matmul %rows, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>
  %o = mt.matmul %h, %w {transpose_b = true} : tensor<12x8xf32>, tensor<8x8xf32>
  %y = mt.grouped_matmul %o, %down, %n : tensor<12x8xf32>, tensor<3x8x4xf32>, tensor<3xi32>
  return %y : tensor<12x4xf32>
}
