// What every tool does at its edge: parse the flags (exit 2 for a bad one, 0 after --help), then
// run its body so that any error ends the process with one "TOOL: error: ..." line and exit 1,
// never an abort. Unwinding to here also removes the temporary file of any AtomicFileWriter that
// was writing, so nothing half-written is left behind.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <exception>
#include <map>
#include <new>
#include <optional>
#include <string>

#include "runtime/io/error.h"
#include "tools/config_file.h"
#include "runtime/version.h"

namespace mt {

// Adds --version, then parses: nullopt to go on; otherwise the exit code (0 after --help or
// --version, 2 for a bad flag).
inline std::optional<int> parseFlags(CLI::App& app, int argc, char** argv) {
  app.set_version_flag("--version", std::string("MegaTrain ") + kVersion);
  // A flag given twice takes its last value: a script's defaults, or a --config file's, can be
  // overridden by what follows (tools/demo.sh --steps 100).
  for (CLI::Option* option : app.get_options())
    if (option->get_expected_max() <= 1) option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  static std::string config_path;  // --help lists --config; expandConfigFlag reads it
  app.add_option("--config", config_path,
                 "read flags from this file first: `flag = value` per line (# comments); the command line's win");
  std::vector<std::string> args;
  try {
    args = expandConfigFlag(app, argc, argv);
  } catch (const Error& e) {
    const std::string tool = argv[0];
    std::fprintf(stderr, "%s: error: %s\n", tool.substr(tool.rfind('/') + 1).c_str(), e.what());
    return 2;
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

// A flag that takes a whole number above zero. (CLI11's PositiveNumber prints its range as a
// 300-digit float, and an override of 0 would otherwise mean "the preset's value".)
inline CLI::Validator positiveInteger() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        size_t used = 0;
        long long value = 0;
        try {
          value = std::stoll(text, &used);
        } catch (const std::exception&) {
          return "'" + text + "' is not a whole number below 2^63";
        }
        if (used != text.size()) return "'" + text + "' is not a whole number";
        if (value <= 0) return "must be positive, got " + text;
        return "";
      },
      "POSITIVE");
}

// An option taking one of `names`, stored in `target` as the value it maps to (an enum, or an
// optional one whose "auto" leaves it unset): a mode parsed once, here at the edge, and never
// compared as a string again. --help lists the names; any other is refused naming them.
template <typename T>
CLI::Option* choiceOf(CLI::App& app, const std::string& flag, T& target, const std::string& help,
                      const std::map<std::string, T>& names) {
  std::string list;
  for (const auto& entry : names) list += (list.empty() ? "" : "|") + entry.first;
  auto known = [names, list](std::string& name) {
    return names.count(name) ? std::string() : "'" + name + "' is not one of " + list;
  };
  return app
      .add_option_function<std::string>(
          flag, [&target, names](const std::string& name) { target = names.at(name); }, help)
      ->check(CLI::Validator(known, ""))
      ->type_name(list);
}

// The exit of a tool whose error has been printed: now, without the libraries' exit handlers.
// Unwinding has already removed every temporary file; what is left at exit can only hang (under
// a memory limit OpenBLAS's exit handler joins a worker thread stuck in malloc: a clean refusal
// that never exits).
[[noreturn]] inline void exitAfterError() {
  std::fflush(nullptr);
  std::_Exit(1);
}

// Runs body() and returns its exit code; after printing the error that escaped it, exits 1.
template <typename Body>
int runTool(const char* tool, Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of memory: the input's sizes need more memory than this machine gives\n",
                 tool);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s (a bug: please report it with the command line)\n", tool, e.what());
  }
  exitAfterError();
}

}  // namespace mt
