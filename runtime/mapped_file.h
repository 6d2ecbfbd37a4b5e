// A whole file mapped read-only, unmapped when the object goes.
#pragma once
#include <cstddef>
#include <string>

namespace mt {

class MappedFile {
 public:
  // Throws mt::Error "cannot open <what> <path>: <reason> <hint>" if the file cannot be mapped.
  MappedFile(const std::string& path, const std::string& what, const std::string& hint);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return static_cast<const unsigned char*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mt
