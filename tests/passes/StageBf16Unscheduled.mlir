// PASSES: --mt-stage-bf16
// The staging replaces the schedule's copies: a scheduled function that copies no parameter is
// left as it is; an unscheduled function is refused, and so is one whose memory is already
// planned (the arena would not hold the bf16 buffers).

// CHECK-LABEL: func.func @no_params
// CHECK-NEXT: mt.h2d %arg0 : tensor<2xf32>
// CHECK-NOT: mt.widen
func.func @no_params(%arg0: tensor<2xf32> {mt.input = "x"}) -> tensor<2xf32> {
  %0 = mt.h2d %arg0 : tensor<2xf32>
  %1 = mt.d2h %0 : tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

// expected-error @+1 {{mt-stage-bf16 needs a scheduled function: run mt-schedule-resident or mt-schedule-streamed first}}
func.func @unscheduled(%arg0: tensor<2x4xf32> {mt.input = "x"}, %arg1: tensor<4x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}) -> (tensor<f32> {mt.loss}, tensor<4x4xf32> {mt.grad = "w"}) {
  %0 = mt.fill {value = 0.000000e+00 : f32} : tensor<f32>
  %1 = mt.fill {value = 0.000000e+00 : f32} : tensor<4x4xf32>
  return %0, %1 : tensor<f32>, tensor<4x4xf32>
}

// -----

func.func @planned(%arg0: tensor<4x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}) -> tensor<4x4xf32> {
  // expected-error @+1 {{mt-stage-bf16 runs before mt-plan-memory (the staging changes what the arena holds)}}
  %0 = mt.h2d %arg0 {mt.offsets = array<i64: 0>} : tensor<4x4xf32>
  %1 = mt.d2h %0 : tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}
