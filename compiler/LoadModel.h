// The load phase of mtc (compiler/Pipeline.cpp): the model a compile names, by its kind (an ONNX
// file, a Hugging Face folder, mt IR, a built-in preset), read into mt IR with what trains marked
// and, where the model comes from a config, the update kind and the batch chosen.
#pragma once
#include <optional>
#include <string>

#include "compiler/BatchSearch.h"
#include "compiler/CompileOptions.h"
#include "compiler/HardwareProfile.h"
#include "compiler/HuggingFace.h"
#include "compiler/TrainableParams.h"
#include "compiler/onnx/OnnxImporter.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "models/BuiltinModels.h"

namespace mt {

// What loading gives the rest of the pipeline: the module and what the summary says of it.
struct LoadedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string description;
  ModelConfig config;                  // built-in models and Hugging Face folders
  onnximport::ImportedModel imported;  // ONNX imports
  std::optional<HuggingFaceModel> hf;
  std::optional<UpdateKind> update;    // chosen with the batch where there is a config
  std::string update_note, batch_note;
  SearchHints searched;                // --batch auto: what the chosen batch's trial found
};

// When AdamW runs (--update): auto keeps the exact, deferred update unless its host bytes (16
// per trained parameter, 4 per frozen one) exceed --host-mem; then the on-arrival update (no
// gradients kept) is chosen and `note` says why.
UpdateKind chooseUpdate(const CompileOptions& o, ParamCount params, std::string& note);

// The model `o.model` names, loaded into `m`: false after printing the error.
bool loadModel(mlir::MLIRContext& context, llvm::SourceMgr& sources, const CompileOptions& o,
               const HardwareProfile& hw, LoadedModel& m);

// --forward-only: the model function's one result, its logits, becomes the output "logits" (an
// ONNX evaluation import and a .mlir function with outputs are forward-only already).
bool markForwardOnly(mlir::ModuleOp module, const std::string& model);

}  // namespace mt
