#ifndef MT_INTERFACES_TD
#define MT_INTERFACES_TD

include "mlir/IR/OpBase.td"

def GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mt";
  let description = [{
    The op's gradient rule (vector-Jacobian product): given the gradients of its results
    (a null Value for a result nothing depends on), build `mt` ops at the builder's insertion
    point and return one gradient per operand (null for operands that take none, e.g. token
    ids).
  }];
  let methods = [
    InterfaceMethod<"Builds the gradients of the operands.",
      "::llvm::SmallVector<::mlir::Value>", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ArrayRef<::mlir::Value>":$resultGrads)>,
  ];
}

def CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mt";
  let description = [{
    What the op costs: floating-point operations and bytes of memory traffic, from its
    static shapes. The cost model turns these into predicted times per hardware profile.
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations (a multiply-add counts 2).", "int64_t", "getFlops">,
    InterfaceMethod<"Bytes read and written (operands + results by default).",
      "int64_t", "getBytesAccessed", (ins), [{}], [{
        return ::mt::defaultBytesAccessed($_op);
      }]>,
  ];
}

def KernelOpInterface : OpInterface<"KernelOpInterface"> {
  let cppNamespace = "::mt";
  let description = [{
    Marks an op that lowers to one kernel of the op table (runtime/plan/op_table.def, found by
    getKernelName) and gives the kernel's positional attributes in the table's order.
  }];
  let methods = [
    InterfaceMethod<"Appends the kernel's int and float attributes.", "void", "getKernelAttrs",
      (ins "::llvm::SmallVectorImpl<int64_t> &":$ints, "::llvm::SmallVectorImpl<float> &":$floats),
      [{}], [{ (void)ints; (void)floats; }]>,
    InterfaceMethod<[{The op table row's name: the op's own, but where an op's optional operand
      selects another row of the table (mt.attention with sinks: mt.attention_sinks).}],
      "::llvm::StringRef", "getKernelName", (ins), [{}],
      [{ return $_op->getName().getStringRef(); }]>,
  ];
}

#endif // MT_INTERFACES_TD
