// PASSES: --mt-plan-memory=land-deferred=true
// A plan for data-parallel ranks (mtc --ranks): the deferred update's gradients land in one
// host buffer too, a gradient's bytes reused once its grad_norm task ran (the host keeps the
// summed gradient apart) and its block's region ended: %ga and %gb, both block 0, do not share;
// %gc, in the next region, takes %ga's place.
// CHECK-LABEL: func.func @deferred
// CHECK-SAME: mt.landing_bytes = 128 : i64
// CHECK: mt.d2h %{{.*}} {mt.block = 0 : i64, mt.landing_offset = 0 : i64}
// CHECK: mt.d2h %{{.*}} {mt.block = 0 : i64, mt.landing_offset = 64 : i64}
// CHECK: mt.d2h %{{.*}} {mt.block = -1 : i64, mt.landing_offset = 0 : i64}
func.func @deferred(%a: tensor<4x4xf32> {mt.param = {name = "a", init = "zeros"}},
                    %b: tensor<4x4xf32> {mt.param = {name = "b", init = "zeros"}},
                    %c: tensor<4x4xf32> {mt.param = {name = "c", init = "zeros"}})
    -> (tensor<4x4xf32> {mt.grad = "a"}, tensor<4x4xf32> {mt.grad = "b"}, tensor<4x4xf32> {mt.grad = "c"}) {
  mt.host_task adamw_previous(%a, %b, %c) : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  %da = mt.fill {mt.block = 0 : i64, value = 1.0 : f32} : tensor<4x4xf32>
  %ga = mt.d2h %da {mt.block = 0 : i64} : tensor<4x4xf32>
  mt.host_task grad_norm(%ga) {mt.block = 0 : i64} : tensor<4x4xf32>
  %db = mt.fill {mt.block = 0 : i64, value = 2.0 : f32} : tensor<4x4xf32>
  %gb = mt.d2h %db {mt.block = 0 : i64} : tensor<4x4xf32>
  mt.host_task grad_norm(%gb) {mt.block = 0 : i64} : tensor<4x4xf32>
  %dc = mt.fill {mt.block = -1 : i64, value = 3.0 : f32} : tensor<4x4xf32>
  %gc = mt.d2h %dc {mt.block = -1 : i64} : tensor<4x4xf32>
  mt.host_task grad_norm(%gc) {mt.block = -1 : i64} : tensor<4x4xf32>
  return %ga, %gb, %gc : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// No grad_norm task takes the gradients (a forward-only or loss-only function): nothing lands.
// CHECK-LABEL: func.func @unnormed
// CHECK-NOT: mt.landing
// CHECK: return
func.func @unnormed(%a: tensor<4x4xf32> {mt.param = {name = "a", init = "zeros"}})
    -> (tensor<4x4xf32> {mt.grad = "a"}) {
  %da = mt.fill {mt.block = 0 : i64, value = 1.0 : f32} : tensor<4x4xf32>
  %ga = mt.d2h %da {mt.block = 0 : i64} : tensor<4x4xf32>
  return %ga : tensor<4x4xf32>
}
