// JSONL instruction data (mttok --chat): one example read from the input (alpaca, messages or
// sharegpt shapes; any nesting, any size up to the campaign's length) and rendered in each
// built-in chat template.
#include <string>

#include "runtime/data/instruction_data.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  mt::fuzz::refusalIsFine([&] {
    const mt::ChatExample example = mt::readExample(line, "input:1");
    for (mt::ChatTemplate chat_template :
         {mt::ChatTemplate::ChatML, mt::ChatTemplate::Qwen3, mt::ChatTemplate::Llama3, mt::ChatTemplate::Harmony})
      mt::fuzz::refusalIsFine([&] { mt::renderExample(example, chat_template); });
  });
  return 0;
}
