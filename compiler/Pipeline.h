// The compiler driver behind mtc: model -> mt IR -> passes -> plan (+ initial weights).
#pragma once
#include <cstdint>
#include <optional>
#include <regex>
#include <string>

#include "models/ModelConfig.h"

namespace mt {

// The dtype the device computes in (mtc --precision): fp32 everywhere, or a bf16 plan (bf16
// weights and activations, f32 statistics, accumulation and gradients: mt-mixed-precision).
enum class ComputePrecision { kFp32, kBf16 };
// What the weights cross the link as (mtc --stream-dtype): the fp32 master, or its bf16 copy
// (mt-stage-bf16; the master then held split, no host bytes added). A bf16 plan streams bf16.
enum class StreamDtype { kF32, kBf16 };
// The schedules the compiler can emit, from the most device memory to the least (mtc
// --schedule; unset: the first that fits the budget).
enum class Schedule { kResident, kStreamed, kStreamedRecompute };
// When AdamW runs (mtc --update; unset: deferred unless only on-arrival fits --host-mem): one
// step late, overlapped with the next forward (exact global-norm clipping; 16 host bytes per
// parameter), or as each gradient lands (no clipping, ~12 bytes; streamed schedules only).
enum class UpdateKind { kDeferred, kOnArrival };
// Kept activations on the host between the forward and the backward (mtc --offload-activations):
// when nothing else fits the budget, always (streamed schedules), never.
enum class Offload { kAuto, kOn, kOff };
// Where the tokens are looked up in their embedding table (mtc --embedding): on the host when
// the vocabulary is split and the table is the tied LM head's, on the device, on the host.
enum class EmbeddingPlace { kAuto, kDevice, kHost };

// Their names on the command line, in the summary and in the passes' options.
const char* scheduleName(Schedule schedule);
const char* updateName(UpdateKind update);

// The stages --emit can stop after, in pipeline order.
inline constexpr const char* kStages[] = {"input",     "fuse",           "attach-loss", "tile-tokens",
                                          "autodiff",  "partition",      "host-embedding", "split-vocab",
                                          "recompute", "schedule",       "memory"};

struct CompileOptions {
  std::string model;            // a preset name or a .mlir file
  ModelConfig overrides;        // non-zero fields replace the preset's
  std::optional<bool> tied;     // replaces the preset's tying when set
  int64_t batch = 8;             // 0: the largest that fits device_mem (built-in models)
  int64_t seq = 0;              // 0: the model's context length (presets)
  std::string emit;             // print the IR after this stage instead of writing a plan
  std::string output;           // plan path
  std::string weights;          // initial weights path; "" = beside the plan
  bool no_weights = false;
  uint64_t seed = 1;
  int64_t device_mem = 0;       // bytes; 0 = no budget
  int64_t host_mem = 0;         // bytes of host memory the training machine has; 0 = unchecked
  std::string hardware = "cpu";
  std::optional<Schedule> schedule;  // unset: the first that fits the budget
  std::optional<UpdateKind> update;  // unset: by host_mem
  int64_t vocab_chunks = 0;       // the LM head in this many vocabulary chunks; 0: only if the budget needs it
  int64_t token_tiles = 0;        // each layer block's token-wise work in this many tiles; 0: only if the budget needs it
  Offload offload = Offload::kAuto;
  EmbeddingPlace embedding = EmbeddingPlace::kAuto;
  StreamDtype stream_dtype = StreamDtype::kF32;
  ComputePrecision precision = ComputePrecision::kFp32;
  // A forward-only plan (tokens in, logits out; no loss, gradients or optimizer) for sampling
  // (mtgen) and evaluation: built-in models and Hugging Face folders return their logits as the
  // output "logits"; an ONNX model is imported as an evaluation (its graph outputs).
  bool forward_only = false;
  // With forward_only: a decode step over a key/value cache of `seq` positions (built-in models
  // and Hugging Face folders; models/BuiltinModels.h, ModelForm::kDecodeStep) for mtgen.
  bool kv_cache = false;
  // ONNX: initializers matching `frozen` stay constants; with `trainable`, only matching ones train.
  std::optional<std::regex> frozen, trainable;
};

// Runs the compiler; returns the process exit code (diagnostics on stderr).
int compile(const CompileOptions& options);

// A size as mtc's summary and errors print it: "12.3 MiB" below a GiB, "1.50 TiB" above.
std::string summaryBytes(double bytes);

// Parses "80GiB", "512MiB", "1.5TiB", "1000000" (bytes); returns -1 if malformed.
int64_t parseByteSize(const std::string& text);

}  // namespace mt
