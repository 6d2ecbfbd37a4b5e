// PASSES: --mt-split-vocab=chunks=2
// The head W (vocab 6) in two pieces of 3 rows, each its own argument and layer block after the
// epilogue (block 0 here: the model has no layer blocks); the loss folds the chunks' logits and
// ends with the last chunk, whose backward follows in its block with the logits it already has;
// the first chunk's product is recomputed for its backward. The head's gradient becomes one
// result per piece (mt.grad_row), dh the sum of the pieces' products; the whole head is gone.
// The untied token embedding E (6 rows) goes the same way in blocks -3 and -2 before the
// prologue: looked up chunk by chunk from zeros, its gradient formed chunk by chunk; its padding
// id (4) goes to the chunk that holds its row.

// CHECK-LABEL: func.func @f
// CHECK-SAME: %arg1: tensor<3x4xf32> {mt.param = {init = "normal", name = "e", rows = array<i64: 0, 6>, std = 1.000000e+00 : f32}}
// CHECK-SAME: %arg2: tensor<3x4xf32> {mt.param = {init = "normal", name = "e", rows = array<i64: 3, 6>, std = 1.000000e+00 : f32}}
// CHECK-SAME: %arg3: tensor<3x4xf32> {mt.param = {init = "normal", name = "w", rows = array<i64: 0, 6>, std = 1.000000e+00 : f32}}
// CHECK-SAME: %arg4: tensor<3x4xf32> {mt.param = {init = "normal", name = "w", rows = array<i64: 3, 6>, std = 1.000000e+00 : f32}}
// CHECK-SAME: tensor<3x4xf32> {mt.grad = "e", mt.grad_row = 0 : i64}, tensor<3x4xf32> {mt.grad = "e", mt.grad_row = 3 : i64}
// CHECK-SAME: tensor<3x4xf32> {mt.grad = "w", mt.grad_row = 0 : i64}, tensor<3x4xf32> {mt.grad = "w", mt.grad_row = 3 : i64}
// CHECK-SAME: mt.vocab_split = ["w", "e"]
// CHECK-NEXT: %[[ZERO:.*]] = mt.fill {mt.block = -3 : i64, value = 0.000000e+00 : f32} : tensor<1x2x4xf32>
// CHECK-NEXT: %[[X0:.*]] = mt.embedding_chunk %arg0, %arg1, %[[ZERO]] {first = 0 : i64, mt.block = -3 : i64}
// CHECK-NEXT: %[[X:.*]] = mt.embedding_chunk %arg0, %arg2, %[[X0]] {first = 3 : i64, mt.block = -2 : i64}
// CHECK-NEXT: %[[INIT:.*]] = mt.fill {mt.block = 1 : i64, value = 0xFF800000 : f32} : tensor<1x2x2xf32>
// CHECK-NEXT: %[[L0:.*]] = mt.matmul %[[X]], %arg3 {mt.block = 1 : i64, transpose_b = true}
// CHECK-NEXT: %[[R0:.*]] = mt.xent_chunk %[[L0]], %arg5, %[[INIT]] {first = 0 : i64, mt.block = 1 : i64}
// CHECK-NEXT: %[[L1:.*]] = mt.matmul %[[X]], %arg4 {mt.block = 2 : i64, transpose_b = true}
// CHECK-NEXT: %[[R1:.*]] = mt.xent_chunk %[[L1]], %arg5, %[[R0]] {first = 3 : i64, mt.block = 2 : i64}
// CHECK-NEXT: %[[LOSS:.*]], %[[LSE:.*]] = mt.xent_finish %[[R1]], %arg5 {mt.block = 2 : i64, vocab = 6 : i64}
// CHECK-NEXT: %[[SEED:.*]] = mt.fill {mt.backward, mt.block = 2 : i64, value = 1.000000e+00 : f32}
// CHECK-NEXT: %[[D1:.*]] = mt.xent_chunk_grad %[[SEED]], %[[L1]], %arg5, %[[LSE]] {first = 3 : i64, mt.backward, mt.block = 2 : i64, vocab = 6 : i64}
// CHECK-NEXT: %[[DH1:.*]] = mt.matmul %[[D1]], %arg4 {mt.backward, mt.block = 2 : i64}
// CHECK:      %[[DW1:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.backward, mt.block = 2 : i64, transpose_a = true}
// CHECK-NEXT: %[[RL0:.*]] = mt.matmul %[[X]], %arg3 {mt.block = 1 : i64, mt.recompute, transpose_b = true}
// CHECK-NEXT: %[[D0:.*]] = mt.xent_chunk_grad %[[SEED]], %[[RL0]], %arg5, %[[LSE]] {first = 0 : i64, mt.backward, mt.block = 1 : i64, vocab = 6 : i64}
// CHECK-NEXT: %[[DH0:.*]] = mt.matmul %[[D0]], %arg3 {mt.backward, mt.block = 1 : i64}
// CHECK:      %[[DW0:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.backward, mt.block = 1 : i64, transpose_a = true}
// CHECK-NEXT: %[[DH:.*]] = mt.add %[[DH1]], %[[DH0]] {mt.backward, mt.block = 1 : i64}
// CHECK-NEXT: %[[DE0:.*]] = mt.embedding_grad_chunk %arg0, %[[DH]] {first = 0 : i64, mt.backward, mt.block = -3 : i64, rows = 3 : i64}
// CHECK-NEXT: %[[DE1:.*]] = mt.embedding_grad_chunk %arg0, %[[DH]] {first = 3 : i64, mt.backward, mt.block = -2 : i64, padding_id = 4 : i64, rows = 3 : i64}
// CHECK-NEXT: return %[[LOSS]], %[[DE0]], %[[DE1]], %[[DW0]], %[[DW1]]
func.func @f(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<6x4xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}}, %arg2: tensor<6x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}, %arg3: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "e"}, tensor<6x4xf32> {mt.grad = "w"}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<6x4xf32>
  %1 = mt.matmul %0, %arg2 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<6x4xf32>
  %loss, %lse = mt.softmax_xent %1, %arg3 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  %2 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %3 = mt.softmax_xent_grad %2, %1, %arg3, %lse {mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<1x2x6xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %4 = mt.matmul %3, %arg2 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<6x4xf32>
  %5 = mt.reshape %0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %6 = mt.reshape %3 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32> -> tensor<2x6xf32>
  %7 = mt.matmul %6, %5 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x6xf32>, tensor<2x4xf32>
  %8 = mt.embedding_grad %arg0, %4 {mt.backward, mt.block = -1 : i64, padding_id = 4 : i64, vocab = 6 : i64} : tensor<1x2xi32>, tensor<1x2x4xf32>
  return %loss, %8, %7 : tensor<f32>, tensor<6x4xf32>, tensor<6x4xf32>
}

// -----

// A head tied to the embedding: the embedding reads the whole table.
func.func @tied(%arg0: tensor<1x2xi32> {mt.input = "tokens"}, %arg1: tensor<6x4xf32> {mt.param = {init = "normal", name = "e", std = 1.000000e+00 : f32}}, %arg2: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "e"}) attributes {mt.block_templates = array<i64>} {
  // expected-error @+1 {{reads the LM head 'e' as a whole (a tied embedding?): the vocabulary split needs an untied head (mtc --untied)}}
  %0 = mt.embedding %arg0, %arg1 {mt.block = -1 : i64} : tensor<1x2xi32>, tensor<6x4xf32>
  %1 = mt.matmul %0, %arg1 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<6x4xf32>
  %loss, %lse = mt.softmax_xent %1, %arg2 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  %2 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %3 = mt.softmax_xent_grad %2, %1, %arg2, %lse {mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<1x2x6xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %4 = mt.matmul %3, %arg1 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<6x4xf32>
  %5 = mt.reshape %0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %6 = mt.reshape %3 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32> -> tensor<2x6xf32>
  %7 = mt.matmul %6, %5 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x6xf32>, tensor<2x4xf32>
  %8 = mt.embedding_grad %arg0, %4 {mt.backward, mt.block = -1 : i64, vocab = 6 : i64} : tensor<1x2xi32>, tensor<1x2x4xf32>
  %9 = mt.add %7, %8 {mt.backward, mt.block = -1 : i64} : tensor<6x4xf32>, tensor<6x4xf32>
  return %loss, %9 : tensor<f32>, tensor<6x4xf32>
}

// -----

// A loss that is not a head's: nothing to split.
// expected-error @+1 {{the vocabulary split needs a loss (mt.softmax_xent, or a DPO plan's mt.sequence_logprob) of logits = mt.matmul(h, W) {transpose_b} (or their mt.softcap) with W a (vocab, C) parameter (an LM head); this model has none}}
func.func @headless(%arg0: tensor<1x2x6xf32> {mt.param = {init = "normal", name = "z", std = 1.000000e+00 : f32}}, %arg1: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<1x2x6xf32> {mt.grad = "z"}) attributes {mt.block_templates = array<i64>} {
  %loss, %lse = mt.softmax_xent %arg0, %arg1 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  %0 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %1 = mt.softmax_xent_grad %0, %arg0, %arg1, %lse {mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<1x2x6xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  return %loss, %1 : tensor<f32>, tensor<1x2x6xf32>
}

// -----

// A DPO plan's loss (mt.sequence_logprob of rows in pairs, then mt.dpo_loss against the
// reference): the same chunks, finished by mt.sequence_logprob_finish, whose sums replace the
// whole's (in mt.dpo_loss and the output policy_logps); mt.dpo_loss, the seed and mt.dpo_loss_grad
// join the last chunk's block, before its backward; each chunk's dlogits from
// mt.sequence_logprob_chunk_grad of dlogp.

// CHECK-LABEL: func.func @dpo
// CHECK:      %[[INIT:.*]] = mt.fill {mt.block = 1 : i64, value = 0xFF800000 : f32} : tensor<2x1x2xf32>
// CHECK-NEXT: %[[L0:.*]] = mt.matmul %arg0, %arg3 {mt.block = 1 : i64, transpose_b = true}
// CHECK-NEXT: %[[R0:.*]] = mt.xent_chunk %[[L0]], %arg1, %[[INIT]] {first = 0 : i64, mt.block = 1 : i64}
// CHECK-NEXT: %[[L1:.*]] = mt.matmul %arg0, %arg4 {mt.block = 2 : i64, transpose_b = true}
// CHECK-NEXT: %[[R1:.*]] = mt.xent_chunk %[[L1]], %arg1, %[[R0]] {first = 3 : i64, mt.block = 2 : i64}
// CHECK-NEXT: %[[LOGP:.*]], %[[LSE:.*]] = mt.sequence_logprob_finish %[[R1]], %arg1 {mt.block = 2 : i64, vocab = 6 : i64} : tensor<2x1x2xf32>, tensor<2x1xi32>
// CHECK-NEXT: %[[LOSS:.*]] = mt.dpo_loss %[[LOGP]], %arg2 {beta = 1.000000e-01 : f32, mt.block = 2 : i64}
// CHECK-NEXT: %[[SEED:.*]] = mt.fill {mt.backward, mt.block = 2 : i64, value = 1.000000e+00 : f32}
// CHECK-NEXT: %[[DLOGP:.*]] = mt.dpo_loss_grad %[[SEED]], %[[LOGP]], %arg2 {beta = 1.000000e-01 : f32, mt.backward, mt.block = 2 : i64}
// CHECK-NEXT: %[[D1:.*]] = mt.sequence_logprob_chunk_grad %[[DLOGP]], %[[L1]], %arg1, %[[LSE]] {first = 3 : i64, mt.backward, mt.block = 2 : i64, vocab = 6 : i64}
// CHECK:      %[[RL0:.*]] = mt.matmul %arg0, %arg3 {mt.block = 1 : i64, mt.recompute, transpose_b = true}
// CHECK-NEXT: %[[D0:.*]] = mt.sequence_logprob_chunk_grad %[[DLOGP]], %[[RL0]], %arg1, %[[LSE]] {first = 0 : i64, mt.backward, mt.block = 1 : i64, vocab = 6 : i64}
// CHECK-NOT:  mt.sequence_logprob %
// CHECK:      return %[[LOSS]], %{{.*}}, %{{.*}}, %[[LOGP]]
func.func @dpo(%arg0: tensor<2x1x4xf32>, %arg1: tensor<2x1xi32> {mt.input = "targets"}, %arg2: tensor<2xf32> {mt.input = "reference_logps"}, %arg3: tensor<6x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}) -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "w"}, tensor<2xf32> {mt.output = "policy_logps"}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.matmul %arg0, %arg3 {mt.block = 0 : i64, transpose_b = true} : tensor<2x1x4xf32>, tensor<6x4xf32>
  %logp, %lse = mt.sequence_logprob %0, %arg1 {mt.block = 0 : i64} : tensor<2x1x6xf32>, tensor<2x1xi32>
  %1 = mt.dpo_loss %logp, %arg2 {beta = 1.000000e-01 : f32, mt.block = 0 : i64} : tensor<2xf32>, tensor<2xf32>
  %2 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %3 = mt.dpo_loss_grad %2, %logp, %arg2 {beta = 1.000000e-01 : f32, mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<2xf32>, tensor<2xf32>
  %4 = mt.sequence_logprob_grad %3, %0, %arg1, %lse {mt.backward, mt.block = 0 : i64} : tensor<2xf32>, tensor<2x1x6xf32>, tensor<2x1xi32>, tensor<2x1xf32>
  %5 = mt.reshape %4 {mt.backward, mt.block = 0 : i64} : tensor<2x1x6xf32> -> tensor<2x6xf32>
  %6 = mt.reshape %arg0 {mt.backward, mt.block = 0 : i64} : tensor<2x1x4xf32> -> tensor<2x4xf32>
  %7 = mt.matmul %5, %6 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x6xf32>, tensor<2x4xf32>
  return %1, %7, %logp : tensor<f32>, tensor<6x4xf32>, tensor<2xf32>
}

// -----

// Means (the IPO and SimPO losses: mt.sequence_logprob {average}): the finish and each chunk's
// backward average too.
// CHECK-LABEL: func.func @dpo_means
// CHECK:      mt.sequence_logprob_finish %{{.*}}, %arg1 {average = true, mt.block = 2 : i64, vocab = 6 : i64}
// CHECK:      mt.sequence_logprob_chunk_grad %{{.*}} {average = true, first = 3 : i64, mt.backward, mt.block = 2 : i64, vocab = 6 : i64}
// CHECK:      mt.sequence_logprob_chunk_grad %{{.*}} {average = true, first = 0 : i64, mt.backward, mt.block = 1 : i64, vocab = 6 : i64}
func.func @dpo_means(%arg0: tensor<2x1x4xf32>, %arg1: tensor<2x1xi32> {mt.input = "targets"}, %arg2: tensor<2xf32> {mt.input = "reference_logps"}, %arg3: tensor<6x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}) -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "w"}, tensor<2xf32> {mt.output = "policy_logps"}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.matmul %arg0, %arg3 {mt.block = 0 : i64, transpose_b = true} : tensor<2x1x4xf32>, tensor<6x4xf32>
  %logp, %lse = mt.sequence_logprob %0, %arg1 {average = true, mt.block = 0 : i64} : tensor<2x1x6xf32>, tensor<2x1xi32>
  %1 = mt.dpo_loss %logp, %arg2 {beta = 1.000000e-01 : f32, kind = 3 : i32, mt.block = 0 : i64} : tensor<2xf32>, tensor<2xf32>
  %2 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %3 = mt.dpo_loss_grad %2, %logp, %arg2 {beta = 1.000000e-01 : f32, kind = 3 : i32, mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<2xf32>, tensor<2xf32>
  %4 = mt.sequence_logprob_grad %3, %0, %arg1, %lse {average = true, mt.backward, mt.block = 0 : i64} : tensor<2xf32>, tensor<2x1x6xf32>, tensor<2x1xi32>, tensor<2x1xf32>
  %5 = mt.reshape %4 {mt.backward, mt.block = 0 : i64} : tensor<2x1x6xf32> -> tensor<2x6xf32>
  %6 = mt.reshape %arg0 {mt.backward, mt.block = 0 : i64} : tensor<2x1x4xf32> -> tensor<2x4xf32>
  %7 = mt.matmul %5, %6 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x6xf32>, tensor<2x4xf32>
  return %1, %7, %logp : tensor<f32>, tensor<6x4xf32>, tensor<2xf32>
}

// -----

// A head with LoRA adapters (mt-lora: y + its update): no chunk has the adapted logits whole.
// expected-error @+1 {{the vocabulary split cannot take an LM head with LoRA adapters ('w'): leave it out of --lora-targets}}
func.func @lora_head(%arg0: tensor<1x2x4xf32> {mt.input = "h"}, %arg1: tensor<6x4xf32> {mt.param = {init = "normal", lora, name = "w", std = 1.000000e+00 : f32}}, %arg2: tensor<1x2x6xf32> {mt.input = "u"}, %arg3: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.matmul %arg0, %arg1 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<6x4xf32>
  %1 = mt.add %0, %arg2 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2x6xf32>
  %loss, %lse = mt.softmax_xent %1, %arg3 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  return %loss : tensor<f32>
}

// -----

// A DoRA head without dropout (mt-lora: g * (y + its update)): refused alike.
// expected-error @+1 {{the vocabulary split cannot take an LM head with LoRA adapters ('w'): leave it out of --lora-targets}}
func.func @dora_head(%arg0: tensor<1x2x4xf32> {mt.input = "h"}, %arg1: tensor<6x4xf32> {mt.param = {init = "normal", lora, name = "w", std = 1.000000e+00 : f32}}, %arg2: tensor<1x2x6xf32> {mt.input = "u"}, %arg3: tensor<6xf32> {mt.input = "g"}, %arg4: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.matmul %arg0, %arg1 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<6x4xf32>
  %1 = mt.add %0, %arg2 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2x6xf32>
  %2 = mt.mul %1, %arg3 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<6xf32>
  %loss, %lse = mt.softmax_xent %2, %arg4 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  return %loss : tensor<f32>
}

// -----

// Softcapped logits (Gemma 2's mt.softcap between the head and its loss): each chunk's logits are
// capped before mt.xent_chunk, the recomputed chunk's too, and each chunk's dlogits go through
// mt.softcap_grad of its capped logits before the products with W.

// CHECK-LABEL: func.func @capped
// CHECK-SAME: mt.vocab_split = ["w"]
// CHECK:      %[[L0:.*]] = mt.matmul %arg0, %arg1 {mt.block = 1 : i64, transpose_b = true}
// CHECK-NEXT: %[[C0:.*]] = mt.softcap %[[L0]] {cap = 3.000000e+00 : f32, mt.block = 1 : i64}
// CHECK-NEXT: %[[R0:.*]] = mt.xent_chunk %[[C0]], %arg3, %{{.*}} {first = 0 : i64, mt.block = 1 : i64}
// CHECK-NEXT: %[[L1:.*]] = mt.matmul %arg0, %arg2 {mt.block = 2 : i64, transpose_b = true}
// CHECK-NEXT: %[[C1:.*]] = mt.softcap %[[L1]] {cap = 3.000000e+00 : f32, mt.block = 2 : i64}
// CHECK-NEXT: %[[R1:.*]] = mt.xent_chunk %[[C1]], %arg3, %[[R0]] {first = 3 : i64, mt.block = 2 : i64}
// CHECK-NEXT: %[[LOSS:.*]], %[[LSE:.*]] = mt.xent_finish %[[R1]], %arg3
// CHECK-NEXT: %[[SEED:.*]] = mt.fill {mt.backward, mt.block = 2 : i64, value = 1.000000e+00 : f32}
// CHECK-NEXT: %[[D1:.*]] = mt.xent_chunk_grad %[[SEED]], %[[C1]], %arg3, %[[LSE]] {first = 3 : i64, mt.backward, mt.block = 2 : i64, vocab = 6 : i64}
// CHECK-NEXT: %[[G1:.*]] = mt.softcap_grad %[[D1]], %[[C1]] {cap = 3.000000e+00 : f32, mt.backward, mt.block = 2 : i64}
// CHECK-NEXT: mt.matmul %[[G1]], %arg2 {mt.backward, mt.block = 2 : i64}
// CHECK:      %[[DW1:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.backward, mt.block = 2 : i64, transpose_a = true}
// CHECK-NEXT: %[[RL0:.*]] = mt.matmul %arg0, %arg1 {mt.block = 1 : i64, mt.recompute, transpose_b = true}
// CHECK-NEXT: %[[RC0:.*]] = mt.softcap %[[RL0]] {cap = 3.000000e+00 : f32, mt.block = 1 : i64, mt.recompute}
// CHECK-NEXT: %[[D0:.*]] = mt.xent_chunk_grad %[[SEED]], %[[RC0]], %arg3, %[[LSE]] {first = 0 : i64, mt.backward, mt.block = 1 : i64, vocab = 6 : i64}
// CHECK-NEXT: %[[G0:.*]] = mt.softcap_grad %[[D0]], %[[RC0]] {cap = 3.000000e+00 : f32, mt.backward, mt.block = 1 : i64}
// CHECK-NEXT: mt.matmul %[[G0]], %arg1 {mt.backward, mt.block = 1 : i64}
// CHECK:      %[[DW0:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.backward, mt.block = 1 : i64, transpose_a = true}
// CHECK:      return %[[LOSS]], %[[DW0]], %[[DW1]]
func.func @capped(%arg0: tensor<1x2x4xf32> {mt.input = "x"}, %arg1: tensor<6x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}, %arg2: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "w"}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.matmul %arg0, %arg1 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<6x4xf32>
  %1 = mt.softcap %0 {cap = 3.000000e+00 : f32, mt.block = 0 : i64} : tensor<1x2x6xf32>
  %loss, %lse = mt.softmax_xent %1, %arg2 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  %2 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %3 = mt.softmax_xent_grad %2, %1, %arg2, %lse {mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<1x2x6xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %4 = mt.softcap_grad %3, %1 {cap = 3.000000e+00 : f32, mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2x6xf32>
  %5 = mt.reshape %arg0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %6 = mt.reshape %4 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32> -> tensor<2x6xf32>
  %7 = mt.matmul %6, %5 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x6xf32>, tensor<2x4xf32>
  return %loss, %7 : tensor<f32>, tensor<6x4xf32>
}

// -----

// Softcapped logits whose loss's backward does not go through the cap's: not a head to split.
// expected-error @+1 {{the vocabulary split needs the softcapped logits' one backward (mt.softcap_grad of the loss's)}}
func.func @capped_without_its_backward(%arg0: tensor<1x2x4xf32> {mt.input = "x"}, %arg1: tensor<6x4xf32> {mt.param = {init = "normal", name = "w", std = 1.000000e+00 : f32}}, %arg2: tensor<1x2xi32> {mt.input = "targets"}) -> (tensor<f32> {mt.loss}, tensor<6x4xf32> {mt.grad = "w"}) attributes {mt.block_templates = array<i64>} {
  %0 = mt.matmul %arg0, %arg1 {mt.block = 0 : i64, transpose_b = true} : tensor<1x2x4xf32>, tensor<6x4xf32>
  %1 = mt.softcap %0 {cap = 3.000000e+00 : f32, mt.block = 0 : i64} : tensor<1x2x6xf32>
  %loss, %lse = mt.softmax_xent %1, %arg2 {mt.block = 0 : i64} : tensor<1x2x6xf32>, tensor<1x2xi32>
  %2 = mt.fill {mt.backward, mt.block = 0 : i64, value = 1.000000e+00 : f32} : tensor<f32>
  %3 = mt.softmax_xent_grad %2, %1, %arg2, %lse {mt.backward, mt.block = 0 : i64} : tensor<f32>, tensor<1x2x6xf32>, tensor<1x2xi32>, tensor<1x2xf32>
  %5 = mt.reshape %arg0 {mt.backward, mt.block = 0 : i64} : tensor<1x2x4xf32> -> tensor<2x4xf32>
  %6 = mt.reshape %3 {mt.backward, mt.block = 0 : i64} : tensor<1x2x6xf32> -> tensor<2x6xf32>
  %7 = mt.matmul %6, %5 {mt.backward, mt.block = 0 : i64, transpose_a = true} : tensor<2x6xf32>, tensor<2x4xf32>
  return %loss, %7 : tensor<f32>, tensor<6x4xf32>
}
