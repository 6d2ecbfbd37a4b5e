// The passes of the mt pipeline, declared in Passes.td; each is exposed only as createXPass().
#pragma once

#include <memory>

#include "compiler/dialect/MtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "passes/PassEnums.h"

namespace mt {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

}  // namespace mt
