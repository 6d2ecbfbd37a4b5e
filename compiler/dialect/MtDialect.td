#ifndef MT_DIALECT_TD
#define MT_DIALECT_TD

include "mlir/IR/OpBase.td"

def Mt_Dialect : Dialect {
  let name = "mt";
  let cppNamespace = "::mt";
  // Inherent attributes live in the attribute dictionary: shape inference then sees them
  // while an op is being parsed (MLIR 19 fills properties only after inference).
  let usePropertiesForAttributes = 0;
  let summary = "MegaTrain's tensor-level training IR";
  let description = [{
    One dialect for the whole pipeline: neural-network ops with static shapes, their fused
    backward ops (`*_grad`), and the memory-centric ops the passes insert (`mt.h2d`,
    `mt.d2h`, `mt.host_task`). Parameters are function arguments carrying an `mt.param`
    dictionary (name, initializer); weights never enter the IR.
  }];
}

class Mt_Op<string mnemonic, list<Trait> traits = []> : Op<Mt_Dialect, mnemonic, traits>;

def Mt_F32Tensor : RankedTensorOf<[F32]>;
// An activation: f32, or bf16 in a bf16 plan (mt-mixed-precision). An op's activations share
// one type; its statistics (Mt_F32Tensor) stay f32. runtime/plan/op_table.def says the same per
// kernel (the precision column).
def Mt_FloatTensor : RankedTensorOf<[F32, BF16]>;
def Mt_I32Tensor : RankedTensorOf<[I32]>;

#endif // MT_DIALECT_TD
