// safetensors: the header, every entry's bounds, checksums; each entry read back as F32 of its
// own shape when it is one.
#include "runtime/io/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mt::fuzz::asFile(data, size, "input.safetensors");
  mt::fuzz::refusalIsFine([&] {
    const mt::SafetensorsFile file(path);
    for (const auto& entry : file.entries()) {
      const std::string& name = entry.first;
      mt::fuzz::refusalIsFine([&] { file.verify(name); });
      if (entry.second.dtype == "F32") mt::fuzz::refusalIsFine([&] { file.f32(name, entry.second.shape); });
    }
  });
  return 0;
}
