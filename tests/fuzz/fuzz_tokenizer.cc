// GPT-2 BPE vocabularies: the input up to its first NUL byte is encoder.json, the rest vocab.bpe;
// a vocabulary that loads then encodes a fixed text and a slice of the input.
#include <filesystem>
#include <fstream>

#include "runtime/data/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string dir = mt::fuzz::scratchDir() + "/mt_fuzz_bpe_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/encoder.json", std::ios::binary | std::ios::trunc) << input.substr(0, split);
  std::ofstream(dir + "/vocab.bpe", std::ios::binary | std::ios::trunc)
      << (split == std::string::npos ? std::string() : input.substr(split + 1));
  mt::fuzz::refusalIsFine([&] {
    mt::BpeTokenizer tokenizer(dir);  // encode() caches merges
    for (uint32_t id : tokenizer.encode("Hello world, it's 2026!\n  tabs\tand ünïcödé"))
      if (id >= tokenizer.vocabSize()) __builtin_trap();
    tokenizer.encode(input.substr(0, 256));
  });
  return 0;
}
