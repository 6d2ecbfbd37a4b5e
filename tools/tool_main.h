// What every tool does at its edge: parse the flags (exit 2 for a bad one, 0 after --help), then
// run its body so that any error ends the process with one "TOOL: error: ..." line and exit 1,
// never an abort. Unwinding to here also removes the temporary file of any AtomicFileWriter that
// was writing, so nothing half-written is left behind.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <optional>
#include <string>

#include "runtime/error.h"
#include "runtime/version.h"

namespace mt {

// Adds --version, then parses: nullopt to go on; otherwise the exit code (0 after --help or
// --version, 2 for a bad flag).
inline std::optional<int> parseFlags(CLI::App& app, int argc, char** argv) {
  app.set_version_flag("--version", std::string("MegaTrain ") + kVersion);
  try {
    app.parse(argc, argv);
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

// Runs body() and returns its exit code, or 1 after printing the error that escaped it.
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
  return 1;
}

}  // namespace mt
