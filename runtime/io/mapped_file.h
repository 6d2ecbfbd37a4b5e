// Reading input files: every one is opened through openInputFile, which refuses what is not a
// regular file (a directory, a pipe, a device) with a message naming it, before any byte is read.
#pragma once
#include <cstddef>
#include <string>

namespace mt {

// An open read-only descriptor of a regular file, closed when the object goes.
class InputFile {
 public:
  // Throws mt::Error "cannot open <what> <path>: <reason> <hint>" for a missing or unreadable
  // path, or one that is not a regular file.
  InputFile(const std::string& path, const std::string& what, const std::string& hint);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  size_t size() const { return size_; }  // when opened
  // Reads up to `bytes` at `offset` (fewer only at the end of the file); throws mt::Error on an I/O
  // error. Safe to call from several threads.
  size_t readAt(void* out, size_t bytes, size_t offset) const;

 private:
  int fd_ = -1;
  size_t size_ = 0;
};

// The whole of a regular file (see InputFile for the errors).
std::string readWholeFile(const std::string& path, const std::string& what, const std::string& hint);

// A whole file mapped read-only, unmapped when the object goes. Only for files that are not
// expected to change while mapped (a truncated mapping raises SIGBUS): the token file, read for
// the whole of a run, uses TokenFile's checked reads instead.
class MappedFile {
 public:
  // Throws mt::Error as InputFile does, or if the file cannot be mapped.
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
