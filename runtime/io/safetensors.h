// safetensors (the format of the PyTorch / Hugging Face ecosystem): an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
// then the raw little-endian tensor bytes. Every file MegaTrain writes carries the CRC-32C of
// each tensor's bytes in its metadata ("crc32c.<name>": 8 hex digits; other readers ignore
// it), and the reader verifies it when a tensor is used: a bit flipped on disk or in a copy is
// an error naming the tensor, never trained on. Files without checksums (from elsewhere) load
// unverified.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/io/mapped_file.h"

namespace mt {

inline constexpr char kChecksumPrefix[] = "crc32c.";
// Metadata key prefix, in saved weights, of a parameter's ONNX origin (HostTensor.origin).
inline constexpr char kOnnxOriginKey[] = "onnx.";

struct SafetensorsEntry {
  std::string dtype;  // "F32", "I32", "BF16", ...
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  int64_t bytes = 0;
  std::optional<uint32_t> crc32c;  // the checksum the file carries, if any
};

// Whether `entry` holds `shape`'s values in a float type the Hugging Face readers widen to f32
// (F32, BF16 or F16): mtc's folder weights and --lora-from's adapters.
inline bool widensTo(const SafetensorsEntry& entry, const std::vector<int64_t>& shape) {
  return entry.shape == shape && (entry.dtype == "F32" || entry.dtype == "BF16" || entry.dtype == "F16");
}

// A safetensors file mapped read-only; every entry is checked to lie inside the file.
class SafetensorsFile {
 public:
  // Throws mt::Error for a missing, truncated or malformed file.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  // The metadata, less the checksums (which the entries hold).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The entry `name`, checked to be F32 of `shape` and against its checksum; throws mt::Error
  // naming the mismatch.
  const SafetensorsEntry& f32(const std::string& name, const std::vector<int64_t>& shape) const;
  // The same from the header alone (its bytes neither read nor checksummed): a file checked before
  // it is loaded.
  const SafetensorsEntry& f32Header(const std::string& name, const std::vector<int64_t>& shape) const;
  // Throws mt::Error if entry `name` does not match the checksum the file carries for it.
  void verify(const std::string& name) const;

 private:
  void checkLayout(const std::byte* data, int64_t data_size) const;
  std::string path_;
  MappedFile file_;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32" or "I32"
  std::vector<int64_t> shape;
  const void* data;
  int64_t bytes;
  // When `data` is null: writes the tensor's `bytes` into the buffer given, just before they
  // go to the file (tensors that do not all fit in memory at once are made one at a time).
  std::function<void(void*)> produce = nullptr;
};

// An F32 tensor's values: its `data`, or what its producer writes into `staged` (resized to fit;
// the pointer lasts until `staged` is next changed).
const float* f32Values(const SafetensorsTensor& t, std::vector<float>& staged);

// "256,64": a shape as the readers' messages print it.
std::string shapeText(const std::vector<int64_t>& shape);

// Writes atomically (temporary file, fsync, rename), tensor by tensor: it holds no copy of
// the tensors, only one produced tensor at a time. Each tensor's checksum is computed as it is
// written and patched into the header (checksums in `metadata` are replaced).
void writeSafetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace mt
