// mttok: turn text files into a token file (byte-level: one token per byte, vocab 256).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "runtime/error.h"
#include "runtime/token_data.h"

int main(int argc, char** argv) {
  std::vector<std::string> inputs;
  std::string output;
  CLI::App app{
      "mttok: tokenise text into a MegaTrain token file.\n\n"
      "Example:\n"
      "  mttok --bytes corpus/*.txt -o corpus.tok\n"};
  app.add_option("inputs", inputs, "text files, concatenated in order")->required();
  app.add_option("-o,--output", output, "token file to write")->required();
  bool bytes = true;
  app.add_flag("--bytes", bytes, "byte-level tokens, vocab 256 (the default and, for now, only mode)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    std::vector<uint32_t> ids;
    for (const auto& path : inputs) {
      std::ifstream in(path, std::ios::binary);
      if (!in) throw mt::Error("cannot read " + path);
      std::stringstream text;
      text << in.rdbuf();
      for (unsigned char ch : text.str()) ids.push_back(ch);
    }
    mt::writeTokenFile(output, ids, 256);
    std::printf("mttok: %zu tokens (vocab 256) from %zu files -> %s\n", ids.size(), inputs.size(),
                output.c_str());
    return 0;
  } catch (const mt::Error& e) {
    std::fprintf(stderr, "mttok: error: %s\n", e.what());
    return 1;
  }
}
