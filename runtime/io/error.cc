#include "runtime/io/error.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <random>
#include <string_view>

namespace mt {

AtomicFileWriter::AtomicFileWriter(const std::string& path) : path_(path) {
  // NAME.tmp.<pid>.<random>, created where nothing is (O_EXCL) and never through a symlink
  // (O_NOFOLLOW): a link planted under a name that can be guessed, in a shared folder, would
  // otherwise have the writer truncate the file it points to. The pid lets a later run remove
  // what a killed writer left (removeStaleTemporaries).
  static std::atomic<uint64_t> counter{0};
  std::random_device entropy;
  for (int attempt = 0; fd_ < 0; ++attempt) {
    const uint64_t salt = (uint64_t{entropy()} << 32 | entropy()) ^ counter.fetch_add(1);
    tmp_ = fmt::format("{}.tmp.{}.{:016x}", path, getpid(), salt);
    fd_ = open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 100)) {
      const int err = errno;
      tmp_.clear();
      throw Error("cannot write " + path_ + ": " + std::strerror(err));
    }
  }
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

void AtomicFileWriter::writeAt(size_t offset, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = pwrite(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
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

void checkWritable(const std::string& path, const std::string& flag) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(flag + " " + path + " is a directory: give a file name");
  try {
    AtomicFileWriter probe(path);  // creates its temporary file beside `path`, removed unwritten
  } catch (const Error& e) {
    throw Error(flag + ": " + e.what() + " (checked before the run starts)");
  }
}

int removeStaleTemporaries(const std::string& dir, const std::function<bool(const std::string&)>& belongs) {
  namespace fs = std::filesystem;
  int removed = 0;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const std::string_view view(name);
    const size_t mark = view.rfind(".tmp.");
    if (mark == std::string_view::npos || !belongs(std::string(view.substr(0, mark)))) continue;
    // NAME.tmp.<pid>.<random> (NAME.tmp.<pid> from before: the same pid rule)
    std::string_view pid_text = view.substr(mark + 5);
    pid_text = pid_text.substr(0, pid_text.find('.'));
    if (pid_text.empty() || pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string_view::npos)
      continue;
    pid_t pid = 0;
    for (char digit : pid_text) pid = pid * 10 + (digit - '0');
    if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer may still run
    if (fs::remove_all(entry.path(), error) > 0) ++removed;  // a file, or an AtomicFolderWriter's folder
  }
  return removed;
}

}  // namespace mt
