// An exclusive lock on a lock file, held for the life of the object: two runs that would write
// the same output (a checkpoint folder, an --export file, an --export-hf folder) refuse to
// interleave, the second naming the first. flock: released by the kernel when the holder dies,
// so a killed run never leaves a lock that blocks the next.
#pragma once
#include <string>

#include "runtime/io/error.h"

namespace mt {

class FileLock {
 public:
  // Another process holds the lock; `holder` is what it wrote ("mtrun (pid 12 on host)").
  class Busy : public Error {
   public:
    Busy(const std::string& path, std::string holder)
        : Error(path + " is locked by " + holder), holder_(std::move(holder)) {}
    const std::string& holder() const { return holder_; }

   private:
    std::string holder_;
  };

  // Locks `path`, creating it if missing (never through a symlink), and writes the holder into
  // it. With `remove_when_released` the file goes when the lock does (a lock beside an output
  // leaves nothing behind; a file removed by its holder between our open and our lock is
  // opened again). Throws Busy, or mt::Error naming the path and the reason.
  FileLock(const std::string& path, bool remove_when_released);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::string path_;
  bool remove_ = false;
  int fd_ = -1;
};

}  // namespace mt
