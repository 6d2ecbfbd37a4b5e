// --config FILE, for every tool: `flag = value` per line (TOML/INI style): `#` or `;` comments,
// blank lines, an optional [default] section, values bare, "quoted" or true/false, the flag
// spelled as on the command line (without the dashes; `_` for `-` is fine). Read strictly: an
// unknown flag, a line that is not `flag = value`, a list or another section is an error naming
// the file and line. (CLI11's own reader skipped what it did not understand and ran with the
// defaults, and read out of bounds on an unterminated list: tests/fuzz/regressions/config/.)
#pragma once
#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "runtime/io/error.h"
#include "runtime/io/mapped_file.h"

namespace mt {

// The flags of config file `path` as command-line arguments ("--flag=value"), each checked to be
// one of `app`'s options. Throws mt::Error naming the file and line.
inline std::vector<std::string> configFileArgs(const CLI::App& app, const std::string& path) {
  const std::string text = readWholeFile(path, "config file", "(--config takes a file of flag = value lines)");
  std::vector<std::string> args;
  size_t start = 0;
  for (int line_number = 1; start <= text.size(); ++line_number) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string line = text.substr(start, end - start);
    start = end + 1;
    auto fail = [&](const std::string& why) {
      return Error("config file " + path + ", line " + std::to_string(line_number) + ": " + why);
    };
    auto trim = [](std::string s) {
      const size_t first = s.find_first_not_of(" \t\r"), last = s.find_last_not_of(" \t\r");
      return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
    };
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      if (line != "[default]") throw fail("section " + line + ": only [default] (or none) is read");
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) throw fail("'" + line + "' is not `flag = value`");
    std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    std::replace(key.begin(), key.end(), '_', '-');
    if (key.empty() || key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
      throw fail("'" + key + "' is not a flag name");
    const CLI::Option* option = app.get_option_no_throw("--" + key);
    if (!option || key == "config") throw fail("--" + key + " is not a flag of this tool (see --help)");
    if (value.empty()) throw fail("--" + key + " has no value");
    if (value[0] == '[') throw fail("--" + key + ": lists are not read; give one value");
    const char quote = value[0];
    if (quote == '"' || quote == '\'') {
      if (value.size() < 2 || value.back() != quote) throw fail("--" + key + ": unterminated quote");
      value = value.substr(1, value.size() - 2);
      if (value.find(quote) != std::string::npos) throw fail("--" + key + ": a quote inside a quoted value");
    } else if (const size_t comment = value.find(" #"); comment != std::string::npos) {
      value = trim(value.substr(0, comment));
    }
    args.push_back("--" + key + "=" + value);
  }
  return args;
}

// argv with --config FILE (or --config=FILE) replaced by the file's flags, placed before the
// command line's own so that those win (a flag given twice takes its last value).
inline std::vector<std::string> expandConfigFlag(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> from_file, rest;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string path;
    if (arg == "--config") {
      if (i + 1 >= argc) throw Error("--config needs a file");
      path = argv[++i];
    } else if (arg.rfind("--config=", 0) == 0) {
      path = arg.substr(9);
    } else {
      rest.push_back(arg);
      continue;
    }
    const std::vector<std::string> args = configFileArgs(app, path);
    from_file.insert(from_file.end(), args.begin(), args.end());
  }
  from_file.insert(from_file.end(), rest.begin(), rest.end());
  return from_file;
}

}  // namespace mt
