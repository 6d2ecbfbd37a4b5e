// Hugging Face tokenizer.json files: a file that loads then encodes a fixed text (white space,
// digits, a special token's look-alike, multi-byte characters) and its own first bytes, every
// id inside the vocabulary, and decodes the ids again. Encoded with the tokens' spans, the ids
// are the same, one span each, rising, inside the text.
#include <cstring>

#include "runtime/data/hf_tokenizer.h"
#include "runtime/data/utf8.h"
#include "runtime/io/error.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mt::fuzz::asFile(data, size, "tokenizer.json");
  mt::fuzz::refusalIsFine([&] {
    mt::HfTokenizer tokenizer(path);
    const std::string input(reinterpret_cast<const char*>(data), std::min<size_t>(size, 256));
    for (const std::string& text : {std::string("Hello world, it's 2026!\n  tabs\tand \u00fcn\u00efc\u00f6d\u00e9 <s>\u0085"), input}) {
      const std::vector<uint32_t> ids = tokenizer.encode(text);
      for (uint32_t id : ids)
        if (id >= tokenizer.vocabSize()) __builtin_trap();
      tokenizer.decode(ids);
      std::vector<mt::TokenSpan> spans;
      std::vector<uint32_t> spanned;
      try {
        spanned = tokenizer.encode(text, true, spans);
      } catch (const mt::Error& e) {
        if (std::strstr(e.what(), "do not spell")) __builtin_trap();  // the spans' bookkeeping broke
        throw;  // a budget spent by the second encoding: a refusal
      }
      if (spanned != ids || spans.size() != ids.size()) __builtin_trap();
      const size_t bytes = mt::validUtf8(text).size();
      for (size_t i = 0; i < spans.size(); ++i)
        if (spans[i].begin > spans[i].end || spans[i].end > bytes || (i > 0 && spans[i].begin < spans[i - 1].begin))
          __builtin_trap();
    }
  });
  return 0;
}
