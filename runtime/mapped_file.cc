#include "runtime/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/error.h"

namespace mt {

MappedFile::MappedFile(const std::string& path, const std::string& what, const std::string& hint) {
  auto fail = [&](int err) {
    return Error("cannot open " + what + " " + path + ": " + std::strerror(err) + (hint.empty() ? "" : " " + hint));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail(errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    throw fail(err);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {  // mmap rejects empty files; an empty one is simply zero bytes long
    data_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data_ == MAP_FAILED) {
      const int err = errno;
      data_ = nullptr;
      close(fd);
      throw fail(err);
    }
  }
  close(fd);
}

MappedFile::~MappedFile() {
  if (data_) munmap(data_, size_);
}

}  // namespace mt
