// PASSES: --mt-partition
// Layer blocks come from module paths in the locations: blocks keep their index, what runs
// before them is the prologue (-1), what runs after the epilogue (last + 1), and a backward op
// shares its forward op's path. Blocks whose forward ops match share a template.

// CHECK-LABEL: func.func @f
// CHECK-SAME: attributes {mt.block_templates = array<i64: 0, 0, 2>}
// CHECK: mt.embedding {{.*}}{mt.block = -1 : i64}
// CHECK: mt.scale {{.*}}{factor = 2.000000e+00 : f32, mt.block = 0 : i64}
// CHECK: mt.scale {{.*}}{factor = 2.000000e+00 : f32, mt.block = 1 : i64}
// CHECK: mt.scale {{.*}}{factor = 3.000000e+00 : f32, mt.block = 2 : i64}
// CHECK: mt.softmax_xent {{.*}}{mt.block = 3 : i64}
func.func @f(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
             %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}}) -> tensor<f32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32> loc("embed")
  %a = mt.scale %x {factor = 2.0 : f32} : tensor<2x3x4xf32> loc("/blocks.0/scale")
  %b = mt.scale %a {factor = 2.0 : f32} : tensor<2x3x4xf32> loc("/blocks.1/scale")
  %c = mt.scale %b {factor = 3.0 : f32} : tensor<2x3x4xf32> loc("/blocks.2/scale")
  %loss, %lse = mt.softmax_xent %c, %tokens : tensor<2x3x4xf32>, tensor<2x3xi32> loc("head")
  return %loss : tensor<f32>
}

// -----

// Without module paths there is one part: everything is the prologue.
// CHECK-LABEL: func.func @flat
// CHECK-SAME: attributes {mt.block_templates = array<i64>}
// CHECK: mt.embedding {{.*}}{mt.block = -1 : i64}
// CHECK: mt.softmax_xent {{.*}}{mt.block = -1 : i64}
func.func @flat(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}}) -> tensor<f32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %loss, %lse = mt.softmax_xent %x, %tokens : tensor<2x3x4xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

func.func @one(%tokens: tensor<2x3xi32> {mt.input = "tokens"}) -> tensor<2x3xi32> {
  return %tokens : tensor<2x3xi32>
}
// expected-error @+1 {{the module must hold exactly one model function; found a second one}}
func.func @two(%tokens: tensor<2x3xi32> {mt.input = "tokens"}) -> tensor<2x3xi32> {
  return %tokens : tensor<2x3xi32>
}
