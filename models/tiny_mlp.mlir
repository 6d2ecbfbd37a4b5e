// A tiny two-layer language model written directly in the mt dialect: token embedding, one
// GELU MLP with a residual connection, layer norm, and a tied output projection. Compile it with
//   mtc models/tiny_mlp.mlir -o tiny.plan
func.func @forward(
    %tokens: tensor<4x16xi32> {mt.input = "tokens"},
    %wte: tensor<256x32xf32> {mt.param = {name = "wte.weight", init = "normal", std = 0.02 : f32}},
    %w1: tensor<128x32xf32> {mt.param = {name = "fc.weight", init = "normal", std = 0.02 : f32}},
    %b1: tensor<128xf32> {mt.param = {name = "fc.bias", init = "zeros"}},
    %w2: tensor<32x128xf32> {mt.param = {name = "proj.weight", init = "normal", std = 0.02 : f32}},
    %g: tensor<32xf32> {mt.param = {name = "ln.weight", init = "ones"}},
    %b: tensor<32xf32> {mt.param = {name = "ln.bias", init = "zeros"}}) -> tensor<4x16x256xf32> {
  %x = mt.embedding %tokens, %wte : tensor<4x16xi32>, tensor<256x32xf32>
  %h = mt.matmul %x, %w1 {transpose_b = true} : tensor<4x16x32xf32>, tensor<128x32xf32>
  %hb = mt.add %h, %b1 : tensor<4x16x128xf32>, tensor<128xf32>
  %a = mt.gelu %hb : tensor<4x16x128xf32>
  %p = mt.matmul %a, %w2 {transpose_b = true} : tensor<4x16x128xf32>, tensor<32x128xf32>
  %r = mt.add %x, %p : tensor<4x16x32xf32>, tensor<4x16x32xf32>
  %n, %mean, %rstd = mt.layernorm %r, %g, %b : tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>
  %logits = mt.matmul %n, %wte {transpose_b = true} : tensor<4x16x32xf32>, tensor<256x32xf32>
  return %logits : tensor<4x16x256xf32>
}
