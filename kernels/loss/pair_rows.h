// The check the pair losses' kernels share (loss_cpu.cc's DPO, reward_kto_cpu.cc's reward model
// and KTO): a vector of rows in pairs.
#pragma once
#include <string>

#include "kernels/loss/loss.h"

namespace mt {

// `rows` (B) f32 of an even B > 0, rows in pairs (`pairs` says of what), `name` in the message.
inline std::string checkPairRows(const Tensor& rows, const char* name, const char* pairs, const char* op) {
  MT_CHECK(expectDType(rows, DType::F32, op));
  if (rows.shape.size() != 1 || rows.shape[0] == 0 || rows.shape[0] % 2 != 0)
    return std::string(op) + ": " + name + " must be (B) of an even B > 0 (rows in pairs: " + pairs + ")";
  return "";
}

}  // namespace mt
