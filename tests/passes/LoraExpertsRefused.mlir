// PASSES: --mt-lora="rank=2 alpha=4.0 dora=true"
// mtc's adapters on a stack of experts have no DoRA: a stack of experts marked `lora` under DoRA
// is refused, naming it; a stack not marked is left as it is, beside a DoRA-adapted weight.

// CHECK-LABEL: func.func @unmarked_stack
// CHECK-SAME: %{{.*}}: tensor<3x8x4xf32> {mt.param = {init = "normal", name = "layers.0.moe.up.weight", std = 2.000000e-02 : f32}}
// CHECK-SAME: name = "layers.0.attn.q.lora_magnitude_vector"
// CHECK-NOT: moe.up.lora
// CHECK: mt.grouped_matmul
// CHECK-NOT: mt.grouped_matmul
// CHECK: return
func.func @unmarked_stack(%x: tensor<12x4xf32> {mt.input = "rows"}, %n: tensor<3xi32> {mt.input = "counts"},
                          %up: tensor<3x8x4xf32> {mt.param = {name = "layers.0.moe.up.weight", init = "normal", std = 0.02 : f32}},
                          %wq: tensor<4x4xf32> {mt.param = {name = "layers.0.attn.q.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<12x8xf32> {mt.output = "y"}) {
  %q = mt.matmul %x, %wq {transpose_b = true} : tensor<12x4xf32>, tensor<4x4xf32>
  %h = mt.grouped_matmul %q, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>
  return %h : tensor<12x8xf32>
}

// -----

// expected-error @+1 {{LoRA on the stack of experts 'layers.0.moe.up.weight' takes no DoRA}}
func.func @dora_stack(%rows: tensor<12x4xf32> {mt.input = "rows"}, %n: tensor<3xi32> {mt.input = "counts"},
                      %up: tensor<3x8x4xf32> {mt.param = {name = "layers.0.moe.up.weight", init = "normal", std = 0.02 : f32, lora}})
    -> (tensor<12x8xf32> {mt.output = "y"}) {
  %h = mt.grouped_matmul %rows, %up, %n {transpose_b = true} : tensor<12x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>
  return %h : tensor<12x8xf32>
}
