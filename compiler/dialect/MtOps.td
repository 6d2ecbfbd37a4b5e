#ifndef MT_OPS_TD
#define MT_OPS_TD

include "MtDialect.td"
include "MtInterfaces.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// MLIR's InferTypeOpAdaptor with the adaptor's own verification first. A parsed op's result types
// are inferred before the op is verified, so a required attribute missing from a hand-written (or
// hostile) .mlir file would reach the inference as null and crash it; the adaptor names it
// instead ("'mt.xent_finish' op requires attribute 'vocab'").
def Mt_InferTypeOpAdaptor : TraitList<[
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    NativeOpTrait<"InferTypeOpAdaptor", [], [{
      static ::llvm::LogicalResult inferReturnTypes(::mlir::MLIRContext *context,
                                                    std::optional<::mlir::Location> location, Adaptor adaptor,
                                                    ::llvm::SmallVectorImpl<::mlir::Type> &inferredReturnTypes);
    }], [{
      ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *context,
          std::optional<::mlir::Location> location, ::mlir::ValueRange operands, ::mlir::DictionaryAttr attributes,
          ::mlir::OpaqueProperties properties, ::mlir::RegionRange regions,
          ::llvm::SmallVectorImpl<::mlir::Type> &inferredReturnTypes) {
        $cppClass::Adaptor adaptor(operands, attributes, properties, regions);
        // Without a location the error is still reported (at an unknown one): better than a crash.
        if (::mlir::failed(adaptor.verify(location.value_or(::mlir::UnknownLoc::get(context)))))
          return ::mlir::failure();
        return $cppClass::inferReturnTypes(context, location, adaptor, inferredReturnTypes);
      }
    }]>]>;

// A pure tensor op with inferred result types that lowers to one kernel and has a cost.
class Mt_KernelOp<string mnemonic, list<Trait> traits = []>
    : Mt_Op<mnemonic, !listconcat(traits, [Pure, Mt_InferTypeOpAdaptor,
                                           DeclareOpInterfaceMethods<CostOpInterface>])>;

//===----------------------------------------------------------------------===//
// Lookups
//===----------------------------------------------------------------------===//

def Mt_EmbeddingOp : Mt_KernelOp<"embedding", [KernelOpInterface,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "row lookup: out[..., :] = table[ids[...], :]";
  let description = [{
    Gathers rows of `table` (V, C) for integer `ids` of any shape; the result has shape
    `ids.shape + [C]`. With `padding_id` (a row of the table: PyTorch's `padding_idx`, a Hugging
    Face model's `pad_token_id`) the lookup is the same, but the tokens of that id give the
    table no gradient: its gradient rule passes the id on to mt.embedding_grad.

    ```mlir
    %x = mt.embedding %ids, %wte : tensor<8x256xi32>, tensor<256x384xf32>
    %y = mt.embedding %ids, %wte {padding_id = 0 : i64} : tensor<8x256xi32>, tensor<256x384xf32>
    ```
  }];
  let arguments = (ins Mt_I32Tensor:$ids, Mt_FloatTensor:$table, OptionalAttr<I64Attr>:$padding_id);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` type($ids) `,` type($table)";
  let hasVerifier = 1;
}

def Mt_EmbeddingGradOp : Mt_KernelOp<"embedding_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "scatter-add of row gradients into a (vocab, C) table gradient";
  let description = [{
    The tokens whose id is `padding_id` (where set) add nothing: that row's gradient stays 0.

    ```mlir
    %dwte = mt.embedding_grad %ids, %dx {vocab = 256} : tensor<8x256xi32>, tensor<8x256x384xf32>
    %dwte = mt.embedding_grad %ids, %dx {vocab = 256, padding_id = 0 : i64} : tensor<8x256xi32>, tensor<8x256x384xf32>
    ```
  }];
  let arguments = (ins Mt_I32Tensor:$ids, Mt_FloatTensor:$dout, I64Attr:$vocab, OptionalAttr<I64Attr>:$padding_id);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$ids `,` $dout attr-dict `:` type($ids) `,` type($dout)";
}

def Mt_EmbeddingChunkOp : Mt_KernelOp<"embedding_chunk", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "row lookup in a chunk of the table's rows, `in` where the id is elsewhere";
  let description = [{
    `table` holds rows [first, first + Vc) of a larger table; a token whose id is one of them
    gets its row, any other keeps `in`'s. Chained from `mt.fill` 0 over every chunk, it is
    `mt.embedding` of the whole table (made by mt-split-vocab, after autodiff: no gradient rule).

    ```mlir
    %x1 = mt.embedding_chunk %ids, %wte1, %x0 {first = 128} : tensor<8x256xi32>, tensor<128x384xf32>, tensor<8x256x384xf32>
    ```
  }];
  let arguments = (ins Mt_I32Tensor:$ids, Mt_FloatTensor:$table, Mt_FloatTensor:$in, I64Attr:$first);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$ids `,` $table `,` $in attr-dict `:` type($ids) `,` type($table) `,` type($in)";
}

def Mt_EmbeddingGradChunkOp : Mt_KernelOp<"embedding_grad_chunk", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "the rows [first, first + rows) of mt.embedding_grad's table gradient";
  let description = [{
    `padding_id` (where set) is mt.embedding_grad's: an id of the whole table, not of the chunk.

    ```mlir
    %dwte1 = mt.embedding_grad_chunk %ids, %dx {first = 128, rows = 128} : tensor<8x256xi32>, tensor<8x256x384xf32>
    ```
  }];
  let arguments = (ins Mt_I32Tensor:$ids, Mt_FloatTensor:$dout, I64Attr:$first, I64Attr:$rows,
                       OptionalAttr<I64Attr>:$padding_id);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$ids `,` $dout attr-dict `:` type($ids) `,` type($dout)";
}

def Mt_PositionsOp : Mt_Op<"positions", [Pure, KernelOpInterface,
    DeclareOpInterfaceMethods<CostOpInterface>]> {
  let summary = "position ids: out[b, t] = t";
  let description = [{
    ```mlir
    %pos = mt.positions : tensor<8x256xi32>
    ```
  }];
  let results = (outs Mt_I32Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra and elementwise
//===----------------------------------------------------------------------===//

def Mt_MatmulOp : Mt_KernelOp<"matmul", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "matrix product op(lhs) @ op(rhs), batched over leading dims";
  let description = [{
    `lhs` is (..., M, K) (or (..., K, M) with `transpose_a`); `rhs` is (K, N) (or (N, K) with
    `transpose_b`) and either rank 2, shared by every batch, or of the lhs rank with equal
    batch dims. A Linear layer with torch's (out, in) weight is `transpose_b = true`. The
    product accumulates in f32; the result has the operands' type, or f32 with `f32_result`
    (a weight's gradient from bf16 activations: it leaves the device as f32).

    ```mlir
    %y = mt.matmul %x, %w {transpose_b = true} : tensor<8x256x384xf32>, tensor<1152x384xf32>
    %dw = mt.matmul %dy, %x {transpose_a = true, f32_result = true} : tensor<2048x1152xbf16>, tensor<2048x384xbf16>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$lhs, Mt_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b,
                       DefaultValuedAttr<BoolAttr, "false">:$f32_result);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

class Mt_BroadcastBinaryOp<string mnemonic, string what>
    : Mt_KernelOp<mnemonic, [KernelOpInterface, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "elementwise " # what # ", rhs broadcast over lhs's leading dims";
  let description = [{
    `rhs` has the shape of `lhs` or a suffix of it (a bias (C) against (B, T, C)).

    ```mlir
    %y = mt.}] # mnemonic # [{ %x, %bias : tensor<8x256x384xf32>, tensor<384xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$lhs, Mt_FloatTensor:$rhs);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Mt_AddOp : Mt_BroadcastBinaryOp<"add", "sum">;
def Mt_MulOp : Mt_BroadcastBinaryOp<"mul", "product">;

def Mt_ScaleOp : Mt_KernelOp<"scale", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "multiplication by a constant";
  let description = [{
    ```mlir
    %y = mt.scale %x {factor = 0.5 : f32} : tensor<8x384xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, F32Attr:$factor);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Mt_DropoutOp : Mt_KernelOp<"dropout", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "inverted dropout: each element zeroed with probability `ratio`, the rest scaled by 1/(1 - ratio)";
  let description = [{
    The mask is a pure function of the step's randomness (the run's seed and the plan run), the
    op's `site` (which Dropout of the model: distinct sites draw independent masks) and the
    element's index, never stored: a recompute redraws the forward's mask, and the gradient is
    `mt.dropout` of the incoming gradient with the same site and ratio. The identity when the
    runtime evaluates (validation). Kernel: kernels/random/dropout.h.

    ```mlir
    %y = mt.dropout %x {ratio = 1.000000e-01 : f32, site = 0 : i64} : tensor<8x256x384xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, I64Attr:$site, F32Attr:$ratio);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Mt_SumToOp : Mt_Op<"sum_to", [Pure, KernelOpInterface,
    DeclareOpInterfaceMethods<CostOpInterface>, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "sum down to a shape that broadcasts to the input's (gradient of a broadcast)";
  let description = [{
    ```mlir
    %db = mt.sum_to %dy : tensor<8x256x384xf32> -> tensor<384xf32>
    ```

    The sums accumulate in f32; the result has the input's type or f32 (a bias's gradient).
  }];
  let arguments = (ins Mt_FloatTensor:$input);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mt_FillOp : Mt_Op<"fill", [Pure,
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<CostOpInterface>]> {
  let summary = "a tensor with every element equal to `value`";
  let description = [{
    ```mlir
    %one = mt.fill {value = 1.0 : f32} : tensor<f32>
    ```
  }];
  let arguments = (ins F32Attr:$value);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Mt_TransposeOp : Mt_KernelOp<"transpose", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "permutation of dimensions: result dim i is input dim perm[i]";
  let description = [{
    ```mlir
    %y = mt.transpose %x {perm = array<i64: 0, 2, 1>} : tensor<8x256x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Mt_ReshapeOp : Mt_Op<"reshape", [Pure, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "the same elements under another shape (a view: no copy, no kernel)";
  let description = [{
    ```mlir
    %y = mt.reshape %x : tensor<8x256x384xf32> -> tensor<2048x384xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mt_TokenSplitOp : Mt_Op<"token_split", [Pure, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "a token tensor as equal tiles of consecutive tokens (views: no copy, no kernel)";
  let description = [{
    Reads (B, T, ...) as B*T token rows in order and cuts them into N equal tiles of R rows:
    tile i is rows [i*R, (i+1)*R), each of shape (b, t, ...) with b*t = R — inside one
    sequence (b = 1, t dividing T) or whole sequences (t = T, b dividing B). Each result is a
    view of the input's bytes at its tile's place (mt-plan-memory). Made by mt-tile-tokens;
    its gradient is mt.token_concat of the tiles' gradients.

    ```mlir
    %x0, %x1 = mt.token_split %x : tensor<2x64x32xf32> -> tensor<1x64x32xf32>, tensor<1x64x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs Variadic<AnyRankedTensor>:$tiles);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($tiles)";
  let hasVerifier = 1;
}

def Mt_TokenConcatOp : Mt_Op<"token_concat", [Pure, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "equal tiles of consecutive tokens as the whole tensor (a view: no copy, no kernel)";
  let description = [{
    The inverse of mt.token_split: tile i is token rows [i*R, (i+1)*R) of the result.
    mt-plan-memory places each tile in the result's bytes where it belongs, so the ops making
    the tiles write the whole in place (a tile it cannot place there is copied once). Its
    gradient is mt.token_split of the result's gradient.

    ```mlir
    %x = mt.token_concat %x0, %x1 : tensor<1x32x32xf32>, tensor<1x32x32xf32> -> tensor<1x64x32xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$tiles);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$tiles attr-dict `:` type($tiles) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisation and activations
//===----------------------------------------------------------------------===//

def Mt_LayerNormOp : Mt_KernelOp<"layernorm", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "layer normalisation over the last dim; also returns mean and 1/std";
  let description = [{
    ```mlir
    %y, %mean, %rstd = mt.layernorm %x, %g, %b {eps = 1.0e-5 : f32}
        : tensor<8x256x384xf32>, tensor<384xf32>, tensor<384xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, Mt_FloatTensor:$gamma, Mt_FloatTensor:$beta,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$eps);
  let results = (outs Mt_FloatTensor:$result, Mt_F32Tensor:$mean, Mt_F32Tensor:$rstd);
  let assemblyFormat = "$input `,` $gamma `,` $beta attr-dict `:` type($input) `,` type($gamma) `,` type($beta)";
}

def Mt_LayerNormGradOp : Mt_KernelOp<"layernorm_grad", [KernelOpInterface]> {
  let summary = "fused backward of mt.layernorm: (dx, dgamma, dbeta)";
  let arguments = (ins Mt_FloatTensor:$dout, Mt_FloatTensor:$input, Mt_FloatTensor:$gamma, Mt_F32Tensor:$mean,
                       Mt_F32Tensor:$rstd);
  let results = (outs Mt_FloatTensor:$dinput, Mt_F32Tensor:$dgamma, Mt_F32Tensor:$dbeta);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_RmsNormOp : Mt_KernelOp<"rmsnorm", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "RMS normalisation over the last dim; also returns 1/rms";
  let description = [{
    y = x / rms(x) * (offset + gamma), offset + gamma taken in f32: Gemma's norms scale by
    1 + weight (`offset` 1; its weights are offsets from 1), the others by gamma (0).

    ```mlir
    %y, %rstd = mt.rmsnorm %x, %g {eps = 1.0e-5 : f32} : tensor<8x256x384xf32>, tensor<384xf32>
    %y1, %rstd1 = mt.rmsnorm %x, %w {eps = 1.0e-6 : f32, offset = 1.0 : f32} : tensor<8x256x384xf32>, tensor<384xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, Mt_FloatTensor:$gamma,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$eps, DefaultValuedAttr<F32Attr, "0.0">:$offset);
  let results = (outs Mt_FloatTensor:$result, Mt_F32Tensor:$rstd);
  let assemblyFormat = "$input `,` $gamma attr-dict `:` type($input) `,` type($gamma)";
}

def Mt_RmsNormGradOp : Mt_KernelOp<"rmsnorm_grad", [DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "fused backward of mt.rmsnorm: (dx, dgamma), its offset the forward's";
  let arguments = (ins Mt_FloatTensor:$dout, Mt_FloatTensor:$input, Mt_FloatTensor:$gamma, Mt_F32Tensor:$rstd,
                       DefaultValuedAttr<F32Attr, "0.0">:$offset);
  let results = (outs Mt_FloatTensor:$dinput, Mt_F32Tensor:$dgamma);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_GeluOp : Mt_KernelOp<"gelu", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "GELU, exact (erf) or with the tanh approximation";
  let description = [{
    ```mlir
    %y = mt.gelu %x {tanh = true} : tensor<8x256x1536xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, DefaultValuedAttr<BoolAttr, "false">:$tanh);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Mt_GeluGradOp : Mt_KernelOp<"gelu_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.gelu";
  let arguments = (ins Mt_FloatTensor:$dout, Mt_FloatTensor:$input, DefaultValuedAttr<BoolAttr, "false">:$tanh);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$dout `,` $input attr-dict `:` type($dout) `,` type($input)";
}

def Mt_SiluOp : Mt_KernelOp<"silu", [KernelOpInterface, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "SiLU: x * sigmoid(x)";
  let description = [{
    ```mlir
    %y = mt.silu %x : tensor<8x256x1024xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Mt_SiluGradOp : Mt_KernelOp<"silu_grad", [KernelOpInterface]> {
  let summary = "backward of mt.silu";
  let arguments = (ins Mt_FloatTensor:$dout, Mt_FloatTensor:$input);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$dout `,` $input attr-dict `:` type($dout) `,` type($input)";
}

def Mt_SwigluOp : Mt_KernelOp<"swiglu", [KernelOpInterface, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "SwiGLU gate: silu(gate) * up";
  let description = [{
    ```mlir
    %h = mt.swiglu %gate, %up : tensor<8x256x1024xf32>, tensor<8x256x1024xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$gate, Mt_FloatTensor:$up);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($gate) `,` type($up)";
}

def Mt_SwigluGradOp : Mt_KernelOp<"swiglu_grad", [KernelOpInterface]> {
  let summary = "backward of mt.swiglu: (dgate, dup)";
  let arguments = (ins Mt_FloatTensor:$dout, Mt_FloatTensor:$gate, Mt_FloatTensor:$up);
  let results = (outs Mt_FloatTensor:$dgate, Mt_FloatTensor:$dup);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_SoftcapOp : Mt_KernelOp<"softcap", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "softcapping: cap * tanh(x / cap) (Gemma 2's final logits)";
  let description = [{
    Bounds each element to (-cap, cap), nearly the identity near 0: Gemma 2 caps its LM head's
    logits at 30 before the loss (transformers' `final_logit_softcapping`). Its gradient reads the
    capped output, not the input.

    ```mlir
    %capped = mt.softcap %logits {cap = 30.0 : f32} : tensor<8x256x32000xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, F32Attr:$cap);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Mt_SoftcapGradOp : Mt_KernelOp<"softcap_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.softcap from its output: dy * (1 - (y / cap)^2)";
  let arguments = (ins Mt_FloatTensor:$dout, Mt_FloatTensor:$capped, F32Attr:$cap);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$dout `,` $capped attr-dict `:` type($dout) `,` type($capped)";
}

def Mt_ClampedSwigluOp : Mt_KernelOp<"clamped_swiglu", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "gpt-oss's clamped SwiGLU over interleaved gate/up columns";
  let description = [{
    `gate_up` (..., 2F) holds gate_j at column 2j and up_j at 2j + 1 (Hugging Face's
    gate_up[..., ::2] and [..., 1::2]). Result (..., F): (clamp(up, -limit, limit) + 1) *
    g * sigmoid(alpha * g) with g = min(gate, limit). As torch's clamp, a value beyond a bound
    takes no gradient.

    ```mlir
    %h = mt.clamped_swiglu %gu {alpha = 1.702 : f32, limit = 7.0 : f32} : tensor<4096x2048xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$gate_up, F32Attr:$alpha, F32Attr:$limit);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$gate_up attr-dict `:` type($gate_up)";
}

def Mt_ClampedSwigluGradOp : Mt_KernelOp<"clamped_swiglu_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.clamped_swiglu: dgate_up (..., 2F), interleaved as gate_up";
  let arguments = (ins Mt_FloatTensor:$dout, Mt_FloatTensor:$gate_up, F32Attr:$alpha, F32Attr:$limit);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_RopeOp : Mt_KernelOp<"rope", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "rotary position embedding on (B, T, H*D), rotate-half convention";
  let description = [{
    `inverse` turns by the negated angle; the gradient of a rope is the inverse rope. Token t
    sits at position `position_offset` + t (a token tile of mt-tile-tokens that starts inside
    its sequence). `scaling_kind` (kernels/rope/rope.h: RopeScalingKind; 0 none, 1 linear, 2
    llama3, 3 yarn, 4 longrope) scales the frequencies as Hugging Face's rope_scaling does, with
    `scaling` = [factor, a, b, c, attention] (cos and sin times attention), LongRoPE's factor of
    each pair after them. `rotary_dim` (0: head_dim) turns the first rotary_dim elements of each
    head alone, the rest passing unchanged (Hugging Face's partial_rotary_factor: Phi-4-mini's 3/4).

    ```mlir
    %q2 = mt.rope %q {head_dim = 64, theta = 10000.0 : f32} : tensor<8x256x384xf32>
    %q3 = mt.rope %q {head_dim = 64, theta = 500000.0 : f32, scaling_kind = 2,
                      scaling = array<f32: 8.0, 1.0, 4.0, 8192.0, 1.0>} : tensor<8x256x384xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, I64Attr:$head_dim,
                       DefaultValuedAttr<F32Attr, "10000.0">:$theta,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse,
                       DefaultValuedAttr<I64Attr, "0">:$position_offset,
                       DefaultValuedAttr<I64Attr, "0">:$scaling_kind,
                       OptionalAttr<DenseF32ArrayAttr>:$scaling,
                       DefaultValuedAttr<I64Attr, "0">:$rotary_dim);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Attention and loss
//===----------------------------------------------------------------------===//

def Mt_AttentionOp : Mt_KernelOp<"attention", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs", "getKernelName"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "fused causal self-attention with grouped-query heads";
  let description = [{
    q is (B, T, H*D), k and v (B, T, Hkv*D); H is a multiple of Hkv. Returns the output
    (B, T, H*D) and each row's log-sum-exp (B, H, T) for the backward pass. A `window` W > 0
    lets query i see keys i - W < j <= i (sliding-window attention, as transformers masks it);
    `sinks` (H), where given, are a learned logit per query head in each row's softmax
    denominator, unscaled, with no value (gpt-oss's attention sinks; the kernel
    mt.attention_sinks). `positions` (B, T) i32, where given, is each token's position in its
    example (mtc --packed-examples): query i sees only keys j >= i - positions[i], so the
    examples packed in a row never see each other (the kernels mt.attention_packed(_sinks)).
    A `softcap` c > 0 caps each scaled score s at c * tanh(s / c) before the softmax (Gemma 2's
    attention logit softcapping; the sinks are not capped).

    ```mlir
    %o, %lse = mt.attention %q, %k, %v {num_heads = 6, num_kv_heads = 2}
        : tensor<8x256x384xf32>, tensor<8x256x128xf32>, tensor<8x256x128xf32>
    %o2, %lse2 = mt.attention %q, %k, %v sinks %s : tensor<6xf32> {num_heads = 6, num_kv_heads = 2, window = 128}
        : tensor<8x256x384xf32>, tensor<8x256x128xf32>, tensor<8x256x128xf32>
    %o3, %lse3 = mt.attention %q, %k, %v positions %p : tensor<8x256xi32> {num_heads = 6, num_kv_heads = 2}
        : tensor<8x256x384xf32>, tensor<8x256x128xf32>, tensor<8x256x128xf32>
    %o4, %lse4 = mt.attention %q, %k, %v {num_heads = 6, num_kv_heads = 2, softcap = 50.0 : f32}
        : tensor<8x256x384xf32>, tensor<8x256x128xf32>, tensor<8x256x128xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$q, Mt_FloatTensor:$k, Mt_FloatTensor:$v, Optional<Mt_F32Tensor>:$sinks,
                       Optional<Mt_I32Tensor>:$positions,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads, DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F32Attr, "0.0f">:$softcap);
  let results = (outs Mt_FloatTensor:$result, Mt_F32Tensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`sinks` $sinks^ `:` type($sinks))? (`positions` $positions^ `:` type($positions))? attr-dict
    `:` type($q) `,` type($k) `,` type($v)
  }];
}

def Mt_AttentionGradOp : Mt_KernelOp<"attention_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs", "getKernelName"]>]> {
  let summary = "fused backward of mt.attention: (dq, dk, dv)";
  let description = [{
    The same for an attention with sinks: its lse counts them. With the forward's `positions`
    (packed examples) last: the kernel mt.attention_packed_grad.
  }];
  let arguments = (ins Mt_FloatTensor:$dout, Mt_FloatTensor:$q, Mt_FloatTensor:$k, Mt_FloatTensor:$v,
                       Mt_FloatTensor:$out, Mt_F32Tensor:$lse, Optional<Mt_I32Tensor>:$positions,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads, DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F32Attr, "0.0f">:$softcap);
  let results = (outs Mt_FloatTensor:$dq, Mt_FloatTensor:$dk, Mt_FloatTensor:$dv);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_AttentionSinksGradOp : Mt_KernelOp<"attention_sinks_grad", [KernelOpInterface]> {
  let summary = "the gradient of mt.attention's sinks (H)";
  let description = [{
    dsink_h = -sum over (b, t) of exp(sink_h - lse[b, h, t]) * (dout . out)[b, t, h]: a sink
    takes probability from every key of its row in proportion.

    ```mlir
    %ds = mt.attention_sinks_grad %dout, %out, %lse, %s
        : tensor<8x256x384xf32>, tensor<8x256x384xf32>, tensor<8x6x256xf32>, tensor<6xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$dout, Mt_FloatTensor:$out, Mt_F32Tensor:$lse, Mt_F32Tensor:$sinks);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_RopeAtOp : Mt_KernelOp<"rope_at", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "mt.rope at given positions: token (b, t) turns by positions[b, t], not t";
  let description = [{
    The decode plan's rotary embedding (mtc --kv-cache): the new tokens sit after a cached
    prefix, their positions a run-time input; a plan of packed examples' (mtc
    --packed-examples): each token at its position in its example. The same angles as `mt.rope`
    at the same position, bit for bit (its frequency scaling and rotary_dim too); `inverse` turns
    back (the gradient).

    ```mlir
    %k2 = mt.rope_at %k, %positions {head_dim = 64, theta = 10000.0 : f32}
        : tensor<1x1x128xf32>, tensor<1x1xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$input, Mt_I32Tensor:$positions, I64Attr:$head_dim,
                       DefaultValuedAttr<F32Attr, "10000.0">:$theta,
                       DefaultValuedAttr<I64Attr, "0">:$scaling_kind,
                       OptionalAttr<DenseF32ArrayAttr>:$scaling,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse,
                       DefaultValuedAttr<I64Attr, "0">:$rotary_dim);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` type($input) `,` type($positions)";
}

def Mt_CachedAttentionOp : Mt_KernelOp<"cached_attention", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs", "getKernelName"]>]> {
  let summary = "causal attention of new tokens over a key/value cache and themselves";
  let description = [{
    q (B, T, H*D), k and v (B, T, Hkv*D): T new tokens of each sequence; k_cache and v_cache
    (B, S, Hkv*D): the keys and values of earlier tokens; positions (B, T): the new tokens'
    positions, consecutive from p0 = positions[b, 0]. New token t of sequence b attends to
    cache rows [0, p0) and new tokens [0, t], softmax scale 1/sqrt(D) (as `mt.attention`,
    whose row p0 + t it reproduces). A p0 outside [0, S - T] is clamped into it (the caller
    keeps p0 + T <= S). `window`, `softcap` and `sinks` as `mt.attention`'s (the kernel with sinks:
    mt.cached_attention_sinks). Forward only (no gradient).

    ```mlir
    %o = mt.cached_attention %q, %k, %v, %kc, %vc, %pos {num_heads = 4, num_kv_heads = 2}
        : tensor<1x1x64xf32>, tensor<1x1x32xf32>, tensor<1x1x32xf32>, tensor<1x64x32xf32>,
          tensor<1x64x32xf32>, tensor<1x1xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$q, Mt_FloatTensor:$k, Mt_FloatTensor:$v, Mt_FloatTensor:$k_cache,
                       Mt_FloatTensor:$v_cache, Mt_I32Tensor:$positions, Optional<Mt_F32Tensor>:$sinks,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads, DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F32Attr, "0.0f">:$softcap);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_SoftmaxXentOp : Mt_KernelOp<"softmax_xent", [KernelOpInterface,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "mean softmax cross-entropy of logits (..., V) against integer targets";
  let description = [{
    Targets outside [0, V) are ignored (not counted in the mean). Also returns each row's
    log-sum-exp for the backward pass.

    ```mlir
    %loss, %lse = mt.softmax_xent %logits, %targets : tensor<8x256x256xf32>, tensor<8x256xi32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$logits, Mt_I32Tensor:$targets);
  let results = (outs Mt_F32Tensor:$loss, Mt_F32Tensor:$lse);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` type($logits) `,` type($targets)";
}

def Mt_SoftmaxXentGradOp : Mt_KernelOp<"softmax_xent_grad", [KernelOpInterface]> {
  let summary = "backward of mt.softmax_xent: dlogits";
  let arguments = (ins Mt_F32Tensor:$dloss, Mt_FloatTensor:$logits, Mt_I32Tensor:$targets, Mt_F32Tensor:$lse);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_XentChunkOp : Mt_KernelOp<"xent_chunk", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "folds one vocabulary chunk's logits into a running cross-entropy";
  let description = [{
    The loss of `mt.softmax_xent` over a vocabulary split into chunks of rows of the LM head
    (made by mt-split-vocab, after autodiff: no gradient rule). `logits` hold vocabulary ids
    [first, first + Vc); `running` (..., 2) holds each row's log-sum-exp over the chunks so far
    and the target's logit once its chunk was seen (start: `mt.fill` of -inf).

    ```mlir
    %r1 = mt.xent_chunk %logits1, %targets, %r0 {first = 128} : tensor<8x64x128xf32>, tensor<8x64xi32>, tensor<8x64x2xf32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$logits, Mt_I32Tensor:$targets, Mt_F32Tensor:$running, I64Attr:$first);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$logits `,` $targets `,` $running attr-dict `:` type($logits) `,` type($targets) `,` type($running)";
}

def Mt_XentFinishOp : Mt_KernelOp<"xent_finish", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "mean cross-entropy from the running state of every vocabulary chunk";
  let description = [{
    What `mt.softmax_xent` returns, (loss, lse), once `mt.xent_chunk` has seen every chunk of
    a vocabulary of `vocab` ids; targets outside [0, vocab) are ignored.

    ```mlir
    %loss, %lse = mt.xent_finish %r2, %targets {vocab = 256} : tensor<8x64x2xf32>, tensor<8x64xi32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$running, Mt_I32Tensor:$targets, I64Attr:$vocab);
  let results = (outs Mt_F32Tensor:$loss, Mt_F32Tensor:$lse);
  let assemblyFormat = "$running `,` $targets attr-dict `:` type($running) `,` type($targets)";
}

def Mt_XentChunkGradOp : Mt_KernelOp<"xent_chunk_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "dlogits of one vocabulary chunk (mt.softmax_xent_grad's columns [first, first + Vc))";
  let description = [{
    ```mlir
    %dl1 = mt.xent_chunk_grad %dloss, %logits1, %targets, %lse {first = 128, vocab = 256} : tensor<f32>, tensor<8x64x128xf32>, tensor<8x64xi32>, tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$dloss, Mt_FloatTensor:$logits, Mt_I32Tensor:$targets, Mt_F32Tensor:$lse,
                       I64Attr:$first, I64Attr:$vocab);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

def Mt_CountTargetsOp : Mt_KernelOp<"count_targets", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "how many targets lie in [0, vocab): what the mean cross-entropy divides by";
  let description = [{
    Made by mt-tile-tokens for the LM head's loss over token tiles: each tile's `mt.xent_tile`
    divides by the whole batch's count.

    ```mlir
    %count = mt.count_targets %targets {vocab = 256} : tensor<8x64xi32>
    ```
  }];
  let arguments = (ins Mt_I32Tensor:$targets, I64Attr:$vocab);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$targets attr-dict `:` type($targets)";
}

def Mt_XentTileOp : Mt_KernelOp<"xent_tile", [KernelOpInterface,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "a token tile's share of the mean softmax cross-entropy";
  let description = [{
    The sum over the tile's rows with a target in [0, V) of log-sum-exp minus the target's logit,
    divided by `count` (the whole batch's counted targets, `mt.count_targets`; 0 when it is 0):
    the tiles' shares add up to `mt.softmax_xent`'s loss. Also returns each row's log-sum-exp.
    Made by mt-tile-tokens.

    ```mlir
    %part, %lse = mt.xent_tile %logits0, %targets0, %count : tensor<1x32x256xf32>, tensor<1x32xi32>, tensor<f32>
    ```
  }];
  let arguments = (ins Mt_FloatTensor:$logits, Mt_I32Tensor:$targets, Mt_F32Tensor:$count);
  let results = (outs Mt_F32Tensor:$loss, Mt_F32Tensor:$lse);
  let assemblyFormat = "$logits `,` $targets `,` $count attr-dict `:` type($logits) `,` type($targets) `,` type($count)";
}

def Mt_XentTileGradOp : Mt_KernelOp<"xent_tile_grad", [KernelOpInterface]> {
  let summary = "backward of mt.xent_tile: dlogits of the tile, over the whole batch's count";
  let arguments = (ins Mt_F32Tensor:$dloss, Mt_FloatTensor:$logits, Mt_I32Tensor:$targets, Mt_F32Tensor:$lse,
                       Mt_F32Tensor:$count);
  let results = (outs Mt_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
}

//===----------------------------------------------------------------------===//
// Generic ops: what imported graphs lower to where no fused op applies
//===----------------------------------------------------------------------===//

def Mt_UnaryOp : Mt_KernelOp<"unary", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "elementwise function: neg, exp, log, sqrt, reciprocal, tanh, erf, sigmoid, relu, abs";
  let description = [{
    ```mlir
    %y = mt.unary %x {fn = "erf"} : tensor<8x256x1536xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$input, StrAttr:$fn);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Mt_UnaryGradOp : Mt_KernelOp<"unary_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.unary: dy * fn'(x)";
  let arguments = (ins Mt_F32Tensor:$dout, Mt_F32Tensor:$input, StrAttr:$fn);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$dout `,` $input attr-dict `:` type($dout) `,` type($input)";
}

def Mt_ClampOp : Mt_KernelOp<"clamp", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "elementwise clamp between two constant bounds (ONNX Clip, torch.clamp)";
  let description = [{
    `min(max(x, min), max)`: all `max` where `min > max`, NaN kept; a bound of -inf or +inf is
    none. Its gradient passes where `min <= x <= max` (bounds included, as torch's).

    ```mlir
    %y = mt.clamp %x {max = 6.000000e+00 : f32, min = 0.000000e+00 : f32} : tensor<8x256x1536xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$input, F32Attr:$min, F32Attr:$max);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Mt_ClampGradOp : Mt_KernelOp<"clamp_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.clamp: dy where min <= x <= max, else 0";
  let arguments = (ins Mt_F32Tensor:$dout, Mt_F32Tensor:$input, F32Attr:$min, F32Attr:$max);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$dout `,` $input attr-dict `:` type($dout) `,` type($input)";
}

def Mt_BinaryOp : Mt_KernelOp<"binary", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "elementwise add, sub, mul, div, pow, max or min with numpy broadcasting";
  let description = [{
    ```mlir
    %y = mt.binary %x, %s {fn = "pow"} : tensor<8x256x384xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$lhs, Mt_F32Tensor:$rhs, StrAttr:$fn);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Mt_BinaryGradOp : Mt_KernelOp<"binary_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.binary: (dlhs, drhs), both in the broadcast shape";
  let arguments = (ins Mt_F32Tensor:$dout, Mt_F32Tensor:$lhs, Mt_F32Tensor:$rhs, StrAttr:$fn);
  let results = (outs Mt_F32Tensor:$dlhs, Mt_F32Tensor:$drhs);
  let assemblyFormat = "$dout `,` $lhs `,` $rhs attr-dict `:` type($dout) `,` type($lhs) `,` type($rhs)";
}

def Mt_WhereOp : Mt_KernelOp<"where", [KernelOpInterface,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "select: cond != 0 ? lhs : rhs, with numpy broadcasting";
  let description = [{
    The branches are both f32 or both i32; the condition is i32 (ONNX bool imports as i32).

    ```mlir
    %y = mt.where %mask, %scores, %neg_inf : tensor<256x256xi32>, tensor<8x6x256x256xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Mt_I32Tensor:$cond, AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($lhs) `,` type($rhs)";
}

def Mt_BroadcastOp : Mt_Op<"broadcast", [Pure, KernelOpInterface,
    DeclareOpInterfaceMethods<CostOpInterface>, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "the input broadcast (numpy rules) to the result's shape";
  let description = [{
    ```mlir
    %y = mt.broadcast %b : tensor<1x384xf32> -> tensor<8x256x384xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mt_CastOp : Mt_Op<"cast", [Pure, KernelOpInterface, DeclareOpInterfaceMethods<CostOpInterface>]> {
  let summary = "element type conversion between f32 and i32 (toward zero, saturating)";
  let description = [{
    ```mlir
    %f = mt.cast %ids : tensor<8x256xi32> -> tensor<8x256xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mt_WidenOp : Mt_Op<"widen", [Pure, KernelOpInterface, DeclareOpInterfaceMethods<CostOpInterface>]> {
  let summary = "exact bf16 -> f32 widening of a weight streamed as its bf16 staging copy";
  let description = [{
    Made by `mt-stage-bf16`: the weight crosses the link as the host's bf16 copy of its fp32
    master (half the bytes) and is widened on the device before its first use. In a bf16 plan
    (`mt-mixed-precision`) also a bf16 activation read by an f32-only op, or a bf16 gradient
    copied to the host's f32.

    ```mlir
    %w_bf16 = mt.h2d %w_staging : tensor<384x384xbf16>
    %w = mt.widen %w_bf16 : tensor<384x384xbf16> -> tensor<384x384xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mt_NarrowOp : Mt_Op<"narrow", [Pure, KernelOpInterface, DeclareOpInterfaceMethods<CostOpInterface>]> {
  let summary = "f32 -> bf16 rounding to nearest even";
  let description = [{
    Made by `mt-mixed-precision` where an f32 value enters a bf16 plan's activations (the
    tokens' rows the host looked up, an f32-only op's result).

    ```mlir
    %x = mt.narrow %rows : tensor<8x256x384xf32> -> tensor<8x256x384xbf16>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$input);
  let results = (outs RankedTensorOf<[BF16]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mt_SoftmaxOp : Mt_KernelOp<"softmax", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "softmax (or log-softmax) along one axis";
  let description = [{
    ```mlir
    %p = mt.softmax %scores {axis = 3, log = false} : tensor<8x6x256x256xf32>
    ```
  }];
  let arguments = (ins Mt_F32Tensor:$input, I64Attr:$axis, DefaultValuedAttr<BoolAttr, "false">:$log);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Mt_SoftmaxGradOp : Mt_KernelOp<"softmax_grad", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>]> {
  let summary = "backward of mt.softmax from dy and the forward result";
  let arguments = (ins Mt_F32Tensor:$dout, Mt_F32Tensor:$output, I64Attr:$axis,
                       DefaultValuedAttr<BoolAttr, "false">:$log);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$dout `,` $output attr-dict `:` type($dout) `,` type($output)";
}

def Mt_GatherOp : Mt_KernelOp<"gather", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "take entries along `axis` at integer indices (ONNX Gather)";
  let description = [{
    The result has data's shape with dimension `axis` replaced by the indices' shape.
    Negative indices count from the end; out-of-range indices give zeros.

    ```mlir
    %y = mt.gather %x, %idx {axis = 1} : tensor<4x10x8xf32>, tensor<3xi32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$data, Mt_I32Tensor:$indices, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$data `,` $indices attr-dict `:` type($data) `,` type($indices)";
}

def Mt_GatherGradOp : Mt_Op<"gather_grad", [Pure,
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<CostOpInterface>]> {
  let summary = "backward of mt.gather: scatter-add of dy into zeros of the data's shape";
  let arguments = (ins Mt_I32Tensor:$indices, Mt_F32Tensor:$dout, I64Attr:$axis);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$indices `,` $dout attr-dict `:` type($indices) `,` type($dout) `->` type($result)";
  let hasVerifier = 1;
}

def Mt_ConcatOp : Mt_KernelOp<"concat", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "two tensors joined along `axis`";
  let description = [{
    ```mlir
    %y = mt.concat %a, %b {axis = 2} : tensor<8x256x32xf32>, tensor<8x256x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Mt_SliceOp : Mt_Op<"slice", [Pure,
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<CostOpInterface>, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "strided slice: result[i] = input[start + i * step] per dimension";
  let description = [{
    The result type gives the slice's size per dimension; steps are non-zero (negative
    walks backwards) and every element read lies inside the input.

    ```mlir
    %q = mt.slice %qkv {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>}
        : tensor<8x256x1152xf32> -> tensor<8x256x384xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$steps);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mt_SliceGradOp : Mt_Op<"slice_grad", [Pure,
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<CostOpInterface>]> {
  let summary = "backward of mt.slice: dy placed where the slice read, zeros elsewhere";
  let arguments = (ins Mt_F32Tensor:$dout, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$steps);
  let results = (outs Mt_F32Tensor:$result);
  let assemblyFormat = "$dout attr-dict `:` type($dout) `->` type($result)";
  let hasVerifier = 1;
}

def Mt_TriluOp : Mt_KernelOp<"trilu", [
    DeclareOpInterfaceMethods<KernelOpInterface, ["getKernelAttrs"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "lower (or upper) triangle of the last two dims, diagonal offset k; zeros elsewhere";
  let description = [{
    ```mlir
    %m = mt.trilu %x {upper = false, k = 0} : tensor<256x256xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, BoolAttr:$upper, I64Attr:$k);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Memory-centric ops (inserted by the scheduling passes)
//===----------------------------------------------------------------------===//

def Mt_H2DOp : Mt_Op<"h2d", [AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<CostOpInterface>]> {
  let summary = "copy of a host tensor into a device buffer";
  let description = [{
    ```mlir
    %w_dev = mt.h2d %w : tensor<384x384xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Mt_D2HOp : Mt_Op<"d2h", [AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<CostOpInterface>]> {
  let summary = "copy of a device buffer into a host tensor (gradient landing, loss)";
  let description = [{
    ```mlir
    %dw_host = mt.d2h %dw : tensor<384x384xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

// What a host task does; the emitter maps it to the plan's HostTask.Kind (adamw_on_arrival to
// NORM_AND_ADAMW_ON_ARRIVAL: it takes its gradient's norm share itself).
def Mt_HostTaskKind : I32EnumAttr<"HostTaskKind", "what an mt.host_task does", [
    I32EnumAttrCase<"GradNorm", 0, "grad_norm">,
    I32EnumAttrCase<"Adamw", 1, "adamw">,
    I32EnumAttrCase<"AdamwPrevious", 2, "adamw_previous">,
    I32EnumAttrCase<"AdamwOnArrival", 3, "adamw_on_arrival">,
    I32EnumAttrCase<"EmbeddingLookup", 4, "embedding_lookup">,
    I32EnumAttrCase<"EmbeddingGrad", 5, "embedding_grad">]> {
  let cppNamespace = "::mt";
}

def Mt_HostTaskOp : Mt_Op<"host_task"> {
  let summary = "optimizer and token-embedding work on the host";
  let description = [{
    `grad_norm` sums the squares of host gradients into the step's global norm; `adamw`
    updates the listed parameters (function arguments) in place from their gradients. An
    adamw task follows the grad_norm task of its step (exact global-norm clipping).
    `adamw_previous` is the deferred form the schedules emit: the update of the previous
    step (its gradients, its norm), placed before the parameter's first copy to the device,
    so the host updates later parameters while earlier ones already stream in and compute.
    It precedes every grad_norm task of the step. `adamw_on_arrival` takes its gradient's norm
    share and updates the parameter in one pass as soon as the gradient has landed (no
    grad_norm task takes that gradient), without global-norm clipping: the gradient's host bytes
    are then reused, so no per-parameter gradient is kept.

    The token embedding on the host (mt-host-embedding): `embedding_lookup(%x, %tokens,
    %table)` fills the host tensor %x (the argument the device reads the step's embedded tokens
    from) with the table's rows of the tokens; `embedding_grad(%table, %tokens, %dx)`
    scatter-adds the copied-out rows %dx into the table's gradient by token, onto what landed
    there before when `mt.accumulate` is set (a tied LM head's gradient), else from zeros; the
    tokens whose id is `mt.padding_id` (where set: mt.embedding_grad's `padding_id`) add nothing.
    %table is the parameter or one of its row pieces (the task reads the whole tensor).

    ```mlir
    mt.host_task embedding_lookup(%x, %tokens, %wte) : tensor<8x256x384xf32>, tensor<8x256xi32>, tensor<256x384xf32>
    mt.host_task adamw_previous(%w0) : tensor<384xf32>
    mt.host_task grad_norm(%g0, %g1) : tensor<384xf32>, tensor<384x384xf32>
    mt.host_task adamw(%w0, %w1) : tensor<384xf32>, tensor<384x384xf32>
    mt.host_task adamw_on_arrival(%w1) : tensor<384x384xf32>
    ```
  }];
  let arguments = (ins Mt_HostTaskKind:$kind, Variadic<AnyRankedTensor>:$tensors);
  let assemblyFormat = "$kind `(` $tensors `)` attr-dict `:` type($tensors)";
  let hasVerifier = 1;
}

include "MtMoeOps.td"
include "MtPreferenceOps.td"

#endif // MT_OPS_TD
