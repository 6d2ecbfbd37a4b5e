// mt-opt: mlir-opt for the mt dialect and passes (golden IR tests run through it).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

int main(int argc, char** argv) {
  mt::registerMtPasses();
  mlir::DialectRegistry registry;
  registry.insert<mt::MtDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "mt optimizer driver\n", registry));
}
