// mtdump: show what a plan holds and when it does what.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/io/mapped_file.h"
#include "runtime/plan/plan_dump.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/verifier.h"
#include "tools/tool_main.h"

namespace {

// A weights file, an export or a checkpoint: its metadata (a run's provenance among it), its
// tensors, and each tensor checked against its checksum.
int dumpWeights(const std::string& path) {
  const mt::SafetensorsFile file(path);
  std::printf("%s: safetensors\n", path.c_str());
  for (const auto& [key, value] : file.metadata())
    if (key.rfind(mt::kOnnxOriginKey, 0) != 0) std::printf("  %-28s %s\n", key.c_str(), value.c_str());
  int64_t bytes = 0;
  int checked = 0;
  for (const auto& [name, entry] : file.entries()) {
    bytes += entry.bytes;
    file.verify(name);  // throws naming the first tensor that does not match
    checked += entry.crc32c.has_value();
  }
  std::printf("  %zu tensors, %.1f MiB; %d of them carry a checksum, all %d match\n", file.entries().size(),
              bytes / 1048576.0, checked, checked);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  bool schedule = false, memory = false, tensors = false, no_verify = false;
  std::string trace, measured;
  CLI::App app{
      "mtdump: print a MegaTrain plan.\n\n"
      "Examples:\n"
      "  mtdump model.plan               everything\n"
      "  mtdump model.plan --schedule    per-stream instruction lists\n"
      "  mtdump model.plan --memory      the device arena map\n"
      "  mtdump model.plan --trace t.json  predicted timeline; open in ui.perfetto.dev or chrome://tracing\n"
      "  mtdump model.plan --trace t.json --measured m.json\n"
      "                                  ... beside a step measured by mtrun --trace m.json\n"
      "  mtdump ckpt/step-000000500.ckpt.safetensors   a checkpoint's provenance; checksums verified\n\n"
      "Exit codes: 0 success, 1 unreadable or invalid plan (message on stderr), 2 bad flags."};
  app.add_option("plan", path,
                 "plan file written by mtc; or a .safetensors file (weights, an export, a checkpoint): its "
                 "metadata — a run's provenance — and tensors, each checked against its checksum")
      ->required();
  app.add_flag("--schedule", schedule, "only the header and the per-stream programs");
  app.add_flag("--memory", memory, "only the header and the device arena map");
  app.add_flag("--tensors", tensors, "only the header and the host tensors");
  app.add_flag("--no-verify", no_verify, "print even a plan that fails verification");
  app.add_option("--trace", trace, "write the predicted timeline of a step as Chrome/Perfetto trace JSON");
  app.add_option("--measured", measured, "with --trace: add the measured step mtrun --trace wrote, as its own process")
      ->needs("--trace");
  if (const auto code = mt::parseFlags(app, argc, argv)) return *code;
  return mt::runTool("mtdump", [&] {
    if (path.size() > 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0) return dumpWeights(path);
    mt::plan::Plan plan = mt::readPlan(path);
    if (!no_verify || !trace.empty()) mt::verifyPlan(plan);  // the replay needs deadlock-free events
    if (!trace.empty()) {
      std::ostringstream json;
      mt::writeTrace(plan, json);
      if (measured.empty()) {
        mt::writeFileAtomically(trace, json.str());
      } else {
        nlohmann::json both = nlohmann::json::parse(json.str());
        const nlohmann::json steps = mt::parseJsonInput(
            mt::readWholeFile(measured, "the measured trace", "(write one with mtrun --trace)"),
            "the measured trace " + measured);
        if (!steps.is_object() || !steps.contains("traceEvents") || !steps["traceEvents"].is_array())
          throw mt::Error(measured + " is not a trace written by mtrun --trace (no traceEvents array)");
        for (const auto& event : steps["traceEvents"]) both["traceEvents"].push_back(event);
        mt::writeFileAtomically(trace, both.dump() + "\n");
      }
      std::printf("trace of %d streams written to %s\n", plan.streams_size(), trace.c_str());
      return 0;
    }
    mt::DumpOptions options;
    if (schedule || memory || tensors) {
      options.schedule = schedule;
      options.memory = memory;
      options.tensors = tensors;
    }
    mt::dumpPlan(plan, options, std::cout);
    return 0;
  });
}
