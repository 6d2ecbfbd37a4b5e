// PASSES: --mt-fuse
// The fused ops replace what ONNX import makes of decomposed layers. Each section is one
// pattern; the near misses (so marked) must stay as they are.

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

// -----

// Causal attention as exporters write it (GPT-2: keys transposed straight from the split
// heads, a where-mask) fuses into mt.attention over the projections' (B, T, H*D) rows.
// CHECK-LABEL: func.func @attention
// CHECK-NEXT: %[[O:.*]], %{{.*}} = mt.attention %arg0, %arg1, %arg2 {num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT: return %[[O]]
func.func @attention(%q: tensor<1x4x4xf32>, %k: tensor<1x4x4xf32>, %v: tensor<1x4x4xf32>,
    %mask: tensor<1x1x4x4xi32> {mt.const = dense<[[[[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]]]> : tensor<1x1x4x4xi32>})
    -> tensor<1x4x4xf32> {
  %q4 = mt.reshape %q : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %qh = mt.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x2xf32>
  %k4 = mt.reshape %k : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %kt = mt.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : tensor<1x4x2x2xf32>
  %v4 = mt.reshape %v : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %vh = mt.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x2xf32>
  %s = mt.matmul %qh, %kt : tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32>
  %ss = mt.scale %s {factor = 0.707106769 : f32} : tensor<1x2x4x4xf32>
  %inf = mt.fill {value = 0xFF800000 : f32} : tensor<f32>
  %m = mt.where %mask, %inf, %ss : tensor<1x1x4x4xi32>, tensor<f32>, tensor<1x2x4x4xf32>
  %p = mt.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %vh : tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>
  %ot = mt.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x2xf32>
  %out = mt.reshape %ot : tensor<1x4x2x2xf32> -> tensor<1x4x4xf32>
  return %out : tensor<1x4x4xf32>
}

// -----

// Llama's form: query heads that went through other ops (rotary embedding; here a scale) are
// turned back into rows, keys and values repeated from one key/value head (repeat_kv's
// reshape/expand/reshape) become grouped-query attention, the mask is added (0 / -inf) and
// the scale is a division by sqrt(D).
// CHECK-LABEL: func.func @grouped_query_attention
// CHECK: %[[QH:.*]] = mt.scale
// CHECK-NEXT: %[[QT:.*]] = mt.transpose %[[QH]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: %[[Q:.*]] = mt.reshape %[[QT]] : tensor<1x4x2x2xf32> -> tensor<1x4x4xf32>
// CHECK-NEXT: %[[O:.*]], %{{.*}} = mt.attention %[[Q]], %arg1, %arg2 {num_heads = 2 : i64, num_kv_heads = 1 : i64}
// CHECK-NEXT: return %[[O]]
func.func @grouped_query_attention(%q: tensor<1x4x4xf32>, %k: tensor<1x4x2xf32>, %v: tensor<1x4x2xf32>,
    %mask: tensor<4x4xf32> {mt.const = dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>})
    -> tensor<1x4x4xf32> {
  %q4 = mt.reshape %q : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %qt = mt.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x2xf32>
  %qh = mt.scale %qt {factor = 1.0 : f32} : tensor<1x2x4x2xf32>
  %k4 = mt.reshape %k : tensor<1x4x2xf32> -> tensor<1x4x1x2xf32>
  %kh = mt.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x1x2xf32>
  %k5 = mt.reshape %kh : tensor<1x1x4x2xf32> -> tensor<1x1x1x4x2xf32>
  %kr = mt.broadcast %k5 : tensor<1x1x1x4x2xf32> -> tensor<1x1x2x4x2xf32>
  %kx = mt.reshape %kr : tensor<1x1x2x4x2xf32> -> tensor<1x2x4x2xf32>
  %kt = mt.transpose %kx {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x2xf32>
  %v4 = mt.reshape %v : tensor<1x4x2xf32> -> tensor<1x4x1x2xf32>
  %vh = mt.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x1x2xf32>
  %v5 = mt.reshape %vh : tensor<1x1x4x2xf32> -> tensor<1x1x1x4x2xf32>
  %vr = mt.broadcast %v5 : tensor<1x1x1x4x2xf32> -> tensor<1x1x2x4x2xf32>
  %vx = mt.reshape %vr : tensor<1x1x2x4x2xf32> -> tensor<1x2x4x2xf32>
  %s = mt.matmul %qh, %kt : tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32>
  %r = mt.fill {value = 1.41421354 : f32} : tensor<f32>
  %ss = mt.binary %s, %r {fn = "div"} : tensor<1x2x4x4xf32>, tensor<f32>
  %m = mt.add %ss, %mask : tensor<1x2x4x4xf32>, tensor<4x4xf32>
  %p = mt.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %vx : tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>
  %ot = mt.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x2xf32>
  %out = mt.reshape %ot : tensor<1x4x2x2xf32> -> tensor<1x4x4xf32>
  return %out : tensor<1x4x4xf32>
}

// -----

// Near miss: a scale other than 1/sqrt(D) is not the fused kernel's; stays unfused.
// CHECK-LABEL: func.func @attention_other_scale
// CHECK-NOT: mt.attention
// CHECK: mt.softmax
func.func @attention_other_scale(%q: tensor<1x4x4xf32>, %k: tensor<1x4x4xf32>, %v: tensor<1x4x4xf32>,
    %mask: tensor<1x1x4x4xi32> {mt.const = dense<[[[[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]]]> : tensor<1x1x4x4xi32>})
    -> tensor<1x4x4xf32> {
  %q4 = mt.reshape %q : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %qh = mt.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x2xf32>
  %k4 = mt.reshape %k : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %kt = mt.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : tensor<1x4x2x2xf32>
  %v4 = mt.reshape %v : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %vh = mt.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x2xf32>
  %s = mt.matmul %qh, %kt : tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32>
  %ss = mt.scale %s {factor = 0.5 : f32} : tensor<1x2x4x4xf32>
  %inf = mt.fill {value = 0xFF800000 : f32} : tensor<f32>
  %m = mt.where %mask, %inf, %ss : tensor<1x1x4x4xi32>, tensor<f32>, tensor<1x2x4x4xf32>
  %p = mt.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %vh : tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>
  %ot = mt.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x2xf32>
  %out = mt.reshape %ot : tensor<1x4x2x2xf32> -> tensor<1x4x4xf32>
  return %out : tensor<1x4x4xf32>
}

// -----

// Near miss: a mask that is not causal (here the diagonal is masked too); stays unfused.
// CHECK-LABEL: func.func @attention_not_causal
// CHECK-NOT: mt.attention
// CHECK: mt.softmax
func.func @attention_not_causal(%q: tensor<1x4x4xf32>, %k: tensor<1x4x4xf32>, %v: tensor<1x4x4xf32>,
    %mask: tensor<1x1x4x4xi32> {mt.const = dense<[[[[1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]]]]> : tensor<1x1x4x4xi32>})
    -> tensor<1x4x4xf32> {
  %q4 = mt.reshape %q : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %qh = mt.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x2xf32>
  %k4 = mt.reshape %k : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %kt = mt.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : tensor<1x4x2x2xf32>
  %v4 = mt.reshape %v : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %vh = mt.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x2xf32>
  %s = mt.matmul %qh, %kt : tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32>
  %ss = mt.scale %s {factor = 0.707106769 : f32} : tensor<1x2x4x4xf32>
  %inf = mt.fill {value = 0xFF800000 : f32} : tensor<f32>
  %m = mt.where %mask, %inf, %ss : tensor<1x1x4x4xi32>, tensor<f32>, tensor<1x2x4x4xf32>
  %p = mt.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %vh : tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>
  %ot = mt.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x2xf32>
  %out = mt.reshape %ot : tensor<1x4x2x2xf32> -> tensor<1x4x4xf32>
  return %out : tensor<1x4x4xf32>
}

// -----

// Rotate-half RoPE on heads with the exporter's constant cos/sin tables (here theta 10000,
// T = 2, D = 4) runs as mt.rope over the rows the heads came from; its users get heads back.
// CHECK-LABEL: func.func @rope
// CHECK-NEXT: %[[R:.*]] = mt.rope %arg0 {head_dim = 4 : i64} : tensor<1x2x4xf32>
// CHECK-NEXT: %[[S:.*]] = mt.reshape %[[R]] : tensor<1x2x4xf32> -> tensor<1x2x1x4xf32>
// CHECK-NEXT: %[[H:.*]] = mt.transpose %[[S]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: return %[[H]]
func.func @rope(%x: tensor<1x2x4xf32>,
    %cos: tensor<2x4xf32> {mt.const = dense<[[1.0, 1.0, 1.0, 1.0], [0.540302306, 0.99995, 0.540302306, 0.99995]]> : tensor<2x4xf32>},
    %sin: tensor<2x4xf32> {mt.const = dense<[[0.0, 0.0, 0.0, 0.0], [0.841470957, 0.00999983307, 0.841470957, 0.00999983307]]> : tensor<2x4xf32>})
    -> tensor<1x1x2x4xf32> {
  %x4 = mt.reshape %x : tensor<1x2x4xf32> -> tensor<1x2x1x4xf32>
  %h = mt.transpose %x4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x1x4xf32>
  %lo = mt.slice %h {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x1x2x4xf32> -> tensor<1x1x2x2xf32>
  %hi = mt.slice %h {starts = array<i64: 0, 0, 0, 2>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x1x2x4xf32> -> tensor<1x1x2x2xf32>
  %c = mt.mul %h, %cos : tensor<1x1x2x4xf32>, tensor<2x4xf32>
  %n = mt.unary %hi {fn = "neg"} : tensor<1x1x2x2xf32>
  %turned = mt.concat %n, %lo {axis = 3 : i64} : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
  %s = mt.mul %turned, %sin : tensor<1x1x2x4xf32>, tensor<2x4xf32>
  %y = mt.add %c, %s : tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>
  return %y : tensor<1x1x2x4xf32>
}

// -----

// Near miss: tables that are not one theta's (the sine of the second pair is wrong); stays.
// CHECK-LABEL: func.func @rope_other_tables
// CHECK-NOT: mt.rope
// CHECK: mt.concat
func.func @rope_other_tables(%x: tensor<1x2x4xf32>,
    %cos: tensor<2x4xf32> {mt.const = dense<[[1.0, 1.0, 1.0, 1.0], [0.540302306, 0.99995, 0.540302306, 0.99995]]> : tensor<2x4xf32>},
    %sin: tensor<2x4xf32> {mt.const = dense<[[0.0, 0.0, 0.0, 0.0], [0.841470957, 0.5, 0.841470957, 0.5]]> : tensor<2x4xf32>})
    -> tensor<1x1x2x4xf32> {
  %x4 = mt.reshape %x : tensor<1x2x4xf32> -> tensor<1x2x1x4xf32>
  %h = mt.transpose %x4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x1x4xf32>
  %lo = mt.slice %h {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x1x2x4xf32> -> tensor<1x1x2x2xf32>
  %hi = mt.slice %h {starts = array<i64: 0, 0, 0, 2>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x1x2x4xf32> -> tensor<1x1x2x2xf32>
  %c = mt.mul %h, %cos : tensor<1x1x2x4xf32>, tensor<2x4xf32>
  %n = mt.unary %hi {fn = "neg"} : tensor<1x1x2x2xf32>
  %turned = mt.concat %n, %lo {axis = 3 : i64} : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
  %s = mt.mul %turned, %sin : tensor<1x1x2x4xf32>, tensor<2x4xf32>
  %y = mt.add %c, %s : tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>
  return %y : tensor<1x1x2x4xf32>
}
