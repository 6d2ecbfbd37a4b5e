// mtrun: train a compiled plan.
#include <CLI/CLI.hpp>
#include <cstdio>

#include <string>

#include "runtime/backends/cpu_libraries.h"
#include "runtime/distributed/world.h"
#include "runtime/io/error.h"
#include "runtime/training/trainer.h"
#include "tools/mtrun_flags.h"
#include "tools/tool_main.h"

int main(int argc, char** argv) {
  mt::configureCpuLibraries(argv);
  mt::TrainConfig c;
  CLI::App app{
      "mtrun: train a MegaTrain plan.\n\n"
      "Examples:\n"
      "  mtrun model.plan --data corpus.tok --steps 300\n"
      "  mtrun model.plan --data corpus.tok --weights model.safetensors --export trained.safetensors\n"
      "  mtrun model.plan --data corpus.tok --steps 5000 --checkpoint-dir ckpt --checkpoint-every 500\n"
      "  mtrun model.plan --data corpus.tok --steps 5000 --resume ckpt\n"
      "  mpirun -np 4 mtrun model.plan --data corpus.tok   (data parallel: as --accumulate 4, bit for bit on\n"
      "                                                    the cpu; rank 0 prints and writes; docs/distributed.md)\n\n"
      "SIGINT, SIGTERM or SIGUSR1 stops the run after the step it is in, with a checkpoint. Under mpirun,\n"
      "send SIGUSR1 to mpirun: it forwards it, while SIGTERM and SIGINT it follows with SIGKILL a second later.\n\n"
      "Exit codes: 0 success (also when a signal stopped the run and a checkpoint or --export kept its\n"
      "progress), 1 bad input or runtime error (message on stderr), 2 bad flags, 130/143/138 stopped by\n"
      "SIGINT/SIGTERM/SIGUSR1 with neither a --checkpoint-dir nor an --export (the progress is lost).\n"
      "Every output path is checked, and the checkpoint directory locked, before the first step."};
  mt::addTrainFlags(app, c);
  // Under mpirun, MPI first (it may consume its own arguments); ranks other than 0 print nothing
  // but errors: rank 0 speaks for the job.
  const mt::World* world = nullptr;
  const int started = mt::runTool("mtrun", [&] {
    world = &mt::World::start(&argc, &argv);
    return 0;
  });
  if (started) return started;
  if (world->rank() != 0 && !std::freopen("/dev/null", "w", stdout)) return 1;
  for (int i = 1; i < argc; ++i) c.command_line += (i > 1 ? " " : "") + std::string(argv[i]);
  // A rank that failed (bad flags: 2, an error: 1) ends the job: the others may wait for it in a
  // collective, a barrier or MPI's finalize (its message is out already). A rank that finalizes
  // and exits alone, even with an error, leaves mpirun waiting for the rest.
  auto leave = [&](int code) {
    if (code == 1 || code == 2) world->abortJob(code);
    return code;
  };
  if (const auto code = mt::parseFlags(app, argc, argv)) return leave(*code);
  c.rows_default = app.count("--rows") == 0;
  c.lr_default = app.count("--lr") == 0;
  try {
    mt::validateConfig(c);  // a flag's value out of range is a bad flag too: exit 2
  } catch (const mt::Error& e) {
    std::fprintf(stderr, "mtrun: error: %s\n", e.what());
    return leave(2);
  }
  const std::string tool = world->distributed() ? "mtrun (rank " + std::to_string(world->rank()) + ")" : "mtrun";
  return leave(mt::runTool(tool.c_str(), [&] { return mt::train(c); }));
}
