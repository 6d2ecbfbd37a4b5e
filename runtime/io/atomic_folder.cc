#include "runtime/io/atomic_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "runtime/io/error.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

void syncFolder(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

std::string parentOf(const std::string& path) {
  const std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

std::string withoutTrailingSlashes(const std::string& path) {
  std::string out = path;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

AtomicFolderWriter::AtomicFolderWriter(const std::string& target) : target_(withoutTrailingSlashes(target)) {
  std::error_code error;
  fs::create_directories(parentOf(target_), error);
  if (error) throw Error("cannot create the folder holding " + target_ + ": " + error.message());
  std::random_device entropy;
  for (int attempt = 0;; ++attempt) {
    staging_ = fmt::format("{}.tmp.{}.{:016x}", target_, getpid(), uint64_t{entropy()} << 32 | entropy());
    if (mkdir(staging_.c_str(), 0755) == 0) break;  // mkdir never follows a symlink at its name
    const int err = errno;
    if (err != EEXIST || attempt >= 100) {
      staging_.clear();
      throw Error("cannot write " + target_ + ": cannot create a folder beside it: " + std::strerror(err));
    }
  }
}

AtomicFolderWriter::~AtomicFolderWriter() {
  if (staging_.empty()) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
}

void AtomicFolderWriter::commit() {
  for (const auto& entry : fs::directory_iterator(staging_)) {  // the files' bytes on disk first
    const int fd = open(entry.path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
      const int err = errno;
      if (fd >= 0) close(fd);
      throw Error("cannot write " + target_ + ": " + entry.path().filename().string() + ": " + std::strerror(err));
    }
    close(fd);
  }
  syncFolder(staging_);
  struct stat st {};
  if (lstat(target_.c_str(), &st) != 0) {
    if (rename(staging_.c_str(), target_.c_str()) != 0)
      throw Error("cannot write " + target_ + ": " + std::strerror(errno));
  } else {
    if (!S_ISDIR(st.st_mode)) throw Error("cannot write " + target_ + ": it exists and is not a folder");
    // One step: the target's name now holds the new folder, the staging name the old one.
    if (renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0)
      throw Error("cannot write " + target_ + ": replacing the folder failed: " + std::strerror(errno));
    std::error_code ignored;
    fs::remove_all(staging_, ignored);
  }
  staging_.clear();
  syncFolder(parentOf(target_));
}

}  // namespace mt
