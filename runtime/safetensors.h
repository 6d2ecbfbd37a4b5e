// safetensors (the format of the PyTorch / Hugging Face ecosystem): an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
// then the raw little-endian tensor bytes.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/mapped_file.h"

namespace mt {

struct SafetensorsEntry {
  std::string dtype;  // "F32", "I32", "BF16", ...
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  int64_t bytes = 0;
};

// A safetensors file mapped read-only; every entry is checked to lie inside the file.
class SafetensorsFile {
 public:
  // Throws mt::Error for a missing, truncated or malformed file.
  explicit SafetensorsFile(const std::string& path);

  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The entry `name`, checked to be F32 of `shape`; throws mt::Error naming the mismatch.
  const SafetensorsEntry& f32(const std::string& name, const std::vector<int64_t>& shape) const;

 private:
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

// Writes atomically (temporary file, fsync, rename), tensor by tensor: it holds no copy of
// the tensors, only one produced tensor at a time.
void writeSafetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace mt
