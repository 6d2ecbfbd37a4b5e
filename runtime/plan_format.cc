#include "runtime/plan_format.h"

#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace mt {

plan::Plan readPlan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open plan " + path + ": no such file (compile one with mtc)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  plan::Plan plan;
  if (!plan.ParseFromString(buffer.str()))
    throw Error("plan " + path + " is corrupt: not a valid plan protobuf (recompile it with mtc)");
  if (plan.magic() != kPlanMagic)
    throw Error("plan " + path + " is not a MegaTrain plan (bad magic '" + plan.magic().substr(0, 16) +
                "')");
  if (plan.version_major() != kPlanVersionMajor || plan.version_minor() > kPlanVersionMinor)
    throw Error("plan " + path + " has format version " + std::to_string(plan.version_major()) +
                "." + std::to_string(plan.version_minor()) + " but this runtime reads " +
                std::to_string(kPlanVersionMajor) + ".0 to " + std::to_string(kPlanVersionMajor) +
                "." + std::to_string(kPlanVersionMinor) +
                ": recompile the model with the mtc that matches this mtrun");
  return plan;
}

void writePlan(const plan::Plan& plan, const std::string& path) {
  std::string bytes;
  if (!plan.SerializeToString(&bytes)) throw Error("cannot serialise plan for " + path);
  writeFileAtomically(path, bytes);
}

int64_t checkedNumel(const google::protobuf::RepeatedField<int64_t>& shape, const std::string& what) {
  constexpr int64_t kMaxElements = int64_t{1} << 48;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(what + " has a negative dimension");
    if (d != 0 && n > kMaxElements / d) throw Error(what + " has more than 2^48 elements");
    n *= d;
  }
  return n;
}

int64_t dtypeBytes(plan::DType dtype) {
  switch (dtype) {
    case plan::DTYPE_F32: return 4;
    case plan::DTYPE_I32: return 4;
    case plan::DTYPE_BF16: return 2;
    default: throw Error("unknown dtype " + std::to_string(static_cast<int>(dtype)));
  }
}

}  // namespace mt
