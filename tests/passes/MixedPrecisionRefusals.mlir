// PASSES: --mt-mixed-precision
// A bf16 plan takes its weights as the bf16 copies mt-stage-bf16 makes: a copy of an f32 master
// is refused, and so are an unscheduled function and one whose memory is already planned. A
// bf16 value the function returns (a gradient lands in an f32 host tensor) is widened first.

// CHECK-LABEL: func.func @returned_bf16
// CHECK-NEXT: %[[X:.*]] = mt.h2d %arg0 : tensor<2xbf16>
// CHECK-NEXT: %[[F:.*]] = mt.widen %[[X]] : tensor<2xbf16> -> tensor<2xf32>
// CHECK-NEXT: mt.d2h %[[F]] : tensor<2xf32>
func.func @returned_bf16(%arg0: tensor<2xbf16> {mt.input = "x"}) -> tensor<2xf32> {
  %0 = mt.h2d %arg0 : tensor<2xbf16>
  %1 = mt.widen %0 : tensor<2xbf16> -> tensor<2xf32>
  %2 = mt.d2h %1 : tensor<2xf32>
  return %2 : tensor<2xf32>
}

// -----

func.func @unstaged(%arg0: tensor<4x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}) -> tensor<4x4xf32> {
  // expected-error @+1 {{mt-mixed-precision needs the weights staged as bf16: run mt-stage-bf16 first (this copy reads the f32 master of 'w')}}
  %0 = mt.h2d %arg0 : tensor<4x4xf32>
  %1 = mt.d2h %0 : tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}

// -----

// expected-error @+1 {{mt-mixed-precision needs a scheduled function: run mt-schedule-resident or mt-schedule-streamed, then mt-stage-bf16, first}}
func.func @unscheduled(%arg0: tensor<2x4xf32> {mt.input = "x"}) -> tensor<f32> {
  %0 = mt.fill {value = 0.000000e+00 : f32} : tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @planned(%arg0: tensor<2xbf16> {mt.input = "x"}) -> tensor<2xbf16> {
  // expected-error @+1 {{mt-mixed-precision runs before mt-plan-memory (it changes the bytes of what the arena holds)}}
  %0 = mt.h2d %arg0 {mt.offsets = array<i64: 0>} : tensor<2xbf16>
  %1 = mt.d2h %0 : tensor<2xbf16>
  return %1 : tensor<2xbf16>
}
