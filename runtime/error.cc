#include "runtime/error.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mt {

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), tmp_(path + ".tmp." + std::to_string(getpid())) {
  fd_ = open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot write " + path_ + ": " + std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) close(fd_);
  if (!tmp_.empty()) unlink(tmp_.c_str());
}

void AtomicFileWriter::fail() {
  const int err = errno;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  unlink(tmp_.c_str());
  tmp_.clear();
  throw Error("cannot write " + path_ + ": " + std::strerror(err));
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::write(fd_, p + done, bytes - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail();
    }
    done += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (fsync(fd_) != 0) fail();
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0 || rename(tmp_.c_str(), path_.c_str()) != 0) fail();
  tmp_.clear();  // renamed: nothing to remove
}

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  AtomicFileWriter file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace mt
