// Reading and writing plan files, and the plan format's identity.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/arena.h"
#include "runtime/plan.pb.h"

namespace mt {

inline constexpr char kPlanMagic[] = "MTPLAN";
// Major: incompatible change. Minor: additions a reader of the same major may ignore.
inline constexpr uint32_t kPlanVersionMajor = 1;
inline constexpr uint32_t kPlanVersionMinor = 2;  // 1.1: inputs, outputs, constants, generic kernels;
                                                  // 1.2: the deferred and the on-arrival update,
                                                  // the gradient landing buffer


// Reads and parses a plan; throws mt::Error for an unreadable or unparsable file or a plan of
// another format version. Does not verify the contents (see verifier.h).
plan::Plan readPlan(const std::string& path);

// Serialises atomically (temporary file + rename).
void writePlan(const plan::Plan& plan, const std::string& path);

// Byte sizes of plan shapes, with overflow checks: throws mt::Error naming `what` when the
// shape has negative dims or more than 2^48 elements.
int64_t checkedNumel(const google::protobuf::RepeatedField<int64_t>& shape, const std::string& what);
int64_t dtypeBytes(plan::DType dtype);

}  // namespace mt
