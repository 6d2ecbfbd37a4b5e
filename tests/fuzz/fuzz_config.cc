// mtrun's --config files through mtrun's own flag parsing (tools/config_file.h: flag = value
// lines, strict), then the hyperparameter validation every run starts with.
#include "runtime/trainer.h"
#include "tests/fuzz/fuzz_common.h"
#include "tools/mtrun_flags.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mt::fuzz::asFile(data, size, "input.toml");
  mt::TrainConfig config;
  CLI::App app;
  mt::addTrainFlags(app, config);
  const char* argv[] = {"mtrun", "m.plan", "--data", "d.tok", "--config", path.c_str()};
  if (mt::parseFlags(app, 6, const_cast<char**>(argv))) return 0;  // refused: mtrun exits 2, naming the line
  mt::fuzz::refusalIsFine([&] { mt::validateConfig(config); });
  return 0;
}
