// Errors that reach the user: one message naming the problem and, where there is one, the fix.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>

namespace mt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A fault of a file a run reads or writes while it trains — the disk under its log full, its
// token file changed — rather than of the training itself: the run saves what it still can (a
// checkpoint) before it stops, and says where.
class IoFault : public Error {
 public:
  using Error::Error;
};

// A file written piece by piece through a temporary file in the same directory, fsynced and
// renamed into place by commit(): readers see the old file or the whole new one, never a half.
// Destroyed without commit() (an error on the way), it removes the temporary file.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t bytes);
  // Overwrites bytes already written (a header patched once the data after it is known).
  void writeAt(size_t offset, const void* data, size_t bytes);
  void commit();

 private:
  [[noreturn]] void fail();
  std::string path_, tmp_;
  int fd_ = -1;
};

// Writes `bytes` to `path` atomically (see AtomicFileWriter).
void writeFileAtomically(const std::string& path, const std::string& bytes);

// Throws mt::Error naming `flag` unless `path` can be written: a directory it names, or one
// missing or read-only, is found before a run, not after it (nothing is left behind).
void checkWritable(const std::string& path, const std::string& flag);

// Removes the temporary files of AtomicFileWriters (and staging folders of AtomicFolderWriters)
// in `dir` that were killed while writing
// (NAME.tmp.<pid>.<random>, or NAME.tmp.<pid> of older versions, whose process is gone) and
// whose NAME `belongs`; returns how many.
int removeStaleTemporaries(const std::string& dir, const std::function<bool(const std::string&)>& belongs);

}  // namespace mt
