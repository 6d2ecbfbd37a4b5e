// Trained weights back into the ONNX model they were imported from (mtonnx): each initializer
// the plan trained replaced by its tensor from a safetensors file (mtrun --export, a
// checkpoint), matched through the ONNX names mtc recorded (HostTensor.origin, kept in the
// weights' metadata): transposed ones transposed back, and parameters an exporter had made
// Identity copies of a shared initializer made initializers of their own. Inline, or as
// external data beside the output when asked, when the model has some, or past protobuf's 2 GB.
#pragma once
#include <cstdint>
#include <string>

namespace mt::onnximport {

struct WriteBack {
  int updated = 0;      // initializers written from the weights
  int split_off = 0;    // of them, new: Identity copies of a shared initializer made initializers
  size_t model_bytes = 0;
  std::string external_location;  // the data file beside the output ("" when inline)
  int64_t external_bytes = 0;
};

// Writes `output` (and OUTPUT.data with external data): `model_path` with the tensors of
// `weights_path`. Throws mt::Error naming what does not match; nothing is written then.
WriteBack writeTrainedWeights(const std::string& model_path, const std::string& weights_path,
                              const std::string& output, bool external_data);

}  // namespace mt::onnximport
