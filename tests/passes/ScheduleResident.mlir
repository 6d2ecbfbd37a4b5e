// PASSES: --mt-schedule-resident
// Every argument is copied to the device at the start of the step, in the order the step first
// uses them (the bias %b, declared first, is needed last), and every result back at its end;
// the host then takes the gradient norm. AdamW runs one step late: each parameter's update of
// the previous step just before its copy in, so compute starts on the first weights while the
// host still updates the later ones.

// CHECK-LABEL: func.func @step
// CHECK-NEXT: %[[TOKENS:.*]] = mt.h2d %arg1 : tensor<2x3xi32>
// CHECK-NEXT: mt.host_task adamw_previous(%arg2) : tensor<5x4xf32>
// CHECK-NEXT: %[[W:.*]] = mt.h2d %arg2 : tensor<5x4xf32>
// CHECK-NEXT: mt.host_task adamw_previous(%arg0) : tensor<4xf32>
// CHECK-NEXT: %[[B:.*]] = mt.h2d %arg0 : tensor<4xf32>
// CHECK-NEXT: mt.embedding %[[TOKENS]], %[[W]]
// CHECK: mt.binary %{{.*}}, %[[B]] {fn = "add"}
// CHECK: %[[DW:.*]] = mt.embedding_grad %[[TOKENS]]
// CHECK: %[[LOSS_HOST:.*]] = mt.d2h %loss : tensor<f32>
// CHECK-NEXT: %[[DW_HOST:.*]] = mt.d2h %[[DW]] : tensor<5x4xf32>
// CHECK-NEXT: %[[DB_HOST:.*]] = mt.d2h %{{.*}} : tensor<4xf32>
// CHECK-NEXT: mt.host_task grad_norm(%[[DW_HOST]], %[[DB_HOST]]) : tensor<5x4xf32>, tensor<4xf32>
// CHECK-NOT: adamw
// CHECK: return %[[LOSS_HOST]], %[[DW_HOST]], %[[DB_HOST]]
func.func @step(%b: tensor<4xf32> {mt.param = {name = "b", init = "zeros"}},
                %tokens: tensor<2x3xi32> {mt.input = "tokens"},
                %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> (tensor<f32> {mt.loss}, tensor<5x4xf32> {mt.grad = "w"}, tensor<4xf32> {mt.grad = "b"}) {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  %flat = mt.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %y = mt.scale %flat {factor = 2.0 : f32} : tensor<6x4xf32>
  %z = mt.binary %y, %b {fn = "add"} : tensor<6x4xf32>, tensor<4xf32>
  %back = mt.reshape %z : tensor<6x4xf32> -> tensor<2x3x4xf32>
  %loss, %lse = mt.softmax_xent %back, %tokens : tensor<2x3x4xf32>, tensor<2x3xi32>
  %one = mt.fill {value = 1.0 : f32} : tensor<f32>
  %dlogits = mt.softmax_xent_grad %one, %back, %tokens, %lse : tensor<f32>, tensor<2x3x4xf32>, tensor<2x3xi32>, tensor<2x3xf32>
  %dy = mt.scale %dlogits {factor = 2.0 : f32} : tensor<2x3x4xf32>
  %dw = mt.embedding_grad %tokens, %dy {vocab = 5} : tensor<2x3xi32>, tensor<2x3x4xf32>
  %db = mt.fill {value = 0.0 : f32} : tensor<4xf32>
  return %loss, %dw, %db : tensor<f32>, tensor<5x4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{mt-schedule-resident needs a differentiated function returning the loss and the gradients (run mt-autodiff first)}}
func.func @forward_only(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                        %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<2x3x4xf32> {
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  return %x : tensor<2x3x4xf32>
}
