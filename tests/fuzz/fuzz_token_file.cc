// Token files: the header, the size, every id; then reads and a batch from a valid one.
#include <vector>

#include "runtime/token_data.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mt::fuzz::asFile(data, size, "input.tok");
  mt::fuzz::refusalIsFine([&] {
    const mt::TokenFile file(path);
    const std::vector<uint32_t> all = file.read(0, file.size());
    for (uint32_t id : all)
      if (id >= file.vocabSize()) __builtin_trap();  // an id past the vocabulary got through
    if (file.size() >= 9) {
      const mt::BatchSampler sampler(file, 2, 8, 1);
      std::vector<int32_t> tokens(16), targets(16);
      sampler.fill(3, tokens.data(), targets.data());
    }
  });
  return 0;
}
