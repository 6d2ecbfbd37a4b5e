#include "runtime/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/io/error.h"

namespace mt {
namespace {

Error openError(const std::string& path, const std::string& what, const std::string& hint,
                const std::string& reason) {
  return Error("cannot open " + what + " " + path + ": " + reason + (hint.empty() ? "" : " " + hint));
}

}  // namespace

InputFile::InputFile(const std::string& path, const std::string& what, const std::string& hint) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever before fstat can refuse it.
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw openError(path, what, hint, std::strerror(errno));
  struct stat st;
  std::string problem;
  if (fstat(fd_, &st) != 0)
    problem = std::strerror(errno);
  else if (S_ISDIR(st.st_mode))
    problem = "it is a directory, not a file";
  else if (!S_ISREG(st.st_mode))
    problem = "it is not a regular file (a device, pipe or socket)";
  if (!problem.empty()) {
    close(fd_);
    throw openError(path, what, hint, problem);
  }
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  size_ = static_cast<size_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) close(fd_);
}

size_t InputFile::readAt(void* out, size_t bytes, size_t offset) const {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t got = pread(fd_, static_cast<char*>(out) + done, bytes - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(std::string("reading a file failed: ") + std::strerror(errno));
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

std::string readWholeFile(const std::string& path, const std::string& what, const std::string& hint) {
  InputFile file(path, what, hint);
  std::string bytes(file.size(), '\0');
  if (file.readAt(bytes.data(), bytes.size(), 0) != bytes.size())
    throw Error(what + " " + path + " shrank while it was read: is something writing to it?");
  return bytes;
}

MappedFile::MappedFile(const std::string& path, const std::string& what, const std::string& hint) {
  const InputFile file(path, what, hint);
  size_ = file.size();
  if (size_ == 0) return;  // mmap rejects empty files; an empty one is simply zero bytes long
  data_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
  if (data_ == MAP_FAILED) {
    data_ = nullptr;
    throw openError(path, what, hint, std::strerror(errno));
  }
}

MappedFile::~MappedFile() {
  if (data_) munmap(data_, size_);
}

}  // namespace mt
