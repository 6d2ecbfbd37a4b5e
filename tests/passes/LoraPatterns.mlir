// PASSES: --mt-lora="rank=2 alpha=4.0"
// A target's own rank and alpha (mt.param's lora_rank, lora_alpha: PEFT's rank_pattern and
// alpha_pattern): its adapters have that rank, its update that scale (alpha 9 / rank 3 = 3 beside
// the pass's 4 / 2 = 2; a stack's 12 / 4), and A carries the alpha as adapter_alpha. A target that
// gives neither keeps the pass's; an own rank of 0 is refused, naming the weight.

// CHECK-LABEL: func.func @own
// CHECK-SAME: %[[A1:[a-z0-9]+]]: tensor<3x4xf32> {mt.param = {adapter_alpha = 9.000000e+00 : f32, bound = 5.000000e-01 : f32, init = "uniform", name = "layers.0.attn.q.lora_A.weight"}}
// CHECK-SAME: tensor<5x3xf32> {mt.param = {init = "zeros", name = "layers.0.attn.q.lora_B.weight"}}
// CHECK-SAME: %[[A2:[a-z0-9]+]]: tensor<2x4xf32> {mt.param = {bound = 5.000000e-01 : f32, init = "uniform", name = "layers.0.attn.v.lora_A.weight"}}
// CHECK-SAME: tensor<3x4x4xf32> {mt.param = {adapter_alpha = 1.200000e+01 : f32, bound = 5.000000e-01 : f32, init = "uniform", name = "layers.0.moe.up.lora_A.weight"}}
// CHECK-SAME: tensor<3x8x4xf32> {mt.param = {init = "zeros", name = "layers.0.moe.up.lora_B.weight"}}
// CHECK: mt.matmul %{{.*}}, %[[A1]] {transpose_b = true} : tensor<12x4xf32>, tensor<3x4xf32>
// CHECK: mt.scale %{{.*}} {factor = 3.000000e+00 : f32} : tensor<12x3xf32>
// CHECK: mt.matmul %{{.*}}, %[[A2]] {transpose_b = true} : tensor<12x4xf32>, tensor<2x4xf32>
// CHECK: mt.scale %{{.*}} {factor = 2.000000e+00 : f32} : tensor<12x2xf32>
// CHECK: mt.grouped_matmul
// CHECK: mt.grouped_matmul
// CHECK: mt.scale %{{.*}} {factor = 3.000000e+00 : f32} : tensor<12x4xf32>
// CHECK: mt.grouped_matmul
func.func @own(%x: tensor<12x4xf32> {mt.input = "rows"}, %n: tensor<3xi32> {mt.input = "counts"},
               %wq: tensor<5x4xf32> {mt.param = {name = "layers.0.attn.q.weight", init = "normal", std = 0.02 : f32, lora, lora_rank = 3 : i64, lora_alpha = 9.0 : f32}},
               %wv: tensor<4x4xf32> {mt.param = {name = "layers.0.attn.v.weight", init = "normal", std = 0.02 : f32, lora}},
               %up: tensor<3x8x4xf32> {mt.param = {name = "layers.0.moe.up.weight", init = "normal", std = 0.02 : f32, lora, lora_rank = 4 : i64, lora_alpha = 12.0 : f32}})
    -> (tensor<12x5xf32> {mt.output = "q"}, tensor<12x8xf32> {mt.output = "h"}) {
  %q = mt.matmul %x, %wq {transpose_b = true} : tensor<12x4xf32>, tensor<5x4xf32>
  %v = mt.matmul %x, %wv {transpose_b = true} : tensor<12x4xf32>, tensor<4x4xf32>
  %h = mt.grouped_matmul %v, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>
  return %q, %h : tensor<12x5xf32>, tensor<12x8xf32>
}

// -----

// expected-error @+1 {{mt-lora needs a rank in [1, 65536] and a positive alpha, not 0 and 4.000000e+00 for 'layers.0.attn.q.weight'}}
func.func @no_rank(%x: tensor<12x4xf32> {mt.input = "rows"},
                   %wq: tensor<5x4xf32> {mt.param = {name = "layers.0.attn.q.weight", init = "normal", std = 0.02 : f32, lora, lora_rank = 0 : i64}})
    -> (tensor<12x5xf32> {mt.output = "q"}) {
  %q = mt.matmul %x, %wq {transpose_b = true} : tensor<12x4xf32>, tensor<5x4xf32>
  return %q : tensor<12x5xf32>
}
