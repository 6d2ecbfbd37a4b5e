// PASSES: --mt-tile-tokens=tiles=2 --mt-autodiff --mt-partition --mt-recompute
// Token tiles through the backward: the gradient rules build each tile's backward in its
// tile's location, so mt-partition gives forward and backward ops their mt.tile; each weight's
// gradient is the sum of its tiles' products. mt-recompute recomputes what the whole block
// shares once, before the block's first backward op — the block input's tiles, the tiles before
// attention, attention — and each tile's own activations just before that tile's stretch of the
// backward: tile 1's norm right before its backward, then tile 0's. The head (the epilogue,
// block 1) in tiles is recomputed so too: each tile's logits just before its xent_tile_grad,
// with the whole batch's count.

// CHECK-LABEL: func.func @f
// CHECK:      mt.token_split %{{.*}} {mt.block = 0 : i64}
// CHECK-NEXT: mt.rmsnorm %{{.*}} {mt.block = 0 : i64, mt.tile = 0 : i64}
// CHECK:      %[[N:.*]] = mt.count_targets %arg5 {mt.block = 1 : i64, mt.recompute, vocab = 16 : i64}
// CHECK-NEXT: %[[SEED:.*]] = mt.fill {mt.backward, mt.block = 1 : i64, value = 1.000000e+00 : f32}
// CHECK-NEXT: %[[L1:.*]] = mt.matmul {{.*}}mt.block = 1 : i64, mt.recompute, mt.tile = 1 : i64
// CHECK-NEXT: %{{.*}}, %[[LSE1:.*]] = mt.xent_tile %[[L1]], {{.*}}, %[[N]] {mt.block = 1 : i64, mt.recompute, mt.tile = 1 : i64}
// CHECK-NEXT: mt.xent_tile_grad %[[SEED]], %[[L1]], %{{.*}}, %[[LSE1]], %[[N]] {mt.backward, mt.block = 1 : i64, mt.tile = 1 : i64}
// CHECK:      %[[L0:.*]] = mt.matmul {{.*}}mt.block = 1 : i64, mt.recompute, mt.tile = 0 : i64
// CHECK:      mt.xent_tile_grad %[[SEED]], %[[L0]]
// The shared recompute: the input's tiles, both tiles before attention, attention.
// CHECK:      %[[X:.*]]:2 = mt.token_split %{{.*}} {mt.block = 0 : i64, mt.recompute}
// CHECK-NEXT: mt.rmsnorm %[[X]]#0, %arg2 {mt.block = 0 : i64, mt.recompute, mt.tile = 0 : i64}
// CHECK:      mt.rmsnorm %[[X]]#1, %arg2 {mt.block = 0 : i64, mt.recompute, mt.tile = 1 : i64}
// CHECK:      %[[O:.*]], %[[LSE:.*]] = mt.attention {{.*}}mt.recompute
// CHECK-NEXT: %[[OT:.*]]:2 = mt.token_split %[[O]] {mt.block = 0 : i64, mt.recompute}
// The backward after attention, tile 1 then tile 0, reading the recomputed output's tiles; the
// weight's gradient summed over the tiles.
// CHECK-NEXT: %[[DY:.*]]:2 = mt.token_split %{{.*}} {mt.backward, mt.block = 0 : i64}
// CHECK-NEXT: mt.matmul %[[DY]]#1, %arg4 {mt.backward, mt.block = 0 : i64, mt.tile = 1 : i64}
// CHECK-NEXT: mt.reshape %[[OT]]#1
// CHECK:      %[[DW1:.*]] = mt.matmul {{.*}}mt.tile = 1 : i64, transpose_a = true
// CHECK:      %[[DW0:.*]] = mt.matmul {{.*}}mt.tile = 0 : i64, transpose_a = true
// CHECK-NEXT: %[[DW:.*]] = mt.add %[[DW1]], %[[DW0]] {mt.backward, mt.block = 0 : i64, mt.tile = 0 : i64}
// CHECK:      mt.attention_grad
// Tile 1's stretch before attention: its norm recomputed first.
// CHECK:      mt.rmsnorm %[[X]]#1, %arg2 {mt.block = 0 : i64, mt.recompute, mt.tile = 1 : i64}
// CHECK-NEXT: mt.rope {{.*}}inverse = true, mt.backward, mt.block = 0 : i64, mt.tile = 1 : i64, position_offset = 32 : i64
// CHECK:      mt.rmsnorm %[[X]]#0, %arg2 {mt.block = 0 : i64, mt.recompute, mt.tile = 0 : i64}
// CHECK-NEXT: mt.rope {{.*}}inverse = true, mt.backward, mt.block = 0 : i64, mt.tile = 0 : i64}
// CHECK:      %[[DX:.*]] = mt.token_concat %{{.*}}, %{{.*}} {mt.backward, mt.block = 0 : i64}
// CHECK-NEXT: mt.embedding_grad %arg0, %[[DX]]
// CHECK:      return %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[DW]]
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

// A layer block with nothing token-wise to tile (the embedding is the prologue's).
// expected-error @+1 {{mt-tile-tokens found no token-wise op in a layer block to tile}}
func.func @nothing_to_tile(%arg0: tensor<1x64xi32> {mt.input = "tokens"},
                           %arg1: tensor<16x32xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}},
                           %arg2: tensor<1x64xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) {
  %0 = mt.embedding %arg0, %arg1 : tensor<1x64xi32>, tensor<16x32xf32> loc("embed")
  %1 = mt.matmul %0, %arg1 {transpose_b = true} : tensor<1x64x32xf32>, tensor<16x32xf32> loc("head")
  %loss, %lse = mt.softmax_xent %1, %arg2 : tensor<1x64x16xf32>, tensor<1x64xi32> loc("head")
  return %loss : tensor<f32>
}
