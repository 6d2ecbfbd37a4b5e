// PASSES: --mt-schedule-streamed --mt-stage-bf16 --mt-mixed-precision
// A bf16 plan: the weights are used as the bf16 copies they crossed the link as (no mt.widen
// left for them); activations and their gradients are bf16; the norm's rstd, the log-sum-exp,
// the loss and its seed stay f32; the weight's gradient product has f32_result, the bias's sum
// and the norm's and embedding's parameter gradients are f32, so every d2h of a gradient copies
// f32. The f32-only op (mt.unary, a generic ONNX op) reads a widened copy and its result is
// narrowed where bf16 ops read it (once per value and type).

// CHECK-LABEL: func.func @f
// CHECK-SAME: mt.precision = "bf16"
// CHECK:      %[[E:.*]] = mt.h2d %arg6 {mt.block = -1 : i64} : tensor<3x4xbf16>
// CHECK:      %[[G:.*]] = mt.h2d %arg7 {mt.block = -1 : i64} : tensor<4xbf16>
// CHECK:      %[[W:.*]] = mt.h2d %arg8 {mt.block = -1 : i64} : tensor<4x4xbf16>
// CHECK:      %[[X:.*]] = mt.embedding %{{.*}}, %[[E]] {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<3x4xbf16>
// CHECK-NEXT: %[[Y:.*]], %[[RSTD:.*]] = mt.rmsnorm %[[X]], %[[G]] {mt.block = 0 : i64} : tensor<1x2x4xbf16>, tensor<4xbf16>
// CHECK-NEXT: %[[P:.*]] = mt.matmul %[[Y]], %[[W]] {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xbf16>, tensor<4x4xbf16>
// CHECK-NEXT: %[[A:.*]] = mt.add %[[P]], %{{.*}} : tensor<1x2x4xbf16>, tensor<4xbf16>
// CHECK-NEXT: %[[AF:.*]] = mt.widen %[[A]] {mt.block = 0 : i64} : tensor<1x2x4xbf16> -> tensor<1x2x4xf32>
// CHECK-NEXT: %[[T:.*]] = mt.unary %[[AF]] {fn = "tanh", mt.block = 0 : i64} : tensor<1x2x4xf32>
// CHECK:      %[[TB:.*]] = mt.narrow %[[T]] {mt.block = 1 : i64} : tensor<1x2x4xf32> -> tensor<1x2x4xbf16>
// CHECK-NEXT: %[[LOSS:.*]], %[[LSE:.*]] = mt.softmax_xent %[[TB]], %{{.*}} : tensor<1x2x4xbf16>, tensor<1x2xi32>
// CHECK-NEXT: mt.d2h %[[LOSS]] {mt.block = 1 : i64} : tensor<f32>
// CHECK-NEXT: %[[SEED:.*]] = mt.fill {mt.backward, mt.block = 1 : i64, value = 1.000000e+00 : f32} : tensor<f32>
// CHECK-NEXT: mt.softmax_xent_grad %[[SEED]], %[[TB]], %{{.*}}, %[[LSE]] {{.*}} : tensor<f32>, tensor<1x2x4xbf16>, tensor<1x2xi32>, tensor<1x2xf32>
// CHECK-NEXT: mt.widen %{{.*}} : tensor<1x2x4xbf16> -> tensor<1x2x4xf32>
// CHECK-NEXT: %[[DT:.*]] = mt.unary_grad
// CHECK-NEXT: %[[DTB:.*]] = mt.narrow %[[DT]] {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<1x2x4xbf16>
// CHECK-NEXT: %[[DB:.*]] = mt.sum_to %[[DTB]] {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xbf16> -> tensor<4xf32>
// CHECK-NEXT: mt.d2h %[[DB]] {mt.block = 0 : i64} : tensor<4xf32>
// CHECK:      mt.matmul %[[DTB]], %{{.*}} {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xbf16>, tensor<4x4xbf16>
// CHECK:      %[[DW:.*]] = mt.matmul %{{.*}}, %{{.*}} {f32_result = true, mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x4xbf16>, tensor<2x4xbf16>
// CHECK-NEXT: mt.d2h %[[DW]] {mt.block = 0 : i64} : tensor<4x4xf32>
// CHECK:      %[[DX:.*]], %[[DG:.*]] = mt.rmsnorm_grad {{.*}} : tensor<1x2x4xbf16>, tensor<1x2x4xbf16>, tensor<4xbf16>, tensor<1x2xf32>
// CHECK-NEXT: mt.d2h %[[DG]] {mt.block = 0 : i64} : tensor<4xf32>
// CHECK:      %[[DE:.*]] = mt.embedding_grad %{{.*}}, %[[DX]] {{.*}} : tensor<1x2xi32>, tensor<1x2x4xbf16>
// CHECK-NEXT: mt.d2h %[[DE]] {mt.block = -1 : i64} : tensor<3x4xf32>
// CHECK-NOT:  mt.widen %{{.*}} : tensor<4x4xbf16>
func.func @f(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<3x4xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}}, %arg2: tensor<4xf32> {mt.param = {init = "ones", name = "g"}}, %arg3: tensor<4x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}, %arg4: tensor<4xf32> {mt.param = {init = "zeros", name = "b"}}, %arg5: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<3x4xf32> {mt.grad = "e"}, tensor<4xf32> {mt.grad = "g"}, tensor<4x4xf32> {mt.grad = "w"}, tensor<4xf32> {mt.grad = "b"}) attributes {mt.block_templates = array<i64: 0>} {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<3x4xf32>
  %y, %rstd = mt.rmsnorm %0, %arg2 {mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<4xf32>
  %1 = mt.matmul %y, %arg3 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %2 = mt.add %1, %arg4 {mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<4xf32>
  %3 = mt.unary %2 {mt.block = 0 : i64, fn = "tanh"} : tensor<1x2x4xf32>
  %loss, %lse = mt.softmax_xent %3, %arg5 {mt.block = 1 : i64} : tensor<1x2x4xf32>, tensor<1x2xi32>
  %4 = mt.fill {mt.backward, mt.block = 1 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %5 = mt.softmax_xent_grad %4, %3, %arg5, %lse {mt.backward, mt.block = 1 : i64} : tensor<f32>, tensor<1x2x4xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %6 = mt.unary_grad %5, %2 {mt.backward, mt.block = 0 : i64, fn = "tanh"} : tensor<1x2x4xf32>, tensor<1x2x4xf32>
  %7 = mt.sum_to %6 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<4xf32>
  %8 = mt.matmul %6, %arg3 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<4x4xf32>
  %9 = mt.reshape %y {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %10 = mt.reshape %6 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %11 = mt.matmul %10, %9 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x4xf32>, tensor<2x4xf32>
  %dx, %dg = mt.rmsnorm_grad %8, %0, %arg2, %rstd {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<4xf32>, tensor<1x2xf32>
  %12 = mt.embedding_grad %arg0, %dx {mt.backward, mt.block = -1 : i64, vocab = 3 : i64} : tensor<1x2xi32>, tensor<1x2x4xf32>
  return %loss, %12, %dg, %11, %7 : tensor<f32>, tensor<3x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>
}

// -----
// The gradient of a parameter-shaped quotient (DoRA's magnitude m over its weight's row norms n):
// the sum over the tokens that binary_grad reads is f32, not rounded to bf16 before the divide;
// the product summed stays a bf16 activation.
// CHECK-LABEL: func.func @magnitude
// CHECK:      %[[P:.*]] = mt.mul %{{.*}}, %{{.*}} {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xbf16>, tensor<1x2x4xbf16>
// CHECK-NEXT: %[[S:.*]] = mt.sum_to %[[P]] {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xbf16> -> tensor<4xf32>
// CHECK-NOT:  mt.widen %[[S]]
// CHECK:      %[[DM:.*]], %{{.*}} = mt.binary_grad %[[S]], %{{.*}}, %{{.*}} {fn = "div"
// CHECK:      mt.d2h %[[DM]] {mt.block = 0 : i64} : tensor<4xf32>
func.func @magnitude(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<3x4xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}}, %arg2: tensor<4xf32> {mt.param = {init = "ones", name = "m"}}, %arg3: tensor<4xf32> {mt.param = {init = "ones", name = "n"}}, %arg4: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<3x4xf32> {mt.grad = "e"}, tensor<4xf32> {mt.grad = "m"}, tensor<4xf32> {mt.grad = "n"}) attributes {mt.block_templates = array<i64: 0>} {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<3x4xf32>
  %1 = mt.binary %arg2, %arg3 {fn = "div", mt.block = 0 : i64} : tensor<4xf32>, tensor<4xf32>
  %2 = mt.mul %0, %1 {mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<4xf32>
  %loss, %lse = mt.softmax_xent %2, %arg4 {mt.block = 1 : i64} : tensor<1x2x4xf32>, tensor<1x2xi32>
  %3 = mt.fill {mt.backward, mt.block = 1 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %4 = mt.softmax_xent_grad %3, %2, %arg4, %lse {mt.backward, mt.block = 1 : i64} : tensor<f32>, tensor<1x2x4xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %5 = mt.mul %4, %0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<1x2x4xf32>
  %6 = mt.sum_to %5 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<4xf32>
  %dm, %dn = mt.binary_grad %6, %arg2, %arg3 {fn = "div", mt.backward, mt.block = 0 : i64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  %7 = mt.mul %4, %1 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32>, tensor<4xf32>
  %8 = mt.embedding_grad %arg0, %7 {mt.backward, mt.block = -1 : i64, vocab = 3 : i64} : tensor<1x2xi32>, tensor<1x2x4xf32>
  return %loss, %8, %dm, %dn : tensor<f32>, tensor<3x4xf32>, tensor<4xf32>, tensor<4xf32>
}
