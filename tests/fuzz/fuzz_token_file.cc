// Token files: the header, the size, every id and loss-mask byte, every example start and label;
// then reads and a batch from a valid one (a masked target must be -1, a counted one an id, and the
// count agree), packed and, where the file records its examples, one example per row and held out,
// or, where they are pairs, a pair per two rows and each pair's label or margin.
#include <cmath>
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
    std::vector<int32_t> tokens(16), targets(16);
    auto checkBatch = [&](int64_t n) {
      int64_t seen = 0;
      for (int32_t t : targets) {
        // (as int64: a vocabulary of exactly 2^31 is valid, its ids all int32s)
        if (t < -1 || t >= static_cast<int64_t>(file.vocabSize())) __builtin_trap();
        seen += t >= 0;
      }
      if (seen != n) __builtin_trap();
    };
    if (file.size() >= 9) checkBatch(mt::BatchSampler(file, 2, 8, 1).fill(3, tokens.data(), targets.data()));
    if (file.hasLabels()) {
      if (file.labels().size() * 2 != file.exampleStarts().size()) __builtin_trap();  // not a label per pair
      for (uint8_t label : file.labels())
        if (label > 1) __builtin_trap();  // a label other than 0/1 got through
    }
    if (file.hasPairs()) {
      const mt::BatchSampler pairs(file, 2, 8, 1, 0, -1, mt::RowLayout::kPairs);
      checkBatch(pairs.fill(3, tokens.data(), targets.data()));
      const size_t example = pairs.exampleOfRow(3, 1);
      if (example >= file.exampleStarts().size() || example % 2 != 1) __builtin_trap();  // row 1: a pair's second
      if (file.hasLabels()) (void)file.labels().at(example / 2);
      if (file.hasMargins() && !std::isfinite(file.margins().at(example / 2))) __builtin_trap();  // a margin unchecked
    } else if (file.hasExamples()) {
      const mt::BatchSampler sampler(file, 2, 8, 1, 0, -1, mt::RowLayout::kExamples);
      checkBatch(sampler.fill(3, tokens.data(), targets.data()));
      const mt::HeldOutBatches held(file, 2, 8, file.size() / 2, file.size(), 0, mt::RowLayout::kExamples);
      checkBatch(held.fill(held.allBatches() - 1, tokens.data(), targets.data()));
      // Packed examples: a later pass's rows, positions within the row's slots.
      std::vector<int32_t> positions(16);
      const mt::BatchSampler packed(file, 2, 8, 1, 0, -1, mt::RowLayout::kPackedExamples, 4);
      checkBatch(packed.fill(5, tokens.data(), targets.data(), 2, nullptr, positions.data()));
      for (int32_t p : positions)
        if (p < 0 || p >= 8) __builtin_trap();
      const mt::HeldOutBatches packed_held(file, 2, 8, 0, file.size(), 0, mt::RowLayout::kPackedExamples);
      checkBatch(packed_held.fill(packed_held.allBatches() - 1, tokens.data(), targets.data(), nullptr,
                                  positions.data()));
    }
  });
  return 0;
}
