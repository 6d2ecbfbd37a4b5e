// PASSES: --mt-fuse
// The fused ops replace what ONNX import makes of decomposed layers. Each section is one
// pattern; the last ones are near misses that must stay as they are.

// A Linear layer's explicit weight transpose folds into the product; exact GELU fuses.
// CHECK-LABEL: func.func @linear_gelu
// CHECK-NEXT: %[[Y:.*]] = mt.matmul %arg0, %arg1 {transpose_b = true}
// CHECK-NEXT: %[[G:.*]] = mt.gelu %[[Y]] :
// CHECK-NEXT: return %[[G]]
func.func @linear_gelu(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>) -> tensor<2x3x5xf32> {
  %wt = mt.transpose %w {perm = array<i64: 1, 0>} : tensor<5x4xf32>
  %y = mt.matmul %x, %wt : tensor<2x3x4xf32>, tensor<4x5xf32>
  %r2 = mt.fill {value = 1.41421354 : f32} : tensor<f32>
  %d = mt.binary %y, %r2 {fn = "div"} : tensor<2x3x5xf32>, tensor<f32>
  %e = mt.unary %d {fn = "erf"} : tensor<2x3x5xf32>
  %one = mt.fill {value = 1.0 : f32} : tensor<f32>
  %a = mt.add %e, %one : tensor<2x3x5xf32>, tensor<f32>
  %m = mt.mul %y, %a : tensor<2x3x5xf32>, tensor<2x3x5xf32>
  %g = mt.scale %m {factor = 0.5 : f32} : tensor<2x3x5xf32>
  return %g : tensor<2x3x5xf32>
}

// -----

// The tanh approximation, as torch exports F.gelu(approximate="tanh").
// CHECK-LABEL: func.func @tanh_gelu
// CHECK-NEXT: %[[G:.*]] = mt.gelu %arg0 {tanh = true}
// CHECK-NEXT: return %[[G]]
func.func @tanh_gelu(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %x2 = mt.mul %x, %x : tensor<2x4xf32>, tensor<2x4xf32>
  %x3 = mt.mul %x, %x2 : tensor<2x4xf32>, tensor<2x4xf32>
  %c = mt.scale %x3 {factor = 0.044715 : f32} : tensor<2x4xf32>
  %s = mt.add %x, %c : tensor<2x4xf32>, tensor<2x4xf32>
  %k = mt.scale %s {factor = 0.797884583 : f32} : tensor<2x4xf32>
  %t = mt.unary %k {fn = "tanh"} : tensor<2x4xf32>
  %one = mt.fill {value = 1.0 : f32} : tensor<f32>
  %a = mt.add %t, %one : tensor<2x4xf32>, tensor<f32>
  %m = mt.mul %x, %a : tensor<2x4xf32>, tensor<2x4xf32>
  %g = mt.scale %m {factor = 0.5 : f32} : tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

// x * sigmoid(x) is SiLU; silu(gate) * up is SwiGLU.
// CHECK-LABEL: func.func @swiglu
// CHECK-NEXT: %[[S:.*]] = mt.swiglu %arg0, %arg1
// CHECK-NEXT: return %[[S]]
func.func @swiglu(%g: tensor<2x8xf32>, %u: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = mt.unary %g {fn = "sigmoid"} : tensor<2x8xf32>
  %silu = mt.mul %g, %s : tensor<2x8xf32>, tensor<2x8xf32>
  %h = mt.mul %silu, %u : tensor<2x8xf32>, tensor<2x8xf32>
  return %h : tensor<2x8xf32>
}

// -----

// RMSNorm as torch writes it: x * rsqrt(mean(x^2) + eps) * w.
// CHECK-LABEL: func.func @rmsnorm
// CHECK-NEXT: %[[Y:.*]], %{{.*}} = mt.rmsnorm %arg0, %arg1 :
// CHECK-NEXT: return %[[Y]]
func.func @rmsnorm(%x: tensor<2x3x4xf32>, %w: tensor<4xf32>) -> tensor<2x3x4xf32> {
  %two = mt.fill {value = 2.0 : f32} : tensor<f32>
  %p = mt.binary %x, %two {fn = "pow"} : tensor<2x3x4xf32>, tensor<f32>
  %s = mt.sum_to %p : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %mean = mt.scale %s {factor = 0.25 : f32} : tensor<2x3x1xf32>
  %eps = mt.fill {value = 1.0e-5 : f32} : tensor<f32>
  %v = mt.add %mean, %eps : tensor<2x3x1xf32>, tensor<f32>
  %r = mt.unary %v {fn = "sqrt"} : tensor<2x3x1xf32>
  %one = mt.fill {value = 1.0 : f32} : tensor<f32>
  %inv = mt.binary %one, %r {fn = "div"} : tensor<f32>, tensor<2x3x1xf32>
  %n = mt.binary %x, %inv {fn = "mul"} : tensor<2x3x4xf32>, tensor<2x3x1xf32>
  %y = mt.mul %n, %w : tensor<2x3x4xf32>, tensor<4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// LayerNorm as opset 14 exports it.
// CHECK-LABEL: func.func @layernorm
// CHECK-NEXT: %[[Y:.*]], %{{.*}}, %{{.*}} = mt.layernorm %arg0, %arg1, %arg2 :
// CHECK-NEXT: return %[[Y]]
func.func @layernorm(%x: tensor<2x3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x3x4xf32> {
  %s = mt.sum_to %x : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %mean = mt.scale %s {factor = 0.25 : f32} : tensor<2x3x1xf32>
  %d = mt.binary %x, %mean {fn = "sub"} : tensor<2x3x4xf32>, tensor<2x3x1xf32>
  %two = mt.fill {value = 2.0 : f32} : tensor<f32>
  %p = mt.binary %d, %two {fn = "pow"} : tensor<2x3x4xf32>, tensor<f32>
  %ps = mt.sum_to %p : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %var = mt.scale %ps {factor = 0.25 : f32} : tensor<2x3x1xf32>
  %eps = mt.fill {value = 1.0e-5 : f32} : tensor<f32>
  %v = mt.add %var, %eps : tensor<2x3x1xf32>, tensor<f32>
  %r = mt.unary %v {fn = "sqrt"} : tensor<2x3x1xf32>
  %n = mt.binary %d, %r {fn = "div"} : tensor<2x3x4xf32>, tensor<2x3x1xf32>
  %m = mt.mul %n, %g : tensor<2x3x4xf32>, tensor<4xf32>
  %y = mt.add %m, %b : tensor<2x3x4xf32>, tensor<4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// Near misses stay: a GELU-like chain dividing by 1.5, a mean over the wrong count, and a
// transpose of a batched rhs.
// CHECK-LABEL: func.func @near_misses
// CHECK: mt.unary %{{.*}} {fn = "erf"}
// CHECK: mt.scale %{{.*}} {factor = 5.000000e-01 : f32}
// CHECK: mt.unary %{{.*}} {fn = "sqrt"}
// CHECK: mt.transpose
// CHECK-NOT: mt.gelu
// CHECK-NOT: mt.rmsnorm
// CHECK: return
func.func @near_misses(%x: tensor<2x3x4xf32>, %w: tensor<4xf32>, %b: tensor<2x3x4xf32>)
    -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x3xf32>) {
  %c = mt.fill {value = 1.5 : f32} : tensor<f32>
  %d = mt.binary %x, %c {fn = "div"} : tensor<2x3x4xf32>, tensor<f32>
  %e = mt.unary %d {fn = "erf"} : tensor<2x3x4xf32>
  %one = mt.fill {value = 1.0 : f32} : tensor<f32>
  %a = mt.add %e, %one : tensor<2x3x4xf32>, tensor<f32>
  %m = mt.mul %x, %a : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %g = mt.scale %m {factor = 0.5 : f32} : tensor<2x3x4xf32>
  %two = mt.fill {value = 2.0 : f32} : tensor<f32>
  %p = mt.binary %x, %two {fn = "pow"} : tensor<2x3x4xf32>, tensor<f32>
  %s = mt.sum_to %p : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %mean = mt.scale %s {factor = 0.5 : f32} : tensor<2x3x1xf32>
  %eps = mt.fill {value = 1.0e-5 : f32} : tensor<f32>
  %v = mt.add %mean, %eps : tensor<2x3x1xf32>, tensor<f32>
  %r = mt.unary %v {fn = "sqrt"} : tensor<2x3x1xf32>
  %inv = mt.binary %one, %r {fn = "div"} : tensor<f32>, tensor<2x3x1xf32>
  %n = mt.binary %x, %inv {fn = "mul"} : tensor<2x3x4xf32>, tensor<2x3x1xf32>
  %y = mt.mul %n, %w : tensor<2x3x4xf32>, tensor<4xf32>
  %bt = mt.transpose %b {perm = array<i64: 0, 2, 1>} : tensor<2x3x4xf32>
  %z = mt.matmul %x, %bt : tensor<2x3x4xf32>, tensor<2x4x3xf32>
  return %g, %y, %z : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x3xf32>
}
