// ONNX models through the importer and on through the compiler (tests/onnx/import_attempt.h):
// as a model to train and as a forward-only one, an input is refused with ImportError, or
// imported — and then its plan must compile, pass the runtime's verifier and (small and
// forward-only) run a step. A crash, a sanitizer report, another exception, or a compiled plan
// the verifier refuses (mt::Error, a compiler bug) is a finding. Coverage feedback comes from the
// importer's own sources, which this harness compiles with it (tests/fuzz/CMakeLists.txt).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/fuzz_common.h"
#include "tests/onnx/import_attempt.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mt::fuzz::asFile(data, size, "model.onnx");
  for (bool training : {false, true}) {
    try {
      mt::test::attemptImport(path, training);
    } catch (const mt::Error& e) {  // ImportError was caught inside: this is the verifier's
      std::fprintf(stderr, "fuzz_onnx: a model compiled into a plan the runtime refuses: %s\n", e.what());
      std::abort();
    }
  }
  return 0;
}
