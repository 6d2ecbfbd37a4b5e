// mtrun's --config files through mtrun's own flag parsing (tools/config_file.h: flag = value
// lines, strict), then the hyperparameter validation every run starts with.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "runtime/training/trainer.h"
#include "tests/fuzz/fuzz_common.h"
#include "tools/mtrun_flags.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mt::fuzz::asFile(data, size, "input.toml");
  mt::TrainConfig config;
  CLI::App app;
  mt::addTrainFlags(app, config);
  const char* argv[] = {"mtrun", "m.plan", "--data", "d.tok", "--config", path.c_str()};
  // The messages of refused inputs go nowhere (they cost more than the parse); a sanitizer's
  // report still reaches file descriptor 2.
  static FILE* const quiet = std::fopen("/dev/null", "w");
  static std::ofstream quiet_stream("/dev/null");
  FILE* const saved = stderr;
  std::streambuf* const saved_cerr = std::cerr.rdbuf(quiet_stream.rdbuf());
  std::streambuf* const saved_cout = std::cout.rdbuf(quiet_stream.rdbuf());
  stderr = quiet;
  const bool refused = mt::parseFlags(app, 6, const_cast<char**>(argv)).has_value();
  stderr = saved;
  std::cerr.rdbuf(saved_cerr);
  std::cout.rdbuf(saved_cout);
  if (refused) return 0;  // mtrun exits 2, naming the line
  mt::fuzz::refusalIsFine([&] { mt::validateConfig(config); });
  return 0;
}
