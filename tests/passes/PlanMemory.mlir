// PASSES: --mt-plan-memory=budget=4096
// Offsets by liveness in one arena, 64-byte aligned: a value's bytes are reused once its last
// use has passed (the weights at 64 become the scaled activations), a reshape shares its
// input's bytes, and an op's results never overlap its own inputs.

// CHECK-LABEL: func.func @step
// CHECK-SAME: attributes {mt.arena_bytes = 512 : i64, mt.arena_min_bytes = 512 : i64}
// CHECK: mt.h2d %arg0 {mt.offsets = array<i64: 0>}
// CHECK: mt.h2d %arg1 {mt.offsets = array<i64: 64>}
// CHECK: mt.embedding %{{.*}} {mt.offsets = array<i64: 192>}
// CHECK: mt.reshape %{{.*}} {mt.offsets = array<i64: 192>}
// CHECK: mt.scale %{{.*}} {factor = 2.000000e+00 : f32, mt.offsets = array<i64: 64>}
// CHECK: mt.reshape %{{.*}} {mt.offsets = array<i64: 64>}
// CHECK: mt.softmax_xent %{{.*}} {mt.offsets = array<i64: 192, 256>}
// CHECK: mt.softmax_xent_grad %{{.*}} {mt.offsets = array<i64: 384>}
// CHECK: mt.embedding_grad %{{.*}} {mt.offsets = array<i64: 256>, vocab = 5 : i64}
// CHECK: mt.d2h %loss : tensor<f32>
// CHECK-NOT: mt.offsets
// CHECK: return
func.func @step(%arg0: tensor<2x3xi32> {mt.input = "tokens"}, %arg1: tensor<5x4xf32> {mt.param = {init = "normal", name = "w", std = 2.000000e-02 : f32}}) -> (tensor<f32> {mt.loss}, tensor<5x4xf32> {mt.grad = "w"}) {
  %0 = mt.h2d %arg0 : tensor<2x3xi32>
  %1 = mt.h2d %arg1 : tensor<5x4xf32>
  %2 = mt.embedding %0, %1 : tensor<2x3xi32>, tensor<5x4xf32>
  %3 = mt.reshape %2 : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %4 = mt.scale %3 {factor = 2.000000e+00 : f32} : tensor<6x4xf32>
  %5 = mt.reshape %4 : tensor<6x4xf32> -> tensor<2x3x4xf32>
  %loss, %lse = mt.softmax_xent %5, %0 : tensor<2x3x4xf32>, tensor<2x3xi32>
  %6 = mt.fill {value = 1.000000e+00 : f32} : tensor<f32>
  %7 = mt.softmax_xent_grad %6, %5, %0, %lse : tensor<f32>, tensor<2x3x4xf32>, tensor<2x3xi32>, tensor<2x3xf32>
  %8 = mt.scale %7 {factor = 2.000000e+00 : f32} : tensor<2x3x4xf32>
  %9 = mt.embedding_grad %0, %8 {vocab = 5 : i64} : tensor<2x3xi32>, tensor<2x3x4xf32>
  %10 = mt.d2h %loss : tensor<f32>
  %11 = mt.d2h %9 : tensor<5x4xf32>
  mt.host_task grad_norm(%11) : tensor<5x4xf32>
  mt.host_task adamw(%arg1) : tensor<5x4xf32>
  return %10, %11 : tensor<f32>, tensor<5x4xf32>
}

// -----

// A device budget below what the plan needs names the smallest budget that works, and a note
// says what the device holds at the peak: here the activations, the embedding's above all.
// expected-error @+2 {{the plan needs 75776 bytes (74.0 KiB) of device memory but the budget is 4096 bytes (4.0 KiB): raise the budget to at least 75776 bytes}}
// expected-note @+1 {{at the peak (mt.softmax_xent) the device holds activations of the forward 68.0 KiB (3 values), inputs 4.0 KiB (1 value); the largest is 64.0 KiB, the result of mt.embedding tensor<64x16x16xf32>}}
func.func @too_big(%tokens: tensor<64x16xi32> {mt.input = "tokens"},
                   %w: tensor<32x16xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> (tensor<f32> {mt.loss}) {
  %t = mt.h2d %tokens : tensor<64x16xi32>
  %d = mt.h2d %w : tensor<32x16xf32>
  %x = mt.embedding %t, %d : tensor<64x16xi32>, tensor<32x16xf32>
  %loss, %lse = mt.softmax_xent %x, %t : tensor<64x16x16xf32>, tensor<64x16xi32>
  %h = mt.d2h %loss : tensor<f32>
  return %h : tensor<f32>
}

// -----

func.func @unscheduled(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                       %w: tensor<5x4xf32> {mt.param = {name = "w", init = "normal", std = 0.02 : f32}})
    -> tensor<2x3x4xf32> {
  // expected-error @+1 {{reads a host value (a function argument) on the device: run mt-schedule-resident first}}
  %x = mt.embedding %tokens, %w : tensor<2x3xi32>, tensor<5x4xf32>
  return %x : tensor<2x3x4xf32>
}

// -----

// A value copied to the host keeps its bytes to the end of its block's region, so the next
// kernel (%b) does not write over it while the copy runs; block 1 (%c) reuses them. 1 KiB each:
// the slack (2 KiB) fits the budget, so it is taken.
// CHECK-LABEL: func.func @copy_slack
// CHECK-SAME: attributes {mt.arena_bytes = 2048 : i64, mt.arena_min_bytes = 1024 : i64}
// CHECK: mt.fill {mt.block = 0 : i64, mt.offsets = array<i64: 0>
// CHECK: mt.fill {mt.block = 0 : i64, mt.offsets = array<i64: 1024>
// CHECK: mt.fill {mt.block = 1 : i64, mt.offsets = array<i64: 0>
func.func @copy_slack() -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) {
  %a = mt.fill {mt.block = 0 : i64, value = 1.0 : f32} : tensor<16x16xf32>
  %ha = mt.d2h %a {mt.block = 0 : i64} : tensor<16x16xf32>
  %b = mt.fill {mt.block = 0 : i64, value = 2.0 : f32} : tensor<16x16xf32>
  %hb = mt.d2h %b {mt.block = 0 : i64} : tensor<16x16xf32>
  %c = mt.fill {mt.block = 1 : i64, value = 3.0 : f32} : tensor<16x16xf32>
  %hc = mt.d2h %c {mt.block = 1 : i64} : tensor<16x16xf32>
  return %ha, %hb, %hc : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>
}

// -----

// The same at 4 KiB each: with the slack (8 KiB) the plan would exceed the 4 KiB budget, so the
// planner gives it up and %b reuses %a's bytes at once.
// CHECK-LABEL: func.func @copy_slack_over_budget
// CHECK-SAME: attributes {mt.arena_bytes = 4096 : i64, mt.arena_min_bytes = 4096 : i64}
// CHECK: mt.fill {mt.block = 0 : i64, mt.offsets = array<i64: 0>
// CHECK: mt.fill {mt.block = 0 : i64, mt.offsets = array<i64: 0>
// CHECK: mt.fill {mt.block = 1 : i64, mt.offsets = array<i64: 0>
func.func @copy_slack_over_budget() -> (tensor<32x32xf32>, tensor<32x32xf32>, tensor<32x32xf32>) {
  %a = mt.fill {mt.block = 0 : i64, value = 1.0 : f32} : tensor<32x32xf32>
  %ha = mt.d2h %a {mt.block = 0 : i64} : tensor<32x32xf32>
  %b = mt.fill {mt.block = 0 : i64, value = 2.0 : f32} : tensor<32x32xf32>
  %hb = mt.d2h %b {mt.block = 0 : i64} : tensor<32x32xf32>
  %c = mt.fill {mt.block = 1 : i64, value = 3.0 : f32} : tensor<32x32xf32>
  %hc = mt.d2h %c {mt.block = 1 : i64} : tensor<32x32xf32>
  return %ha, %hb, %hc : tensor<32x32xf32>, tensor<32x32xf32>, tensor<32x32xf32>
}

// -----

// Updated on arrival, gradients land in one host buffer: a gradient's bytes are reused once
// its update ran and its block's region ended (%ga and %gb, both block 0, do not share; %gc,
// in the next region, takes %ga's place).
// CHECK-LABEL: func.func @landing
// CHECK-SAME: mt.landing_bytes = 128 : i64
// CHECK: mt.d2h %{{.*}} {mt.block = 0 : i64, mt.landing_offset = 0 : i64}
// CHECK: mt.d2h %{{.*}} {mt.block = 0 : i64, mt.landing_offset = 64 : i64}
// CHECK: mt.d2h %{{.*}} {mt.block = -1 : i64, mt.landing_offset = 0 : i64}
func.func @landing(%a: tensor<4x4xf32> {mt.param = {name = "a", init = "zeros"}},
                   %b: tensor<4x4xf32> {mt.param = {name = "b", init = "zeros"}},
                   %c: tensor<4x4xf32> {mt.param = {name = "c", init = "zeros"}})
    -> (tensor<4x4xf32> {mt.grad = "a"}, tensor<4x4xf32> {mt.grad = "b"}, tensor<4x4xf32> {mt.grad = "c"}) {
  %da = mt.fill {mt.block = 0 : i64, value = 1.0 : f32} : tensor<4x4xf32>
  %ga = mt.d2h %da {mt.block = 0 : i64} : tensor<4x4xf32>
  mt.host_task adamw_on_arrival(%a) {mt.block = 0 : i64} : tensor<4x4xf32>
  %db = mt.fill {mt.block = 0 : i64, value = 2.0 : f32} : tensor<4x4xf32>
  %gb = mt.d2h %db {mt.block = 0 : i64} : tensor<4x4xf32>
  mt.host_task adamw_on_arrival(%b) {mt.block = 0 : i64} : tensor<4x4xf32>
  %dc = mt.fill {mt.block = -1 : i64, value = 3.0 : f32} : tensor<4x4xf32>
  %gc = mt.d2h %dc {mt.block = -1 : i64} : tensor<4x4xf32>
  mt.host_task adamw_on_arrival(%c) {mt.block = -1 : i64} : tensor<4x4xf32>
  return %ga, %gb, %gc : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A forward-only function's weights keep their bytes to the end, so a backend may keep them on
// the device between runs: %y does not take %w1's bytes (64) once the embedding has read them,
// as it would in a training step; the tokens' bytes (0) are reused.
// CHECK-LABEL: func.func @forward
// CHECK: mt.h2d %arg0 {mt.offsets = array<i64: 0>}
// CHECK: mt.h2d %arg1 {mt.offsets = array<i64: 64>}
// CHECK: mt.embedding %{{.*}} {mt.offsets = array<i64: 192>}
// CHECK: mt.h2d %arg2 {mt.offsets = array<i64: 0>}
// CHECK: mt.matmul %{{.*}} {mt.offsets = array<i64: 320>}
func.func @forward(%tokens: tensor<2x3xi32> {mt.input = "tokens"},
                   %w1: tensor<5x4xf32> {mt.param = {name = "w1", init = "zeros"}},
                   %w2: tensor<4x4xf32> {mt.param = {name = "w2", init = "zeros"}})
    -> (tensor<2x3x4xf32> {mt.output = "logits"}) {
  %t = mt.h2d %tokens : tensor<2x3xi32>
  %d1 = mt.h2d %w1 : tensor<5x4xf32>
  %x = mt.embedding %t, %d1 : tensor<2x3xi32>, tensor<5x4xf32>
  %d2 = mt.h2d %w2 : tensor<4x4xf32>
  %y = mt.matmul %x, %d2 : tensor<2x3x4xf32>, tensor<4x4xf32>
  %h = mt.d2h %y : tensor<2x3x4xf32>
  return %h : tensor<2x3x4xf32>
}

// -----

// A host task's kind is one of the enum's (mt.host_task's HostTaskKind): another is refused
// when the IR is read, naming the kinds there are.
func.func @unknown_task(%a: tensor<4xf32> {mt.param = {name = "a", init = "zeros"}}) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [grad_norm, adamw, adamw_previous, adamw_on_arrival, embedding_lookup, embedding_grad]}}
  mt.host_task adam(%a) : tensor<4xf32>
  return
}
