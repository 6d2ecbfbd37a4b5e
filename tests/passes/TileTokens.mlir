// PASSES: --mt-tile-tokens=tiles=2
// A layer block (layers.0) of 64 tokens in two tiles of 32: the block input is split into
// views; each tile runs the token-wise ops before attention (norm, projection, rope — tile 1's
// rope at position 32) and their wholes are assembled for attention; attention's output is
// split again and each tile runs the ops after it, the residual add reading the tile of the
// block input it already has; the block's output is whole again, and the head runs in tiles too:
// the LM head per tile and the loss as each tile's share of the mean over the whole batch's
// counted targets. The prologue (embed) is left alone. (Through the backward and recompute:
// TileTokensRecompute.mlir.)

// CHECK-LABEL: func.func @f
// CHECK-SAME: mt.token_tiles = 2
// CHECK:      %[[X:.*]] = mt.embedding
// CHECK-NEXT: %[[X0:.*]]:2 = mt.token_split %[[X]] : tensor<1x64x32xf32> -> tensor<1x32x32xf32>, tensor<1x32x32xf32>
// CHECK-NEXT: %[[N0:.*]], %{{.*}} = mt.rmsnorm %[[X0]]#0, %arg2 : tensor<1x32x32xf32>
// CHECK-NEXT: %[[P0:.*]] = mt.matmul %[[N0]], %arg3 {transpose_b = true} : tensor<1x32x32xf32>
// CHECK-NEXT: %[[R0:.*]] = mt.rope %[[P0]] {head_dim = 16 : i64} : tensor<1x32x32xf32>
// CHECK-NEXT: %[[N1:.*]], %{{.*}} = mt.rmsnorm %[[X0]]#1, %arg2
// CHECK-NEXT: %[[P1:.*]] = mt.matmul %[[N1]], %arg3 {transpose_b = true}
// CHECK-NEXT: %[[R1:.*]] = mt.rope %[[P1]] {head_dim = 16 : i64, position_offset = 32 : i64}
// CHECK-NEXT: %[[P:.*]] = mt.token_concat %[[P0]], %[[P1]] : tensor<1x32x32xf32>, tensor<1x32x32xf32> -> tensor<1x64x32xf32>
// CHECK-NEXT: %[[R:.*]] = mt.token_concat %[[R0]], %[[R1]]
// CHECK-NEXT: %[[O:.*]], %{{.*}} = mt.attention %[[R]], %[[R]], %[[P]]
// CHECK-NEXT: %[[O0:.*]]:2 = mt.token_split %[[O]]
// CHECK-NEXT: %[[Q0:.*]] = mt.matmul %[[O0]]#0, %arg4
// CHECK-NEXT: %[[A0:.*]] = mt.add %[[X0]]#0, %[[Q0]] : tensor<1x32x32xf32>
// CHECK-NEXT: %[[Q1:.*]] = mt.matmul %[[O0]]#1, %arg4
// CHECK-NEXT: %[[A1:.*]] = mt.add %[[X0]]#1, %[[Q1]]
// CHECK-NEXT: %[[A:.*]] = mt.token_concat %[[A0]], %[[A1]]
// The head: the LM head per tile, each tile's share of the loss over the whole batch's count.
// CHECK-NEXT: %[[H:.*]]:2 = mt.token_split %[[A]]
// CHECK-NEXT: %[[T:.*]]:2 = mt.token_split %arg5 : tensor<1x64xi32> -> tensor<1x32xi32>, tensor<1x32xi32>
// CHECK-NEXT: %[[N:.*]] = mt.count_targets %arg5 {vocab = 16 : i64}
// CHECK-NEXT: %[[L0:.*]] = mt.matmul %[[H]]#0, %arg1 {transpose_b = true} : tensor<1x32x32xf32>
// CHECK-NEXT: %[[S0:.*]], %{{.*}} = mt.xent_tile %[[L0]], %[[T]]#0, %[[N]]
// CHECK-NEXT: %[[L1:.*]] = mt.matmul %[[H]]#1, %arg1
// CHECK-NEXT: %[[S1:.*]], %{{.*}} = mt.xent_tile %[[L1]], %[[T]]#1, %[[N]]
// CHECK-NEXT: %[[LOSS:.*]] = mt.add %[[S0]], %[[S1]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: return %[[LOSS]]
// CHECK-NOT:  mt.softmax_xent
func.func @f(%arg0: tensor<1x64xi32> {mt.input = "tokens"},
             %arg1: tensor<16x32xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}},
             %arg2: tensor<32xf32> {mt.param = {init = "ones", name = "n"}},
             %arg3: tensor<32x32xf32> {mt.param = {init = "normal", name = "q", std = 1.000000e+00 : f32}},
             %arg4: tensor<32x32xf32> {mt.param = {init = "normal", name = "o", std = 1.000000e+00 : f32}},
             %arg5: tensor<1x64xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) {
  %0 = mt.embedding %arg0, %arg1 : tensor<1x64xi32>, tensor<16x32xf32> loc("embed")
  %y, %rstd = mt.rmsnorm %0, %arg2 : tensor<1x64x32xf32>, tensor<32xf32> loc("layers.0")
  %1 = mt.matmul %y, %arg3 {transpose_b = true} : tensor<1x64x32xf32>, tensor<32x32xf32> loc("layers.0")
  %2 = mt.rope %1 {head_dim = 16 : i64} : tensor<1x64x32xf32> loc("layers.0")
  %o, %lse = mt.attention %2, %2, %1 {num_heads = 2 : i64, num_kv_heads = 2 : i64}
      : tensor<1x64x32xf32>, tensor<1x64x32xf32>, tensor<1x64x32xf32> loc("layers.0")
  %3 = mt.matmul %o, %arg4 {transpose_b = true} : tensor<1x64x32xf32>, tensor<32x32xf32> loc("layers.0")
  %4 = mt.add %0, %3 : tensor<1x64x32xf32>, tensor<1x64x32xf32> loc("layers.0")
  %5 = mt.matmul %4, %arg1 {transpose_b = true} : tensor<1x64x32xf32>, tensor<16x32xf32> loc("head")
  %loss, %lse2 = mt.softmax_xent %5, %arg5 : tensor<1x64x16xf32>, tensor<1x64xi32> loc("head")
  return %loss : tensor<f32> loc("head")
}

// -----

// 48 tokens cannot be cut into two tiles of a multiple of 32.
// expected-error @+1 {{cannot cut 1 x 48 tokens into 2 token tiles: a tile must be a multiple of 32 tokens inside one sequence or whole sequences; counts that work: none (the batch is too small to tile)}}
func.func @too_short(%arg0: tensor<1x48xi32> {mt.input = "tokens"},
                     %arg1: tensor<16x32xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}},
                     %arg2: tensor<1x48xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) {
  %0 = mt.embedding %arg0, %arg1 : tensor<1x48xi32>, tensor<16x32xf32> loc("embed")
  %1 = mt.gelu %0 : tensor<1x48x32xf32> loc("layers.0")
  %2 = mt.matmul %1, %arg1 {transpose_b = true} : tensor<1x48x32xf32>, tensor<16x32xf32> loc("head")
  %loss, %lse = mt.softmax_xent %2, %arg2 : tensor<1x48x16xf32>, tensor<1x48xi32> loc("head")
  return %loss : tensor<f32>
}

// -----

// The pass tiles the forward function: once differentiated, it is too late.
func.func @differentiated(%arg0: tensor<1x64xi32> {mt.input = "tokens"}) -> (tensor<f32> {mt.loss}) {
  // expected-error @+1 {{mt-tile-tokens runs on the forward function, before mt-autodiff and mt-partition}}
  %0 = mt.fill {mt.backward, value = 1.000000e+00 : f32} : tensor<f32>
  return %0 : tensor<f32>
}
