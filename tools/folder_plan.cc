#include "tools/folder_plan.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "runtime/io/error.h"
#include "runtime/version.h"

extern char** environ;

namespace mt {
namespace fs = std::filesystem;
namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A folder of this user's at `path`, made (mode 0700) if missing; never a link.
void ownFolder(const fs::path& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error("cannot create the cache folder " + path.string() + ": " + std::strerror(errno) +
                " (set XDG_CACHE_HOME to a writable folder)");
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
    throw Error("the cache folder " + path.string() + " is not a folder of this user's (a link, a file or another "
                "user's): remove it, or set XDG_CACHE_HOME to another folder");
}

// $XDG_CACHE_HOME/megatrain/mtgen, or ~/.cache/megatrain/mtgen.
fs::path cacheRoot() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (!(xdg && *xdg) && !(home && *home))
    throw Error("mtgen DIR keeps the compiled plan in a cache folder: set HOME or XDG_CACHE_HOME");
  const fs::path base = xdg && *xdg ? fs::path(xdg) : fs::path(home) / ".cache";
  std::error_code ec;
  fs::create_directories(base, ec);  // the user's own cache folder: made as any program would
  fs::path root = base;
  for (const char* part : {"megatrain", "mtgen"}) ownFolder(root /= part);
  return root;
}

// What the plan depends on: the folder (its real path), its files' names, sizes and times, the
// context, the batch (above 1: a plan of one row keeps the name it had before batches) and the
// MegaTrain version.
std::string folderState(const fs::path& dir, int64_t context, int64_t batch) {
  std::vector<std::string> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    std::error_code ec;
    if (!entry.is_regular_file(ec)) continue;
    files.push_back(fmt::format("{} {} {}", entry.path().filename().string(), entry.file_size(ec),
                                entry.last_write_time(ec).time_since_epoch().count()));
  }
  std::sort(files.begin(), files.end());
  std::string state = fmt::format("{}\n{}\n{}\n", dir.string(), context, kVersion);
  if (batch > 1) state += fmt::format("batch {}\n", batch);
  for (const std::string& f : files) state += f + "\n";
  return state;
}

// The mtc of this build: beside the running mtgen.
fs::path mtcBinary() {
  std::error_code ec;
  const fs::path mtc = fs::read_symlink("/proc/self/exe", ec).parent_path() / "mtc";
  if (ec || !fs::is_regular_file(mtc, ec))
    throw Error("mtgen DIR compiles the folder with mtc, which is not beside mtgen (" + mtc.string() +
                "): build it (bash tools/build.sh), or compile the plan yourself (mtc DIR --forward-only --kv-cache "
                "--batch 1 --seq N -o PLAN) and give mtgen PLAN");
  return mtc;
}

// Runs `args` (args[0] the program), its standard output onto ours for errors: the text mtgen
// prints stays alone on standard output. The exit code; -1 if it did not run or was killed.
int runQuietly(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  std::fflush(nullptr);
  pid_t pid = 0;
  const int failed = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (failed) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The folder's name as a file name's part: letters, digits, '.', '-', '_'.
std::string safeName(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  return out.empty() ? "model" : out;
}

}  // namespace

bool isModelFolder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

FolderPlan folderPlan(const std::string& dir, int64_t context, int64_t batch) {
  const fs::path folder = fs::canonical(dir);
  const fs::path root = cacheRoot();
  const std::string name = fmt::format("{}-{}{}-{:016x}", safeName(folder.filename().string()), context,
                                       batch > 1 ? fmt::format("-b{}", batch) : "",
                                       fnv1a(folderState(folder, context, batch)));
  const fs::path final = root / name;
  std::error_code ec;
  if (fs::is_regular_file(final / "gen.plan", ec)) {
    ownFolder(final);
    return {(final / "gen.plan").string(), true};
  }
  const fs::path mtc = mtcBinary();
  const fs::path staging = root / fmt::format("{}.tmp-{}", name, ::getpid());
  fs::remove_all(staging, ec);
  ownFolder(staging);
  const int code = runQuietly({mtc.string(), folder.string(), "--forward-only", "--kv-cache", "--batch",
                               std::to_string(batch), "--seq", std::to_string(context), "-o",
                               (staging / "gen.plan").string()});
  if (code != 0) {
    fs::remove_all(staging, ec);
    throw Error(fmt::format("mtc could not compile {} (exit {}; its message above): a folder mtc imports "
                            "(docs/inputs.md), and a --context the model takes", dir, code));
  }
  if (::rename(staging.c_str(), final.c_str()) != 0) {  // another mtgen published it first: theirs
    fs::remove_all(staging, ec);
    if (!fs::is_regular_file(final / "gen.plan", ec))
      throw Error("cannot publish the compiled plan in " + final.string() + ": " + std::strerror(errno));
  }
  return {(final / "gen.plan").string(), false};
}

}  // namespace mt
