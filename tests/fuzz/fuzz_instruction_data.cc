// Instruction data (mttok --chat, mtgen --chat-file): the input read as one JSONL example
// (alpaca, messages or sharegpt shapes; any nesting, any size up to the campaign's length) and
// rendered in each built-in chat template, and read as a whole file of conversations to reply to
// (JSONL or a JSON array), each rendered through its generation prompt in each template, and as
// a file of preference pairs (mttok --preferences), each side rendered in each template, and as a
// file of KTO's labelled examples (mttok --unpaired), each with its KL row rendered.
#include <string>
#include <vector>

#include "runtime/data/instruction_data.h"
#include "runtime/data/preference_data.h"
#include "tests/fuzz/fuzz_common.h"

namespace {
constexpr mt::ChatTemplate kTemplates[] = {mt::ChatTemplate::ChatML, mt::ChatTemplate::Qwen3,
                                           mt::ChatTemplate::Llama3, mt::ChatTemplate::Harmony};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mt::fuzz::refusalIsFine([&] {
    const mt::ChatExample example = mt::readExample(text, "input:1");
    for (mt::ChatTemplate chat_template : kTemplates)
      mt::fuzz::refusalIsFine([&] { mt::renderExample(example, chat_template); });
  });
  mt::fuzz::refusalIsFine([&] {
    mt::forEachExample(
        "input", text,
        [](const mt::ChatExample& conversation, const std::string&) {
          for (mt::ChatTemplate chat_template : kTemplates)
            mt::fuzz::refusalIsFine([&] { mt::generationPrompt(conversation, chat_template); });
        },
        mt::ExamplesFor::kReplying);
  });
  mt::fuzz::refusalIsFine([&] {
    mt::forEachPreferencePair("input", text, [](const mt::PreferencePair& pair, const std::string&) {
      for (const mt::ChatExample* side : {&pair.chosen, &pair.rejected})
        for (mt::ChatTemplate chat_template : kTemplates)
          mt::fuzz::refusalIsFine([&] { mt::renderExample(*side, chat_template); });
    });
  });
  mt::fuzz::refusalIsFine([&] {
    std::vector<mt::LabelledExample> examples;
    mt::forEachLabelledExample("input", text, [&](const mt::LabelledExample& e, const std::string&) {
      if (e.prompt_messages >= e.example.messages.size()) __builtin_trap();  // no completion
      examples.push_back(e);
    });
    for (size_t i = 0; examples.size() >= 2 && i < examples.size(); ++i) {
      bool same_prompt = false;
      const size_t source = mt::klSource(examples, i, same_prompt);
      if (source >= examples.size() || source == i) __builtin_trap();  // a KL row of its own completion
      for (mt::ChatTemplate chat_template : kTemplates)
        mt::fuzz::refusalIsFine([&] { mt::renderExample(mt::klExample(examples[i], examples[source]), chat_template); });
    }
  });
  return 0;
}
