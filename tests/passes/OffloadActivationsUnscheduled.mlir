// PASSES: --mt-offload-activations
// A scheduled function whose backward reads nothing from its forward moves no activation; one
// without the copies and regions of a streamed schedule is refused.

// CHECK-LABEL: func.func @nothing_kept
// CHECK-SAME: mt.activation_bytes = 0 : i64
// CHECK-NEXT: mt.h2d %arg0
// CHECK-NEXT: mt.d2h
// CHECK-NEXT: return
func.func @nothing_kept(%arg0: tensor<2xf32> {mt.input = "x"}) -> tensor<2xf32> attributes {mt.block_templates = array<i64>} {
  %0 = mt.h2d %arg0 {mt.block = 0 : i64} : tensor<2xf32>
  %1 = mt.d2h %0 {mt.block = 0 : i64} : tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

// expected-error @+1 {{mt-offload-activations needs a streamed schedule: run mt-schedule-streamed first}}
func.func @unscheduled(%tokens: tensor<2x3xi32> {mt.input = "tokens"}) -> tensor<2x3xi32> attributes {mt.block_templates = array<i64>} {
  return %tokens : tensor<2x3xi32>
}
