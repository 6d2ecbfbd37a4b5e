#include "runtime/io/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mt {

FileLock::FileLock(const std::string& path, bool remove_when_released) : path_(path), remove_(remove_when_released) {
  for (int attempt = 0;; ++attempt) {
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot create the lock file " + path + ": " + std::strerror(errno));
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char text[256] = {};
      const ssize_t got = pread(fd_, text, sizeof text - 1, 0);
      std::string holder = got > 0 ? std::string(text, static_cast<size_t>(got)) : "another process";
      while (!holder.empty() && holder.back() == '\n') holder.pop_back();
      close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK) throw Busy(path, holder);
      throw Error("cannot lock " + path + ": " + std::strerror(err));
    }
    // Locked; but if the holder before us removed the file after we opened it, the lock is on a
    // file nobody else will find: take the one at `path` now instead.
    struct stat ours {}, named {};
    if (fstat(fd_, &ours) == 0 && stat(path.c_str(), &named) == 0 && ours.st_ino == named.st_ino &&
        ours.st_dev == named.st_dev)
      break;
    close(fd_);
    fd_ = -1;
    if (attempt >= 100) throw Error("cannot lock " + path + ": it keeps being removed and made again");
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string holder = "mtrun (pid " + std::to_string(getpid()) + " on " + host + ")\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, holder.data(), holder.size(), 0) < 0) {
    const int err = errno;
    close(fd_);
    throw Error("cannot write the lock file " + path + ": " + std::strerror(err));
  }
}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  if (remove_) unlink(path_.c_str());  // while still held: whoever opens it next makes a new one
  close(fd_);                            // releases the lock
}

}  // namespace mt
