// Issue 30's regressions for the files the runtime reads and writes: JSON nested past any real
// file, safetensors that the reference library refuses, temporary files and locks that a planted
// symlink must not redirect, folders published whole, a log that never ends in a torn line.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/io/atomic_folder.h"
#include "runtime/io/error.h"
#include "runtime/io/file_lock.h"
#include "runtime/io/json_input.h"
#include "runtime/io/safetensors.h"
#include "runtime/training/run_files.h"
#include "tests/runtime/expect_error.h"
#include "tests/runtime/scratch_path.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using test::expectError;
using test::scratchPath;

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A fresh empty folder of this process.
std::string freshFolder(const std::string& name) {
  const std::string dir = scratchPath(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(JsonInput, NestingPastTheLimitIsRefusedBeforeParsing) {
  // 150,000 levels: a walk over it, or an error message's dump() of it, overflowed the stack.
  const std::string deep = std::string(150000, '[') + "1" + std::string(150000, ']');
  expectError([&] { parseJsonInput(deep, "x.json"); }, "x.json nests lists and objects deeper than 64 levels");
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parseJsonInput(at_limit, "x.json").is_array());
  // Brackets inside strings (escaped quotes too) are text, not nesting.
  const std::string quoted = "{\"a\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}";
  EXPECT_TRUE(parseJsonInput(quoted, "x.json").is_object());
}

TEST(JsonInput, NotJsonIsNamedWithItsPlace) {
  // NaN and 1e400 (Python's json writes the first; the second overflows a double) are not JSON:
  // the message says so, not "is not a JSON object".
  expectError([] { parseJsonInput("{\"a\": NaN}", "c.json"); }, "c.json is not valid JSON: parse error at line 1");
  expectError([] { parseJsonInput("{\"a\": 1e400}", "c.json"); }, "c.json is not valid JSON");
}

TEST(JsonInput, MessagesQuoteValuesInBrief) {
  EXPECT_EQ(jsonBrief(nlohmann::json::array({1, 2, 3})), "a list of 3 items");
  EXPECT_EQ(jsonBrief(nlohmann::json::object()), "an object of 0 keys");
  EXPECT_EQ(jsonBrief(nlohmann::json(-4)), "-4");
  const std::string brief = jsonBrief(nlohmann::json(std::string(100000, 'x')));
  EXPECT_LT(brief.size(), 100u);
  EXPECT_NE(brief.find("(100000 bytes)"), std::string::npos);
}

// A safetensors file of one header and `data_bytes` zero bytes.
std::string safetensorsWith(const std::string& header, size_t data_bytes) {
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  return bytes + header + std::string(data_bytes, '\0');
}

TEST(Safetensors, RefusesWhatTheReferenceLibraryRefuses) {
  const std::string path = scratchPath("layout.safetensors");
  auto refused = [&](const std::string& header, size_t data_bytes, const std::string& needle) {
    writeAll(path, safetensorsWith(header, data_bytes));
    expectError([&] { SafetensorsFile f(path); }, needle);
  };
  // Two tensors over the same bytes: a write into one would change the other.
  refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
          12, "tensor 'b' starts at byte 4 of the data, where the tensor before it still runs (tensors overlap)");
  refused(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "a gap between tensors");
  refused(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12, "bytes no tensor covers");
  // Metadata maps strings to strings: nothing nested.
  refused(R"({"__metadata__":{"k":{"nested":"x"}},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4,
          "__metadata__'s \"k\" is an object of 1 key, not a string");
  refused(std::string(R"({"__metadata__":)") + std::string(100, '{') + std::string(100, '}') + "}", 0,
          "deeper than 64 levels");
  // What it accepts: tensors tiling the data in any order of their names, empty ones included.
  writeAll(path, safetensorsWith(R"({"z":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                 R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                                 R"("a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                 12));
  EXPECT_EQ(SafetensorsFile(path).entries().size(), 3u);
}

// A symlink planted at a temporary file's or a lock's name, pointing to a file of someone else's.
TEST(OutputFiles, APlantedSymlinkRedirectsNoWrite) {
  const std::string dir = freshFolder("planted");
  const std::string victim = dir + "/victim.txt", out = dir + "/w.safetensors";
  writeAll(victim, "precious");
  // The name the writer used before (NAME.tmp.<pid>): predictable, so plantable.
  fs::create_symlink(victim, out + ".tmp." + std::to_string(getpid()));
  writeFileAtomically(out, "new weights");
  EXPECT_EQ(readAll(victim), "precious");
  EXPECT_EQ(readAll(out), "new weights");
  EXPECT_FALSE(fs::is_symlink(out));
  fs::create_symlink(victim, out + ".lock");
  expectError([&] { FileLock lock(out + ".lock", true); }, "cannot create the lock file");
  EXPECT_EQ(readAll(victim), "precious");
}

TEST(OutputFiles, ALockNamesItsHolderAndGoesWithIt) {
  const std::string path = scratchPath("export.lock");
  fs::remove(path);
  {
    FileLock held(path, /*remove_when_released=*/true);
    try {
      FileLock second(path, true);
      FAIL() << "a second lock was granted";
    } catch (const FileLock::Busy& busy) {
      EXPECT_NE(busy.holder().find("mtrun (pid " + std::to_string(getpid()) + " on "), std::string::npos);
    }
  }
  EXPECT_FALSE(fs::exists(path));
  FileLock again(path, true);  // free once its holder let go
}

TEST(OutputFiles, AFolderIsPublishedWholeOrNotAtAll) {
  const std::string parent = freshFolder("folders"), target = parent + "/out";
  fs::create_directories(target);
  writeAll(target + "/model.safetensors.index.json", "old index");
  writeAll(target + "/model-00001-of-00002.safetensors", "old shard");
  {
    AtomicFolderWriter unfinished(target + "/");
    writeAll(unfinished.staging() + "/model.safetensors", "half");
  }  // not committed: the old folder stands, the staging folder is gone
  EXPECT_EQ(readAll(target + "/model.safetensors.index.json"), "old index");
  EXPECT_EQ(std::distance(fs::directory_iterator(parent), fs::directory_iterator()), 1);
  {
    AtomicFolderWriter writer(target);
    writeAll(writer.staging() + "/model.safetensors", "new");
    writeAll(writer.staging() + "/config.json", "{}");
    writer.commit();
  }
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(target)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "model.safetensors"}));  // no old file left beside
  EXPECT_EQ(std::distance(fs::directory_iterator(parent), fs::directory_iterator()), 1);
  AtomicFolderWriter fresh(parent + "/new/deeper");  // a target that does not exist yet
  writeAll(fresh.staging() + "/config.json", "{}");
  fresh.commit();
  EXPECT_EQ(readAll(parent + "/new/deeper/config.json"), "{}");
}

// The disk full under a log (a file-size limit; SIGXFSZ ignored, so the write fails with EFBIG):
// an IoFault, and the log cut back to its whole lines.
TEST(OutputFiles, ALogOnAFullDiskKeepsOnlyWholeLines) {
  const std::string path = scratchPath("full.jsonl");
  JsonLog log(path, /*append=*/false);
  log.write({{"step", 1}});
  const size_t whole = readAll(path).size();
  rlimit before{};
  getrlimit(RLIMIT_FSIZE, &before);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limit = before;
  limit.rlim_cur = whole + 10;  // room for part of the next line only
  setrlimit(RLIMIT_FSIZE, &limit);
  bool faulted = false;
  try {
    log.write({{"step", 2}, {"loss", 1.25}, {"note", std::string(100, 'x')}});
  } catch (const IoFault& fault) {
    faulted = std::string(fault.what()).find("cannot write log") != std::string::npos;
  }
  setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(faulted);
  EXPECT_EQ(readAll(path), "{\"step\":1}\n");
}

}  // namespace
}  // namespace mt
