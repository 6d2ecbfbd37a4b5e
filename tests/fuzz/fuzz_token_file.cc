// Token files: the header, the size, every id and loss-mask byte; then reads and a batch from a
// valid one (a masked target must be -1, a counted one an id, and the count agree).
#include <vector>

#include "runtime/data/token_data.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mt::fuzz::asFile(data, size, "input.tok");
  mt::fuzz::refusalIsFine([&] {
    const mt::TokenFile file(path);
    std::vector<uint8_t> counted;
    const std::vector<uint32_t> all = file.read(0, file.size(), &counted);
    for (uint32_t id : all)
      if (id >= file.vocabSize()) __builtin_trap();  // an id past the vocabulary got through
    for (uint8_t c : counted)
      if (c > 1) __builtin_trap();  // a mask byte other than 0/1 got through
    if (file.size() >= 9) {
      const mt::BatchSampler sampler(file, 2, 8, 1);
      std::vector<int32_t> tokens(16), targets(16);
      const int64_t n = sampler.fill(3, tokens.data(), targets.data());
      int64_t seen = 0;
      for (int32_t t : targets) {
        // (as int64: a vocabulary of exactly 2^31 is valid, its ids all int32s)
        if (t < -1 || t >= static_cast<int64_t>(file.vocabSize())) __builtin_trap();
        seen += t >= 0;
      }
      if (seen != n) __builtin_trap();
    }
  });
  return 0;
}
