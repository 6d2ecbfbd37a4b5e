// mtonnx: put trained weights back into the ONNX model they were imported from
// (compiler/onnx/OnnxWriteBack.h does it).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "compiler/onnx/OnnxWriteBack.h"
#include "tools/tool_main.h"

namespace {

int run(const std::string& model, const std::string& weights, const std::string& output, bool external) {
  const mt::onnximport::WriteBack r = mt::onnximport::writeTrainedWeights(model, weights, output, external);
  std::printf("mtonnx: %s: %d initializers updated from %s%s, %zu bytes%s\n", output.c_str(), r.updated,
              weights.c_str(),
              r.split_off ? (" (" + std::to_string(r.split_off) + " of them new: parameters the exporter had made "
                             "Identity copies of a shared initializer, now initializers of their own)").c_str()
                          : "",
              r.model_bytes,
              r.external_location.empty()
                  ? ""
                  : (" + external data " + r.external_location + ", " + std::to_string(r.external_bytes) + " bytes").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, weights, output;
  CLI::App app{
      "mtonnx: write an ONNX model with trained weights — the initializers of MODEL replaced by the\n"
      "tensors of WEIGHTS (mtrun --export or a checkpoint's weights), matched through the ONNX names\n"
      "mtc recorded (transposed and de-duplicated initializers of eval exports included).\n\n"
      "Example:\n"
      "  mtc model.onnx -o m.plan && mtrun m.plan --data d.tok --weights m.safetensors --export trained.safetensors\n"
      "  mtonnx model.onnx trained.safetensors -o trained.onnx\n\n"
      "Exit codes: 0 success, 1 bad input (message on stderr), 2 bad flags."};
  app.add_option("model", model, "the ONNX model the plan was compiled from")->required();
  app.add_option("weights", weights, "trained weights (safetensors)")->required();
  app.add_option("-o,--output", output, "the ONNX model to write")->required();
  bool external = false;
  app.add_flag("--external-data", external,
               "write the weights into OUTPUT.data beside the model (automatic when MODEL uses external data "
               "or the model would pass protobuf's 2 GB)");
  if (const auto code = mt::parseFlags(app, argc, argv)) return *code;
  return mt::runTool("mtonnx", [&] { return run(model, weights, output, external); });
}
